/* Exit statuses of cbackup (DESIGN §3; also in cbackup(8)). */
#ifndef CB_EXIT_H
#define CB_EXIT_H
enum cb_exit {
	CB_EXIT_OK = 0,        /* every guest backed up */
	CB_EXIT_FAILED = 1,    /* at least one guest failed; the job went on */
	CB_EXIT_USAGE = 2,     /* usage or configuration error; nothing touched */
	CB_EXIT_LOCKED = 3,    /* could not get the lock within lockwait */
	/* 128 + the signal: SIGINT 130, SIGTERM 143, SIGHUP 129 (the job was
	 * interrupted, cleaned up and reported); a reader that closed standard
	 * output (ls, list, --stdout into `| head`) ends quietly with 141, the
	 * status of a process killed by SIGPIPE, as tar's is */
	CB_EXIT_SIGNAL = 128,
	CB_EXIT_PIPE = 141,
};
#endif
