/* cb_progress: TTY progress line. See include/cb_progress.h. */
#include <stdio.h>
#include <unistd.h>

#include "cb_progress.h"
#include "cb_util.h"

void cb_progress_start(struct cb_progress *p, int enabled, const char *what, uint64_t total)
{
	p->enabled = enabled && isatty(STDERR_FILENO);
	p->what = what;
	p->total = total;
	p->done = 0;
	p->start = p->last = cb_now();
	p->drawn = 0;
}

/* One frame. An estimate that fell short shows 99% while the pass runs
 * and 100% at its end, never more. */
static void draw(struct cb_progress *p, double now, int final)
{
	char amount[32], total[32], rate[32], eta[16] = "--:--:--";
	double secs = now - p->start, bps = secs > 0 ? p->done / secs : 0;
	uint64_t whole = p->total;
	int pct;

	cb_fmt_bytes(amount, sizeof(amount), p->done);
	cb_fmt_bytes(rate, sizeof(rate), (uint64_t)bps);
	if (!whole) {
		fprintf(stderr, "\r\033[K%s: %s, %s/s", p->what, amount, rate);
		p->drawn = 1;
		return;
	}
	if (p->done >= whole) {
		whole = p->done;
		pct = final ? 100 : 99;
	} else {
		pct = (int)(100.0 * p->done / whole);
	}
	cb_fmt_bytes(total, sizeof(total), whole);
	if (bps > 0)
		cb_fmt_hms(eta, sizeof(eta), (whole - p->done) / bps);
	fprintf(stderr, "\r\033[K%s: %3d%% %s of %s, %s/s, ETA %s", p->what, pct, amount, total,
		rate, eta);
	p->drawn = 1;
}

void cb_progress_update(struct cb_progress *p, uint64_t done)
{
	double now;

	if (!p || !p->enabled)
		return;
	p->done = done;
	now = cb_now();
	if (now - p->last < 0.25)
		return;
	p->last = now;
	draw(p, now, 0);
}

void cb_progress_end(struct cb_progress *p)
{
	if (!p)
		return;
	/* where the pass ended, whatever the rate limit skipped */
	if (p->enabled && p->done)
		draw(p, cb_now(), 1);
	if (p->enabled && p->drawn)
		fputs("\r\033[K", stderr);
	p->drawn = 0;
	p->done = 0;
}
