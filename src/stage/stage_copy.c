/* Staging engine: copy primitives for one entry (data, metadata, xattrs,
 * special files) and removal from staging. See src/stage_int.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <linux/fs.h>

#include "cb_cleanup.h"
#include "cb_rmtree.h"
#include "stage_int.h"

/* Interrupt checks between chunks: SIGINT stops a multi-GB file quickly. */
#define COPY_CHUNK (8 << 20)

/* "cannot write 'var/log/x' to staging: No space left on device" */
int stage_fail(struct cb_stage *st, const char *verb, const char *where)
{
	return cb_error_errno("%s '%s'%s%s", verb, stage_relname(st), where ? " " : "",
			      where ? where : "");
}

int stage_open_src(struct cb_stage *st, int sdfd, const char *name, int flags,
		   const struct stat *sb)
{
	struct stat now;
	int fd;

	(void)st;
	/* O_NOATIME: a backup should not look like the guest read its files.
	 * Callers pass O_NONBLOCK for files: a file swapped for a fifo under
	 * us must not hang the copy. */
	fd = openat(sdfd, name, flags | O_NOFOLLOW | O_CLOEXEC | O_NOATIME);
	if (fd < 0 && errno == EPERM)
		fd = openat(sdfd, name, flags | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || !sb)
		return fd;
	/* what is read is what was stat'ed: a name that became another entry
	 * (a file turned into a directory) between the two is not copied */
	if (fstat(fd, &now) < 0 || ((now.st_mode ^ sb->st_mode) & S_IFMT) ||
	    now.st_ino != sb->st_ino || now.st_dev != sb->st_dev) {
		close(fd);
		errno = ESTALE;
		return -1;
	}
	return fd;
}

/* bwlimit (unless a clone: nothing read) and progress over all workers:
 * one bucket, one total. */
static int shared_tick(struct cb_stage *w, size_t n, int throttle)
{
	int r = 0;

	pthread_mutex_lock(w->throttle_mu);
	if (throttle)
		r = cb_throttle_account(w->throttle_shared, n);
	*w->pool_bytes += n;
	cb_progress_update(w->progress, *w->pool_bytes);
	pthread_mutex_unlock(w->throttle_mu);
	return r;
}

static int copy_tick(struct cb_stage *st, size_t n)
{
	st->stats->transferred_size += n;
	if (st->throttle_mu) {   /* a worker: the bucket is shared */
		if (shared_tick(st, n, 1) < 0)
			return -1;
	} else {
		if (cb_throttle_account(&st->throttle, n) < 0)
			return -1;
		cb_progress_update(st->progress, st->stats->transferred_size);
	}
	st->since_check += n;
	if (st->since_check < COPY_CHUNK)
		return 0;
	st->since_check = 0;
	return cb_check_interrupt();
}

/* pread/pwrite fallback; returns bytes copied (0 at EOF) or -1. */
static ssize_t copy_rw(struct cb_stage *st, int in, int out, off_t off, size_t len)
{
	ssize_t n, done = 0;

	if (len > STAGE_BUF_SIZE)
		len = STAGE_BUF_SIZE;
	do
		n = pread(in, st->buf, len, off);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return stage_fail(st, "cannot read", "from source");
	while (done < n) {
		ssize_t w = pwrite(out, st->buf + done, (size_t)(n - done), off + done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return stage_fail(st, "cannot write", "to staging");
		done += w;
	}
	return n;
}

static int cfr_unusable(int err)
{
	return err == EXDEV || err == ENOSYS || err == EOPNOTSUPP || err == EINVAL;
}

static ssize_t copy_chunk(struct cb_stage *st, int in, int out, off_t off, size_t len)
{
	loff_t ioff = off, ooff = off;
	ssize_t n;

	if (st->no_cfr)
		return copy_rw(st, in, out, off, len);
	n = copy_file_range(in, &ioff, out, &ooff, len, 0);
	if (n >= 0)
		return n;
	if (errno == EINTR)
		return copy_chunk(st, in, out, off, len);
	if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG)
		return stage_fail(st, "cannot write", "to staging");
	if (!cfr_unusable(errno))
		return stage_fail(st, "cannot copy", "to staging");
	st->no_cfr = 1;
	return copy_rw(st, in, out, off, len);
}

