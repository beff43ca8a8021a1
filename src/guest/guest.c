/*
 * cb_guest: freeze/thaw backends and the watchdog. See include/cb_guest.h.
 *
 * Every thaw is done by the watchdog, a child forked before the freeze:
 * the main process asks for it over a pipe ('T') and reads the outcome
 * back ("O", "W why", "G why", "X"). So one piece of code retries a failed
 * thaw, whoever asked; a signal handler only writes one byte to a pipe; and
 * the deadline holds while the main process is stopped, stuck or dead.
 * And the other way round: while the guest is frozen a thread of cbackup's
 * pings the watchdog; its pipe closed (SIGKILL, the OOM killer) or no
 * answer in time (SIGSTOP) and cbackup thaws the guest itself; so too
 * when it does not take a thaw request ('A') in time.
 * The fork happens while cbackup has no helper thread (staging runs on the
 * main thread, the archive's threads start after the thaw), so the child
 * may use the whole library.
 */
#include <errno.h>
#include <fcntl.h>
#include <mntent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>

#include "cb_cleanup.h"
#include "cb_guest.h"
#include "cb_log.h"
#include "cb_qmp.h"
#include "cb_run.h"
#include "cb_util.h"
#include "guest_int.h"





/* the main process waits this long for a confirmed thaw; then it fails the
 * guest and goes on, and the watchdog keeps trying (thaw-timeout) */
#define THAW_FOREGROUND_MS 5000

/* ---- init ------------------------------------------------------------- */

/* Mount points of cgroup2 and the v1 freezer hierarchy (NULL if none). */
static void find_mounts(char **v2, char **v1)
{
	FILE *f = setmntent("/proc/self/mounts", "r");
	struct mntent *m;

	*v2 = *v1 = NULL;
	if (!f)
		return;
	while ((m = getmntent(f))) {
		if (!*v2 && !strcmp(m->mnt_type, "cgroup2"))
			*v2 = cb_xstrdup(m->mnt_dir);
		else if (!*v1 && !strcmp(m->mnt_type, "cgroup") && hasmntopt(m, "freezer"))
			*v1 = cb_xstrdup(m->mnt_dir);
	}
	endmntent(f);
}

static int has_file(const char *dir, const char *name)
{
	char *p = cb_xasprintf("%s/%s", dir, name);
	int ok = access(p, F_OK) == 0;
	free(p);
	return ok;
}

/* Set g->path/kind if DIR is a cgroup with a freezer; 1 if so. */
static int try_cgroup(struct cb_guest *g, char *dir)
{
	if (has_file(dir, V2_FREEZE))
		g->kind = CB_FREEZER_CGROUP2;
	else if (has_file(dir, V1_STATE))
		g->kind = CB_FREEZER_CGROUP1;
	else {
		free(dir);
		return 0;
	}
	g->path = dir;
	return 1;
}

static int init_cgroup(struct cb_guest *g, const char *path)
{
	char *v2, *v1;
	int found = 0;

	if (path[0] == '/') {
		found = try_cgroup(g, cb_xstrdup(path));
	} else {
		find_mounts(&v2, &v1);
		if (v2)
			found = try_cgroup(g, cb_xasprintf("%s/%s", v2, path));
		if (!found && v1)
			found = try_cgroup(g, cb_xasprintf("%s/%s", v1, path));
		free(v2);
		free(v1);
	}
	if (!found)
		return cb_error("freeze cgroup '%s' not found (no cgroup.freeze or freezer.state)",
				path);
	return 0;
}

static int init_pid(struct cb_guest *g, long pid)
{
	pid_t pgid;

	if (pid <= 1 || pid != (pid_t)pid)
		return cb_error("invalid freeze pid %ld", pid);
	if (kill((pid_t)pid, 0) < 0 && errno != EPERM)
		return cb_error_errno("freeze pid %ld", pid);
	pgid = getpgid((pid_t)pid);
	if (pgid < 0)
		return cb_error_errno("freeze pid %ld: cannot get its process group", pid);
	g->kind = CB_FREEZER_PID;
	g->pid = (pid_t)pid;
	/* never stop our own process group: that would stop cbackup itself */
	g->pgid = (pgid == getpgrp() || pgid <= 1) ? 0 : pgid;
	return 0;
}

