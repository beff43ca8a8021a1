/* cb_prune: Proxmox prune-backups semantics. See include/cb_prune.h. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "cb_catalog.h"
#include "cb_prune.h"
#include "cb_store.h"
#include "cb_util.h"

#define N_RULES CB_PRUNE_N_RULES
static const struct cb_prune_rule_def *const rules = cb_prune_rule_table;

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

static int remove_backup(const struct cb_backup_file *f)
{
	static const char *const beside[] = { ".sha256", ".idx", ".verified", ".notes", NULL };
	char *base = cb_catalog_base(f->path), *logf = cb_xasprintf("%s.log", base);
	int ret = 0;

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

/* The rules over cat's backups of type; each one to remove given to rm
 * (not on a dry run). */
static int prune_catalog(struct cb_catalog *cat, enum cb_guest_type type, const char *spec,
			 const char *keep_name, int dry_run, struct cb_log *log, unsigned *removed,
			 int (*rm)(void *ctx, const struct cb_backup_file *f), void *ctx)
{
	struct cb_prune_rules rules;
	struct cb_prune_item *items;
	size_t n = 0;
	unsigned count = 0;
	int ret = 0;

	if (cb_prune_parse(spec, &rules) < 0)
		return -1;
	items = cb_xcalloc(cat->n + 1, sizeof(*items));
	for (size_t i = 0; i < cat->n; i++) {
		if (cat->files[i].type != type)
			continue;
		items[n].when = cat->files[i].when;
		items[n].is_protected = cat->files[i].is_protected;
		items[n++].data = &cat->files[i];
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
		if (dry_run)
			continue;
		cb_info(log, "removing backup '%s'", f->path);
		if (rm(ctx, f) < 0)
			ret = -1;
	}
	if (removed)
		*removed = count;
	free(items);
	return ret;
}

static int remove_file(void *ctx, const struct cb_backup_file *f)
{
	(void)ctx;
	return remove_backup(f);
}

int cb_prune_guest(const char *dumpdir, enum cb_guest_type type, const char *id, const char *spec,
		   const char *keep_name, int dry_run, struct cb_log *log, unsigned *removed)
{
	struct cb_catalog cat;
	int ret;

	if (cb_catalog_scan(&cat, dumpdir, id) < 0)
		return -1;
	ret = prune_catalog(&cat, type, spec, keep_name, dry_run, log, removed, remove_file, NULL);
	cb_catalog_release(&cat);
	return ret;
}

struct store_rm {
	struct cb_objstore *s;
	const char *logdir;
};

/* A night goes with its manifest (its units stay for cb_store_gc), and
 * with its log file in logdir. */
static int remove_night(void *ctx, const struct cb_backup_file *f)
{
	const struct store_rm *sr = ctx;
	char *obj = cb_store_night_name(f->name);
	int ret = sr->s->ops->del(sr->s, obj);

	free(obj);
	if (ret == 0 && sr->logdir) {
		char *base = cb_catalog_base(f->name), *logf = cb_xasprintf("%s/%s.log", sr->logdir, base);

		unlink(logf);
		free(logf);
		free(base);
	}
	return ret;
}

int cb_prune_store_guest(struct cb_objstore *s, const char *logdir, enum cb_guest_type type,
			 const char *id, const char *spec, const char *keep_name, int dry_run,
			 struct cb_log *log, unsigned *removed)
{
	struct store_rm sr = { s, logdir };
	struct cb_catalog cat;
	int ret;

	if (cb_store_catalog(s, id, 1, &cat) < 0)
		return -1;
	ret = prune_catalog(&cat, type, spec, keep_name, dry_run, log, removed, remove_night, &sr);
	cb_catalog_release(&cat);
	return ret;
}
