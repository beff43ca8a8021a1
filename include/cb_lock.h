/*
 * cb_lock: flock(2)-based locks. A lock held by a dead process is released
 * by the kernel, so a stale lock file never blocks.
 *   global:    /run/cbackup/cbackup.lock (the directory can be moved with the
 *              CBACKUP_LOCK_DIR environment variable, for tests), waited
 *              for up to lockwait minutes;
 *   per guest: /run/cbackup/cbackup-<ID>.lock, never waited for;
 * The lock directory is root's alone (created 0700, checked with fstat
 * before each job: owned by root, no group/other bits, not a symlink), so
 * no other user can plant a symlink there or hold a lock file open to
 * block jobs. Lock files are opened O_NOFOLLOW and must be plain files.
 *   storage:   <dumpdir>/.cbackup-<type>-<ID>.lock, so that two hosts that
 *              share an NFS storage never write the same guest at once.
 */
#ifndef CB_LOCK_H
#define CB_LOCK_H

struct cb_lock {
	int fd;          /* -1 when not held */
	char *path;
};

#define CB_LOCK_INIT { -1, 0 }

/* Returns 0 when held, 1 on timeout, -1 on error. wait_seconds 0 = try once. */
int cb_lock_acquire(struct cb_lock *l, const char *path, double wait_seconds);
void cb_lock_release(struct cb_lock *l);
/* The directory of the host-local locks. */
const char *cb_lock_dir(void);
/* Create the lock directory (0700) if missing and check it is private. */
int cb_lock_dir_check(void);
/* Both per-guest locks, tried once: the host-local one, then (store not
 * NULL) the one in DUMPDIR. 0 when both are held; 1 when the local one is
 * taken, 2 when the storage's is (error set naming it; neither is held
 * then); -1 on error. */
int cb_lock_guest(struct cb_lock *local, struct cb_lock *store, const char *dumpdir,
		  const char *type, const char *id);

#endif
