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

#define V2_FREEZE "cgroup.freeze"
#define V2_EVENTS "cgroup.events"
#define V1_STATE  "freezer.state"
#define QMP_TIMEOUT_MS 5000
/* one thaw attempt waits this long for the backend to report it thawed */
#define THAW_CONFIRM_MS 1000
/* a failed thaw is retried after 0.1 s, doubling up to 2 s */
#define RETRY_FIRST_S 0.1
#define RETRY_MAX_S 2.0
/* the main process waits this long for a confirmed thaw; then it fails the
 * guest and goes on, and the watchdog keeps trying (thaw-timeout) */
#define THAW_FOREGROUND_MS 5000
/* the watchdog answers a ping, or takes a thaw request, within this */
#define PING_MS 200
#define ANSWER_MS 1000

static const char *const kind_names[] = {
	"none", "cgroup2", "cgroup1", "pid", "cmd", "qmp"
};

const char *cb_guest_kind_name(enum cb_freezer_kind k)
{
	if ((unsigned)k >= sizeof(kind_names) / sizeof(kind_names[0]))
		return "unknown";
	return kind_names[k];
}

/* ---- small async-signal-safe helpers ---------------------------------- */

/* Write a short string to DIR/NAME; open/openat/write/close only. */
static int write_ctl(const char *dir, const char *name, const char *val)
{
	int dfd, fd, ret = -1;

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	fd = openat(dfd, name, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		ret = write(fd, val, strlen(val)) < 0 ? -1 : 0;
		close(fd);
	}
	close(dfd);
	return ret;
}

/* The guest's cgroup directory no longer exists (access() is
 * async-signal-safe: the watchdog calls this too). */
static int cgroup_gone(const struct cb_guest *g)
{
	return (g->kind == CB_FREEZER_CGROUP2 || g->kind == CB_FREEZER_CGROUP1) &&
	       access(g->path, F_OK) < 0 && errno == ENOENT;
}

/* The kernel's own freezers, either way: a cgroup's freeze file, or
 * SIGSTOP/SIGCONT to the process group (a group gone counts as thawed). */
static int kernel_request(const struct cb_guest *g, int freeze)
{
	int v2 = g->kind == CB_FREEZER_CGROUP2;
	const char *file = v2 ? V2_FREEZE : V1_STATE;

	if (g->kind == CB_FREEZER_PID) {
		if (kill(g->pgid ? -g->pgid : g->pid, freeze ? SIGSTOP : SIGCONT) == 0 ||
		    (!freeze && errno == ESRCH))
			return 0;
		return cb_error_errno("cannot %s pid %d", freeze ? "stop" : "continue", (int)g->pid);
	}
	if (write_ctl(g->path, file, v2 ? (freeze ? "1" : "0") : (freeze ? "FROZEN" : "THAWED")) < 0) {
		/* a cgroup is removed only once it is empty: the guest stopped
		 * while frozen and nothing is left to thaw (retrying until
		 * thaw-timeout would only fail the backup) */
		if (!freeze && errno == ENOENT && cgroup_gone(g))
			return 0;
		return cb_error_errno("cannot write '%s/%s'", g->path, file);
	}
	return 0;
}

/* One QMP command on the VM's socket (stop, cont); QEMU's error text, if
 * any, in the error. */
static int qmp_run(const struct cb_guest *g, const char *cmd)
{
	char reply[512] = "";
	int st = cb_qmp_execute(g->path, cmd, reply, sizeof(reply), QMP_TIMEOUT_MS);

	if (st != CB_QMP_OK)
		return cb_error("qmp socket '%s': %s failed: %s%s%s", g->path, cmd, cb_qmp_strerror(st),
				*reply ? " " : "", reply);
	return 0;
}

