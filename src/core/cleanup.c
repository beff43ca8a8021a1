/*
 * cb_cleanup: process-wide cleanup stack run on signals. See
 * include/cb_cleanup.h. This is the one place with process-global state:
 * a signal handler has no other way to reach what must be undone.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cb_cleanup.h"
#include "cb_util.h"

#define CB_CLEANUP_MAX 32

struct cleanup_slot {
	cb_cleanup_fn fn;
	void *arg;
};

/* A stack: slots[0..top) in push order; a popped slot below the top stays
 * empty until everything above it is popped too, so that running from the
 * top down is always newest first. */
static struct cleanup_slot slots[CB_CLEANUP_MAX];
static volatile sig_atomic_t top;
static pid_t owner_pid;
static volatile sig_atomic_t got_signal;
static volatile sig_atomic_t signal_count;
static double deadline_at;      /* monotonic seconds, 0 = none */
static char deadline_why[256];

static void run_all(void)
{
	if (getpid() != owner_pid)
		return;
	for (int i = top - 1; i >= 0; i--) {
		cb_cleanup_fn fn = slots[i].fn;
		if (fn) {
			slots[i].fn = NULL;
			fn(slots[i].arg);
		}
	}
}

static void on_signal(int sig)
{
	int saved = errno;
	got_signal = sig;
	signal_count++;
	run_all();
	errno = saved;
}

void cb_cleanup_deadline(double at, const char *why)
{
	deadline_at = 0;
	if (at > 0)
		snprintf(deadline_why, sizeof(deadline_why), "%s", why);
	deadline_at = at;
}

void cb_cleanup_install(void)
{
	struct sigaction sa;

	owner_pid = getpid();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGINT);
	sigaddset(&sa.sa_mask, SIGTERM);
	sigaddset(&sa.sa_mask, SIGHUP);
	sa.sa_flags = 0;  /* no SA_RESTART: blocking calls return EINTR */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
}

/* Signals off while the stack changes; the process has threads, whose
 * masks are their own (helper threads block these signals for good). */
static void block_all(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, old);
}

int cb_cleanup_push(cb_cleanup_fn fn, void *arg)
{
	sigset_t old;
	int handle = -1;

	if (!owner_pid)
		owner_pid = getpid();
	block_all(&old);
	if (top < CB_CLEANUP_MAX) {
		handle = top;
		slots[handle].arg = arg;
		slots[handle].fn = fn;
		top = handle + 1;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return handle;
}

void cb_cleanup_pop(int handle, int run_it)
{
	sigset_t old;
	struct cleanup_slot s;

	if (handle < 0 || handle >= CB_CLEANUP_MAX)
		return;
	block_all(&old);
	s = slots[handle];
	slots[handle].fn = NULL;
	while (top > 0 && !slots[top - 1].fn)
		top--;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (run_it && s.fn)
		s.fn(s.arg);
}

void cb_cleanup_run_all(void)
{
	run_all();
}

int cb_interrupted(void)
{
	return got_signal;
}

int cb_signal_count(void)
{
	return signal_count;
}

int cb_check_interrupt(void)
{
	if (deadline_at > 0 && cb_now() >= deadline_at)
		return cb_error("%s", deadline_why);
	if (!got_signal)
		return 0;
	return cb_error("interrupted by signal %s", sigabbrev_np(got_signal));
}
