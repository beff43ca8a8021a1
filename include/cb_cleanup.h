/*
 * cb_cleanup: the process-wide cleanup stack (git's sigchain + tempfile).
 *
 * Push an action right after the resource exists (thaw right after a freeze
 * succeeds, sink-abort right after the sink opens) and pop it when the
 * resource is released normally. On SIGINT/SIGTERM/SIGHUP the handler runs
 * every pushed action, newest first (the order of the pushes, whatever was
 * popped in between), then records the signal so that long loops stop (cb_interrupted()) and the
 * normal error path unwinds and reports. Only the owner pid runs actions:
 * a forked child never thaws or unlinks on its parent's behalf.
 */
#ifndef CB_CLEANUP_H
#define CB_CLEANUP_H

typedef void (*cb_cleanup_fn)(void *arg);

/* Install the signal handlers; call once from main. */
void cb_cleanup_install(void);
/* Push an action; returns a handle for cb_cleanup_pop(), or -1 when the
 * stack is full (32 actions): the caller must then not go on, its resource
 * would be unprotected. Every action runs in a signal handler, so it must
 * be async-signal-safe (open/write/close/unlink/kill and the like). */
int cb_cleanup_push(cb_cleanup_fn fn, void *arg);
/* Remove the action without running it (run_it=0) or run and remove it. */
void cb_cleanup_pop(int handle, int run_it);
/* Run all remaining actions (used on fatal paths). */
void cb_cleanup_run_all(void);

/*
 * A deadline (max-freeze) for long loops: once the monotonic clock
 * (cb_now()) reaches `at`, cb_check_interrupt() fails with `why` until
 * cb_cleanup_deadline(0, NULL) clears it. It runs no action: the thaw at
 * the deadline is the freeze watchdog's (cb_guest), which holds it even
 * while this process is stopped.
 */
void cb_cleanup_deadline(double at, const char *why);

/* Non-zero once SIGINT/SIGTERM/SIGHUP arrived: the signal number. */
int cb_interrupted(void);
/* How many of them arrived so far (a wait that began after the first one
 * ends on the next). */
int cb_signal_count(void);
/* -1 with "interrupted by signal INT" if cb_interrupted() (or the deadline's
 * message once it fired), else 0. */
int cb_check_interrupt(void);

#endif
