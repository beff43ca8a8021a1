/*
 * cb_prune: retention rules with Proxmox's prune-backups semantics (the
 * rules themselves, parsed: cb_prunerules.h).
 *
 * Rules are applied in the order keep-last, keep-hourly, keep-daily,
 * keep-weekly (ISO weeks), keep-monthly, keep-yearly, newest backup first.
 * Within one rule a time slot (hour, day, ...) keeps its newest backup; a
 * slot already kept by an earlier rule does not count again; a rule stops
 * after N slots. What no rule keeps is removed. keep-all keeps everything.
 * Protected backups are neither kept by a rule nor removed, and do not
 * count towards any rule. Time slots use local time.
 */
#ifndef CB_PRUNE_H
#define CB_PRUNE_H

#include <stddef.h>
#include <time.h>
#include "cb_log.h"
#include "cb_opts.h"
#include "cb_prunerules.h"

enum cb_prune_mark { CB_PRUNE_UNMARKED, CB_PRUNE_KEEP, CB_PRUNE_REMOVE, CB_PRUNE_PROTECTED };

struct cb_prune_item {
	time_t when;               /* backup time (from the archive name) */
	int is_protected;          /* a .protected file exists */
	enum cb_prune_mark mark;   /* output */
	const char *rule;          /* output: "keep-daily", "protected", ... */
	void *data;                /* caller's */
};

/* Sorts items newest first and marks each one. */
void cb_prune_mark(struct cb_prune_item *items, size_t n, const struct cb_prune_rules *r);

/*
 * Apply `spec` to the backups of guest (type, id) in dumpdir. Removes each
 * pruned archive with its .log, .sha256, .verified and .notes; with dry_run only
 * prints "keep|remove|protected NAME (rule)" lines on stdout.
 * keep_name (may be NULL): the archive (base name) just written, never
 * removed. *removed (may be NULL) counts what was (or would be) removed.
 */
int cb_prune_guest(const char *dumpdir, enum cb_guest_type type, const char *id, const char *spec,
		   const char *keep_name, int dry_run, struct cb_log *log, unsigned *removed);

/* The same over the nights of a unit store (cb_store.h): a night goes
 * with its manifest and its log file in logdir (NULL: none); the units no
 * night names any more are cb_store_gc's. */
struct cb_objstore;
int cb_prune_store_guest(struct cb_objstore *s, const char *logdir, enum cb_guest_type type,
			 const char *id, const char *spec, const char *keep_name, int dry_run,
			 struct cb_log *log, unsigned *removed);

#endif
