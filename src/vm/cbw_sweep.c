/*
 * What a copy-before-write snapshot leaves in QEMU's graph, taken out
 * again (the sweep): blockdev-backup jobs, exports, snapshot-access nodes,
 * devices back on their format nodes, filters, fleecing nodes, backup
 * targets and stopped bitmaps named cbackup-*: at the start of a run (what a
 * killed one left), at its end, and by the VM watchdog.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cb_json.h"
#include "cb_nbdread.h"
#include "cb_private.h"
#include "cb_qmp_session.h"
#include "cb_rmtree.h"
#include "cb_vmsnap.h"
#include "vmsnap_int.h"

/* ---- the block graph: leftovers and teardown -------------------------- */

static int has_prefix(const char *s, const char *what)
{
	char p[32];

	snprintf(p, sizeof(p), PREFIX "%s", what);
	return s && !strncmp(s, p, strlen(p));
}

/* The node name of the "file" child of node NAME, from the graph. */
static char *file_child(const struct cb_json *graph, const char *name)
{
	const struct cb_json *nodes = cb_json_get(graph, "return.nodes");
	const struct cb_json *edges = cb_json_get(graph, "return.edges");
	long long id = -1;

	for (size_t i = 0; nodes && i < nodes->n && id < 0; i++)
		if (cb_json_str(nodes->items[i], "name") &&
		    !strcmp(cb_json_str(nodes->items[i], "name"), name))
			id = cb_json_int(nodes->items[i], "id", -1);
	for (size_t i = 0; edges && id >= 0 && i < edges->n; i++) {
		const struct cb_json *e = edges->items[i];
		const char *en = cb_json_str(e, "name");
		if (cb_json_int(e, "parent", -2) != id || !en || strcmp(en, "file"))
			continue;
		long long child = cb_json_int(e, "child", -1);
		for (size_t k = 0; k < nodes->n; k++)
			if (cb_json_int(nodes->items[k], "id", -3) == child)
				return cb_json_str(nodes->items[k], "name")
					       ? cb_xstrdup(cb_json_str(nodes->items[k], "name")) : NULL;
	}
	return NULL;
}

/* Every device whose medium is a cbackup filter goes back on the node
 * under it. */
static int restore_devices(struct cb_qmp_session *s, int *count)
{
	struct cb_json *blocks = NULL, *graph = NULL;
	const struct cb_json *list;
	int rc = 0;

	if (cb_qmp_session_exec(s, "query-block", NULL, &blocks) < 0)
		return -1;
	list = cb_json_get(blocks, "return");
	for (size_t i = 0; list && i < list->n; i++) {
		const char *node = cb_json_str(list->items[i], "inserted.node-name");
		const char *qdev = cb_json_str(list->items[i], "qdev");
		char *orig, *q1, *q2;
		if (!has_prefix(node, "cbw") || !qdev)
			continue;
		if (!graph && cb_qmp_session_exec(s, "x-debug-query-block-graph", NULL, &graph) < 0) {
			rc = -1;
			break;
		}
		if (!(orig = file_child(graph, node))) {
			rc = cb_error("no node under filter '%s'", node);
			continue;
		}
		q1 = cb_json_quote(qdev);
		q2 = cb_json_quote(orig);
		if (cb_qmp_session_execf(s, NULL, "qom-set", "{\"path\":%s,\"property\":\"drive\",\"value\":%s}",
				  q1, q2) < 0)
			rc = -1;
		else
			(*count)++;
		free(q1);
		free(q2);
		free(orig);
	}
	cb_json_free(blocks);
	cb_json_free(graph);
	return rc;
}

/* blockdev-del of every node named cbackup-KIND*; an export still
 * closing holds its node a moment: retried for up to 5 s. */
static int del_nodes(struct cb_qmp_session *s, const char *kind, int *count)
{
	for (int tries = 0;; tries++) {
		struct cb_json *nodes = NULL;
		const struct cb_json *list;
		int rc = 0, busy = 0;
		if (cb_qmp_session_execf(s, &nodes, "query-named-block-nodes", "{\"flat\":true}") < 0)
			return -1;
		list = cb_json_get(nodes, "return");
		for (size_t i = 0; list && i < list->n; i++) {
			const char *name = cb_json_str(list->items[i], "node-name");
			if (!has_prefix(name, kind))
				continue;
			if (cb_qmp_session_execf(s, NULL, "blockdev-del", "{\"node-name\":\"%s\"}", name) == 0)
				(*count)++;
			else
				busy = rc = -1;
		}
		cb_json_free(nodes);
		if (!busy || tries >= 50)
			return rc;
		cb_qmp_session_drain(s, 100);
	}
}

