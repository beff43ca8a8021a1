/*
 * cb_progress: a one-line progress display on stderr (percent, amount,
 * rate, ETA), redrawn at most 4 times a second, only when stderr is a
 * terminal and --quiet is off, and once more where the pass ended. Never
 * written to the log file.
 */
#ifndef CB_PROGRESS_H
#define CB_PROGRESS_H

#include <stdint.h>

struct cb_progress {
	int enabled;
	const char *what;     /* "first sync", "archive", "restore", "verify" */
	uint64_t total;       /* expected bytes (0 = unknown: no percent/ETA) */
	uint64_t done;        /* the last count given */
	double start, last;
	int drawn;
};

/* enabled: the caller's wish (not quiet); it is also off when stderr is no TTY. */
void cb_progress_start(struct cb_progress *p, int enabled, const char *what, uint64_t total);
void cb_progress_update(struct cb_progress *p, uint64_t done);
/* The last frame (done of total: 100% when done reached the total), then
 * the line erased (before the next log line). */
void cb_progress_end(struct cb_progress *p);

#endif