/* Copy [off, off+len) to the same offsets; stops early at EOF (the guest
 * may shrink a file under us). *end: offset after the last byte written. */
static int copy_range(struct cb_stage *st, int in, int out, off_t off, off_t len, off_t *end)
{
	while (len > 0) {
		size_t chunk = len > COPY_CHUNK ? COPY_CHUNK : (size_t)len;
		ssize_t n = copy_chunk(st, in, out, off, chunk);
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		off += n;
		len -= n;
		*end = off;
		if (copy_tick(st, (size_t)n) < 0)
			return -1;
	}
	return 0;
}

/* Data segments only: holes stay holes in the staged copy. */
static int copy_sparse(struct cb_stage *st, int in, int out, off_t size, off_t *end)
{
	off_t off = 0;

	while (off < size) {
		off_t data = lseek(in, off, SEEK_DATA), hole;
		if (data < 0 && errno == ENXIO)
			break;
		if (data < 0 && errno != EINVAL)
			return stage_fail(st, "cannot read", "from source");
		if (data < 0)
			data = off;  /* no SEEK_DATA support: all data */
		if (data >= size)
			break;
		hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0 || hole > size)
			hole = size;
		if (copy_range(st, in, out, data, hole - data, end) < 0)
			return -1;
		off = hole;
	}
	return 0;
}

/* Reflink (btrfs, xfs with reflink=1, tmpdir on the guest's file system):
 * the staged file shares the source's blocks, no data is read or written.
 * 1 = cloned, 0 = copy it instead, -1 = error. */
static int clone_data(struct cb_stage *st, int in, int out, const struct stat *sb)
{
	if (st->no_clone || sb->st_size == 0)
		return 0;
	if (ioctl(out, FICLONE, in) == 0) {
		st->stats->cloned_files++;
		st->stats->cloned_size += sb->st_size;
		st->stats->transferred_size += sb->st_size;
		if (st->throttle_mu)
			shared_tick(st, (size_t)sb->st_size, 0);
		else
			cb_progress_update(st->progress, st->stats->transferred_size);
		return 1;
	}
	if (errno == ENOSPC || errno == EDQUOT)
		return stage_fail(st, "cannot write", "to staging");
	/* another file system, or one that cannot: no use trying each file */
	if (errno == EXDEV || errno == EOPNOTSUPP || errno == ENOTTY || errno == ENOSYS)
		st->no_clone = 1;
	return 0;
}

int stage_copy_data(struct cb_stage *st, int in, int out, const struct stat *sb)
{
	off_t size = sb->st_size, end = 0;
	int ret = clone_data(st, in, out, sb);

	if (ret != 0)
		return ret < 0 ? -1 : (st->stats->files_transferred++, 0);
	/* as many blocks as bytes: no hole worth two lseek() calls */
	if ((off_t)sb->st_blocks * 512 >= size)
		ret = copy_range(st, in, out, 0, size, &end);
	else
		ret = copy_sparse(st, in, out, size, &end);
	if (ret < 0)
		return -1;
	/* the final size, so that trailing holes stay holes */
	if (end != size && ftruncate(out, size) < 0)
		return stage_fail(st, "cannot write", "to staging");
	st->stats->files_transferred++;
	return 0;
}

/* ---- metadata ---- */

/* Returns 1 if the owner was changed (chown clears setuid bits and
 * security.capability: both are set again afterwards), 0 if not, -1. */
static int set_owner(struct cb_stage *st, int dfd, int ddfd, const char *name,
		     const struct stat *sb, const struct stat *have)
{
	int r;

	if (!st->is_root || (have && have->st_uid == sb->st_uid && have->st_gid == sb->st_gid))
		return 0;
	if (dfd >= 0)
		r = fchown(dfd, sb->st_uid, sb->st_gid);
	else
		r = fchownat(ddfd, name, sb->st_uid, sb->st_gid, AT_SYMLINK_NOFOLLOW);
	return r < 0 ? stage_fail(st, "cannot set owner of", "in staging") : 1;
}

