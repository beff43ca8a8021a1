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

/* freezer.c: the freezers' requests and state (async-signal-safe: the
 * watchdog child calls them) */
int guest_thaw_request(const struct cb_guest *g);
char guest_proc_state(pid_t pid);
int guest_wait_state(const struct cb_guest *g, int want, int timeout_ms, int stop_on_signal);
int freezer_cgroup_gone(const struct cb_guest *g);
int freezer_kernel_request(const struct cb_guest *g, int freeze);
int freezer_qmp_run(const struct cb_guest *g, const char *cmd);
int freezer_read_small(const char *dir, const char *name, char *buf, size_t len);

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