/* "freeze-cgroup, freeze-pid" for the backends that opts configures. */
static int count_backends(const struct cb_opts *o, char *names, size_t len)
{
	const char *set[4];
	int n = 0;

	if (o->freeze_cgroup && *o->freeze_cgroup)
		set[n++] = "freeze-cgroup";
	if (o->freeze_pid)
		set[n++] = "freeze-pid";
	if ((o->freeze_cmd && *o->freeze_cmd) || (o->thaw_cmd && *o->thaw_cmd))
		set[n++] = "freeze-cmd/thaw-cmd";
	if (o->qmp && *o->qmp)
		set[n++] = "qmp";
	names[0] = '\0';
	for (int i = 0; i < n; i++)
		snprintf(names + strlen(names), len - strlen(names), "%s%s",
			 i ? ", " : "", set[i]);
	return n;
}

/* The monitor must answer now: a wrong socket is found before any copy. */
static int init_qmp(struct cb_guest *g, const char *sock)
{
	int st;

	g->kind = CB_FREEZER_QMP;
	g->path = cb_xstrdup(sock);
	errno = 0;
	st = cb_qmp_is_paused(sock, QMP_TIMEOUT_MS);
	if (st == CB_QMP_CONNECT && errno)
		return cb_error_errno("qmp socket '%s': cannot connect", sock);
	if (st < 0)
		return cb_error("qmp socket '%s': %s", sock, cb_qmp_strerror(st));
	return 0;
}

int cb_guest_check_opts(const struct cb_opts *o)
{
	char names[128];

	if (count_backends(o, names, sizeof(names)) > 1)
		return cb_error("more than one freeze backend configured: %s", names);
	if ((o->freeze_cmd && *o->freeze_cmd) != (o->thaw_cmd && *o->thaw_cmd))
		return cb_error("freeze-cmd and thaw-cmd go together: set both or neither");
	return 0;
}

int cb_guest_init(struct cb_guest *g, const struct cb_opts *o)
{
	char names[128];
	int n;

	memset(g, 0, sizeof(*g));
	g->watchdog_fd = g->report_fd = -1;
	g->cleanup_handle = -1;
	g->thaw_timeout_ms = (o->thaw_timeout > 0 ? o->thaw_timeout : 60) * 1000;
	n = count_backends(o, names, sizeof(names));
	if (n > 1)
		return cb_error("more than one freeze backend configured: %s", names);
	if (n == 0)
		return 0;
	if (o->freeze_cgroup && *o->freeze_cgroup)
		return init_cgroup(g, o->freeze_cgroup);
	if (o->freeze_pid)
		return init_pid(g, o->freeze_pid);
	if (o->qmp && *o->qmp)
		return init_qmp(g, o->qmp);
	if (!o->freeze_cmd || !*o->freeze_cmd)
		return cb_error("thaw-cmd is set but freeze-cmd is not");
	if (!o->thaw_cmd || !*o->thaw_cmd)
		return cb_error("freeze-cmd is set but thaw-cmd is not");
	g->kind = CB_FREEZER_CMD;
	g->freeze_cmd = cb_xstrdup(o->freeze_cmd);
	g->thaw_cmd = cb_xstrdup(o->thaw_cmd);
	return 0;
}

void cb_guest_release(struct cb_guest *g)
{
	if (!g)
		return;
	if (g->frozen || g->watchdog)
		cb_guest_thaw(g);
	free(g->path);
	free(g->freeze_cmd);
	free(g->thaw_cmd);
	g->path = g->freeze_cmd = g->thaw_cmd = NULL;
	g->kind = CB_FREEZER_NONE;
}

/* ---- is the guest running? -------------------------------------------- */

char *cb_guest_cgroup_dir(const char *path)
{
	char *v2 = NULL, *v1 = NULL, *dir = NULL;
	struct stat st;

	if (path[0] == '/')
		return cb_xstrdup(path);
	find_mounts(&v2, &v1);
	if (v2)
		dir = cb_xasprintf("%s/%s", v2, path);
	if (v1 && (!dir || stat(dir, &st) < 0)) {
		free(dir);
		dir = cb_xasprintf("%s/%s", v1, path);
	}
	free(v2);
	free(v1);
	return dir;
}

/* A cgroup that is gone, or (v2) holds no process, is a stopped guest's:
 * lxc and systemd remove or empty it when the container stops. */
