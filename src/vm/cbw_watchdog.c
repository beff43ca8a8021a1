/*
 * The VM watchdog: a child process that holds QEMU's monitor and resumes
 * the VM (and sweeps the graph) when cbackup dies or the pause passes
 * max-freeze; cbackup asks it before each pause and resume and ends one
 * that does not answer, resuming the VM itself.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cb_json.h"
#include "cb_nbdread.h"
#include "cb_private.h"
#include "cb_qmp_session.h"
#include "cb_rmtree.h"
#include "cb_vmsnap.h"
#include "cb_child.h"
#include "vmsnap_int.h"

/* ---- the watchdog ------------------------------------------------------ */

/* How long cbackup waits for the watchdog's answer: a process blocked in
 * poll answers in microseconds; one that does not is stopped or hung. */
#define WD_ANSWER_MS 1000

/* Requests on the socket, each answered with one byte: 'P' the VM is
 * about to be paused by cbackup (the watchdog resumes it at max-freeze),
 * answer 'p'; 'R' cbackup resumes it now, answer 'r', or 'f' when the
 * deadline passed and the watchdog resumed it already; notes without an
 * answer: 'N' the NBD server cbackup starts next is its own, 'n' it is not
 * (it did not start); 'D' done, the graph
 * is cbackup's again: it exits (the socket's EOF is the answer). EOF
 * without 'D' (cbackup died, even by SIGKILL): resume the VM and sweep the
 * graph. */
static void __attribute__((noreturn)) watchdog_main(struct cb_vmsnap *v, int cmd_fd)
{
	int qfd = v->s.fd, paused = 0, fired = 0, nbd = 0;
	double deadline = 0;
	struct cb_qmp_session s;
	int count;

	cb_child_detach("cbackup-vmwdog", qfd, cmd_fd);
	cb_qmp_session_adopt(&s, qfd, "wd", 10000);
	for (;;) {
		struct pollfd p = { cmd_fd, POLLIN, 0 };
		int ms = paused ? (int)((deadline - cb_now()) * 1000) : -1;
		char c, answer = 0;
		if (paused && ms <= 0) {
			/* fire and forget: cbackup reads the replies while alive */
			static const char cont[] = "{\"execute\":\"cont\",\"id\":\"wd-cont\"}\n";
			if (write(qfd, cont, sizeof(cont) - 1) < 0)
				break;
			paused = 0;
			fired = 1;
			continue;
		}
		if (poll(&p, 1, ms < 0 ? -1 : ms) == 0)
			continue;
		ssize_t r = read(cmd_fd, &c, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (c == 'P') {
			paused = 1;
			fired = 0;
			deadline = cb_now() + (v->o->max_freeze > 0 ? v->o->max_freeze : 1e9);
			answer = 'p';
		} else if (c == 'R') {
			answer = fired ? 'f' : 'r';
			paused = fired = 0;
		} else if (c == 'N' || c == 'n') {
			nbd = c == 'N';
		} else if (c == 'D') {
			_exit(0);
		}
		if (answer && write(cmd_fd, &answer, 1) < 0)
			break;
	}
	if (paused)
		cb_qmp_session_exec(&s, "cont", NULL, NULL);
	cbw_sweep(&s, v->bitmap, nbd, &count);
	_exit(0);
}

int cbw_watchdog_start(struct cb_vmsnap *v)
{
	int p[2];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0)
		return cb_error_errno("watchdog socket");
	v->wd_pid = fork();
	if (v->wd_pid == 0) {
		close(p[1]);
		watchdog_main(v, p[0]);
	}
	close(p[0]);
	if (v->wd_pid < 0) {
		close(p[1]);
		return cb_error_errno("cannot fork the VM watchdog");
	}
	v->wd_fd = p[1];
	return 0;
}

/* Until the watchdog's socket is readable (an answer or its EOF), at most
 * WD_ANSWER_MS: 1 readable, 0 not. */
static int watchdog_wait(const struct cb_vmsnap *v)
{
	double until = cb_now() + WD_ANSWER_MS / 1000.0;

	for (;;) {
		struct pollfd p = { v->wd_fd, POLLIN, 0 };
		int ms = (int)((until - cb_now()) * 1000), n;
		if (ms < 0)
			ms = 0;
		n = poll(&p, 1, ms);
		if (n > 0)
			return 1;
		if (n == 0 || errno != EINTR)
			return 0;
	}
}

/* Request C and its answer; 0: no answer in time (stopped, hung), -1:
 * the watchdog is gone. */
int cbw_watchdog_ask(struct cb_vmsnap *v, char c)
{
	char answer;

	if (v->wd_fd < 0 || send(v->wd_fd, &c, 1, MSG_NOSIGNAL) != 1)
		return -1;
	if (!watchdog_wait(v))
		return 0;
	return read(v->wd_fd, &answer, 1) == 1 ? answer : -1;
}

void cbw_watchdog_note(struct cb_vmsnap *v, char c)
{
	if (v->wd_fd >= 0)
		send(v->wd_fd, &c, 1, MSG_NOSIGNAL);
}

const char *cbw_watchdog_lost(int answer)
{
	return answer < 0 ? "ended (killed?)" : "did not answer for 1 s (stopped?)";
}

/* The watchdog reaped; KILL_IT: killed first, whatever state it is in (it
 * cannot be trusted to resume the VM or tear the graph down any more). */
void cbw_watchdog_reap(struct cb_vmsnap *v, int kill_it)
{
	if (v->wd_fd < 0)
		return;
	if (kill_it)
		kill(v->wd_pid, SIGKILL);
	close(v->wd_fd);
	v->wd_fd = -1;
	cb_child_reap(v->wd_pid, 0);
}

/* 'D' and the watchdog's exit (its EOF); one that does not go in time is
 * killed, with a WARN: the backup itself is complete. */
void cbw_watchdog_stop(struct cb_vmsnap *v)
{
	int late;

	if (v->wd_fd < 0)
		return;
	late = send(v->wd_fd, "D", 1, MSG_NOSIGNAL) == 1 && !watchdog_wait(v);
	if (late)
		cb_warn(v->o->log, "the VM watchdog (pid %d) did not end in 1 s (stopped?): killed",
			(int)v->wd_pid);
	cbw_watchdog_reap(v, late);
}
