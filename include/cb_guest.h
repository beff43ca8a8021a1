/*
 * cb_guest: freeze/thaw backends and the watchdog.
 *
 * Backends (chosen from the options, at most one configured):
 *   cgroup v2  — "1"/"0" into PATH/cgroup.freeze, wait for "frozen 1"/
 *                "frozen 0" in PATH/cgroup.events;
 *   cgroup v1  — FROZEN/THAWED into PATH/freezer.state, wait for FROZEN;
 *   pid        — SIGSTOP/SIGCONT to the process group of the pid (only the
 *                pid itself if that group is ours);
 *   cmd        — freeze-cmd / thaw-cmd with /bin/sh -c, each in its own
 *                process group with a time limit (cb_run); exit 0 = done;
 *   qmp        — "stop" / "cont" over the VM's QMP socket, status checked.
 * A relative freeze-cgroup PATH is looked up under the cgroup2 mount, then
 * the v1 freezer mount (found in /proc/self/mounts).
 *
 * Safety (cbackup(8), "How the guest is kept safe"): cb_guest_freeze()
 * first forks a watchdog in its own session that holds two pipes to
 * cbackup. The watchdog does every thaw: when asked ('T': cb_guest_thaw or
 * the SIGINT/SIGTERM/SIGHUP handler), when the pipe closes (cbackup died,
 * even by SIGKILL), and on its own when the deadline passes (the freeze
 * wait until the freeze is confirmed, then max-freeze), whatever cbackup is
 * doing then (stopped, stuck in a hook). It retries a failed thaw with
 * backoff (0.1 s doubling to 2 s) for thaw-timeout, and stays until a thaw
 * is confirmed (cgroup "frozen 0", QMP status running, the pid no longer
 * stopped, thaw-cmd exit 0).
 */
#ifndef CB_GUEST_H
#define CB_GUEST_H

#include <pthread.h>
#include <signal.h>
#include <sys/types.h>
#include "cb_log.h"
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
	int thaw_timeout_ms;   /* how long a failed thaw is retried */
	struct cb_log *log;    /* for the WARN lines of failed thaws; may be NULL */
	int max_freeze_ms;     /* the deadline the watchdog holds (0 = none) */
	double frozen_since;   /* cb_now() at the freeze request */
	int deadline_hit;      /* the watchdog thawed at the deadline */
	volatile sig_atomic_t thaw_asked;  /* 'T' sent (maybe by the handler) */
	pid_t watchdog;        /* 0 when none */
	int watchdog_fd;       /* commands to the watchdog, -1 when none */
	int report_fd;         /* its reports (one line each), -1 when none */
	char rep_buf[2048];    /* a report line being read */
	size_t rep_len;
	int cleanup_handle;    /* cb_cleanup handle of the thaw action, -1 */
	/* while frozen, a thread of cbackup's watches the watchdog (pings it,
	 * sees its pipe close) and thaws the guest itself if it is gone */
	pthread_t monitor;
	int monitor_on;
	int monitor_stop[2];   /* a byte (or EOF) here ends the monitor */
	int watchdog_lost;     /* the monitor found the watchdog gone */
	char lost_msg[512];    /* what it found and what it did */
};

/* Configuration check only (no system access): at most one backend, and
 * freeze-cmd with thaw-cmd. For the job's up-front validation (exit 2). */
int cb_guest_check_opts(const struct cb_opts *o);

/* Resolve the backend from opts; error if the cgroup/pid does not exist or
 * if two backends are configured. kind NONE when nothing is configured. */
int cb_guest_init(struct cb_guest *g, const struct cb_opts *o);
void cb_guest_release(struct cb_guest *g);   /* thaws if still frozen */

/* A freeze-cgroup value's directory (malloc'ed): absolute as it is, else
 * under the cgroup2 mount, else the v1 freezer's; NULL without either. */
char *cb_guest_cgroup_dir(const char *path);

/* Whether the guest runs, asked of its freeze backend: 0 stopped (why says
 * how that is known: its cgroup gone or empty, its pid or qmp socket gone),
 * 1 running or unknown (freeze-cmd and no backend cannot tell). A stopped
 * guest is backed up as it is, without any freeze (vzdump's
 * "status = stopped"). */
int cb_guest_status(const struct cb_opts *o, char *why, size_t len);

/* A container cb_guest_status calls stopped (why: its words) is asked
 * again: its manager where it has one (`pct status ID` for a Proxmox CT,
 * `lxc-info -s` for one in the LXC directory) decides; without one, a
 * process of the host whose root is the guest's root directory or a
 * directory below it (/proc/PID/root, by device and inode) means it runs.
 * 0 stopped as far as can be seen (a VM: 0), -1 with the error set when
 * it runs: its freeze setting is wrong (a mistyped freeze-cgroup), and a
 * running guest must not be copied unfrozen as a stopped one. */
int cb_guest_check_stopped(const struct cb_opts *o, const char *why);

const char *cb_guest_kind_name(enum cb_freezer_kind k);  /* "cgroup2", ... */
/* The cgroup directory that holds the guest's processes, NULL when its
 * freezer is not a cgroup. */
const char *cb_guest_cgroup(const struct cb_guest *g);

/* wait_ms bounds the freeze itself (freeze-cmd, the wait for "frozen";
 * at most max_ms): a guest not frozen by then is thawed and the call fails
 * naming what did not freeze. max_ms (0 = none) is the deadline of the
 * whole frozen time, counted from now and held by the watchdog. Fails at
 * once on a signal (thawed). */
int cb_guest_freeze(struct cb_guest *g, int wait_ms, int max_ms);
/* Thaw through the watchdog and wait up to 5 s for the confirmation. -1
 * if a thaw attempt failed (even if a retry worked), if it is not confirmed
 * (the watchdog goes on trying), or if the watchdog had to thaw at the
 * deadline ("max-freeze (N s) exceeded"). A watchdog that does not take
 * the request within 1 s, is stopped at the end of the wait, or ends
 * before it confirmed, is killed and reaped, and the guest thawed from
 * here (-1 all the same, naming the watchdog). */
int cb_guest_thaw(struct cb_guest *g);
/* 1 if the backend reports the guest frozen now, 0 if not, -1 unknown. */
int cb_guest_is_frozen(const struct cb_guest *g);

#endif