static int set_mode(struct cb_stage *st, int dfd, int ddfd, const char *name,
		    const struct stat *sb, const struct stat *have, int chowned)
{
	mode_t mode = sb->st_mode & 07777;
	int r;

	if (S_ISLNK(sb->st_mode) || (have && !chowned && (have->st_mode & 07777) == mode))
		return 0;
	r = dfd >= 0 ? fchmod(dfd, mode) : fchmodat(ddfd, name, mode, 0);
	return r < 0 ? stage_fail(st, "cannot set mode of", "in staging") : 0;
}

static int set_times(struct cb_stage *st, int dfd, int ddfd, const char *name,
		     const struct stat *sb)
{
	struct timespec ts[2] = { sb->st_atim, sb->st_mtim };
	int r;

	r = dfd >= 0 ? futimens(dfd, ts) : utimensat(ddfd, name, ts, AT_SYMLINK_NOFOLLOW);
	return r < 0 ? stage_fail(st, "cannot set times of", "in staging") : 0;
}

/* Where xattr calls go: an open fd, or for symlinks and devices the name
 * below its open directory, "/proc/self/fd/DIR/NAME": no component is
 * looked up again (none can be swapped for a symlink), whatever the depth
 * or the length of the path. */
struct xtarget {
	int fd;
	char *path;
};

static ssize_t x_list(const struct xtarget *t, char *buf, size_t len)
{
	return t->fd >= 0 ? flistxattr(t->fd, buf, len) : llistxattr(t->path, buf, len);
}

static ssize_t x_get(const struct xtarget *t, const char *n, void *buf, size_t len)
{
	return t->fd >= 0 ? fgetxattr(t->fd, n, buf, len) : lgetxattr(t->path, n, buf, len);
}

static int x_set(const struct xtarget *t, const char *n, const void *v, size_t len)
{
	return t->fd >= 0 ? fsetxattr(t->fd, n, v, len, 0) : lsetxattr(t->path, n, v, len, 0);
}

static int x_remove(const struct xtarget *t, const char *n)
{
	return t->fd >= 0 ? fremovexattr(t->fd, n) : lremovexattr(t->path, n);
}

static int no_xattrs(int err)
{
	return err == ENOTSUP || err == EOPNOTSUPP;
}

/* The list of xattr names into *out (malloc'd, may be NULL when empty). */
static ssize_t x_names(const struct xtarget *t, char **out)
{
	ssize_t n;

	*out = NULL;
	for (;;) {
		n = x_list(t, NULL, 0);
		if (n <= 0)
			return n < 0 && (no_xattrs(errno) || errno == ENOENT) ? 0 : n;
		*out = cb_xmalloc((size_t)n);
		n = x_list(t, *out, (size_t)n);
		if (n >= 0 || errno != ERANGE)
			return n;
		free(*out);  /* grew between the two calls */
	}
}

static int has_name(const char *list, ssize_t len, const char *name)
{
	for (const char *p = list; p < list + len; p += strlen(p) + 1)
		if (!strcmp(p, name))
			return 1;
	return 0;
}

/*
 * An xattr the staging file system cannot hold (ext4 keeps all of an
 * inode's xattrs in one block, 4 KiB, where tmpfs or XFS take 64 KiB) is
 * kept in the side store <dst>.xattrs/ID (name, NUL, value) and the staged
 * entry gets the marker CB_STAGE_XATTR_MARK ID; the archive puts the value
 * back under its name. IDs are unique across runs (a kept copy keeps its
 * markers).
 */
