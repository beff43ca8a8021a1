/* Exit statuses of cbackup (DESIGN §3; also in cbackup(8)). */
#ifndef CB_EXIT_H
#define CB_EXIT_H
enum cb_exit {
	CB_EXIT_OK = 0,        /* every guest backed up */
	CB_EXIT_FAILED = 1,    /* at least one guest failed; the job went on */
	CB_EXIT_USAGE = 2,     /* usage or configuration error; nothing touched */
	CB_EXIT_LOCKED = 3,    /* could not get the lock within lockwait */
};
#endif
