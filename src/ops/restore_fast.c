/*
 * restore_fast: the entries of a tree (regular files, directories,
 * symlinks, hardlinks, fifos, devices) written by cbackup itself, each by one create
 * relative to its parent directory's fd (restore_dirs.c holds the fds of
 * the current path). libarchive's disk writer checks every component of
 * every name from the top and unlinks every name before creating it: 6-7
 * opens and stats an entry, most of a restore's system time. Here a name
 * is created with O_EXCL (mkdirat, symlinkat fail on an existing name the
 * same way); only when it exists (an archive holding a name twice) is the
 * old entry removed, never followed, and the creation tried again: nothing
 * is unlinked in a tree cbackup is making from empty.
 *
 * Directories get their owner and xattrs at once, and their mode, ACLs and
 * times at the end (restore_fast_finish), deepest first, on an fd opened
 * the same race-free way: entries created in them would change their
 * times, a mode without write or search permission would stop the
 * restore, and a path of any length is reached by fds, not by name.
 *
 * Hardlinks are made between the two directories' fds. Left to libarchive
 * (with its checks, from the tree's top): hardlinks that carry data,
 * entries with ACLs only in text form or with file flags, and everything
 * when not root (libarchive then warns about owners it cannot set, as
 * before).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <archive.h>
#include <archive_entry.h>

#include "cb_util.h"
#include "restore_int.h"

struct fixdir {
	char *path;                 /* relative, normalized */
	mode_t mode;
	struct timespec ts[2];
	void *acl[2];               /* raw system.posix_acl_access/default */
	size_t acl_len[2];
};

struct restore_fast_state {
	int off;                    /* not root: libarchive writes everything */
	mode_t umask;
	struct rst_dirs dirs;
	char *rel;                  /* the entry's name, normalized */
	size_t rel_cap;
	struct fixdir *fix;
	size_t n_fix, cap_fix;
};

static const char *const acl_names[2] = { "system.posix_acl_access", "system.posix_acl_default" };

static struct restore_fast_state *fast_get(struct restore_job *r)
{
	struct restore_fast_state *f = r->fast;

	if (f)
		return f;
	f = r->fast = cb_xcalloc(1, sizeof(*f));
	f->off = geteuid() != 0 || r->stage_fd < 0;
	umask(f->umask = umask(0));
	restore_dirs_init(&f->dirs, r->stage_fd);
	return f;
}

/* A type and metadata written here (see the top). */
static int is_fast(struct archive_entry *e)
{
	unsigned long set = 0, clear = 0;
	mode_t t = archive_entry_filetype(e);

	archive_entry_fflags(e, &set, &clear);
	if (set || archive_entry_acl_count(e, ARCHIVE_ENTRY_ACL_TYPE_ACCESS |
					   ARCHIVE_ENTRY_ACL_TYPE_DEFAULT |
					   ARCHIVE_ENTRY_ACL_TYPE_NFS4) > 0)
		return 0;
	if (archive_entry_hardlink(e))   /* with data: libarchive writes that */
		return !archive_entry_size_is_set(e) || archive_entry_size(e) == 0;
	return t == AE_IFREG || t == AE_IFDIR || t == AE_IFLNK || t == AE_IFIFO || t == AE_IFCHR ||
	       t == AE_IFBLK;
}

/* name without empty and "." components and trailing slashes, into f->rel;
 * its length, and where the last component starts */
static size_t normalize(struct restore_fast_state *f, const char *name, size_t *base)
{
	size_t n = 0, len = strlen(name);
	const char *p = name;

	if (len + 1 > f->rel_cap)
		f->rel = cb_xrealloc(f->rel, f->rel_cap = len + 1);
	*base = 0;
	while (*p) {
		size_t c = strcspn(p, "/");

		if (c && !(c == 1 && p[0] == '.')) {
			if (n)
				f->rel[n++] = '/';
			*base = n;
			memcpy(f->rel + n, p, c);
			n += c;
		}
		p += c;
		p += strspn(p, "/");
	}
	f->rel[n] = '\0';
	return n;
}

