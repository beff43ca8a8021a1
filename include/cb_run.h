/*
 * cb_run: run a child program with a bounded wait.
 *
 * Every program cbackup starts while a guest may be frozen (freeze-cmd,
 * thaw-cmd, hook scripts) goes through here, so that none of them can hold
 * the guest frozen or the job hostage: the child gets a process group of
 * its own (it and whatever it forked can be killed together), stdin from
 * /dev/null, default signal dispositions and an empty signal mask; its
 * stdout and stderr go line by line to a callback, or to /dev/null.
 *
 * The wait ends when the child exits, when `timeout_ms` passes, or as soon
 * as a signal arrives (cb_signal_count() moves). A child started after a
 * signal (the abort hooks of an interrupted run) still runs, for at most
 * CB_RUN_AFTER_SIGNAL_MS. In the last two cases the group
 * gets SIGTERM, then SIGKILL after CB_RUN_KILL_GRACE_MS, and the call fails
 * with "... timed out after N s" / "... interrupted by signal TERM".
 */
#ifndef CB_RUN_H
#define CB_RUN_H

#define CB_RUN_KILL_GRACE_MS 1000
/* a child started after a signal arrived (an abort hook) gets at most this */
#define CB_RUN_AFTER_SIGNAL_MS 30000

struct cb_run {
	const char *what;        /* for messages: "hook script '/x'", "thaw-cmd 'y'" */
	int timeout_ms;          /* 0: no limit but signals */
	/* called for each line of output (without the newline); NULL: discard */
	void (*on_line)(void *arg, const char *line);
	void *arg;
	/* called in the child before exec (set environment, ...); may be NULL */
	void (*child_setup)(void *arg);
	int ignore_interrupt;    /* 1: keep waiting after a signal (the watchdog) */
};

/* Run argv[0] with argv (no shell). 0 if it exited with status 0; -1 with
 * the error set otherwise (exit code, signal, timeout, interruption). */
int cb_run_argv(const struct cb_run *r, char *const argv[]);
/* Run CMD with /bin/sh -c. Same result as cb_run_argv. */
int cb_run_sh(const struct cb_run *r, const char *cmd);

#endif
