/*
 * cb_hook: the hook script (`script =` / --script), vzdump's protocol.
 *
 * Called without a shell as `SCRIPT PHASE` for the job phases (job-init,
 * job-start, job-end, job-abort) and `SCRIPT PHASE MODE ID` for the guest
 * phases (backup-start, pre-stop, pre-restart, post-restart, backup-end,
 * backup-abort, log-end), with DUMPDIR, STOREID, VMTYPE, HOSTNAME (the
 * guest's), TARGET and LOGFILE in its environment (where known). Its stdout and stderr go
 * into the log line by line. A non-zero exit is an error; whether that
 * fails the job, the guest, or is only a warning is the caller's decision
 * (vzdump's: see cb_backup). The script runs in a process group of its own
 * (cb_run): on a timeout or a signal the group is killed.
 */
#ifndef CB_HOOK_H
#define CB_HOOK_H

#include "cb_log.h"

struct cb_hook_env {
	const char *dumpdir, *storeid, *vmtype, *target, *logfile;
	const char *hostname;     /* the guest's (vzdump's HOSTNAME); NULL for job phases */
	int timeout_ms;           /* 0: none; a hook run while the guest is frozen
				   * gets what is left of max-freeze */
};

/* script NULL: nothing to do, returns 0. mode/id NULL for job phases. */
int cb_hook_run(const char *script, const char *phase, const char *mode, const char *id,
		const struct cb_hook_env *env, struct cb_log *log);

#endif
