/*
 * cb_fdpath: the chain of directories from a walk's root down to where the
 * walk is, each reachable by an fd, with a bounded number of them open.
 *
 * A recursive walk that keeps one fd per level runs out of descriptors
 * deep in a tree (`ulimit -n 1024` stops it at ~500 levels with a source
 * and a staging side). Here the walk pushes a level for each directory it
 * enters and asks for a level's fd when it needs it: only the newest
 * CB_FDPATH_WINDOW levels stay open, and anchors that thin out with the
 * distance from the top (every WINDOW-th level within WINDOW^2 levels,
 * every WINDOW^2-th within WINDOW^3, ...); a closed level is opened again
 * from the nearest open ancestor, name by name, fd-relative with
 * O_NOFOLLOW, and must be the same directory (device and inode) as when it
 * was entered. So about WINDOW fds per power of WINDOW of depth are open:
 * ~100 at 30,000 levels.
 *
 * Rule for callers: an fd from cb_fdpath_fd() is valid until the next
 * cb_fdpath_push() (which may close levels above the new one): fetch it
 * again after any call that can descend.
 *
 * The root fd is borrowed and never closed; the path owns every other fd.
 */
#ifndef CB_FDPATH_H
#define CB_FDPATH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CB_FDPATH_WINDOW 32

struct cb_fdpath_level {
	int fd;            /* -1: closed (or not opened yet) */
	char *name;        /* in the level above (NULL for the root) */
	dev_t dev;
	ino_t ino;
	int known;         /* dev/ino recorded (a lazy level learns them at its first open) */
	uintptr_t tag;     /* the caller's, e.g. the length of its relative path */
};

struct cb_fdpath {
	struct cb_fdpath_level *v;
	size_t n, cap;
	int flags;         /* openat flags for a reopen (O_DIRECTORY|O_NOFOLLOW added) */
	size_t open;       /* fds open, the root included: for tests */
	size_t failed;     /* the level whose open failed last (for messages) */
};

/* flags: extra openat flags for reopening (e.g. O_NOATIME). */
void cb_fdpath_init(struct cb_fdpath *p, int root_fd, int flags);
void cb_fdpath_release(struct cb_fdpath *p);

/* Enter NAME (below the top level) with fd, which the path takes over; fd
 * -1 pushes a lazy level, opened on first cb_fdpath_fd(). 0, or -1 (fstat
 * of fd failed, errno set; fd closed, nothing pushed). */
int cb_fdpath_push(struct cb_fdpath *p, int fd, const char *name, uintptr_t tag);
/* Leave the top level (closing its fd). */
void cb_fdpath_pop(struct cb_fdpath *p);

/* The fd of LEVEL (0 = root), opened again if needed. -1 with errno set:
 * the open failed (ENOENT when a name is gone), or ESTALE when what is
 * there now is another directory than the one entered (renamed, replaced);
 * p->failed is the level that could not be opened (LEVEL or above). */
int cb_fdpath_fd(struct cb_fdpath *p, size_t level);
static inline size_t cb_fdpath_top(const struct cb_fdpath *p) { return p->n - 1; }
static inline uintptr_t cb_fdpath_tag(const struct cb_fdpath *p, size_t level)
{
	return p->v[level].tag;
}

#endif
