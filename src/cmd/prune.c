/* cb_prune: Proxmox prune-backups semantics. See include/cb_prune.h. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "cb_catalog.h"
#include "cb_prune.h"
#include "cb_util.h"

static const struct {
	const char *name;
	size_t offset;
	const char *fmt;   /* strftime format of the time slot; NULL = every backup */
} rules[] = {
	{ "keep-last", offsetof(struct cb_prune_rules, last), NULL },
	{ "keep-hourly", offsetof(struct cb_prune_rules, hourly), "%Y/%m/%d/%H" },
	{ "keep-daily", offsetof(struct cb_prune_rules, daily), "%Y/%m/%d" },
	{ "keep-weekly", offsetof(struct cb_prune_rules, weekly), "%G/%V" },
	{ "keep-monthly", offsetof(struct cb_prune_rules, monthly), "%Y/%m" },
	{ "keep-yearly", offsetof(struct cb_prune_rules, yearly), "%Y" },
};
#define N_RULES (sizeof(rules) / sizeof(rules[0]))

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

static int newest_first(const void *a, const void *b)
{
	const struct cb_prune_item *x = a, *y = b;
	return x->when < y->when ? 1 : x->when > y->when ? -1 : 0;
}

static void slot_of(char *buf, size_t len, const char *fmt, time_t when)
{
	struct tm tm;

	if (!fmt) {
		snprintf(buf, len, "%lld", (long long)when);
		return;
	}
	localtime_r(&when, &tm);
	strftime(buf, len, fmt, &tm);
}

static int slot_in(char (*slots)[32], size_t n, const char *slot)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(slots[i], slot))
			return 1;
	return 0;
}

/* One rule over the items (newest first), as Proxmox's prune_mark. */
static void apply_rule(struct cb_prune_item *it, size_t n, int count, const char *fmt,
		       const char *name)
{
	char (*kept)[32] = cb_xcalloc(n + 1, 32), (*fresh)[32] = cb_xcalloc(n + 1, 32), slot[32];
	size_t n_kept = 0, n_fresh = 0;

	for (size_t i = 0; i < n; i++) {
		if (it[i].mark != CB_PRUNE_KEEP)
			continue;
		slot_of(kept[n_kept++], 32, fmt, it[i].when);
	}
	for (size_t i = 0; i < n; i++) {
		if (it[i].mark != CB_PRUNE_UNMARKED)
			continue;
		slot_of(slot, sizeof(slot), fmt, it[i].when);
		if (slot_in(kept, n_kept, slot))
			continue;
		if (slot_in(fresh, n_fresh, slot)) {
			it[i].mark = CB_PRUNE_REMOVE;  /* an older backup of a slot already kept */
			continue;
		}
		if (n_fresh >= (size_t)count)
			break;
		memcpy(fresh[n_fresh++], slot, 32);
		it[i].mark = CB_PRUNE_KEEP;
		it[i].rule = name;
	}
	free(kept);
	free(fresh);
}

void cb_prune_mark(struct cb_prune_item *items, size_t n, const struct cb_prune_rules *r)
{
	qsort(items, n, sizeof(*items), newest_first);
	for (size_t i = 0; i < n; i++) {
		items[i].mark = items[i].is_protected ? CB_PRUNE_PROTECTED : CB_PRUNE_UNMARKED;
		items[i].rule = items[i].is_protected ? "protected" : NULL;
	}
	for (size_t i = 0; i < N_RULES && !r->all; i++) {
		int count = *(const int *)((const char *)r + rules[i].offset);
		if (count > 0)
			apply_rule(items, n, count, rules[i].fmt, rules[i].name);
	}
	for (size_t i = 0; i < n; i++) {
		if (items[i].mark != CB_PRUNE_UNMARKED)
			continue;
		items[i].mark = r->all ? CB_PRUNE_KEEP : CB_PRUNE_REMOVE;
		items[i].rule = r->all ? "keep-all" : NULL;
	}
}

static int remove_backup(const struct cb_backup_file *f, struct cb_log *log)
{
	static const char *const beside[] = { ".sha256", ".idx", ".verified", ".notes", NULL };
	char *base = cb_catalog_base(f->path), *logf = cb_xasprintf("%s.log", base);
	int ret = 0;

	cb_info(log, "removing backup '%s'", f->path);
	if (unlink(f->path) < 0)
		ret = cb_error_errno("cannot remove '%s'", f->path);
	unlink(logf);
	for (int i = 0; beside[i]; i++) {
		char *p = cb_xasprintf("%s%s", f->path, beside[i]);
		unlink(p);
		free(p);
	}
	free(logf);
	free(base);
	return ret;
}

static const char *mark_word(enum cb_prune_mark m)
{
	return m == CB_PRUNE_KEEP ? "keep" : m == CB_PRUNE_PROTECTED ? "protected" : "remove";
}

/* The backup just written stays whatever the rules say: a clock that went
 * back, or an archive from the future, must not make a job delete it. */
static void keep_newest_written(struct cb_prune_item *items, size_t n, const char *keep_name)
{
	for (size_t i = 0; keep_name && i < n; i++) {
		const struct cb_backup_file *f = items[i].data;
		if (items[i].mark == CB_PRUNE_REMOVE && !strcmp(f->name, keep_name)) {
			items[i].mark = CB_PRUNE_KEEP;
			items[i].rule = "just written";
		}
	}
}

int cb_prune_guest(const char *dumpdir, enum cb_guest_type type, const char *id, const char *spec,
		   const char *keep_name, int dry_run, struct cb_log *log, unsigned *removed)
{
	struct cb_prune_rules rules;
	struct cb_catalog cat;
	struct cb_prune_item *items;
	size_t n = 0;
	unsigned count = 0;
	int ret = 0;

	if (cb_prune_parse(spec, &rules) < 0 || cb_catalog_scan(&cat, dumpdir, id) < 0)
		return -1;
	items = cb_xcalloc(cat.n + 1, sizeof(*items));
	for (size_t i = 0; i < cat.n; i++) {
		if (cat.files[i].type != type)
			continue;
		items[n].when = cat.files[i].when;
		items[n].is_protected = cat.files[i].is_protected;
		items[n++].data = &cat.files[i];
	}
	cb_prune_mark(items, n, &rules);
	keep_newest_written(items, n, keep_name);
	for (size_t i = 0; i < n; i++) {
		const struct cb_backup_file *f = items[i].data;
		if (dry_run)
			printf("%-9s %s%s%s%s\n", mark_word(items[i].mark), f->name, items[i].rule ? " (" : "",
			       items[i].rule ? items[i].rule : "", items[i].rule ? ")" : "");
		if (items[i].mark != CB_PRUNE_REMOVE)
			continue;
		count++;
		if (!dry_run && remove_backup(f, log) < 0)
			ret = -1;
	}
	if (removed)
		*removed = count;
	free(items);
	cb_catalog_release(&cat);
	return ret;
}
