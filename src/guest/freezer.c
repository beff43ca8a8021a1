/*
 * The freezers' requests and their state, written to be async-signal-safe
 * (the watchdog child calls them after a fork): a cgroup's freeze file
 * (v2, v1), SIGSTOP/SIGCONT to a process group, thaw-cmd, QMP cont; and
 * what each says of the guest (frozen or not). guest.c freezes and thaws
 * through them; watchdog.c thaws through them.
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
int freezer_cgroup_gone(const struct cb_guest *g)
{
	return (g->kind == CB_FREEZER_CGROUP2 || g->kind == CB_FREEZER_CGROUP1) &&
	       access(g->path, F_OK) < 0 && errno == ENOENT;
}

/* The kernel's own freezers, either way: a cgroup's freeze file, or
 * SIGSTOP/SIGCONT to the process group (a group gone counts as thawed). */
int freezer_kernel_request(const struct cb_guest *g, int freeze)
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
		if (!freeze && errno == ENOENT && freezer_cgroup_gone(g))
			return 0;
		return cb_error_errno("cannot write '%s/%s'", g->path, file);
	}
	return 0;
}

/* One QMP command on the VM's socket (stop, cont); QEMU's error text, if
 * any, in the error. */
int freezer_qmp_run(const struct cb_guest *g, const char *cmd)
{
	char reply[512] = "";
	int st = cb_qmp_execute(g->path, cmd, reply, sizeof(reply), QMP_TIMEOUT_MS);

	if (st != CB_QMP_OK)
		return cb_error("qmp socket '%s': %s failed: %s%s%s", g->path, cmd, cb_qmp_strerror(st),
				*reply ? " " : "", reply);
	return 0;
}

/* Ask the backend to thaw; does not wait for it. -1 with the error set. */
int guest_thaw_request(const struct cb_guest *g)
{
	/* one attempt may not eat the whole retry time */
	struct cb_run run = { .timeout_ms = g->thaw_timeout_ms < 10000 ? g->thaw_timeout_ms : 10000,
			      .ignore_interrupt = 1 };
	char what[512];

	switch (g->kind) {
	case CB_FREEZER_CGROUP2:
	case CB_FREEZER_CGROUP1:
	case CB_FREEZER_PID:
		return freezer_kernel_request(g, 0);
	case CB_FREEZER_CMD:
		snprintf(what, sizeof(what), "thaw-cmd '%s'", g->thaw_cmd);
		run.what = what;
		return cb_run_sh(&run, g->thaw_cmd);
	case CB_FREEZER_QMP:
		return freezer_qmp_run(g, "cont");
	default:
		return 0;
	}
}

/* ---- state reading ---------------------------------------------------- */

int freezer_read_small(const char *dir, const char *name, char *buf, size_t len)
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
char guest_proc_state(pid_t pid)
{
	char dir[32], buf[512], *p;

	snprintf(dir, sizeof(dir), "/proc/%d", (int)pid);
	if (freezer_read_small(dir, "stat", buf, sizeof(buf)) < 0)
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
		if (freezer_read_small(g->path, V2_EVENTS, buf, sizeof(buf)) < 0)
			return -1;
		return strstr(buf, "frozen 1") != NULL;
	case CB_FREEZER_CGROUP1:
		if (freezer_read_small(g->path, V1_STATE, buf, sizeof(buf)) < 0)
			return -1;
		return strncmp(buf, "FROZEN", 6) == 0;
	case CB_FREEZER_PID:
		st = guest_proc_state(g->pid);
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
int guest_wait_state(const struct cb_guest *g, int want, int timeout_ms, int stop_on_signal)
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