static int x_side_store(struct cb_stage *st, const struct xtarget *d, const char *name,
			const void *v, size_t len)
{
	char id[64], *mark;
	int fd, ret;

	if (st->side_fd < 0) {
		char *dir = cb_xasprintf("%s%s", st->dst, CB_STAGE_XATTR_DIR);
		mkdir(dir, 0700);  /* EEXIST: a kept copy's; the open checks it */
		st->side_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		free(dir);
		if (st->side_fd < 0)
			return stage_fail(st, "cannot keep a big xattr of", "beside staging");
	}
	snprintf(id, sizeof(id), "%llx-%x-%u", (unsigned long long)st->side_stamp,
		 (unsigned)getpid(), st->side_seq++);
	fd = openat(st->side_fd, id, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	ret = fd < 0 || cb_write_all(fd, name, strlen(name) + 1) < 0 || cb_write_all(fd, v, len) < 0;
	if (fd >= 0)
		close(fd);
	if (ret)
		return stage_fail(st, "cannot keep a big xattr of", "beside staging");
	mark = cb_xasprintf("%s%s", CB_STAGE_XATTR_MARK, id);
	ret = x_set(d, mark, "", 0);
	free(mark);
	if (ret < 0)
		return cb_error_errno("cannot set xattr '%s' of '%s' in staging", name, stage_relname(st));
	return 0;
}

static int x_set_one(struct cb_stage *st, const struct xtarget *s, const struct xtarget *d,
		     const char *name)
{
	ssize_t v;

	/* our own markers are never taken from a guest */
	if (!strncmp(name, CB_STAGE_OWN_XATTRS, strlen(CB_STAGE_OWN_XATTRS)))
		return 0;
	v = x_get(s, name, st->xbuf, STAGE_XATTR_MAX);
	/* gone from the source since its stat (ENOENT): pass 2 settles it */
	if (v < 0)
		return errno == ENODATA || errno == ENOENT ? 0
							   : stage_fail(st, "cannot read xattrs of", "in source");
	if (x_set(d, name, st->xbuf, (size_t)v) == 0)
		return 0;
	if (errno == ENOSPC || errno == E2BIG || errno == ERANGE)
		return x_side_store(st, d, name, st->xbuf, (size_t)v);
	if (!no_xattrs(errno))
		return cb_error_errno("cannot set xattr '%s' of '%s' in staging", name,
				      stage_relname(st));
	if (!st->warned_xattr++)
		cb_warn(st->log, "staging file system does not keep xattr '%s' (of '%s')", name,
			stage_relname(st));
	return 0;
}

/* Drop staged xattrs the source does not have (not needed on fresh entries,
 * which have none). */
static int x_prune(struct cb_stage *st, const struct xtarget *d, const char *slist, ssize_t slen)
{
	char *dlist;
	ssize_t dlen = x_names(d, &dlist);
	int ret = 0;

	if (dlen < 0)
		ret = stage_fail(st, "cannot list xattrs of", "in staging");
	for (const char *p = dlist; ret == 0 && p && p < dlist + dlen; p += strlen(p) + 1)
		if (!has_name(slist, slen, p) && x_remove(d, p) < 0 && errno != ENODATA)
			ret = stage_fail(st, "cannot remove xattrs of", "in staging");
	free(dlist);
	return ret;
}

static int set_xattrs(struct cb_stage *st, const struct xtarget *s, const struct xtarget *d,
		      const char *slist, ssize_t slen)
{
	for (const char *p = slist; p && p < slist + slen; p += strlen(p) + 1)
		if (x_set_one(st, s, d, p) < 0)
			return -1;
	return 0;
}

/* The flags chattr sets and a restore can set again (no file-system
 * bookkeeping such as extents or inline data). */
#define USER_FFLAGS (FS_SECRM_FL | FS_UNRM_FL | FS_COMPR_FL | FS_SYNC_FL | FS_IMMUTABLE_FL | \
		     FS_APPEND_FL | FS_NODUMP_FL | FS_NOATIME_FL | FS_JOURNAL_DATA_FL | \
		     FS_NOTAIL_FL | FS_DIRSYNC_FL | FS_TOPDIR_FL | FS_NOCOW_FL | \
		     FS_PROJINHERIT_FL)

/* The source's chattr flags as CB_STAGE_FFLAGS_XATTR on the staged copy
 * (x_prune() has removed an old one). */
static int keep_fflags(struct cb_stage *st, int sfd, const struct xtarget *d)
{
	char v[16];
	int fl = 0;

	if (ioctl(sfd, FS_IOC_GETFLAGS, &fl) < 0 || !(fl & USER_FFLAGS))
		return 0;
	snprintf(v, sizeof(v), "%u", (unsigned)(fl & USER_FFLAGS));
	if (x_set(d, CB_STAGE_FFLAGS_XATTR, v, strlen(v)) == 0 || no_xattrs(errno))
		return 0;
	return cb_error_errno("cannot keep the chattr flags of '%s' in staging", stage_relname(st));
}

