/*
 * cb_prunerules: the prune-backups rules, parsed. See include/cb_prunerules.h.
 * Configuration (cb_opts checks a prune-backups value with it) as much as
 * the prune command's (ops/prune.c applies the rules): so on the ground floor.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cb_prunerules.h"
#include "cb_util.h"

const struct cb_prune_rule_def cb_prune_rule_table[CB_PRUNE_N_RULES] = {
	{ "keep-last", offsetof(struct cb_prune_rules, last), NULL },
	{ "keep-hourly", offsetof(struct cb_prune_rules, hourly), "%Y/%m/%d/%H" },
	{ "keep-daily", offsetof(struct cb_prune_rules, daily), "%Y/%m/%d" },
	{ "keep-weekly", offsetof(struct cb_prune_rules, weekly), "%G/%V" },
	{ "keep-monthly", offsetof(struct cb_prune_rules, monthly), "%Y/%m" },
	{ "keep-yearly", offsetof(struct cb_prune_rules, yearly), "%Y" },
};
#define N_RULES CB_PRUNE_N_RULES
static const struct cb_prune_rule_def *const rules = cb_prune_rule_table;

/* A typo in a rule would mean no pruning until the disk fills: an error
 * naming the rule it most looks like. */
static int unknown_rule(const char *tok, size_t len)
{
	const char *names[N_RULES + 1];
	char *word = cb_xasprintf("%.*s", (int)len, tok);
	const char *near;
	int ret;

	for (size_t i = 0; i < N_RULES; i++)
		names[i] = rules[i].name;
	names[N_RULES] = "keep-all";
	near = cb_closest_word(word, names, N_RULES + 1);
	if (near)
		ret = cb_error("unknown prune rule '%s' (did you mean '%s'?)", word, near);
	else
		ret = cb_error("unknown prune rule '%s' (accepted: keep-last, keep-hourly, keep-daily, "
			       "keep-weekly, keep-monthly, keep-yearly, keep-all)", word);
	free(word);
	return ret;
}

static int parse_one(struct cb_prune_rules *r, const char *tok)
{
	const char *eq = strchr(tok, '=');
	char *end;
	long v;

	if (!eq)
		return cb_error("invalid prune rule '%s' (accepted: keep-last=N, keep-hourly=N, "
				"keep-daily=N, keep-weekly=N, keep-monthly=N, keep-yearly=N, keep-all=1)", tok);
	v = strtol(eq + 1, &end, 10);
	if (end == eq + 1 || *end || v < 0 || v > 1000000)
		return cb_error("invalid count in prune rule '%s' (accepted: a whole number >= 0)", tok);
	if (!strncmp(tok, "keep-all", (size_t)(eq - tok)) && eq - tok == 8) {
		r->all = v != 0;
		return 0;
	}
	for (size_t i = 0; i < N_RULES; i++) {
		if (strlen(rules[i].name) == (size_t)(eq - tok) && !strncmp(tok, rules[i].name, (size_t)(eq - tok))) {
			*(int *)((char *)r + rules[i].offset) = (int)v;
			return 0;
		}
	}
	return unknown_rule(tok, (size_t)(eq - tok));
}

/* As vzdump: a rule set that keeps nothing would delete every backup, the
 * one just written included; keep-all says so explicitly. */
static int keeps_something(const struct cb_prune_rules *r)
{
	if (r->all)
		return 1;
	for (size_t i = 0; i < N_RULES; i++)
		if (*(const int *)((const char *)r + rules[i].offset) > 0)
			return 1;
	return 0;
}

int cb_prune_parse(const char *spec, struct cb_prune_rules *r)
{
	char *copy, *save = NULL;
	int ret = 0, any = 0;

	memset(r, 0, sizeof(*r));
	if (!spec || !*spec) {
		r->all = 1;
		return 0;
	}
	copy = cb_xstrdup(spec);
	for (char *t = strtok_r(copy, ", ", &save); t && ret == 0; t = strtok_r(NULL, ", ", &save), any = 1)
		ret = parse_one(r, t);
	free(copy);
	if (ret == 0 && !any)
		r->all = 1;
	if (ret == 0 && !keeps_something(r))
		ret = cb_error("prune rules '%s' keep no backup at all (give a count above 0, "
			       "or keep-all=1)", spec);
	return ret;
}