static int cgroup_status(const char *path, char *why, size_t len)
{
	char *dir = cb_guest_cgroup_dir(path), buf[256];
	struct stat st;
	int running = 0;

	if (!dir || stat(dir, &st) < 0)
		snprintf(why, len, "freeze cgroup '%s' does not exist", path);
	else if (freezer_read_small(dir, V2_EVENTS, buf, sizeof(buf)) == 0 && strstr(buf, "populated 0"))
		snprintf(why, len, "freeze cgroup '%s' has no process", path);
	else
		running = 1;
	free(dir);
	return running;
}

/* No socket, or nobody listening on it: QEMU is not running. */
static int qmp_status(const char *sock, char *why, size_t len)
{
	struct stat st;

	if (stat(sock, &st) < 0 && errno == ENOENT) {
		snprintf(why, len, "qmp socket '%s' does not exist", sock);
		return 0;
	}
	errno = 0;
	if (cb_qmp_is_paused(sock, QMP_TIMEOUT_MS) == CB_QMP_CONNECT && errno == ECONNREFUSED) {
		snprintf(why, len, "nothing listens on qmp socket '%s'", sock);
		return 0;
	}
	return 1;
}

int cb_guest_status(const struct cb_opts *o, char *why, size_t len)
{
	why[0] = '\0';
	if (o->freeze_cgroup && *o->freeze_cgroup)
		return cgroup_status(o->freeze_cgroup, why, len);
	if (o->freeze_pid && o->freeze_pid > 1 && kill((pid_t)o->freeze_pid, 0) < 0 && errno == ESRCH) {
		snprintf(why, len, "freeze pid %ld does not exist", o->freeze_pid);
		return 0;
	}
	if (o->qmp && *o->qmp)
		return qmp_status(o->qmp, why, len);
	return 1;   /* freeze-cmd, or no freezer: no way to ask */
}

/* ---- freeze / thaw ---------------------------------------------------- */

/* "pid 12 (cat) state D in request_wait_answer" for each task of the
 * cgroup that is not parked in the freezer (wchan __refrigerator in v1;
 * do_freezer_trap, seen as get_signal, in v2). */
static void describe_unfrozen(const struct cb_guest *g, char *out, size_t len)
{
	char list[8192], dir[32], stat[512], wchan[128], *save = NULL;
	int shown = 0;

	out[0] = '\0';
	if (freezer_read_small(g->path, g->kind == CB_FREEZER_CGROUP2 ? "cgroup.procs" : "tasks", list,
		       sizeof(list)) < 0)
		return;
	for (char *t = strtok_r(list, "\n", &save); t && shown < 8; t = strtok_r(NULL, "\n", &save)) {
		char *comm, *end;
		snprintf(dir, sizeof(dir), "/proc/%s", t);
		if (freezer_read_small(dir, "stat", stat, sizeof(stat)) < 0)
			continue;
		if (freezer_read_small(dir, "wchan", wchan, sizeof(wchan)) < 0)
			wchan[0] = '\0';
		if (strstr(wchan, "refrigerator") || strstr(wchan, "freezer") ||
		    !strcmp(wchan, "get_signal"))
			continue;
		comm = strchr(stat, '(');
		end = strrchr(stat, ')');
		if (!comm || !end || end[1] != ' ')
			continue;
		snprintf(out + strlen(out), len - strlen(out), "%spid %s %.*s state %c%s%s",
			 shown ? ", " : "", t, (int)(end - comm + 1), comm, end[2],
			 wchan[0] && strcmp(wchan, "0") ? " in " : "", strcmp(wchan, "0") ? wchan : "");
		shown++;
	}
}

static int freeze_wait(struct cb_guest *g, int wait_ms)
{
	char tasks[1024];
	int r;

	if (g->kind == CB_FREEZER_CMD)
		return 0;
	r = guest_wait_state(g, 1, wait_ms, 1);
	if (r == 0 || r == -2)
		return r == 0 ? 0 : -1;
	if (g->kind == CB_FREEZER_PID)
		return cb_error("pid %d did not stop within %.1f s", (int)g->pid, wait_ms / 1000.0);
	if (g->kind == CB_FREEZER_QMP)
		return cb_error("qmp socket '%s': the VM did not stop within %.1f s", g->path,
				wait_ms / 1000.0);
	describe_unfrozen(g, tasks, sizeof(tasks));
	return cb_error("cgroup '%s' did not freeze within %.1f s (freeze-wait): thawed; tasks that "
			"did not freeze: %s", g->path, wait_ms / 1000.0, tasks[0] ? tasks : "unknown");
}

