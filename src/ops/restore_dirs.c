/*
 * restore_dirs: directory fds of the restore's current path, so that an
 * entry is created by one call relative to its parent's fd instead of a
 * walk from the top for every entry (tar order is depth-first: the parent
 * is almost always the directory of the entry before, or one of its
 * ancestors). Every directory is opened with O_NOFOLLOW|O_DIRECTORY from
 * its parent's fd, or where the kernel has openat2() in one call with
 * RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS from the
 * nearest held ancestor: a symlink that an earlier entry (or anyone) put
 * on the way is never followed. A bounded number of fds is held whatever
 * the depth; a level whose fd was closed is opened again from the nearest
 * held ancestor.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cb_util.h"
#include "restore_int.h"

/* fds held besides the root: enough for any real tree's depth-first walk,
 * few enough for a ulimit -n of 1024 */
#define DIRS_HELD 48

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

void restore_dirs_init(struct rst_dirs *d, int root)
{
	memset(d, 0, sizeof(*d));
	d->root = root;
}

static void drop_level(struct rst_dirs *d, size_t i)
{
	if (d->lv[i].fd >= 0) {
		close(d->lv[i].fd);
		d->lv[i].fd = -1;
		d->held--;
	}
}

/* Forget every level (after a directory on the path was removed). */
void restore_dirs_flush(struct rst_dirs *d)
{
	while (d->n > 0)
		drop_level(d, --d->n);
	d->len = 0;
}

void restore_dirs_release(struct rst_dirs *d)
{
	restore_dirs_flush(d);
	free(d->lv);
	free(d->path);
	memset(d, 0, sizeof(*d));
}

/* Levels of the held path that dir (normalized) also starts with. */
static size_t common_levels(const struct rst_dirs *d, const char *dir, size_t dlen)
{
	size_t p = 0, k = 0, m = d->len < dlen ? d->len : dlen;

	while (p < m && d->path[p] == dir[p])
		p++;
	while (k < d->n && d->lv[k].end <= p &&
	       (d->lv[k].end == dlen || dir[d->lv[k].end] == '/'))
		k++;
	return k;
}

static void hold(struct rst_dirs *d, size_t i, int fd)
{
	d->lv[i].fd = fd;
	d->held++;
	/* the shallowest first: depth-first order comes back to them last */
	for (size_t j = 0; d->held > DIRS_HELD && j < i; j++)
		drop_level(d, j);
}

/* dir's levels below the common ones appended to the held path (their
 * fds not open yet). */
static void add_levels(struct rst_dirs *d, const char *dir, size_t dlen)
{
	size_t p = d->len;

	if (d->len + dlen + 2 > d->cap)
		d->path = cb_xrealloc(d->path, d->cap = 2 * (d->len + dlen + 2));
	memcpy(d->path + d->len, dir + d->len, dlen - d->len);
	d->len = dlen;
	d->path[d->len] = '\0';
	while (p < dlen) {
		size_t e;

		if (d->path[p] == '/')
			p++;
		e = p + strcspn(d->path + p, "/");
		if (d->n == d->cap_lv)
			d->lv = cb_xrealloc(d->lv, (d->cap_lv = d->cap_lv ? 2 * d->cap_lv : 32) *
					    sizeof(*d->lv));
		d->lv[d->n++] = (struct rst_level){ e, -1 };
		p = e;
	}
}

static int openat2_beneath(struct rst_dirs *d, int at, const char *rel)
{
	struct open_how how = { .flags = DIR_FLAGS,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					   RESOLVE_NO_MAGICLINKS };
	long fd;

	if (d->no_openat2)
		return -1;
	fd = syscall(SYS_openat2, at, rel, &how, sizeof(how));
	if (fd < 0 && (errno == ENOSYS || errno == EPERM))   /* EPERM: a seccomp filter */
		d->no_openat2 = 1;
	return (int)fd;
}

/* One component below at: opened, or (create) made first when missing. */
static int open_one(int at, const char *name, int create)
{
	int fd = openat(at, name, DIR_FLAGS);

	if (fd < 0 && errno == ENOENT && create &&
	    (mkdirat(at, name, 0755) == 0 || errno == EEXIST))
		fd = openat(at, name, DIR_FLAGS);
	return fd;
}

/* Open levels a+1..b (a: a held level, or -1 for the root), level b's fd
 * the result: openat2() for all of them at once where it can, else one
 * component at a time. */
static int open_levels(struct rst_dirs *d, long a, size_t b, int create)
{
	int at = a < 0 ? d->root : d->lv[a].fd;
	size_t start = a < 0 ? 0 : d->lv[a].end + 1;
	char saved;
	int fd;

	if (d->lv[b].end - start < PATH_MAX) {
		saved = d->path[d->lv[b].end];
		d->path[d->lv[b].end] = '\0';
		fd = openat2_beneath(d, at, d->path + start);
		d->path[d->lv[b].end] = saved;
		if (fd >= 0) {
			hold(d, b, fd);
			return fd;
		}
	}
	for (size_t i = (size_t)(a + 1); i <= b; i++) {
		size_t s = i == 0 ? 0 : d->lv[i - 1].end + 1;

		saved = d->path[d->lv[i].end];
		d->path[d->lv[i].end] = '\0';
		fd = open_one(i == 0 ? d->root : d->lv[i - 1].fd, d->path + s, create);
		d->path[d->lv[i].end] = saved;
		if (fd < 0)
			return -1;
		hold(d, i, fd);
	}
	return d->lv[b].fd;
}

int restore_dirs_get(struct rst_dirs *d, const char *dir, size_t dlen, int create)
{
	size_t k;
	long a;

	if (dlen == 0) {
		restore_dirs_flush(d);
		return d->root;
	}
	k = common_levels(d, dir, dlen);
	while (d->n > k)
		drop_level(d, --d->n);
	d->len = k ? d->lv[k - 1].end : 0;
	if (d->len < dlen)
		add_levels(d, dir, dlen);
	if (d->lv[d->n - 1].fd >= 0)
		return d->lv[d->n - 1].fd;
	for (a = (long)d->n - 2; a >= 0 && d->lv[a].fd < 0; a--)
		;
	if (open_levels(d, a, d->n - 1, create) >= 0)
		return d->lv[d->n - 1].fd;
	/* what could not be opened is not held: the next call starts above it */
	while (d->n > 0 && d->lv[d->n - 1].fd < 0)
		d->n--;
	d->len = d->n ? d->lv[d->n - 1].end : 0;
	return -1;
}
