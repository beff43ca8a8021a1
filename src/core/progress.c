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
	p->start = p->last = cb_now();
	p->drawn = 0;
}

void cb_progress_update(struct cb_progress *p, uint64_t done)
{
	char amount[32], total[32], rate[32], eta[16] = "--:--:--";
	double now, secs, bps;

	if (!p || !p->enabled)
		return;
	now = cb_now();
	if (now - p->last < 0.25)
		return;
	p->last = now;
	secs = now - p->start;
	bps = secs > 0 ? done / secs : 0;
	cb_fmt_bytes(amount, sizeof(amount), done);
	cb_fmt_bytes(rate, sizeof(rate), (uint64_t)bps);
	if (p->total && done <= p->total) {
		cb_fmt_bytes(total, sizeof(total), p->total);
		if (bps > 0)
			cb_fmt_hms(eta, sizeof(eta), (p->total - done) / bps);
		fprintf(stderr, "\r\033[K%s: %3d%% %s of %s, %s/s, ETA %s", p->what,
			(int)(100.0 * done / p->total), amount, total, rate, eta);
	} else {
		fprintf(stderr, "\r\033[K%s: %s, %s/s", p->what, amount, rate);
	}
	p->drawn = 1;
}

void cb_progress_end(struct cb_progress *p)
{
	if (p && p->enabled && p->drawn)
		fputs("\r\033[K", stderr);
	if (p)
		p->drawn = 0;
}