static void entry_times(struct archive_entry *e, struct timespec ts[2])
{
	ts[0].tv_sec = archive_entry_atime(e);
	ts[0].tv_nsec = archive_entry_atime_is_set(e) ? archive_entry_atime_nsec(e) : UTIME_NOW;
	ts[1].tv_sec = archive_entry_mtime(e);
	ts[1].tv_nsec = archive_entry_mtime_is_set(e) ? archive_entry_mtime_nsec(e) : UTIME_NOW;
}

/* The entry's xattrs (ACLs apart, fix_entry took them) on fd: a failure is
 * a warning, as libarchive's disk writer makes it. */
static void set_xattrs(struct restore_job *r, struct archive_entry *e, int fd, const char *name)
{
	const char *xname;
	const void *val;
	size_t len;

	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &xname, &val, &len) == ARCHIVE_OK)
		if (fsetxattr(fd, xname, val, len, 0) < 0)
			cb_warn(r->log, "'%s': cannot restore extended attribute '%s': %s", name, xname,
				strerror(errno));
}

static int set_acls(int fd, void *const acl[2], const size_t len[2], const char *name)
{
	for (int k = 0; k < 2; k++)
		if (acl[k] && fsetxattr(fd, acl_names[k], acl[k], len[k], 0) < 0)
			return cb_error_errno("cannot set the ACL of '%s'", name);
	return 0;
}

/* base exists in pfd: removed (a directory only if empty and the new
 * entry is not one); 1 if it is a directory to keep (new is one too).
 * What goes is never a held directory: the held path ends at pfd. */