/* Every job named cbackup-job* (blockdev-backup) cancelled and dismissed;
 * cancelling one of a grouped transaction cancels all: waited for up to
 * 5 s, the jobs hold their target nodes. */
static int end_jobs(struct cb_qmp_session *s, int *count)
{
	for (int tries = 0;; tries++) {
		struct cb_json *jobs = NULL;
		const struct cb_json *list;
		int left = 0;
		if (cb_qmp_session_exec(s, "query-jobs", NULL, &jobs) < 0)
			return -1;
		list = cb_json_get(jobs, "return");
		for (size_t i = 0; list && i < list->n; i++) {
			const char *id = cb_json_str(list->items[i], "id");
			const char *st = cb_json_str(list->items[i], "status");
			char *q;
			if (!has_prefix(id, "job"))
				continue;
			q = cb_json_quote(id);
			if (st && !strcmp(st, "concluded")) {
				if (cb_qmp_session_execf(s, NULL, "job-dismiss", "{\"id\":%s}", q) == 0)
					(*count)++;
			} else {
				left++;
				if (st && strcmp(st, "aborting"))
					cb_qmp_session_execf(s, NULL, "job-cancel", "{\"id\":%s}", q);
			}
			free(q);
		}
		cb_json_free(jobs);
		if (!left)
			return 0;
		if (tries >= 50)
			return cb_error("blockdev-backup job(s) " PREFIX "job* still running after "
					"job-cancel");
		cb_qmp_session_drain(s, 100);
	}
}

/* NBD: the NBD server is cbackup's (started by this run), exports or not. */
int cbw_del_exports(struct cb_qmp_session *s, int nbd, int *count)
{
	struct cb_json *ex = NULL;
	const struct cb_json *list;
	int rc = 0, found = 0;

	if (cb_qmp_session_exec(s, "query-block-exports", NULL, &ex) < 0)
		return -1;
	list = cb_json_get(ex, "return");
	for (size_t i = 0; list && i < list->n; i++) {
		const char *id = cb_json_str(list->items[i], "id");
		if (!has_prefix(id, "exp"))
			continue;
		found = 1;
		if (cb_qmp_session_execf(s, NULL, "block-export-del", "{\"id\":\"%s\",\"mode\":\"hard\"}", id) < 0)
			rc = -1;
		else
			(*count)++;
	}
	cb_json_free(ex);
	/* the NBD server of a run that had exports was cbackup's own */
	if (found || nbd)
		cb_qmp_session_exec(s, "nbd-server-stop", NULL, NULL);
	return rc;
}

/* Everything named cbackup-* in QEMU's graph goes, in the order that frees
 * each thing before what it uses: blockdev-backup jobs, exports,
 * snapshot-access nodes, devices back on their format nodes, filters,
 * fleecing nodes, backup targets; snapshot bitmaps named BITMAP* (may be
 * NULL). Goes on after an error (each step
 * undoes what it can); the first error is kept. */
int cbw_sweep(struct cb_qmp_session *s, const char *bitmap, int nbd, int *count)
{
	char first[1024] = "";
	int rc = 0;

	*count = 0;
	if (end_jobs(s, count) < 0 && !rc++)
		snprintf(first, sizeof(first), "%s", cb_last_error());
	if (cbw_del_exports(s, nbd, count) < 0 && !rc++)
		snprintf(first, sizeof(first), "%s", cb_last_error());
	if (del_nodes(s, "acc", count) < 0 && !rc++)
		snprintf(first, sizeof(first), "%s", cb_last_error());
	if (restore_devices(s, count) < 0 && !rc++)
		snprintf(first, sizeof(first), "%s", cb_last_error());
	if (del_nodes(s, "cbw", count) < 0 && !rc++)
		snprintf(first, sizeof(first), "%s", cb_last_error());
	if (del_nodes(s, "fl", count) < 0 && !rc++)
		snprintf(first, sizeof(first), "%s", cb_last_error());
	if (del_nodes(s, "tgt", count) < 0 && !rc++)
		snprintf(first, sizeof(first), "%s", cb_last_error());
	if (cb_vmbm_sweep(s, bitmap, count) < 0 && !rc++)
		snprintf(first, sizeof(first), "%s", cb_last_error());
	return rc ? cb_error("%s", first) : 0;
}