/* Ask the backend to thaw; does not wait for it. -1 with the error set. */
static int thaw_request(const struct cb_guest *g)
{
	/* one attempt may not eat the whole retry time */
	struct cb_run run = { .timeout_ms = g->thaw_timeout_ms < 10000 ? g->thaw_timeout_ms : 10000,
			      .ignore_interrupt = 1 };
	char what[512];

	switch (g->kind) {
	case CB_FREEZER_CGROUP2:
	case CB_FREEZER_CGROUP1:
	case CB_FREEZER_PID:
		return kernel_request(g, 0);
	case CB_FREEZER_CMD:
		snprintf(what, sizeof(what), "thaw-cmd '%s'", g->thaw_cmd);
		run.what = what;
		return cb_run_sh(&run, g->thaw_cmd);
	case CB_FREEZER_QMP:
		return qmp_run(g, "cont");
	default:
		return 0;
	}
}

/* ---- state reading ---------------------------------------------------- */

static int read_small(const char *dir, const char *name, char *buf, size_t len)
{
	char *path = cb_xasprintf("%s/%s", dir, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = -1;

	if (fd >= 0) {
		n = read(fd, buf, len - 1);
		close(fd);
	}
	free(path);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* Process state letter from /proc/PID/stat ('R', 'S', 'T', ...), 0 if gone. */
static char proc_state(pid_t pid)
{
	char dir[32], buf[512], *p;

	snprintf(dir, sizeof(dir), "/proc/%d", (int)pid);
	if (read_small(dir, "stat", buf, sizeof(buf)) < 0)
		return 0;
	p = strrchr(buf, ')');
	return (p && p[1] == ' ') ? p[2] : 0;
}

int cb_guest_is_frozen(const struct cb_guest *g)
{
	char buf[256];
	char st;

	switch (g->kind) {
	case CB_FREEZER_NONE:
		return 0;
	case CB_FREEZER_CGROUP2:
		if (read_small(g->path, V2_EVENTS, buf, sizeof(buf)) < 0)
			return -1;
		return strstr(buf, "frozen 1") != NULL;
	case CB_FREEZER_CGROUP1:
		if (read_small(g->path, V1_STATE, buf, sizeof(buf)) < 0)
			return -1;
		return strncmp(buf, "FROZEN", 6) == 0;
	case CB_FREEZER_PID:
		st = proc_state(g->pid);
		if (!st)
			return -1;
		return st == 'T' || st == 't';
	case CB_FREEZER_QMP: {
		int r = cb_qmp_is_paused(g->path, QMP_TIMEOUT_MS);
		return r < 0 ? -1 : r;
	}
	default:
		return -1;  /* cmd: no way to ask */
	}
}

/*
 * Wait until the backend reports frozen == want: 0, or -1 on timeout (no
 * error set) or, with stop_on_signal, as soon as a signal arrived (error
 * set). cgroup v2 notifies changes of cgroup.events with POLLPRI; the short
 * poll timeout covers backends without notification and missed wakeups.
 */
static int wait_state(const struct cb_guest *g, int want, int timeout_ms, int stop_on_signal)
{
	double end = cb_now() + timeout_ms / 1000.0;
	struct pollfd pfd = { .fd = -1, .events = POLLPRI };
	int ret = -1;

	if (g->kind == CB_FREEZER_CGROUP2) {
		char *p = cb_xasprintf("%s/%s", g->path, V2_EVENTS);
		pfd.fd = open(p, O_RDONLY | O_CLOEXEC);
		free(p);
	}
	for (;;) {
		int r = cb_guest_is_frozen(g);
		/* unreadable (pid gone, cgroup removed) counts as not frozen */
		if (want ? r == 1 : r != 1) {
			ret = 0;
			break;
		}
		if (cb_now() >= end)
			break;
		if (stop_on_signal && cb_check_interrupt() < 0) {
			ret = -2;
			break;
		}
		if (pfd.fd >= 0)
			poll(&pfd, 1, 1);
		else
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	if (pfd.fd >= 0)
		close(pfd.fd);
	return ret;
}

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
	else if (read_small(dir, V2_EVENTS, buf, sizeof(buf)) == 0 && strstr(buf, "populated 0"))
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

/* ---- the watchdog (child side) ---------------------------------------- */

struct wdog {
	struct cb_guest *g;
	int cmd_fd, rep_fd;
	double wait_end, max_end;   /* monotonic seconds; 0 = none */
	int frozen_seen, thawed, gave_up;
};

/* One line to the main process: "C message\n" (the message on one line). */
static void report(const struct wdog *w, char code, const char *msg)
{
	char line[1024];
	int n = snprintf(line, sizeof(line) - 1, "%c %s", code, msg ? msg : "");

	if (n < 0)
		return;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	for (int i = 0; i < n; i++)
		if (line[i] == '\n')
			line[i] = ' ';
	line[n++] = '\n';
	cb_write_all(w->rep_fd, line, (size_t)n);
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* One attempt: ask the backend, then wait for it to report the guest runs.
 * A thaw-cmd's exit 0 is its confirmation. */
static int thaw_once(const struct cb_guest *g)
{
	if (thaw_request(g) < 0)
		return -1;
	if (g->kind == CB_FREEZER_CMD || wait_state(g, 0, THAW_CONFIRM_MS, 0) == 0)
		return 0;
	return cb_error("the guest is still frozen %d ms after the thaw (%s)", THAW_CONFIRM_MS,
			cb_guest_kind_name(g->kind));
}

/* Thaw, retrying with backoff until confirmed or thaw-timeout is over. */
static void wdog_thaw(struct wdog *w)
{
	double give_up = cb_now() + w->g->thaw_timeout_ms / 1000.0, pause = RETRY_FIRST_S;

	if (w->thawed || w->gave_up)
		return;
	while (thaw_once(w->g) < 0) {
		if (cb_now() + pause > give_up) {
			report(w, 'G', cb_last_error());
			w->gave_up = 1;
			return;
		}
		report(w, 'W', cb_last_error());
		sleep_s(pause);
		pause = pause * 2 < RETRY_MAX_S ? pause * 2 : RETRY_MAX_S;
	}
	w->thawed = 1;
	report(w, 'O', NULL);
}

/* The deadline now in force: the freeze wait's until 'F', then max-freeze. */
static double wdog_deadline(const struct wdog *w)
{
	if (w->thawed || w->gave_up)
		return 0;
	if (w->frozen_seen || !w->wait_end)
		return w->max_end;
	return w->max_end && w->max_end < w->wait_end ? w->max_end : w->wait_end;
}

/* Commands: 'F' frozen, 'T' thaw now, 'D' done; EOF: cbackup is gone. */
static void wdog_loop(struct wdog *w)
{
	for (;;) {
		struct pollfd pf = { w->cmd_fd, POLLIN, 0 };
		double end = wdog_deadline(w);
		int timeout = -1, n;
		char c;

		if (end > 0)
			timeout = end > cb_now() ? (int)((end - cb_now()) * 1000) + 1 : 0;
		n = poll(&pf, 1, timeout);
		if (n == 0) {
			report(w, 'X', NULL);
			wdog_thaw(w);
			continue;
		}
		if (n < 0)
			continue;
		n = (int)read(w->cmd_fd, &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			wdog_thaw(w);
			return;
		}
		if (c == 'F')
			w->frozen_seen = 1;
		else if (c == 'T') {
			report(w, 'A', NULL);   /* taken: cbackup need not thaw itself */
			wdog_thaw(w);
		}
		else if (c == 'P')
			report(w, 'P', NULL);   /* cbackup's ping: still here */
		else if (c == 'D')
			return;
	}
}

/*
 * The child: its own session (a signal to cbackup's process group must not
 * take it along), no descriptor of cbackup's but its two pipes (a lock or
 * an archive held open here would outlive cbackup), deaf to INT/TERM/HUP.
 */
static void __attribute__((noreturn))
watchdog_main(struct wdog *w)
{
	struct sigaction sa;
	int low, high;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);
	sa.sa_handler = SIG_DFL;
	sigaction(SIGCHLD, &sa, NULL);
	setsid();
	prctl(PR_SET_NAME, "cbackup-wdog", 0, 0, 0);
	low = w->cmd_fd < w->rep_fd ? w->cmd_fd : w->rep_fd;
	high = w->cmd_fd < w->rep_fd ? w->rep_fd : w->cmd_fd;
	close_range(0, (unsigned)low - 1, 0);
	close_range((unsigned)low + 1, (unsigned)high - 1, 0);
	close_range((unsigned)high + 1, ~0U, 0);
	/* 0, 1, 2 are free now (both pipes are above 2): harmless ones for
	 * the thaw-cmd */
	for (int i = 0; i < 3; i++)
		if (open("/dev/null", O_RDWR) < 0)
			break;
	report(w, 'R', NULL);
	wdog_loop(w);
	_exit(0);
}

/* ---- the watchdog (cbackup's side) ------------------------------------ */

/* One report line into buf: 1, 0 when `end` passed first, -1 at EOF. */
static int read_report(struct cb_guest *g, char *buf, size_t len, double end)
{
	for (;;) {
		char *nl = memchr(g->rep_buf, '\n', g->rep_len);
		struct pollfd pf = { g->report_fd, POLLIN, 0 };
		double left = end - cb_now();
		ssize_t n;

		if (nl) {
			size_t l = (size_t)(nl - g->rep_buf);
			snprintf(buf, len, "%.*s", (int)l, g->rep_buf);
			memmove(g->rep_buf, nl + 1, g->rep_len - l - 1);
			g->rep_len -= l + 1;
			return 1;
		}
		if (g->rep_len == sizeof(g->rep_buf))
			g->rep_len = 0;      /* a line that long is no report */
		if (left <= 0)
			return 0;
		if (poll(&pf, 1, (int)(left * 1000) + 1) <= 0)
			continue;
		n = read(g->report_fd, g->rep_buf + g->rep_len, sizeof(g->rep_buf) - g->rep_len);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			return -1;
		if (n > 0)
			g->rep_len += (size_t)n;
	}
}

static int watchdog_start(struct cb_guest *g, double wait_end, double max_end)
{
	int cmd[2], rep[2];
	char line[64];
	struct wdog w;
	pid_t pid;

	if (pipe2(cmd, O_CLOEXEC) < 0)
		return cb_error_errno("watchdog pipe");
	if (pipe2(rep, O_CLOEXEC) < 0) {
		close(cmd[0]);
		close(cmd[1]);
		return cb_error_errno("watchdog pipe");
	}
	pid = fork();
	if (pid == 0) {
		w = (struct wdog){ g, cmd[0], rep[1], wait_end, max_end, 0, 0, 0 };
		watchdog_main(&w);
	}
	close(cmd[0]);
	close(rep[1]);
	if (pid < 0) {
		close(cmd[1]);
		close(rep[0]);
		return cb_error_errno("cannot fork the freeze watchdog");
	}
	g->watchdog = pid;
	g->watchdog_fd = cmd[1];
	g->report_fd = rep[0];
	g->rep_len = 0;
	if (read_report(g, line, sizeof(line), cb_now() + 5) != 1 || line[0] != 'R')
		return cb_error("the freeze watchdog did not start");
	return 0;
}

/* Send one command byte; the watchdog may be gone: no SIGPIPE for that. */
static void watchdog_send(const struct cb_guest *g, char c)
{
	sigset_t pipe_set, old;

	if (g->watchdog_fd < 0)
		return;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	if (write(g->watchdog_fd, &c, 1) < 0 && errno == EPIPE)
		sigtimedwait(&pipe_set, NULL, &(struct timespec){ 0, 0 });
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void watchdog_close_fds(struct cb_guest *g)
{
	if (g->watchdog_fd >= 0)
		close(g->watchdog_fd);
	if (g->report_fd >= 0)
		close(g->report_fd);
	g->watchdog_fd = g->report_fd = -1;
}

/* The thaw is confirmed: let the watchdog go and reap it. */
static void watchdog_dismiss(struct cb_guest *g)
{
	watchdog_send(g, 'D');
	watchdog_close_fds(g);
	if (g->watchdog > 0)
		while (waitpid(g->watchdog, NULL, 0) < 0 && errno == EINTR)
			;
	g->watchdog = 0;
}

/* The thaw is not confirmed: the watchdog, in its own session, goes on
 * retrying after we close our ends (EOF means "you are on your own"). */
static void watchdog_leave(struct cb_guest *g)
{
	watchdog_close_fds(g);
	g->watchdog = 0;
}

/* Async-signal-safe (the signal handler's action): one byte to a pipe. */
static void ask_thaw(struct cb_guest *g)
{
	if (g->thaw_asked)
		return;
	g->thaw_asked = 1;
	watchdog_send(g, 'T');
}

static void thaw_action(void *arg)
{
	int saved = errno;

	ask_thaw(arg);
	errno = saved;
}

/* A failed attempt, once per distinct message. */
static void note_failure(struct cb_guest *g, const char *msg, char *last, size_t len, int *fails)
{
	(*fails)++;
	if (!strcmp(last, msg))
		return;
	snprintf(last, len, "%s", msg);
	if (g->log)
		cb_warn(g->log, "thaw failed, retrying: %s", msg);
}

/* A watchdog that is stopped (SIGSTOP, a debugger) thaws nothing however
 * long it is waited for. */
static int watchdog_stopped(const struct cb_guest *g)
{
	char st = proc_state(g->watchdog);

	return st == 'T' || st == 't';
}

/* Read reports until the thaw is confirmed (0) or not within timeout_ms;
 * 1 when the watchdog did not take the request ('A') within ANSWER_MS, is
 * found stopped at the end, or ended before it confirmed: it will not
 * thaw, cbackup must. */
static int await_thaw(struct cb_guest *g, int timeout_ms)
{
	double end = cb_now() + timeout_ms / 1000.0, ack_end = cb_now() + ANSWER_MS / 1000.0;
	char line[1100], last[1100] = "";
	int fails = 0, acked = 0;

	for (;;) {
		int r = read_report(g, line, sizeof(line), acked || ack_end > end ? end : ack_end);

		if (r == 0 && (!acked || watchdog_stopped(g)))
			return 1;
		if (r == 0)
			return cb_error("thaw failed: %s; the watchdog (pid %d) keeps retrying for up to "
					"%d s", last[0] ? last : "no answer", (int)g->watchdog,
					g->thaw_timeout_ms / 1000);
		if (r < 0)   /* it ended (killed) before it confirmed: nobody thaws */
			return 1;
		/* any line but a ping's answer: it took the request, or is busy
		 * with a thaw of its own (the deadline's, retrying) */
		acked |= line[0] != 'P';
		if (line[0] == 'X')
			g->deadline_hit = 1;
		else if (line[0] == 'W')
			note_failure(g, line + 2, last, sizeof(last), &fails);
		else if (line[0] == 'G')
			return cb_error("thaw failed, gave up after thaw-timeout (%d s): %s",
					g->thaw_timeout_ms / 1000, line + 2);
		else if (line[0] == 'O' && fails)
			return cb_error("thaw failed %d time(s) before it worked: %s", fails, last);
		else if (line[0] == 'O')
			return 0;
	}
}

/* ---- cbackup watches the watchdog ------------------------------------- */

/* A ping every PING_MS; no answer for ANSWER_MS means the watchdog is
 * stopped (or starved): it could not hold the deadline any more. Once it
 * reported the deadline ('X') it is busy thawing (a retry may sleep 2 s):
 * from then on only its pipe closing counts. */

/* Take the watchdog's answers to pings ('P' lines) out of the report
 * buffer, leaving the other lines for await_thaw(). 1 if there was one;
 * *busy set when the deadline line 'X' is in it. */
static int take_pongs(struct cb_guest *g, int *busy)
{
	size_t i = 0, o = 0;
	int seen = 0;

	while (i < g->rep_len) {
		char *nl = memchr(g->rep_buf + i, '\n', g->rep_len - i);
		size_t l = nl ? (size_t)(nl - (g->rep_buf + i)) + 1 : g->rep_len - i;

		if (nl && g->rep_buf[i] == 'P') {
			seen = 1;
		} else {
			*busy |= nl && g->rep_buf[i] == 'X';
			memmove(g->rep_buf + o, g->rep_buf + i, l);
			o += l;
		}
		i += l;
	}
	g->rep_len = o;
	return seen;
}

/* The watchdog is gone or stuck: end it (it cannot be trusted to thaw or
 * hold the deadline any more) and thaw the guest from here, retrying as
 * it would have. */
static void monitor_takeover(struct cb_guest *g, const char *what)
{
	double give_up = cb_now() + g->thaw_timeout_ms / 1000.0, pause = RETRY_FIRST_S;
	int ok;

	kill(g->watchdog, SIGKILL);
	while (!(ok = (thaw_once(g) == 0)) && cb_now() + pause <= give_up) {
		sleep_s(pause);
		pause = pause * 2 < RETRY_MAX_S ? pause * 2 : RETRY_MAX_S;
	}
	snprintf(g->lost_msg, sizeof(g->lost_msg), "the freeze watchdog (pid %d) %s while the guest "
		 "was frozen: %s%s", (int)g->watchdog, what,
		 ok ? "cbackup thawed the guest itself" : "cbackup could not thaw the guest: ",
		 ok ? "" : cb_last_error());
	g->watchdog_lost = 1;
	if (g->log)
		cb_warn(g->log, "%s", g->lost_msg);
}

static void *monitor_main(void *arg)
{
	struct cb_guest *g = arg;
	double last = cb_now(), prev = last, next_ping = 0;
	int busy = 0;

	for (;;) {
		struct pollfd pf[2] = { { g->monitor_stop[0], POLLIN, 0 }, { g->report_fd, POLLIN, 0 } };
		double now = cb_now();
		ssize_t n;

		/* cbackup itself was stopped (SIGSTOP) or starved: the silence
		 * is ours, not the watchdog's; it gets its full time again */
		if (now - prev > 2.0 * PING_MS / 1000.0)
			last = now;
		prev = now;

		if (now >= next_ping) {
			watchdog_send(g, 'P');
			next_ping = now + PING_MS / 1000.0;
		}
		if (!busy && now - last > ANSWER_MS / 1000.0) {
			monitor_takeover(g, "did not answer for 1 s (stopped?)");
			return NULL;
		}
		if (poll(pf, 2, PING_MS) < 0)
			continue;
		if (pf[0].revents)
			return NULL;
		if (!pf[1].revents)
			continue;
		if (g->rep_len == sizeof(g->rep_buf))
			g->rep_len = 0;   /* a line that long is no report */
		n = read(g->report_fd, g->rep_buf + g->rep_len, sizeof(g->rep_buf) - g->rep_len);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
			monitor_takeover(g, "ended (killed?)");
			return NULL;
		}
		if (n > 0)
			g->rep_len += (size_t)n;
		if (take_pongs(g, &busy))
			last = cb_now();
	}
}

static int monitor_start(struct cb_guest *g)
{
	g->watchdog_lost = 0;
	g->lost_msg[0] = '\0';
	if (pipe2(g->monitor_stop, O_CLOEXEC) < 0)
		return cb_error_errno("watchdog monitor pipe");
	if (cb_thread_start(&g->monitor, monitor_main, g) != 0) {
		close(g->monitor_stop[0]);
		close(g->monitor_stop[1]);
		return cb_error("cannot start the thread that watches the freeze watchdog");
	}
	g->monitor_on = 1;
	return 0;
}

/* Before cbackup reads the watchdog's reports itself. */
static void monitor_stop(struct cb_guest *g)
{
	if (!g->monitor_on)
		return;
	close(g->monitor_stop[1]);
	pthread_join(g->monitor, NULL);
	close(g->monitor_stop[0]);
	g->monitor_on = 0;
}

/* ---- freeze / thaw ---------------------------------------------------- */

static int freeze_cmd(struct cb_guest *g, int wait_ms)
{
	char what[512];
	struct cb_run run = { .what = what, .timeout_ms = wait_ms };

	snprintf(what, sizeof(what), "freeze-cmd '%s'", g->freeze_cmd);
	return cb_run_sh(&run, g->freeze_cmd);
}

static int freeze_request(struct cb_guest *g, int wait_ms)
{
	switch (g->kind) {
	case CB_FREEZER_CGROUP2:
	case CB_FREEZER_CGROUP1:
	case CB_FREEZER_PID:
		return kernel_request(g, 1);
	case CB_FREEZER_CMD:
		return freeze_cmd(g, wait_ms);
	case CB_FREEZER_QMP:
		return qmp_run(g, "stop");
	default:
		return cb_error("cannot freeze: backend %s", cb_guest_kind_name(g->kind));
	}
}

/* "pid 12 (cat) state D in request_wait_answer" for each task of the
 * cgroup that is not parked in the freezer (wchan __refrigerator in v1;
 * do_freezer_trap, seen as get_signal, in v2). */
static void describe_unfrozen(const struct cb_guest *g, char *out, size_t len)
{
	char list[8192], dir[32], stat[512], wchan[128], *save = NULL;
	int shown = 0;

	out[0] = '\0';
	if (read_small(g->path, g->kind == CB_FREEZER_CGROUP2 ? "cgroup.procs" : "tasks", list,
		       sizeof(list)) < 0)
		return;
	for (char *t = strtok_r(list, "\n", &save); t && shown < 8; t = strtok_r(NULL, "\n", &save)) {
		char *comm, *end;
		snprintf(dir, sizeof(dir), "/proc/%s", t);
		if (read_small(dir, "stat", stat, sizeof(stat)) < 0)
			continue;
		if (read_small(dir, "wchan", wchan, sizeof(wchan)) < 0)
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
	r = wait_state(g, 1, wait_ms, 1);
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
	    monitor_start(g) < 0) {
		watchdog_dismiss(g);
		return -1;
	}
	g->frozen = 1;
	g->cleanup_handle = cb_cleanup_push(thaw_action, g);
	if (g->cleanup_handle < 0) {
		cb_error("cleanup stack full, cannot protect the frozen guest");
		return freeze_failed(g);
	}
	if (freeze_request(g, wait_ms) < 0 || freeze_wait(g, wait_ms) < 0 ||
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
	monitor_stop(g);
	if (g->watchdog && g->watchdog_lost) {
		ret = cb_error("%s", g->lost_msg);
		watchdog_dismiss(g);   /* killed by the monitor: reaped here */
	} else if (g->watchdog) {
		ask_thaw(g);
		ret = await_thaw(g, g->thaw_timeout_ms < THAW_FOREGROUND_MS ? g->thaw_timeout_ms
									   : THAW_FOREGROUND_MS);
		if (ret == 1) {   /* stopped, hung or dead: it would leave the guest frozen */
			monitor_takeover(g, proc_state(g->watchdog) == 'Z'
					 ? "ended before it confirmed the thaw (killed?)"
					 : "did not answer the thaw request (stopped?)");
			ret = cb_error("%s", g->lost_msg);
		}
		if (ret == 0 || g->watchdog_lost)
			watchdog_dismiss(g);
		else
			watchdog_leave(g);
	} else {
		ret = thaw_once(g);   /* no watchdog: its start failed; try ourselves */
	}
	if (g->cleanup_handle >= 0)
		cb_cleanup_pop(g->cleanup_handle, 0);
	g->cleanup_handle = -1;
	g->frozen = 0;
	if (ret == 0 && cgroup_gone(g) && g->log)
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
