/*
 * cb_child.h: what the two watchdogs (the container's, src/guest/watchdog.c,
 * and the VM's, src/vm/cbw_watchdog.c) share as child processes that must
 * outlive a crash of cbackup: their detachment right after fork(), and
 * their reaping.
 */
#ifndef CB_CHILD_H
#define CB_CHILD_H

#include <sys/types.h>

/* In a child just forked: SIGINT, SIGTERM, SIGHUP and SIGPIPE ignored (they
 * end the job, never the watchdog), SIGCHLD default, a session of its own,
 * NAME as its process name, every descriptor closed but KEEP_A and KEEP_B,
 * and 0, 1, 2 on /dev/null (for the commands it runs). Async-signal-safe. */
void cb_child_detach(const char *name, int keep_a, int keep_b);
/* Wait for child PID to end (EINTR retried); with kill_it, SIGKILL first. */
void cb_child_reap(pid_t pid, int kill_it);

#endif
