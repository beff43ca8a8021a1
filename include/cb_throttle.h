/*
 * cb_throttle: a token bucket for bwlimit (KiB/s). Callers account the
 * bytes they moved; the bucket sleeps when they are ahead of the rate.
 * Bursts are capped at a quarter second's worth, so the rate holds over
 * any window longer than that. A wait ends within 0.1 s of a signal.
 */
#ifndef CB_THROTTLE_H
#define CB_THROTTLE_H

#include <stddef.h>

struct cb_throttle {
	double rate;      /* bytes per second; 0 = unlimited */
	double tokens;
	double last;
	double waited;    /* seconds slept for the rate, in all */
};

void cb_throttle_init(struct cb_throttle *t, long kib_per_s);
/* Sleeps while the caller is ahead of the rate; -1 (error set) as soon as
 * a signal arrived (cb_check_interrupt), else 0. */
int cb_throttle_account(struct cb_throttle *t, size_t bytes);

#endif
