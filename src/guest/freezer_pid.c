/*
 * The process-group freezer: SIGSTOP and SIGCONT to the guest's process
 * group (or its one pid); a group gone counts as thawed. Its state is the
 * process's ('T' stopped). Async-signal-safe: kill only.
 */
#include <errno.h>
#include <signal.h>
#include "cb_guest.h"
#include "cb_util.h"
#include "guest_int.h"

static int pid_request(const struct cb_guest *g, int freeze)
{
	if (kill(g->pgid ? -g->pgid : g->pid, freeze ? SIGSTOP : SIGCONT) == 0 ||
	    (!freeze && errno == ESRCH))
		return 0;
	return cb_error_errno("cannot %s pid %d", freeze ? "stop" : "continue", (int)g->pid);
}

static int pid_freeze(const struct cb_guest *g, int wait_ms)
{
	(void)wait_ms;
	return pid_request(g, 1);
}

static int pid_thaw(const struct cb_guest *g)
{
	return pid_request(g, 0);
}

static int pid_is_frozen(const struct cb_guest *g)
{
	char st = guest_proc_state(g->pid);

	if (!st)
		return -1;
	return st == 'T' || st == 't';
}

const struct freezer_ops freezer_pid = {
	"pid", pid_freeze, pid_thaw, pid_is_frozen, NULL
};
