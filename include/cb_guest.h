/*
 * cb_guest: freeze/thaw backends and the watchdog.
 *
 * Backends (chosen from the options, at most one configured):
 *   cgroup v2  — "1"/"0" into PATH/cgroup.freeze, wait for "frozen 1"/
 *                "frozen 0" in PATH/cgroup.events;
 *   cgroup v1  — FROZEN/THAWED into PATH/freezer.state, wait for FROZEN;
 *   pid        — SIGSTOP/SIGCONT to the process group of the pid (only the
 *                pid itself if that group is ours);
 *   cmd        — run freeze-cmd / thaw-cmd with /bin/sh -c; exit 0 = done;
 *   qmp        — later issue (stop/cont over a QMP socket).
 * A relative freeze-cgroup PATH is looked up under the cgroup2 mount, then
 * the v1 freezer mount (found in /proc/self/mounts).
 *
 * Safety: cb_guest_freeze() first forks a watchdog that holds the read end
 * of a pipe; if cbackup dies (even SIGKILL) the pipe closes and the
 * watchdog thaws the guest. cb_guest_thaw() thaws and dismisses the
 * watchdog. The freeze also pushes a thaw onto the cleanup stack, so a
 * SIGINT/SIGTERM/SIGHUP thaws at once.
 */
#ifndef CB_GUEST_H
#define CB_GUEST_H

#include <sys/types.h>
#include "cb_opts.h"

enum cb_freezer_kind { CB_FREEZER_NONE, CB_FREEZER_CGROUP2, CB_FREEZER_CGROUP1,
		       CB_FREEZER_PID, CB_FREEZER_CMD, CB_FREEZER_QMP };

struct cb_guest {
	enum cb_freezer_kind kind;
	char *path;            /* resolved cgroup dir (cgroup kinds) */
	pid_t pid;             /* pid kind: the target */
	pid_t pgid;            /* pid kind: group signalled (0 = pid only) */
	char *freeze_cmd, *thaw_cmd;
	int frozen;
	int kept_paused;       /* qmp: the VM was paused already at the freeze;
				* nothing was stopped, nothing is resumed */
	pid_t watchdog;        /* 0 when none */
	int watchdog_fd;       /* write end of the pipe, -1 when none */
	int cleanup_handle;    /* cb_cleanup handle of the thaw action, -1 */
};

/* Configuration check only (no system access): at most one backend, and
 * freeze-cmd with thaw-cmd. For the job's up-front validation (exit 2). */
int cb_guest_check_opts(const struct cb_opts *o);

/* Resolve the backend from opts; error if the cgroup/pid does not exist or
 * if two backends are configured. kind NONE when nothing is configured. */
int cb_guest_init(struct cb_guest *g, const struct cb_opts *o);
void cb_guest_release(struct cb_guest *g);   /* thaws if still frozen */

const char *cb_guest_kind_name(enum cb_freezer_kind k);  /* "cgroup2", ... */

/* timeout_ms bounds the wait for the freezer to report frozen. */
int cb_guest_freeze(struct cb_guest *g, int timeout_ms);
int cb_guest_thaw(struct cb_guest *g);
/* 1 if the backend reports the guest frozen now, 0 if not, -1 unknown. */
int cb_guest_is_frozen(const struct cb_guest *g);

#endif