static int make_room(int pfd, const char *base, int new_dir, const char *name)
{
	struct stat st;

	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return cb_error_errno("cannot restore '%s'", name);
	if (S_ISDIR(st.st_mode) && new_dir)
		return 1;
	if (unlinkat(pfd, base, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
		return cb_error_errno("cannot restore '%s': cannot replace what is there", name);
	return 0;
}

static int file_meta(struct restore_job *r, struct archive_entry *e, int fd, const char *name)
{
	mode_t mode = archive_entry_mode(e) & 07777;
	struct timespec ts[2];

	if (fchown(fd, archive_entry_uid(e), archive_entry_gid(e)) < 0)
		return cb_error_errno("cannot set the owner of '%s'", name);
	/* after fchown (it clears set-id bits), unless the create made it */
	if (mode != (mode & 0777 & ~r->fast->umask) && fchmod(fd, mode) < 0)
		return cb_error_errno("cannot set the mode of '%s'", name);
	set_xattrs(r, e, fd, name);
	if (set_acls(fd, r->acl, r->acl_len, name) < 0)
		return -1;
	entry_times(e, ts);
	if (futimens(fd, ts) < 0)
		return cb_error_errno("cannot set the times of '%s'", name);
	return 0;
}

static int put_file(struct restore_job *r, struct archive_entry *e, int pfd, const char *base,
		    const char *name, restore_data_fn data)
{
	int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, ret = -1;
	mode_t mode = archive_entry_mode(e) & 0777;
	la_int64_t end = 0;
	int fd = openat(pfd, base, flags, mode);

	if (fd < 0 && errno == EEXIST) {
		if (make_room(pfd, base, 0, name) < 0)
			return -1;
		fd = openat(pfd, base, flags, mode);
	}
	if (fd < 0)
		return cb_error_errno("cannot restore '%s'", name);
	if (archive_entry_size(e) > 0 && data(r, name, fd, &end) < 0)
		goto out;
	/* a hole at the end: the archive's data stops before the size */
	if (end < archive_entry_size(e) && ftruncate(fd, archive_entry_size(e)) < 0) {
		cb_error_errno("cannot restore '%s'", name);
		goto out;
	}
	ret = file_meta(r, e, fd, name);
out:
	close(fd);
	return ret;
}

/* Symlinks, fifos and devices have no fd to write through: their xattrs
 * go through /proc/self/fd of an O_PATH fd (the node itself, not where a
 * symlink points, and a device is never opened). */
static void node_xattrs(struct restore_job *r, struct archive_entry *e, int pfd, const char *base,
			const char *name)
{
	const char *xname;
	const void *val;
	char path[64];
	size_t len;
	int fd;

	if (archive_entry_xattr_count(e) == 0)
		return;
	fd = openat(pfd, base, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &xname, &val, &len) == ARCHIVE_OK)
		if (fd < 0 || setxattr(path, xname, val, len, 0) < 0)
			cb_warn(r->log, "'%s': cannot restore extended attribute '%s': %s", name, xname,
				strerror(errno));
	if (fd >= 0)
		close(fd);
}

static int make_node(struct archive_entry *e, int pfd, const char *base)
{
	mode_t t = archive_entry_filetype(e);

	if (t == AE_IFLNK)
		return symlinkat(archive_entry_symlink(e), pfd, base);
	return mknodat(pfd, base, (t == AE_IFIFO ? S_IFIFO : t == AE_IFCHR ? S_IFCHR : S_IFBLK) |
		       (archive_entry_mode(e) & 0777), archive_entry_rdev(e));
}

static int put_node(struct restore_job *r, struct archive_entry *e, int pfd, const char *base,
		    const char *name)
{
	mode_t mode = archive_entry_mode(e) & 07777;
	struct timespec ts[2];
	int rc = make_node(e, pfd, base);

	if (rc < 0 && errno == EEXIST) {
		if (make_room(pfd, base, 0, name) < 0)
			return -1;
		rc = make_node(e, pfd, base);
	}
	if (rc < 0)
		return cb_error_errno("cannot restore '%s'", name);
	if (fchownat(pfd, base, archive_entry_uid(e), archive_entry_gid(e),
		     AT_SYMLINK_NOFOLLOW) < 0)
		return cb_error_errno("cannot set the owner of '%s'", name);
	if (archive_entry_filetype(e) != AE_IFLNK && mode != (mode & 0777 & ~r->fast->umask) &&
	    fchmodat(pfd, base, mode, 0) < 0)
		return cb_error_errno("cannot set the mode of '%s'", name);
	node_xattrs(r, e, pfd, base, name);
	entry_times(e, ts);
	if (utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return cb_error_errno("cannot set the times of '%s'", name);
	return 0;
}

/* A hardlink to target (checked, relative to the top like every name):
 * linked between the two directories' fds, never through a symlink. */
static int put_link(struct restore_job *r, struct archive_entry *e, size_t base, const char *name)
{
	struct restore_fast_state *f = r->fast;
	char *rel = cb_xstrdup(f->rel), *target;
	size_t tbase, tlen;
	int tfd, pfd, ret = -1;

	tlen = normalize(f, archive_entry_hardlink(e), &tbase);
	target = cb_xstrdup(f->rel);
	tfd = restore_dirs_get(&f->dirs, target, tbase ? tbase - 1 : 0, 0);
	if (tfd < 0 || (tfd = dup(tfd)) < 0 || !tlen) {
		cb_error_errno("cannot restore '%s': cannot open the directory of its target", name);
		goto out;
	}
	pfd = restore_dirs_get(&f->dirs, rel, base ? base - 1 : 0, 1);
	if (pfd < 0) {
		cb_error_errno("cannot restore '%s': cannot open the directory it is in", name);
		goto out;
	}
	ret = linkat(tfd, target + tbase, pfd, rel + base, 0);
	if (ret < 0 && errno == EEXIST && make_room(pfd, rel + base, 0, name) == 0)
		ret = linkat(tfd, target + tbase, pfd, rel + base, 0);
	if (ret < 0)
		cb_error_errno("cannot restore '%s' (a hardlink to '%s')", name,
			       archive_entry_hardlink(e));
out:
	if (tfd >= 0)
		close(tfd);
	free(target);
	free(rel);
	return ret;
}

/* The directory's record for the end: a new one, or (a name the archive
 * holds twice) the one it had, so that the last entry counts. */
static struct fixdir *fixdir_for(struct restore_fast_state *f, const char *rel, int clash)
{
	struct fixdir *d;

	for (size_t i = f->n_fix; clash && i-- > 0;) {
		if (!strcmp(f->fix[i].path, rel)) {
			d = &f->fix[i];
			for (int k = 0; k < 2; k++)
				free(d->acl[k]);
			return d;
		}
	}
	if (f->n_fix == f->cap_fix)
		f->fix = cb_xrealloc(f->fix, (f->cap_fix = f->cap_fix ? 2 * f->cap_fix : 256) *
				     sizeof(*f->fix));
	d = &f->fix[f->n_fix++];
	d->path = cb_xstrdup(rel);
	return d;
}

static int put_dir(struct restore_job *r, struct archive_entry *e, int pfd, const char *base,
		   size_t len, const char *name)
{
	struct restore_fast_state *f = r->fast;
	struct fixdir *d;
	int clash = 0, keep, fd;

	if (mkdirat(pfd, base, 0700) < 0) {
		if (errno != EEXIST)
			return cb_error_errno("cannot restore '%s'", name);
		clash = 1;
		if ((keep = make_room(pfd, base, 1, name)) < 0)
			return -1;
		if (!keep && mkdirat(pfd, base, 0700) < 0)
			return cb_error_errno("cannot restore '%s'", name);
	}
	/* held as the current directory: its entries come next */
	fd = restore_dirs_get(&f->dirs, f->rel, len, 0);
	if (fd < 0)
		return cb_error_errno("cannot restore '%s'", name);
	if (fchown(fd, archive_entry_uid(e), archive_entry_gid(e)) < 0)
		return cb_error_errno("cannot set the owner of '%s'", name);
	set_xattrs(r, e, fd, name);
	d = fixdir_for(f, f->rel, clash);
	d->mode = archive_entry_mode(e) & 07777;
	entry_times(e, d->ts);
	for (int k = 0; k < 2; k++) {
		d->acl[k] = r->acl[k];
		d->acl_len[k] = r->acl_len[k];
		r->acl[k] = NULL;
	}
	return 0;
}

int restore_fast_entry(struct restore_job *r, struct archive_entry *e, const char *name,
		      restore_data_fn data)
{
	struct restore_fast_state *f = fast_get(r);
	size_t base, len;
	int pfd, ret;

	if (f->off)
		return 0;
	if (!is_fast(e)) {
		/* libarchive may remove or replace a directory held here */
		restore_dirs_flush(&f->dirs);
		return 0;
	}
	len = normalize(f, name, &base);
	if (archive_entry_hardlink(e))
		return put_link(r, e, base, name) < 0 ? -1 : 1;
	pfd = restore_dirs_get(&f->dirs, f->rel, base ? base - 1 : 0, 1);
	if (pfd < 0)
		return cb_error_errno("cannot restore '%s': cannot open the directory it is in (a "
				      "symlink is not followed)", name);
	switch (archive_entry_filetype(e)) {
	case AE_IFDIR:
		ret = put_dir(r, e, pfd, f->rel + base, len, name);
		break;
	case AE_IFREG:
		ret = put_file(r, e, pfd, f->rel + base, name, data);
		break;
	default:
		ret = put_node(r, e, pfd, f->rel + base, name);
		break;
	}
	return ret < 0 ? -1 : 1;
}

/* Backwards: in archive order a directory comes before what is in it, so
 * its subdirectories get theirs first (what is set on them changes
 * nothing of it, and their fds are reached before its mode may close it).
 * A directory that is no longer one (a later entry replaced it by a
 * symlink or a file, or removed it) is left. */
int restore_fast_finish(struct restore_job *r)
{
	struct restore_fast_state *f = r->fast;
	int ret = 0;

	if (!f)
		return 0;
	for (size_t i = f->n_fix; i-- > 0;) {
		struct fixdir *d = &f->fix[i];
		int fd = restore_dirs_get(&f->dirs, d->path, strlen(d->path), 0);

		if (fd < 0 && (errno == ELOOP || errno == ENOTDIR || errno == ENOENT))
			continue;
		if (fd < 0 || fchmod(fd, d->mode) < 0 || futimens(fd, d->ts) < 0) {
			ret = cb_error_errno("cannot set the mode or times of '%s'", d->path);
			break;
		}
		/* after the mode (a chmod resets the ACL's mask); setting an
		 * ACL leaves the times alone */
		if ((ret = set_acls(fd, d->acl, d->acl_len, d->path)) < 0)
			break;
	}
	restore_dirs_flush(&f->dirs);
	return ret;
}

void restore_fast_release(struct restore_job *r)
{
	struct restore_fast_state *f = r->fast;

	if (!f)
		return;
	for (size_t i = 0; i < f->n_fix; i++) {
		free(f->fix[i].path);
		free(f->fix[i].acl[0]);
		free(f->fix[i].acl[1]);
	}
	free(f->fix);
	free(f->rel);
	restore_dirs_release(&f->dirs);
	free(f);
	r->fast = NULL;
}
