/*
 * The freezers, behind one table (struct freezer_ops, guest_int.h): a
 * cgroup's freeze file v2 and v1 (freezer_cgroup.c), SIGSTOP/SIGCONT to a
 * process group (freezer_pid.c), freeze-cmd and thaw-cmd (freezer_cmd.c),
 * QMP stop and cont (freezer_qmp.c). Their thaw requests are
 * async-signal-safe: the watchdog child calls them after a fork. This
 * file: the table by kind, what they share, and waiting for a state.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cb_cleanup.h"
#include "cb_guest.h"
#include "cb_util.h"
#include "guest_int.h"

static int none_freeze(const struct cb_guest *g, int wait_ms)
{
	(void)g;
	(void)wait_ms;
	return cb_error("cannot freeze: backend none");
}

static int none_thaw(const struct cb_guest *g)
{
	(void)g;
	return 0;
}

static int none_is_frozen(const struct cb_guest *g)
{
	(void)g;
	return 0;
}

static const struct freezer_ops freezer_none = {
	"none", none_freeze, none_thaw, none_is_frozen, NULL
};

const struct freezer_ops *freezer_of(enum cb_freezer_kind k)
{
	switch (k) {
	case CB_FREEZER_CGROUP2: return &freezer_cgroup2;
	case CB_FREEZER_CGROUP1: return &freezer_cgroup1;
	case CB_FREEZER_PID:     return &freezer_pid;
	case CB_FREEZER_CMD:     return &freezer_cmd;
	case CB_FREEZER_QMP:     return &freezer_qmp;
	default:                 return &freezer_none;
	}
}

const char *cb_guest_kind_name(enum cb_freezer_kind k)
{
	if ((unsigned)k > CB_FREEZER_QMP)
		return "unknown";
	return freezer_of(k)->name;
}

/* Ask the backend to thaw; does not wait for it. -1 with the error set. */
int guest_thaw_request(const struct cb_guest *g)
{
	return freezer_of(g->kind)->thaw(g);
}

int freezer_freeze(const struct cb_guest *g, int wait_ms)
{
	return freezer_of(g->kind)->freeze(g, wait_ms);
}

int cb_guest_is_frozen(const struct cb_guest *g)
{
	return freezer_of(g->kind)->is_frozen(g);
}

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

/*
 * Wait until the backend reports frozen == want: 0, or -1 on timeout (no
 * error set) or, with stop_on_signal, as soon as a signal arrived (error
 * set). A backend with a notify file (cgroup v2's cgroup.events) wakes the
 * wait with POLLPRI; the short poll timeout covers the others and missed
 * wakeups.
 */
int guest_wait_state(const struct cb_guest *g, int want, int timeout_ms, int stop_on_signal)
{
	const struct freezer_ops *ops = freezer_of(g->kind);
	double end = cb_now() + timeout_ms / 1000.0;
	struct pollfd pfd = { .fd = -1, .events = POLLPRI };
	int ret = -1;

	if (ops->notify_file) {
		char *p = cb_xasprintf("%s/%s", g->path, ops->notify_file);
		pfd.fd = open(p, O_RDONLY | O_CLOEXEC);
		free(p);
	}
	for (;;) {
		int r = ops->is_frozen(g);
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
