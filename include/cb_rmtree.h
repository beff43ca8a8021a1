/*
 * cb_rmtree: removing a directory tree (the staging copy, a failed
 * restore's destination, leftovers): fd-relative, never through a symlink,
 * staying on one device, with a bounded number of fds at any depth
 * (cb_fdpath), on a deep stack (cb_call_deep).
 */
#ifndef CB_RMTREE_H
#define CB_RMTREE_H

#include <stdint.h>
#include <sys/types.h>

/* Remove a directory tree (no symlink following, stays on one device). */
int cb_remove_tree(const char *path);
/* Remove NAME below dfd: a file, or a directory with everything in it,
 * fd-relative and never through a symlink, with a bounded number of fds
 * at any depth (cb_fdpath). dev != 0: never enter a directory of another
 * device (a mount point inside). *count (may be NULL) gets the entries
 * removed. Goes on past errors; 0, or -1 with errno of the first. */
int cb_remove_at(int dfd, const char *name, dev_t dev, uint64_t *count);
/* The same with up to WORKERS threads, each on its own subtrees (the
 * staging copy of a big guest: removal is as much work as the copy). */
int cb_remove_tree_parallel(const char *path, int workers);

#endif
