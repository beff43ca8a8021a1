/* cb_throttle: token bucket. See include/cb_throttle.h. */
#include <time.h>

#include "cb_cleanup.h"
#include "cb_throttle.h"
#include "cb_util.h"

void cb_throttle_init(struct cb_throttle *t, long kib_per_s)
{
	t->rate = kib_per_s > 0 ? kib_per_s * 1024.0 : 0;
	t->tokens = t->rate / 4;
	t->last = cb_now();
	t->waited = 0;
}

/* Slices short enough that a signal (seen through cb_interrupted(), which
 * any thread can read) ends the wait at once: a 4 MiB write at 100 KiB/s
 * owes 40 s, and nanosleep in a helper thread is not interrupted at all. */
#define SLICE_S 0.1

int cb_throttle_account(struct cb_throttle *t, size_t bytes)
{
	double now, until;

	if (t->rate <= 0)
		return 0;
	now = cb_now();
	t->tokens += (now - t->last) * t->rate;
	if (t->tokens > t->rate / 4)
		t->tokens = t->rate / 4;
	t->last = now;
	t->tokens -= (double)bytes;
	if (t->tokens >= 0)
		return 0;
	until = now - t->tokens / t->rate;
	t->waited += until - now;
	while ((now = cb_now()) < until) {
		double wait = until - now < SLICE_S ? until - now : SLICE_S;
		struct timespec ts = { 0, (long)(wait * 1e9) };

		if (cb_interrupted())
			return cb_check_interrupt();
		nanosleep(&ts, NULL);
	}
	return cb_check_interrupt();
}
