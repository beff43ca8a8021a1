/*
 * The freeze watchdog: a child process that holds a pipe to cbackup and
 * thaws the guest when cbackup dies (its end of the pipe closes), when the
 * freeze passes max-freeze, or when it is asked to; and the thread with
 * which cbackup watches it in turn (a watchdog that does not answer is
 * ended, and cbackup thaws the guest itself). The freezer requests it
 * makes are guest.c's (guest_int.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <mntent.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include "cb_cleanup.h"
#include "cb_guest.h"
#include "cb_log.h"
#include "cb_qmp.h"
#include "cb_run.h"
#include "cb_util.h"
#include "cb_child.h"
#include "guest_int.h"

/* ---- the watchdog (child side) ---------------------------------------- */

struct wdog {
	struct cb_guest *g;
	int cmd_fd, rep_fd;
	double wait_end, max_end;   /* monotonic seconds; 0 = none */
	int frozen_seen, thawed, gave_up;
};

/* One line to the main process: "C message\n" (the message on one line). */
static void report(const struct wdog *w, char code, const char *msg)
{
	char line[1024];
	int n = snprintf(line, sizeof(line) - 1, "%c %s", code, msg ? msg : "");

	if (n < 0)
		return;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	for (int i = 0; i < n; i++)
		if (line[i] == '\n')
			line[i] = ' ';
	line[n++] = '\n';
	cb_write_all(w->rep_fd, line, (size_t)n);
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* One attempt: ask the backend, then wait for it to report the guest runs.
 * A thaw-cmd's exit 0 is its confirmation. */
int watchdog_thaw_once(const struct cb_guest *g)
{
	if (guest_thaw_request(g) < 0)
		return -1;
	if (g->kind == CB_FREEZER_CMD || guest_wait_state(g, 0, THAW_CONFIRM_MS, 0) == 0)
		return 0;
	return cb_error("the guest is still frozen %d ms after the thaw (%s)", THAW_CONFIRM_MS,
			cb_guest_kind_name(g->kind));
}

/* Thaw, retrying with backoff until confirmed or thaw-timeout is over. */
static void wdog_thaw(struct wdog *w)
{
	double give_up = cb_now() + w->g->thaw_timeout_ms / 1000.0, pause = RETRY_FIRST_S;

	if (w->thawed || w->gave_up)
		return;
	while (watchdog_thaw_once(w->g) < 0) {
		if (cb_now() + pause > give_up) {
			report(w, 'G', cb_last_error());
			w->gave_up = 1;
			return;
		}
		report(w, 'W', cb_last_error());
		sleep_s(pause);
		pause = pause * 2 < RETRY_MAX_S ? pause * 2 : RETRY_MAX_S;
	}
	w->thawed = 1;
	report(w, 'O', NULL);
}

/* The deadline now in force: the freeze wait's until 'F', then max-freeze. */
static double wdog_deadline(const struct wdog *w)
{
	if (w->thawed || w->gave_up)
		return 0;
	if (w->frozen_seen || !w->wait_end)
		return w->max_end;
	return w->max_end && w->max_end < w->wait_end ? w->max_end : w->wait_end;
}

/* Commands: 'F' frozen, 'T' thaw now, 'D' done; EOF: cbackup is gone. */
static void wdog_loop(struct wdog *w)
{
	for (;;) {
		struct pollfd pf = { w->cmd_fd, POLLIN, 0 };
		double end = wdog_deadline(w);
		int timeout = -1, n;
		char c;

		if (end > 0)
			timeout = end > cb_now() ? (int)((end - cb_now()) * 1000) + 1 : 0;
		n = poll(&pf, 1, timeout);
		if (n == 0) {
			report(w, 'X', NULL);
			wdog_thaw(w);
			continue;
		}
		if (n < 0)
			continue;
		n = (int)read(w->cmd_fd, &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			wdog_thaw(w);
			return;
		}
		if (c == 'F')
			w->frozen_seen = 1;
		else if (c == 'T') {
			report(w, 'A', NULL);   /* taken: cbackup need not thaw itself */
			wdog_thaw(w);
		}
		else if (c == 'P')
			report(w, 'P', NULL);   /* cbackup's ping: still here */
		else if (c == 'D')
			return;
	}
}

/*
 * The child: its own session (a signal to cbackup's process group must not
 * take it along), no descriptor of cbackup's but its two pipes (a lock or
 * an archive held open here would outlive cbackup), deaf to INT/TERM/HUP.
 */
static void __attribute__((noreturn))
watchdog_main(struct wdog *w)
{
	cb_child_detach("cbackup-wdog", w->cmd_fd, w->rep_fd);
	report(w, 'R', NULL);
	wdog_loop(w);
	_exit(0);
}

/* ---- the watchdog (cbackup's side) ------------------------------------ */

/* One report line into buf: 1, 0 when `end` passed first, -1 at EOF. */
static int read_report(struct cb_guest *g, char *buf, size_t len, double end)
{
	for (;;) {
		char *nl = memchr(g->rep_buf, '\n', g->rep_len);
		struct pollfd pf = { g->report_fd, POLLIN, 0 };
		double left = end - cb_now();
		ssize_t n;

		if (nl) {
			size_t l = (size_t)(nl - g->rep_buf);
			snprintf(buf, len, "%.*s", (int)l, g->rep_buf);
			memmove(g->rep_buf, nl + 1, g->rep_len - l - 1);
			g->rep_len -= l + 1;
			return 1;
		}
		if (g->rep_len == sizeof(g->rep_buf))
			g->rep_len = 0;      /* a line that long is no report */
		if (left <= 0)
			return 0;
		if (poll(&pf, 1, (int)(left * 1000) + 1) <= 0)
			continue;
		n = read(g->report_fd, g->rep_buf + g->rep_len, sizeof(g->rep_buf) - g->rep_len);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
			return -1;
		if (n > 0)
			g->rep_len += (size_t)n;
	}
}

int watchdog_start(struct cb_guest *g, double wait_end, double max_end)
{
	int cmd[2], rep[2];
	char line[64];
	struct wdog w;
	pid_t pid;

	if (pipe2(cmd, O_CLOEXEC) < 0)
		return cb_error_errno("watchdog pipe");
	if (pipe2(rep, O_CLOEXEC) < 0) {
		close(cmd[0]);
		close(cmd[1]);
		return cb_error_errno("watchdog pipe");
	}
	pid = fork();
	if (pid == 0) {
		w = (struct wdog){ g, cmd[0], rep[1], wait_end, max_end, 0, 0, 0 };
		watchdog_main(&w);
	}
	close(cmd[0]);
	close(rep[1]);
	if (pid < 0) {
		close(cmd[1]);
		close(rep[0]);
		return cb_error_errno("cannot fork the freeze watchdog");
	}
	g->watchdog = pid;
	g->watchdog_fd = cmd[1];
	g->report_fd = rep[0];
	g->rep_len = 0;
	if (read_report(g, line, sizeof(line), cb_now() + 5) != 1 || line[0] != 'R')
		return cb_error("the freeze watchdog did not start");
	return 0;
}

/* Send one command byte; the watchdog may be gone: no SIGPIPE for that. */
void watchdog_send(const struct cb_guest *g, char c)
{
	sigset_t pipe_set, old;

	if (g->watchdog_fd < 0)
		return;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	if (write(g->watchdog_fd, &c, 1) < 0 && errno == EPIPE)
		sigtimedwait(&pipe_set, NULL, &(struct timespec){ 0, 0 });
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void watchdog_close_fds(struct cb_guest *g)
{
	if (g->watchdog_fd >= 0)
		close(g->watchdog_fd);
	if (g->report_fd >= 0)
		close(g->report_fd);
	g->watchdog_fd = g->report_fd = -1;
}

/* The thaw is confirmed: let the watchdog go and reap it. */
void watchdog_dismiss(struct cb_guest *g)
{
	watchdog_send(g, 'D');
	watchdog_close_fds(g);
	cb_child_reap(g->watchdog, 0);
	g->watchdog = 0;
}

/* The thaw is not confirmed: the watchdog, in its own session, goes on
 * retrying after we close our ends (EOF means "you are on your own"). */
void watchdog_leave(struct cb_guest *g)
{
	watchdog_close_fds(g);
	g->watchdog = 0;
}

/* Async-signal-safe (the signal handler's action): one byte to a pipe. */
void watchdog_ask_thaw(struct cb_guest *g)
{
	if (g->thaw_asked)
		return;
	g->thaw_asked = 1;
	watchdog_send(g, 'T');
}

void watchdog_thaw_action(void *arg)
{
	int saved = errno;

	watchdog_ask_thaw(arg);
	errno = saved;
}

/* A failed attempt, once per distinct message. */
static void note_failure(struct cb_guest *g, const char *msg, char *last, size_t len, int *fails)
{
	(*fails)++;
	if (!strcmp(last, msg))
		return;
	snprintf(last, len, "%s", msg);
	if (g->log)
		cb_warn(g->log, "thaw failed, retrying: %s", msg);
}

/* A watchdog that is stopped (SIGSTOP, a debugger) thaws nothing however
 * long it is waited for. */
static int watchdog_stopped(const struct cb_guest *g)
{
	char st = guest_proc_state(g->watchdog);

	return st == 'T' || st == 't';
}

/* Read reports until the thaw is confirmed (0) or not within timeout_ms;
 * 1 when the watchdog did not take the request ('A') within ANSWER_MS, is
 * found stopped at the end, or ended before it confirmed: it will not
 * thaw, cbackup must. */
int watchdog_await_thaw(struct cb_guest *g, int timeout_ms)
{
	double end = cb_now() + timeout_ms / 1000.0, ack_end = cb_now() + ANSWER_MS / 1000.0;
	char line[1100], last[1100] = "";
	int fails = 0, acked = 0;

	for (;;) {
		int r = read_report(g, line, sizeof(line), acked || ack_end > end ? end : ack_end);

		if (r == 0 && (!acked || watchdog_stopped(g)))
			return 1;
		if (r == 0)
			return cb_error("thaw failed: %s; the watchdog (pid %d) keeps retrying for up to "
					"%d s", last[0] ? last : "no answer", (int)g->watchdog,
					g->thaw_timeout_ms / 1000);
		if (r < 0)   /* it ended (killed) before it confirmed: nobody thaws */
			return 1;
		/* any line but a ping's answer: it took the request, or is busy
		 * with a thaw of its own (the deadline's, retrying) */
		acked |= line[0] != 'P';
		if (line[0] == 'X')
			g->deadline_hit = 1;
		else if (line[0] == 'W')
			note_failure(g, line + 2, last, sizeof(last), &fails);
		else if (line[0] == 'G')
			return cb_error("thaw failed, gave up after thaw-timeout (%d s): %s",
					g->thaw_timeout_ms / 1000, line + 2);
		else if (line[0] == 'O' && fails)
			return cb_error("thaw failed %d time(s) before it worked: %s", fails, last);
		else if (line[0] == 'O')
			return 0;
	}
}

/* ---- cbackup watches the watchdog ------------------------------------- */

/* A ping every PING_MS; no answer for ANSWER_MS means the watchdog is
 * stopped (or starved): it could not hold the deadline any more. Once it
 * reported the deadline ('X') it is busy thawing (a retry may sleep 2 s):
 * from then on only its pipe closing counts. */

/* Take the watchdog's answers to pings ('P' lines) out of the report
 * buffer, leaving the other lines for watchdog_await_thaw(). 1 if there was one;
 * *busy set when the deadline line 'X' is in it. */
static int take_pongs(struct cb_guest *g, int *busy)
{
	size_t i = 0, o = 0;
	int seen = 0;

	while (i < g->rep_len) {
		char *nl = memchr(g->rep_buf + i, '\n', g->rep_len - i);
		size_t l = nl ? (size_t)(nl - (g->rep_buf + i)) + 1 : g->rep_len - i;

		if (nl && g->rep_buf[i] == 'P') {
			seen = 1;
		} else {
			*busy |= nl && g->rep_buf[i] == 'X';
			memmove(g->rep_buf + o, g->rep_buf + i, l);
			o += l;
		}
		i += l;
	}
	g->rep_len = o;
	return seen;
}

/* The watchdog is gone or stuck: end it (it cannot be trusted to thaw or
 * hold the deadline any more) and thaw the guest from here, retrying as
 * it would have. */
void watchdog_monitor_takeover(struct cb_guest *g, const char *what)
{
	double give_up = cb_now() + g->thaw_timeout_ms / 1000.0, pause = RETRY_FIRST_S;
	int ok;

	kill(g->watchdog, SIGKILL);
	while (!(ok = (watchdog_thaw_once(g) == 0)) && cb_now() + pause <= give_up) {
		sleep_s(pause);
		pause = pause * 2 < RETRY_MAX_S ? pause * 2 : RETRY_MAX_S;
	}
	snprintf(g->lost_msg, sizeof(g->lost_msg), "the freeze watchdog (pid %d) %s while the guest "
		 "was frozen: %s%s", (int)g->watchdog, what,
		 ok ? "cbackup thawed the guest itself" : "cbackup could not thaw the guest: ",
		 ok ? "" : cb_last_error());
	g->watchdog_lost = 1;
	if (g->log)
		cb_warn(g->log, "%s", g->lost_msg);
}

static void *monitor_main(void *arg)
{
	struct cb_guest *g = arg;
	double last = cb_now(), prev = last, next_ping = 0;
	int busy = 0;

	for (;;) {
		struct pollfd pf[2] = { { g->monitor_stop[0], POLLIN, 0 }, { g->report_fd, POLLIN, 0 } };
		double now = cb_now();
		ssize_t n;

		/* cbackup itself was stopped (SIGSTOP) or starved: the silence
		 * is ours, not the watchdog's; it gets its full time again */
		if (now - prev > 2.0 * PING_MS / 1000.0)
			last = now;
		prev = now;

		if (now >= next_ping) {
			watchdog_send(g, 'P');
			next_ping = now + PING_MS / 1000.0;
		}
		if (!busy && now - last > ANSWER_MS / 1000.0) {
			watchdog_monitor_takeover(g, "did not answer for 1 s (stopped?)");
			return NULL;
		}
		if (poll(pf, 2, PING_MS) < 0)
			continue;
		if (pf[0].revents)
			return NULL;
		if (!pf[1].revents)
			continue;
		if (g->rep_len == sizeof(g->rep_buf))
			g->rep_len = 0;   /* a line that long is no report */
		n = read(g->report_fd, g->rep_buf + g->rep_len, sizeof(g->rep_buf) - g->rep_len);
		if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
			watchdog_monitor_takeover(g, "ended (killed?)");
			return NULL;
		}
		if (n > 0)
			g->rep_len += (size_t)n;
		if (take_pongs(g, &busy))
			last = cb_now();
	}
}

int watchdog_monitor_start(struct cb_guest *g)
{
	g->watchdog_lost = 0;
	g->lost_msg[0] = '\0';
	if (pipe2(g->monitor_stop, O_CLOEXEC) < 0)
		return cb_error_errno("watchdog monitor pipe");
	if (cb_thread_start(&g->monitor, monitor_main, g) != 0) {
		close(g->monitor_stop[0]);
		close(g->monitor_stop[1]);
		return cb_error("cannot start the thread that watches the freeze watchdog");
	}
	g->monitor_on = 1;
	return 0;
}

/* Before cbackup reads the watchdog's reports itself. */
void watchdog_monitor_stop(struct cb_guest *g)
{
	if (!g->monitor_on)
		return;
	close(g->monitor_stop[1]);
	pthread_join(g->monitor, NULL);
	close(g->monitor_stop[0]);
	g->monitor_on = 0;
}
