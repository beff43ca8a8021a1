/* cb_run: child programs with a bounded wait. See include/cb_run.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cb_cleanup.h"
#include "cb_run.h"
#include "cb_util.h"

/* A signal can land between the check of cb_interrupted() and poll(); the
 * slice bounds how long such a signal goes unnoticed. */
#define POLL_SLICE_MS 100
#define LINE_MAX_LEN 4096

struct child {
	const struct cb_run *r;
	int signals;       /* cb_signal_count() at the start */
	pid_t pid;
	int pidfd, out_fd;
	char line[LINE_MAX_LEN];
	size_t len;
};

static void __attribute__((noreturn))
child_exec(const struct cb_run *r, int out_fd, char *const argv[])
{
	struct sigaction sa;
	sigset_t none;
	int null = open("/dev/null", O_RDWR);

	setpgid(0, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	for (int sig = 1; sig < NSIG; sig++)
		sigaction(sig, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (null >= 0)
		dup2(null, STDIN_FILENO);
	dup2(out_fd >= 0 ? out_fd : null, STDOUT_FILENO);
	dup2(out_fd >= 0 ? out_fd : null, STDERR_FILENO);
	if (r->child_setup)
		r->child_setup(r->arg);
	execv(argv[0], argv);
	dprintf(STDERR_FILENO, "cannot execute '%s': %s\n", argv[0], strerror(errno));
	_exit(127);
}

static void emit_line(struct child *c)
{
	c->line[c->len] = '\0';
	if (c->r->on_line)
		c->r->on_line(c->r->arg, c->line);
	c->len = 0;
}

/* Read what the pipe has; split into lines. 1 if it read something, 0 at
 * EOF (or error), -1 when nothing is there now. */
static int drain_output(struct child *c)
{
	char buf[4096];
	ssize_t n = read(c->out_fd, buf, sizeof(buf));

	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? -1 : 0;
	for (ssize_t i = 0; i < n; i++) {
		if (buf[i] == '\n' || c->len == LINE_MAX_LEN - 1) {
			emit_line(c);
			if (buf[i] == '\n')
				continue;
		}
		c->line[c->len++] = buf[i];
	}
	if (n == 0 && c->len)
		emit_line(c);
	return n > 0;
}

static int start(struct child *c, char *const argv[])
{
	int p[2] = { -1, -1 };

	if (c->r->on_line && pipe2(p, O_CLOEXEC) < 0)
		return cb_error_errno("%s: cannot create a pipe", c->r->what);
	c->pid = fork();
	if (c->pid == 0)
		child_exec(c->r, p[1], argv);
	if (p[1] >= 0)
		close(p[1]);
	c->out_fd = p[0];
	if (c->pid < 0) {
		if (p[0] >= 0)
			close(p[0]);
		return cb_error_errno("%s: cannot fork", c->r->what);
	}
	setpgid(c->pid, c->pid);   /* also here: no window where a kill misses it */
	if (c->out_fd >= 0)
		fcntl(c->out_fd, F_SETFL, O_NONBLOCK);
	c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
	return 0;
}

/* 1 once the child has exited (not reaped yet), 0 if not. */
static int exited(const struct child *c)
{
	siginfo_t si = { 0 };

	return waitid(P_PID, (id_t)c->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid != 0;
}

/* Wait for the exit, the deadline or a signal: 0 exited, 1 timed out,
 * 2 interrupted. Output is passed on while waiting. */
static int wait_child(struct child *c, double end)
{
	for (;;) {
		struct pollfd pf[2] = { { c->pidfd, POLLIN, 0 }, { c->out_fd, POLLIN, 0 } };
		int slice = POLL_SLICE_MS;

		if (exited(c))
			return 0;
		if (!c->r->ignore_interrupt && cb_signal_count() != c->signals)
			return 2;
		if (end > 0) {
			double left = end - cb_now();
			if (left <= 0)
				return 1;
			if (left * 1000 < slice)
				slice = (int)(left * 1000) + 1;
		}
		poll(pf, 2, slice);
		if (c->out_fd >= 0 && (pf[1].revents & (POLLIN | POLLHUP)) && drain_output(c) == 0) {
			close(c->out_fd);
			c->out_fd = -1;
		}
	}
}

/* TERM the group, KILL it after the grace time; reaps the child. */
static void kill_group(struct child *c)
{
	double end = cb_now() + CB_RUN_KILL_GRACE_MS / 1000.0;

	kill(-c->pid, SIGTERM);
	kill(-c->pid, SIGCONT);    /* a stopped group cannot act on TERM */
	while (!exited(c) && cb_now() < end)
		poll(NULL, 0, 10);
	kill(-c->pid, SIGKILL);
}

static int reap(struct child *c, int *status)
{
	while (waitpid(c->pid, status, 0) < 0)
		if (errno != EINTR)
			return cb_error_errno("%s: waitpid", c->r->what);
	return 0;
}

static int verdict(const struct child *c, int how, int status, int timeout_ms)
{
	const struct cb_run *r = c->r;

	if (how == 1)
		return cb_error("%s timed out after %.1f s (killed)", r->what, timeout_ms / 1000.0);
	if (how == 2)
		return cb_error("%s interrupted by signal %s (killed)", r->what,
				sigabbrev_np(cb_interrupted()));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		return cb_error("%s failed with exit code %d", r->what, WEXITSTATUS(status));
	return cb_error("%s killed by signal %s", r->what, sigabbrev_np(WTERMSIG(status)));
}

int cb_run_argv(const struct cb_run *r, char *const argv[])
{
	struct child c = { .r = r, .signals = cb_signal_count(), .pid = -1, .pidfd = -1,
			   .out_fd = -1 };
	int timeout_ms = r->timeout_ms;
	double end;
	int how, status = 0, ret;

	/* after a signal the run is ending: what still runs (the abort hooks)
	 * is bounded, and a further signal ends it */
	if (c.signals && (!timeout_ms || timeout_ms > CB_RUN_AFTER_SIGNAL_MS))
		timeout_ms = CB_RUN_AFTER_SIGNAL_MS;
	end = timeout_ms > 0 ? cb_now() + timeout_ms / 1000.0 : 0;
	if (start(&c, argv) < 0)
		return -1;
	how = wait_child(&c, end);
	if (how)
		kill_group(&c);
	ret = reap(&c, &status);
	/* what the child wrote before it ended; a grandchild holding the pipe
	 * open must not keep us here, so no wait for EOF */
	while (c.out_fd >= 0 && drain_output(&c) == 1)
		;
	if (c.len)
		emit_line(&c);
	if (c.out_fd >= 0)
		close(c.out_fd);
	if (c.pidfd >= 0)
		close(c.pidfd);
	return ret < 0 ? ret : verdict(&c, how, status, timeout_ms);
}

int cb_run_sh(const struct cb_run *r, const char *cmd)
{
	char *argv[] = { "/bin/sh", "-c", (char *)cmd, NULL };

	return cb_run_argv(r, argv);
}
