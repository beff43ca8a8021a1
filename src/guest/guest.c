/*
 * cb_guest: freeze/thaw backends and the watchdog. See include/cb_guest.h.
 *
 * Everything that thaws (the cleanup-stack action, the watchdog child, the
 * normal path) goes through thaw_now(), which only uses async-signal-safe
 * calls: it runs inside a signal handler and inside a child forked from a
 * process that may have threads.
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

#include "cb_cleanup.h"
#include "cb_guest.h"
#include "cb_qmp.h"
#include "cb_util.h"

#define V2_FREEZE "cgroup.freeze"
#define V2_EVENTS "cgroup.events"
#define V1_STATE  "freezer.state"
#define THAW_WAIT_MS 5000
#define QMP_TIMEOUT_MS 5000

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

/* fork + /bin/sh -c CMD + waitpid; returns the wait status or -1. */
static int run_sh(const char *cmd)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct sigaction sa;
		sigset_t none;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = SIG_DFL;
		sigaction(SIGPIPE, &sa, NULL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return status;
}

/* Ask the backend to thaw; does not wait. Safe in a signal handler. */
static int thaw_now(const struct cb_guest *g)
{
	switch (g->kind) {
	case CB_FREEZER_CGROUP2:
		return write_ctl(g->path, V2_FREEZE, "0");
	case CB_FREEZER_CGROUP1:
		return write_ctl(g->path, V1_STATE, "THAWED");
	case CB_FREEZER_PID:
		return kill(g->pgid ? -g->pgid : g->pid, SIGCONT);
	case CB_FREEZER_CMD: {
		int st = run_sh(g->thaw_cmd);
		return (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) ? 0 : -1;
	}
	case CB_FREEZER_QMP:
		return cb_qmp_execute(g->path, "cont", NULL, 0, QMP_TIMEOUT_MS) == CB_QMP_OK ? 0 : -1;
	default:
		return 0;
	}
}

