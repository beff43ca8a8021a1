/*
 * guest_int.h: what guest.c (the freezers, freeze and thaw) and watchdog.c
 * (the watchdog child and cbackup's watch over it) call of each other. Not
 * a public header: the backup calls cb_guest.h.
 */
#ifndef CB_GUEST_INT_H
#define CB_GUEST_INT_H

#include <stddef.h>
#include <sys/types.h>
#include "cb_guest.h"

#define V2_FREEZE "cgroup.freeze"
#define V2_EVENTS "cgroup.events"
#define V1_STATE  "freezer.state"
#define QMP_TIMEOUT_MS 5000

/* one thaw attempt waits this long for the backend to report it thawed */
#define THAW_CONFIRM_MS 1000
/* a failed thaw is retried after 0.1 s, doubling up to 2 s */
#define RETRY_FIRST_S 0.1
#define RETRY_MAX_S 2.0
/* the watchdog answers a ping, or takes a thaw request, within this */
#define PING_MS 200
#define ANSWER_MS 1000

/* A freezer: one file each (freezer_cgroup.c, freezer_pid.c, freezer_cmd.c,
 * freezer_qmp.c), chosen by the guest's kind (freezer_of). */
struct freezer_ops {
	const char *name;                                   /* "cgroup2", as logged */
	/* the request to freeze; wait_ms bounds a command (the caller then
	 * waits for the state) */
	int (*freeze)(const struct cb_guest *g, int wait_ms);
	/* the request to thaw, async-signal-safe (the watchdog child) */
	int (*thaw)(const struct cb_guest *g);
	int (*is_frozen)(const struct cb_guest *g);          /* 1, 0, -1: cannot tell */
	const char *notify_file;  /* in the guest's path: POLLPRI when the state changes */
};
extern const struct freezer_ops freezer_cgroup2, freezer_cgroup1, freezer_pid, freezer_cmd,
	freezer_qmp;

/* freezer.c: the table, and what the freezers share */
const struct freezer_ops *freezer_of(enum cb_freezer_kind k);
int freezer_freeze(const struct cb_guest *g, int wait_ms);
int guest_thaw_request(const struct cb_guest *g);
char guest_proc_state(pid_t pid);
int guest_wait_state(const struct cb_guest *g, int want, int timeout_ms, int stop_on_signal);
int freezer_read_small(const char *dir, const char *name, char *buf, size_t len);
/* freezer_cgroup.c */
int freezer_cgroup_gone(const struct cb_guest *g);

/* watchdog.c */
int watchdog_thaw_once(const struct cb_guest *g);
int watchdog_start(struct cb_guest *g, double wait_end, double max_end);
void watchdog_send(const struct cb_guest *g, char c);
void watchdog_dismiss(struct cb_guest *g);
void watchdog_leave(struct cb_guest *g);
void watchdog_ask_thaw(struct cb_guest *g);
void watchdog_thaw_action(void *arg);
int watchdog_await_thaw(struct cb_guest *g, int timeout_ms);
void watchdog_monitor_takeover(struct cb_guest *g, const char *what);
int watchdog_monitor_start(struct cb_guest *g);
void watchdog_monitor_stop(struct cb_guest *g);

#endif
