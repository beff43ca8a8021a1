/* cb_throttle: token bucket. See include/cb_throttle.h. */
#include <time.h>

#include "cb_throttle.h"
#include "cb_util.h"

void cb_throttle_init(struct cb_throttle *t, long kib_per_s)
{
	t->rate = kib_per_s > 0 ? kib_per_s * 1024.0 : 0;
	t->tokens = t->rate / 4;
	t->last = cb_now();
}

void cb_throttle_account(struct cb_throttle *t, size_t bytes)
{
	double now, wait;
	struct timespec ts;

	if (t->rate <= 0)
		return;
	now = cb_now();
	t->tokens += (now - t->last) * t->rate;
	if (t->tokens > t->rate / 4)
		t->tokens = t->rate / 4;
	t->last = now;
	t->tokens -= (double)bytes;
	if (t->tokens >= 0)
		return;
	wait = -t->tokens / t->rate;
	ts.tv_sec = (time_t)wait;
	ts.tv_nsec = (long)((wait - (double)ts.tv_sec) * 1e9);
	nanosleep(&ts, NULL);   /* an interrupting signal only shortens one wait */
}
