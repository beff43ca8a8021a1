/*
 * Marks and the garbage collection of a unit store (include/cb_store.h).
 *
 * A night relies on units it did not write: those the store had when it
 * listed them. A collection that deleted such a unit (one no manifest
 * names yet, or only a night being pruned) while the night runs would
 * leave the night's manifest naming a unit that is gone. So each side
 * announces itself before it looks at the other: a night writes
 * marks/night/NAME before it lists the units, a collection writes
 * marks/gc/HOST-PID before it lists the marks of nights. The store is
 * read after its own write (S3 is strongly consistent, so is a
 * directory), so of a night and a collection that overlap, at least one
 * sees the other's mark: a collection that sees a night's mark deletes
 * nothing; a night that sees a collection's mark waits until it is gone
 * before it lists the units. A mark says its host, process and time: one
 * older than CB_STORE_MARK_TTL is a killed run's and counts no more, and
 * one of this host whose process is gone is removed at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cb_log.h"
#include "cb_store.h"
#include "cb_util.h"

char *cb_store_mark_put(struct cb_objstore *s, const char *kind, const char *tag)
{
	char host[256], *obj, *text;
	int rc;

	cb_node_name(host, sizeof(host));
	obj = cb_xasprintf(CB_STORE_MARKS "%s/%s", kind, tag);
	text = cb_xasprintf("host %s\npid %ld\ntime %lld\n", host, (long)getpid(), (long long)time(NULL));
	rc = s->ops->put(s, obj, text, strlen(text), 0);
	free(text);
	if (rc < 0) {
		free(obj);
		return NULL;
	}
	return obj;
}

void cb_store_mark_drop(struct cb_objstore *s, char *obj)
{
	if (obj && s->ops->del(s, obj) < 0)
		cb_error_prefix("cannot remove the mark");
	free(obj);
}

struct mark_scan {
	struct cb_objstore *s;
	const char *skip;                /* our own mark */
	char who[512];                   /* the first live one: "NAME (host H)" */
	int live;
};

/* 1 if the mark names a process of this host that is gone. */
static int dead_here(const char *host, long pid)
{
	char me[256];

	cb_node_name(me, sizeof(me));
	return !strcmp(host, me) && pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

static int on_mark(void *arg, const char *obj, uint64_t size)
{
	struct mark_scan *ms = arg;
	struct cb_s3_buf b = { 0 };
	char host[256] = "?";
	long pid = 0;
	long long when = 0;

	if ((ms->skip && !strcmp(obj, ms->skip)) || size > 4096)
		return 0;
	if (ms->s->ops->get(ms->s, obj, 0, 0, &b) == 0 && b.data)
		sscanf((const char *)b.data, "host %255s pid %ld time %lld", host, &pid, &when);
	cb_s3_buf_release(&b);
	if (when + CB_STORE_MARK_TTL < (long long)time(NULL) || dead_here(host, pid)) {
		ms->s->ops->del(ms->s, obj);   /* a killed run's: counts no more */
		return 0;
	}
	if (!ms->live++)
		snprintf(ms->who, sizeof(ms->who), "%s (host %s, process %ld)", strrchr(obj, '/') + 1, host,
			 pid);
	return 0;
}

int cb_store_marks_live(struct cb_objstore *s, const char *kind, const char *skip, char *who,
			size_t who_len)
{
	struct mark_scan ms = { s, skip, "", 0 };
	char *prefix = cb_xasprintf(CB_STORE_MARKS "%s/", kind);
	int rc = s->ops->list(s, prefix, on_mark, &ms);

	free(prefix);
	if (rc < 0)
		return -1;
	if (who)
		snprintf(who, who_len, "%s", ms.who);
	return ms.live;
}

/* ---- the collection ---- */

struct gc_run {
	struct cb_objstore *s;
	struct cb_store_set keep;        /* every unit a manifest names */
	int dry_run;
	struct cb_log *log;
	uint64_t units, bytes, failed;
};

static int keep_refs(struct gc_run *g, const char *name)
{
	struct cb_manifest m;
	unsigned char d[32];
	int rc = cb_store_get_manifest(g->s, name, &m);

	if (rc != 0)
		return rc < 0 ? -1 : 0;
	/* a sealed night: its clear records name its objects, key or not */
	for (size_t i = 0; i < m.n_objects; i++)
		if (cb_store_unhex(m.objects[i].hex, d) == 0)
			cb_store_set_add(&g->keep, d);
	if (m.sealed) {
		cb_manifest_release(&m);
		return 0;
	}
	if (m.catalog.hex[0] && cb_store_unhex(m.catalog.hex, d) == 0)
		cb_store_set_add(&g->keep, d);
	if (m.log.hex[0] && cb_store_unhex(m.log.hex, d) == 0)
		cb_store_set_add(&g->keep, d);
	if (m.notes.hex[0] && cb_store_unhex(m.notes.hex, d) == 0)
		cb_store_set_add(&g->keep, d);
	for (size_t i = 0; i < m.n_units; i++)
		if (cb_store_unhex(m.units[i].hex, d) == 0)
			cb_store_set_add(&g->keep, d);
	cb_manifest_release(&m);
	return 0;
}

static int on_unit(void *arg, const char *obj, uint64_t size)
{
	struct gc_run *g = arg;
	const char *hex = strrchr(obj, '/');
	unsigned char d[32];

	if (!hex || cb_store_unhex(hex + 1, d) < 0 || cb_store_set_has(&g->keep, d))
		return 0;
	if (g->dry_run) {
		printf("remove    %s (no night names it)\n", obj);
	} else if (g->s->ops->del(g->s, obj) < 0) {
		cb_warn(g->log, "%s", cb_last_error());
		g->failed++;
		return 0;
	}
	g->units++;
	g->bytes += size;
	return 0;
}

/* Every manifest read (a damaged one stops the collection: its units
 * would look unreferenced), then every unit none names removed. */
static int collect(struct gc_run *g)
{
	struct cb_catalog cat;
	int rc = 0;

	if (cb_store_catalog(g->s, NULL, 0, &cat) < 0)
		return -1;
	for (size_t i = 0; rc == 0 && i < cat.n; i++)
		rc = keep_refs(g, cat.files[i].name);
	cb_catalog_release(&cat);
	if (rc < 0)
		return cb_error_prefix("nothing collected");
	return g->s->ops->list(g->s, CB_STORE_UNITS, on_unit, g);
}

int cb_store_gc(struct cb_objstore *s, int dry_run, struct cb_log *log)
{
	struct gc_run g = { .s = s, .dry_run = dry_run, .log = log };
	char host[256], tag[300], who[512], size[32];
	char *mark = NULL;
	int live, rc = 0;

	cb_node_name(host, sizeof(host));
	snprintf(tag, sizeof(tag), "%s-%ld", host, (long)getpid());
	if (!dry_run && !(mark = cb_store_mark_put(s, "gc", tag)))
		return -1;
	live = cb_store_marks_live(s, "night", NULL, who, sizeof(who));
	if (live < 0)
		rc = -1;
	else if (live > 0)
		cb_info(log, "storage '%s': garbage collection skipped: %d night(s) being written, %s "
			"first; the next prune collects", s->label, live, who);
	else if ((rc = collect(&g)) == 0) {
		cb_fmt_bytes(size, sizeof(size), g.bytes);
		cb_info(log, "storage '%s': %s %" PRIu64 " unit(s) (%s) no night names", s->label,
			dry_run ? "would remove" : "removed", g.units, size);
	}
	cb_store_mark_drop(s, mark);
	cb_store_set_release(&g.keep);
	return rc;
}