/*
 * Owner, mode, xattrs (ACLs included), times of the staged entry, in the
 * order that keeps them: chown first (it clears setuid bits and
 * security.capability), stale xattrs removed before chmod (dropping an ACL
 * must not leave its mask in the mode), times last (nothing after them
 * may bump them). sfd/dfd: open source/staged fds of a file or directory,
 * or -1 to go by name below the open directories sdfd/ddfd. fresh: we
 * just created the staged entry, so there is nothing to compare or remove.
 */
int stage_meta(struct cb_stage *st, int sfd, int dfd, int sdfd, int ddfd, const char *name,
	       const struct stat *sb, int fresh)
{
	struct xtarget s = { sfd, NULL }, d = { dfd, NULL };
	struct stat have, *hp = NULL;
	char *slist = NULL;
	ssize_t slen = 0;
	int ret, chowned;

	if (!fresh) {
		ret = dfd >= 0 ? fstat(dfd, &have) : fstatat(ddfd, name, &have, AT_SYMLINK_NOFOLLOW);
		if (ret < 0)
			return stage_fail(st, "cannot stat", "in staging");
		hp = &have;
	}
	chowned = set_owner(st, dfd, ddfd, name, sb, hp);
	if (chowned < 0)
		return -1;
	if (sfd < 0)
		s.path = cb_xasprintf("/proc/self/fd/%d/%s", sdfd, name);
	if (dfd < 0)
		d.path = cb_xasprintf("/proc/self/fd/%d/%s", ddfd, name);
	slen = x_names(&s, &slist);
	ret = slen < 0 ? stage_fail(st, "cannot list xattrs of", "in source") : 0;
	if (ret == 0 && !fresh)
		ret = x_prune(st, &d, slist, slen);
	if (ret == 0)
		ret = set_mode(st, dfd, ddfd, name, sb, hp, chowned);
	if (ret == 0)
		ret = set_xattrs(st, &s, &d, slist, slen);
	if (ret == 0 && sfd >= 0)
		ret = keep_fflags(st, sfd, &d);
	if (ret == 0)
		ret = set_times(st, dfd, ddfd, name, sb);
	free(slist);
	free(s.path);
	free(d.path);
	return ret;
}

/* ---- special files ---- */

static int make_link(struct cb_stage *st, int sdfd, int ddfd, const char *name,
		     const struct stat *sb)
{
	size_t len = (size_t)sb->st_size + 2;
	char *target = cb_xmalloc(len);
	ssize_t n = readlinkat(sdfd, name, target, len);
	int ret = 0;

	/* gone, or no longer a symlink (EINVAL): pass 2 settles it */
	if (n < 0)
		ret = errno == ENOENT || errno == EINVAL ? 1
							 : stage_fail(st, "cannot read link", "in source");
	else if ((size_t)n >= len)
		ret = 1;  /* retargeted under us: treat as vanished, pass 2 sees it */
	else {
		target[n] = '\0';
		if (symlinkat(target, ddfd, name) < 0)
			ret = stage_fail(st, "cannot create symlink", "in staging");
	}
	free(target);
	return ret;
}

/* Symlinks, devices, fifos. 0, 1 if it vanished, -1 on error. */
int stage_make_special(struct cb_stage *st, int sdfd, int ddfd, const char *name,
		       const struct stat *sb)
{
	if (S_ISLNK(sb->st_mode))
		return make_link(st, sdfd, ddfd, name, sb);
	if (mknodat(ddfd, name, (sb->st_mode & S_IFMT) | 0600, sb->st_rdev) < 0)
		return stage_fail(st, "cannot create", "in staging");
	return 0;
}

/* ---- removal ---- */

/* Remove a staged entry (a whole tree for a directory); counts entries. */
int stage_remove(struct cb_stage *st, int ddfd, const char *name, uint64_t *count)
{
	if (cb_remove_at(ddfd, name, 0, count) < 0)
		return stage_fail(st, "cannot remove", "from staging");
	return 0;
}