static void thaw_action(void *arg)
{
	int saved = errno;
	thaw_now(arg);
	errno = saved;
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
 * Wait until the backend reports frozen == want. cgroup v2 notifies
 * changes of cgroup.events with POLLPRI; the short poll timeout covers
 * backends without notification and any missed wakeup.
 */
static int wait_state(const struct cb_guest *g, int want, int timeout_ms)
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
	g->watchdog_fd = -1;
	g->cleanup_handle = -1;
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

/* ---- watchdog --------------------------------------------------------- */

/*
 * The child: its own session (a signal to cbackup's process group must not
 * take it along), no inherited descriptors but the pipe, and blocked in
 * read() until the parent says 'D' (done) or dies (EOF).
 */
static void __attribute__((noreturn))
watchdog_main(const struct cb_guest *g, int rfd, int ready_fd)
{
	struct sigaction sa;
	char c = 0;
	ssize_t n;
	int fd;

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
	if (write(ready_fd, "R", 1) < 0)
		_exit(1);
	fd = fcntl(rfd, F_DUPFD, 3);
	if (fd < 0)
		_exit(1);
	close_range(0, fd - 1, 0);
	close_range(fd + 1, ~0U, 0);
	/* 0, 1, 2 are free now: give the thaw command harmless ones */
	for (int i = 0; i < 3; i++)
		if (open("/dev/null", O_RDWR) < 0)
			break;
	do
		n = read(fd, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1 && c == 'D')
		_exit(0);
	thaw_now(g);
	_exit(0);
}

/* Start the watchdog and return once it is in its own session. */
static int watchdog_start(struct cb_guest *g)
{
	int p[2], ready[2];
	char c;
	ssize_t n;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return cb_error_errno("watchdog pipe");
	if (pipe2(ready, O_CLOEXEC) < 0) {
		close(p[0]);
		close(p[1]);
		return cb_error_errno("watchdog pipe");
	}
	pid = fork();
	if (pid == 0)
		watchdog_main(g, p[0], ready[1]);
	close(p[0]);
	close(ready[1]);
	if (pid < 0) {
		close(p[1]);
		close(ready[0]);
		return cb_error_errno("cannot fork the freeze watchdog");
	}
	do
		n = read(ready[0], &c, 1);
	while (n < 0 && errno == EINTR);
	close(ready[0]);
	g->watchdog = pid;
	g->watchdog_fd = p[1];
	if (n != 1)
		return cb_error("the freeze watchdog did not start");
	return 0;
}

/* Tell the watchdog we are done (no thaw from it) and reap it. */
static void watchdog_dismiss(struct cb_guest *g)
{
	sigset_t pipe_set, old;

	if (g->watchdog_fd >= 0) {
		/* the watchdog may be gone already: no SIGPIPE for that */
		sigemptyset(&pipe_set);
		sigaddset(&pipe_set, SIGPIPE);
		pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
		if (write(g->watchdog_fd, "D", 1) < 0 && errno == EPIPE)
			sigtimedwait(&pipe_set, NULL, &(struct timespec){ 0, 0 });
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		close(g->watchdog_fd);
		g->watchdog_fd = -1;
	}
	if (g->watchdog > 0) {
		while (waitpid(g->watchdog, NULL, 0) < 0 && errno == EINTR)
			;
		g->watchdog = 0;
	}
}

/* ---- freeze / thaw ---------------------------------------------------- */

static int freeze_cmd(struct cb_guest *g)
{
	int st = run_sh(g->freeze_cmd);

	if (st < 0)
		return cb_error_errno("cannot run freeze-cmd '%s'", g->freeze_cmd);
	if (WIFSIGNALED(st))
		return cb_error("freeze-cmd '%s' killed by signal %d", g->freeze_cmd,
				WTERMSIG(st));
	if (WEXITSTATUS(st) != 0)
		return cb_error("freeze-cmd '%s' failed with exit status %d", g->freeze_cmd,
				WEXITSTATUS(st));
	return 0;
}

static int freeze_request(struct cb_guest *g)
{
	switch (g->kind) {
	case CB_FREEZER_CGROUP2:
		if (write_ctl(g->path, V2_FREEZE, "1") < 0)
			return cb_error_errno("cannot write '%s/%s'", g->path, V2_FREEZE);
		return 0;
	case CB_FREEZER_CGROUP1:
		if (write_ctl(g->path, V1_STATE, "FROZEN") < 0)
			return cb_error_errno("cannot write '%s/%s'", g->path, V1_STATE);
		return 0;
	case CB_FREEZER_PID:
		if (kill(g->pgid ? -g->pgid : g->pid, SIGSTOP) < 0)
			return cb_error_errno("cannot stop pid %d", (int)g->pid);
		return 0;
	case CB_FREEZER_CMD:
		return freeze_cmd(g);
	case CB_FREEZER_QMP: {
		char reply[512] = "";
		int st = cb_qmp_execute(g->path, "stop", reply, sizeof(reply), QMP_TIMEOUT_MS);
		if (st != CB_QMP_OK)
			return cb_error("qmp socket '%s': stop failed: %s %s", g->path, cb_qmp_strerror(st),
					reply);
		return 0;
	}
	default:
		return cb_error("cannot freeze: backend %s", cb_guest_kind_name(g->kind));
	}
}

static int freeze_wait(struct cb_guest *g, int timeout_ms)
{
	if (g->kind == CB_FREEZER_CMD)
		return 0;
	if (wait_state(g, 1, timeout_ms) == 0)
		return 0;
	if (g->kind == CB_FREEZER_PID)
		return cb_error("pid %d did not stop within %d ms", (int)g->pid, timeout_ms);
	if (g->kind == CB_FREEZER_QMP)
		return cb_error("qmp socket '%s': the VM did not stop within %d ms", g->path, timeout_ms);
	return cb_error("cgroup '%s' did not freeze within %d ms", g->path, timeout_ms);
}

int cb_guest_freeze(struct cb_guest *g, int timeout_ms)
{
	if (g->kind == CB_FREEZER_NONE)
		return 0;
	if (g->frozen)
		return 0;
	/* A VM its admin paused is as still as a stopped one: back it up as
	 * it is and leave it paused (asked now, not at init: it may have been
	 * resumed since). */
	g->kept_paused = g->kind == CB_FREEZER_QMP && cb_qmp_is_paused(g->path, QMP_TIMEOUT_MS) == 1;
	if (g->kept_paused)
		return 0;
	if (watchdog_start(g) < 0)
		goto fail;
	if (freeze_request(g) < 0 || freeze_wait(g, timeout_ms) < 0 ||
	    cb_check_interrupt() < 0)
		goto fail;
	g->cleanup_handle = cb_cleanup_push(thaw_action, g);
	if (g->cleanup_handle < 0) {
		cb_error("cleanup stack full, cannot protect the frozen guest");
		goto fail;
	}
	g->frozen = 1;
	return 0;
fail:
	/* thawing an unfrozen guest is harmless; leave it frozen never */
	thaw_now(g);
	watchdog_dismiss(g);
	return -1;
}

int cb_guest_thaw(struct cb_guest *g)
{
	int ret = 0;

	if (!g->frozen && !g->watchdog)
		return 0;
	if (thaw_now(g) < 0) {
		ret = g->kind == CB_FREEZER_CMD
			? cb_error("thaw-cmd '%s' failed", g->thaw_cmd)
			: cb_error_errno("cannot thaw %s guest", cb_guest_kind_name(g->kind));
	} else if (g->kind != CB_FREEZER_CMD && wait_state(g, 0, THAW_WAIT_MS) < 0) {
		ret = cb_error("guest still frozen %d ms after thaw", THAW_WAIT_MS);
	}
	if (g->cleanup_handle >= 0)
		cb_cleanup_pop(g->cleanup_handle, 0);
	g->cleanup_handle = -1;
	watchdog_dismiss(g);
	g->frozen = 0;
	return ret;
}