/* Thaw after a failed freeze; the freeze's error stays the one reported. */
static int freeze_failed(struct cb_guest *g)
{
	char first[2048], then[1024];

	snprintf(first, sizeof(first), "%s", cb_last_error());
	if (cb_guest_thaw(g) < 0 && !g->deadline_hit) {
		snprintf(then, sizeof(then), "%s", cb_last_error());
		return cb_error("%s; %s", first, then);
	}
	return cb_error("%s", first);
}

int cb_guest_freeze(struct cb_guest *g, int wait_ms, int max_ms)
{
	double t0;

	if (g->kind == CB_FREEZER_NONE || g->frozen)
		return 0;
	/* A VM its admin paused is as still as a stopped one: back it up as
	 * it is and leave it paused (asked now, not at init: it may have been
	 * resumed since). */
	g->kept_paused = g->kind == CB_FREEZER_QMP && cb_qmp_is_paused(g->path, QMP_TIMEOUT_MS) == 1;
	if (g->kept_paused)
		return 0;
	if (max_ms > 0 && wait_ms > max_ms)
		wait_ms = max_ms;
	g->max_freeze_ms = max_ms;
	g->deadline_hit = 0;
	g->thaw_asked = 0;
	t0 = g->frozen_since = cb_now();
	/* the watchdog's own bound on the wait: the main process's plus 1 s */
	if (watchdog_start(g, t0 + wait_ms / 1000.0 + 1, max_ms > 0 ? t0 + max_ms / 1000.0 : 0) < 0 ||
	    watchdog_monitor_start(g) < 0) {
		watchdog_dismiss(g);
		return -1;
	}
	g->frozen = 1;
	g->cleanup_handle = cb_cleanup_push(watchdog_thaw_action, g);
	if (g->cleanup_handle < 0) {
		cb_error("cleanup stack full, cannot protect the frozen guest");
		return freeze_failed(g);
	}
	if (freezer_freeze(g, wait_ms) < 0 || freeze_wait(g, wait_ms) < 0 ||
	    cb_check_interrupt() < 0)
		return freeze_failed(g);
	watchdog_send(g, 'F');
	return 0;
}

int cb_guest_thaw(struct cb_guest *g)
{
	int ret;

	if (!g->frozen && !g->watchdog)
		return 0;
	watchdog_monitor_stop(g);
	if (g->watchdog && g->watchdog_lost) {
		ret = cb_error("%s", g->lost_msg);
		watchdog_dismiss(g);   /* killed by the monitor: reaped here */
	} else if (g->watchdog) {
		watchdog_ask_thaw(g);
		ret = watchdog_await_thaw(g, g->thaw_timeout_ms < THAW_FOREGROUND_MS ? g->thaw_timeout_ms
									   : THAW_FOREGROUND_MS);
		if (ret == 1) {   /* stopped, hung or dead: it would leave the guest frozen */
			watchdog_monitor_takeover(g, guest_proc_state(g->watchdog) == 'Z'
					 ? "ended before it confirmed the thaw (killed?)"
					 : "did not answer the thaw request (stopped?)");
			ret = cb_error("%s", g->lost_msg);
		}
		if (ret == 0 || g->watchdog_lost)
			watchdog_dismiss(g);
		else
			watchdog_leave(g);
	} else {
		ret = watchdog_thaw_once(g);   /* no watchdog: its start failed; try ourselves */
	}
	if (g->cleanup_handle >= 0)
		cb_cleanup_pop(g->cleanup_handle, 0);
	g->cleanup_handle = -1;
	g->frozen = 0;
	if (ret == 0 && freezer_cgroup_gone(g) && g->log)
		cb_warn(g->log, "the freeze cgroup '%s' is gone: the guest stopped while it was frozen",
			g->path);
	if (ret == 0 && g->deadline_hit)
		ret = g->max_freeze_ms
			? cb_error("max-freeze (%d s) exceeded: the watchdog thawed the guest",
				   g->max_freeze_ms / 1000)
			: cb_error("the freeze did not complete in time: the watchdog thawed the guest");
	return ret;
}

const char *cb_guest_cgroup(const struct cb_guest *g)
{
	return (g->kind == CB_FREEZER_CGROUP2 || g->kind == CB_FREEZER_CGROUP1) ? g->path : NULL;
}
