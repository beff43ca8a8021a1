/* cb_fdpath: bounded directory fds along a walk (see cb_fdpath.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_fdpath.h"
#include "cb_util.h"

void cb_fdpath_init(struct cb_fdpath *p, int root_fd, int flags)
{
	memset(p, 0, sizeof(*p));
	p->flags = flags | O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
	p->cap = 16;
	p->v = cb_xcalloc(p->cap, sizeof(*p->v));
	p->v[0].fd = root_fd;
	p->n = 1;
	p->open = 1;
}

static void close_level(struct cb_fdpath *p, size_t level)
{
	if (level == 0 || p->v[level].fd < 0)
		return;
	close(p->v[level].fd);
	p->v[level].fd = -1;
	p->open--;
}

void cb_fdpath_release(struct cb_fdpath *p)
{
	while (p->n > 1)
		cb_fdpath_pop(p);
	free(p->v);
	memset(p, 0, sizeof(*p));
}

/*
 * Levels that stay open once opened: the root, the WINDOW levels at the
 * top, and anchors to open the others from again, thinning out with the
 * distance from the top: every WINDOW-th level within WINDOW^2 of it,
 * every WINDOW^2-th within WINDOW^3, and so on. About WINDOW fds a power
 * of WINDOW of depth: ~100 at a depth of 30,000, ~160 at a million.
 */
static int stays_open(const struct cb_fdpath *p, size_t level)
{
	size_t dist = p->n - 1 - level;

	if (level == 0 || dist < CB_FDPATH_WINDOW)
		return 1;
	for (size_t m = CB_FDPATH_WINDOW;; m *= CB_FDPATH_WINDOW) {
		if (level % m)
			return 0;
		if (dist / CB_FDPATH_WINDOW < m)
			return 1;
	}
}

/* After a push: the levels whose distance from the top just crossed a
 * bound (WINDOW, WINDOW^2, ...) are closed unless they stay open. */
static void trim(struct cb_fdpath *p)
{
	size_t top = p->n - 1;

	for (size_t m = 1; m <= top / CB_FDPATH_WINDOW; m *= CB_FDPATH_WINDOW) {
		size_t level = top - m * CB_FDPATH_WINDOW;
		if (level % m == 0 && !stays_open(p, level))
			close_level(p, level);
	}
}

static int record(struct cb_fdpath_level *l)
{
	struct stat sb;

	if (fstat(l->fd, &sb) < 0)
		return -1;
	if (l->known && (sb.st_dev != l->dev || sb.st_ino != l->ino)) {
		errno = ESTALE;
		return -1;
	}
	l->dev = sb.st_dev;
	l->ino = sb.st_ino;
	l->known = 1;
	return 0;
}

int cb_fdpath_push(struct cb_fdpath *p, int fd, const char *name, uintptr_t tag)
{
	struct cb_fdpath_level *l;

	if (p->n == p->cap) {
		p->cap *= 2;
		p->v = cb_xrealloc(p->v, p->cap * sizeof(*p->v));
	}
	l = &p->v[p->n];
	memset(l, 0, sizeof(*l));
	l->fd = fd;
	if (fd >= 0 && record(l) < 0) {
		int err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	l->name = cb_xstrdup(name);
	l->tag = tag;
	p->n++;
	if (fd >= 0)
		p->open++;
	trim(p);
	return 0;
}

void cb_fdpath_pop(struct cb_fdpath *p)
{
	if (p->n <= 1)
		return;
	close_level(p, p->n - 1);
	free(p->v[p->n - 1].name);
	p->n--;
}

/* Open LEVEL below its parent, whose fd is open. */
static int reopen(struct cb_fdpath *p, size_t level)
{
	struct cb_fdpath_level *l = &p->v[level];
	int err;

	l->fd = openat(p->v[level - 1].fd, l->name, p->flags);
	if (l->fd < 0 && errno == EPERM && (p->flags & O_NOATIME)) {
		/* O_NOATIME needs ownership or CAP_FOWNER */
		l->fd = openat(p->v[level - 1].fd, l->name, p->flags & ~O_NOATIME);
	}
	if (l->fd < 0)
		return -1;
	p->open++;
	if (record(l) == 0)
		return 0;
	err = errno;
	close_level(p, level);
	errno = err;
	return -1;
}

int cb_fdpath_fd(struct cb_fdpath *p, size_t level)
{
	size_t from = level;

	if (level >= p->n) {
		errno = EINVAL;
		return -1;
	}
	while (from > 0 && p->v[from].fd < 0)
		from--;  /* the root is always open (AT_FDCWD too) */
	/* down from there; what was opened only to pass through is closed
	 * again, so the bound holds however far down the level is */
	for (size_t i = from + 1; i <= level; i++) {
		if (reopen(p, i) < 0) {
			p->failed = i;
			return -1;
		}
		if (i - 1 > from && !stays_open(p, i - 1))
			close_level(p, i - 1);
	}
	return p->v[level].fd;
}
