/*
 * cb_prunerules: a prune-backups value ("keep-last=3,keep-daily=7"), parsed
 * into counts per rule. Configuration checks it when it is read (cb_opts);
 * the prune command applies it (cb_prune.h says how).
 */
#ifndef CB_PRUNERULES_H
#define CB_PRUNERULES_H

#include <stddef.h>

struct cb_prune_rules {
	int last, hourly, daily, weekly, monthly, yearly;
	int all;
};

/* The counted rules in the order they apply, keep-all aside. */
#define CB_PRUNE_N_RULES 6
struct cb_prune_rule_def {
	const char *name;
	size_t offset;     /* of its count in struct cb_prune_rules */
	const char *fmt;   /* strftime format of the time slot; NULL = every backup */
};
extern const struct cb_prune_rule_def cb_prune_rule_table[CB_PRUNE_N_RULES];

/* "keep-last=3,keep-daily=7" (also space-separated); empty/NULL = keep-all.
 * A set that keeps nothing (keep-last=0, keep-all=0) is an error. */
int cb_prune_parse(const char *spec, struct cb_prune_rules *r);

#endif
