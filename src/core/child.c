/*
 * Watchdog children (cb_child.h): detached right after fork() so that what
 * ends cbackup does not end them, and reaped when their work is done.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "cb_child.h"

void cb_child_detach(const char *name, int keep_a, int keep_b)
{
	struct sigaction sa;
	int lo = keep_a < keep_b ? keep_a : keep_b, hi = keep_a < keep_b ? keep_b : keep_a;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGPIPE, &sa, NULL);
	sa.sa_handler = SIG_DFL;
	sigaction(SIGCHLD, &sa, NULL);
	setsid();
	prctl(PR_SET_NAME, name, 0, 0, 0);
	if (lo > 0)
		close_range(0, (unsigned)lo - 1, 0);
	if (hi > lo + 1)
		close_range((unsigned)lo + 1, (unsigned)hi - 1, 0);
	close_range((unsigned)hi + 1, ~0U, 0);
	/* 0, 1, 2 free (the kept ones are above 2): harmless ones for the
	 * commands it may run (thaw-cmd) */
	for (int i = 0; i < 3; i++)
		if (fcntl(i, F_GETFD) < 0 && open("/dev/null", O_RDWR) < 0)
			break;
}

void cb_child_reap(pid_t pid, int kill_it)
{
	if (pid <= 0)
		return;
	if (kill_it)
		kill(pid, SIGKILL);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}
