/*
 * restore_dest: where a restore writes, and how the result takes
 * DESTDIR's place.
 *
 * Nothing is extracted into DESTDIR itself: the archive goes into a fresh
 * directory cbackup creates beside it (DESTDIR/../.cbackup-restore-NAME-X,
 * root-only 0700, checked after mkdir), made the working directory by its
 * fd. Every name libarchive resolves is relative to that directory, which
 * no other user can enter or change: a user who owns DESTDIR (a
 * container's mapped root) has nothing to swap between a check and an
 * open. Only when the extraction is complete (directory modes, times and
 * ACLs applied) does the tree take DESTDIR's place, by one
 * renameat2(RENAME_EXCHANGE) of two names in the parent's fd; the old tree
 * is then removed fd-relative, never through a symlink, on its own device
 * (or kept with --keep-old). A failure at any point removes the new tree
 * and leaves DESTDIR as it was.
 *
 * DESTDIR that is a mount point cannot be exchanged: there the fresh
 * directory is made inside it, and at the end DESTDIR's entries move into
 * a second fresh directory, the new ones move up (renameat between fds,
 * put back on failure), and the old ones are removed.
 *
 * restore --path into a non-empty DESTDIR (--force) replaces only the
 * chosen paths: each is walked down from DESTDIR's fd one component at a
 * time (O_NOFOLLOW|O_DIRECTORY: a symlink on the way is refused) and the
 * new entry exchanged for the old one, which goes away with the stage.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cb_rmtree.h"
#include "cb_util.h"
#include "restore_int.h"

static int mkdir_p(const char *path)
{
	char *p = cb_xstrdup(path);
	int ret = 0;

	for (char *s = p + 1; ; s++) {
		if (*s && *s != '/')
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			ret = cb_error_errno("cannot create directory '%s'", p);
			break;
		}
		*s = c;
		if (!c)
			break;
	}
	free(p);
	return ret;
}

/* 1 if directory fd has no entry, 0 if it has, -1. */
static int fd_is_empty(int fd, const char *path)
{
	struct cb_strvec names = CB_STRVEC_INIT;
	int empty;

	if (cb_dir_names(fd, &names) < 0)
		return cb_error_errno("cannot read directory '%s'", path);
	empty = names.n == 0;
	cb_strvec_clear(&names);
	return empty;
}

/* Two directories on the same mount (else a rename between them fails). */
static int same_mount(int a, int b)
{
	struct statx x, y;

	if (statx(a, "", AT_EMPTY_PATH, STATX_MNT_ID, &x) < 0 ||
	    statx(b, "", AT_EMPTY_PATH, STATX_MNT_ID, &y) < 0)
		return 0;
	if (x.stx_mask & y.stx_mask & STATX_MNT_ID)
		return x.stx_mnt_id == y.stx_mnt_id;
	return x.stx_dev_major == y.stx_dev_major && x.stx_dev_minor == y.stx_dev_minor;
}

/* A fresh root-only directory in dfd, named PREFIX-XXXXXX, opened without
 * following anything and checked to be what mkdir made. */
static int fresh_dir(int dfd, const char *prefix, char *name, size_t len, const char *where)
{
	struct stat st;
	int fd;

	for (int tries = 0; ; tries++) {
		snprintf(name, len, "%s-%06lx", prefix, (unsigned long)(random() & 0xffffff));
		if (mkdirat(dfd, name, 0700) == 0)
			break;
		if (errno != EEXIST || tries > 100) {
			int e = errno;
			cb_error_errno("cannot create a directory in '%s'", where);
			errno = e;     /* the caller may try elsewhere */
			return -1;
		}
	}
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != geteuid() || fchmod(fd, 0700) < 0) {
		if (fd >= 0)
			close(fd);
		return cb_error("'%s/%s' is not the directory cbackup just made", where, name);
	}
	return fd;
}

/* DESTDIR's parent (created if missing) and DESTDIR's name in it. */
static int open_parent(struct restore_job *r, const char *destdir)
{
	char *d = cb_xstrdup(destdir), *slash, *parent, *rp;
	size_t n = strlen(d);
	int ret = -1;

	while (n > 1 && d[n - 1] == '/')
		d[--n] = '\0';
	slash = strrchr(d, '/');
	parent = slash ? (slash == d ? cb_xstrdup("/") : cb_xasprintf("%.*s", (int)(slash - d), d))
		       : cb_xstrdup(".");
	r->dest_name = cb_xstrdup(slash ? slash + 1 : d);
	if (!*r->dest_name || !strcmp(r->dest_name, ".") || !strcmp(r->dest_name, "..")) {
		cb_error("destination '%s': name a directory by its own name", destdir);
		goto out;
	}
	if (access(parent, F_OK) < 0 && mkdir_p(parent) < 0)
		goto out;
	rp = realpath(parent, NULL);
	r->parent_fd = rp ? open(rp, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (r->parent_fd < 0) {
		free(rp);
		cb_error_errno("cannot open '%s'", parent);
		goto out;
	}
	r->dest = cb_xasprintf("%s/%s", strcmp(rp, "/") ? rp : "", r->dest_name);
	free(rp);
	ret = 0;
out:
	free(parent);
	free(d);
	return ret;
}

/* The private directory: beside DESTDIR, or inside it when DESTDIR is a
 * mount point or its parent is not ours to write (a restore as a user). */
static int make_stage(struct restore_job *r, const struct cb_restore_opts *o)
{
	char prefix[64];

	for (;;) {
		snprintf(prefix, sizeof(prefix), ".cbackup-restore-%.32s",
			 r->in_dest ? "new" : r->dest_name);
		r->stage_dir_fd = r->in_dest ? r->dest_fd : r->parent_fd;
		r->stage_fd = fresh_dir(r->stage_dir_fd, prefix, r->stage_name, sizeof(r->stage_name),
					r->in_dest ? r->dest : o->destdir);
		if (r->stage_fd >= 0 || r->in_dest || r->dest_fd < 0 ||
		    (errno != EACCES && errno != EPERM && errno != EROFS))
			break;
		r->in_dest = 1;
	}
	if (r->stage_fd < 0)
		return -1;
	if (r->in_dest && o->keep_old && !r->dest_empty)
		return cb_error("--keep-old: the old tree of '%s' cannot be kept beside it (a mount "
				"point, or a parent cbackup cannot write)", r->dest);
	return 0;
}

int restore_dest_open(struct restore_job *r, const struct cb_restore_opts *o)
{
	/* the admin's path is resolved once (it may lead through symlinks);
	 * from there on only fds and single names */
	char *real = realpath(o->destdir, NULL);
	int empty = 1, ret = open_parent(r, real ? real : o->destdir);

	free(real);
	if (ret < 0)
		return -1;
	r->dest_fd = openat(r->parent_fd, r->dest_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			    O_CLOEXEC);
	if (r->dest_fd < 0 && errno != ENOENT)
		return cb_error_errno("destination '%s' is not a directory (a symlink is not followed)",
				      r->dest);
	if (r->dest_fd >= 0 && (empty = fd_is_empty(r->dest_fd, r->dest)) < 0)
		return -1;
	if (!empty && !o->force)
		return cb_error("destination '%s' is not empty (use --force)", r->dest);
	r->dest_empty = empty;
	r->in_dest = r->dest_fd >= 0 && !same_mount(r->parent_fd, r->dest_fd);
	srandom((unsigned)(getpid() ^ time(NULL)));
	if (make_stage(r, o) < 0)
		return -1;
	r->cwd_fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fchdir(r->stage_fd) < 0)
		return cb_error_errno("cannot enter the restore directory '%s'", r->stage_name);
	return 0;
}

/* Remove NAME below dfd: fd-relative, never through a symlink, one device. */
struct rm_call {
	int dfd;
	const char *name;
};

static int rm_call(void *arg)
{
	struct rm_call *c = arg;
	struct stat st;

	if (fstatat(c->dfd, c->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	return cb_remove_at(c->dfd, c->name, st.st_dev, NULL);
}

/* A few rounds: the old tree's owner may be renaming things in it. */
static int remove_at(int dfd, const char *name)
{
	struct rm_call c = { dfd, name };
	int ret = -1;

	for (int round = 0; round < 5 && ret < 0; round++)
		ret = cb_call_deep(rm_call, &c);
	return ret;
}

/* Every entry of `from` (but the two skipped) to `to`, by name, never
 * replacing; on a failure those moved go back. */
static int move_entries(int from, int to, const char *skip, const char *skip2, const char *what)
{
	struct cb_strvec names = CB_STRVEC_INIT;
	size_t i;
	int ret = 0;

	if (cb_dir_names(from, &names) < 0)
		return cb_error_errno("cannot read %s", what);
	for (i = 0; i < names.n && ret == 0; i++)
		if (strcmp(names.v[i], skip) && strcmp(names.v[i], skip2) &&
		    renameat2(from, names.v[i], to, names.v[i], RENAME_NOREPLACE) < 0)
			ret = cb_error_errno("cannot move '%s' of %s", names.v[i], what);
	if (ret < 0)
		while (i-- > 1)
			if (strcmp(names.v[i - 1], skip) && strcmp(names.v[i - 1], skip2))
				renameat2(to, names.v[i - 1], from, names.v[i - 1], RENAME_NOREPLACE);
	cb_strvec_clear(&names);
	return ret;
}

/* DESTDIR is a mount point: its entries aside, the new ones up, the old
 * ones and the empty private directories removed, and then the root
 * entry (its times last). */
static int swap_inside(struct restore_job *r)
{
	char old[64];
	int old_fd = -1, ret = -1;

	if (!r->dest_empty) {
		old_fd = fresh_dir(r->dest_fd, ".cbackup-restore-old", old, sizeof(old), r->dest);
		if (old_fd < 0 || move_entries(r->dest_fd, old_fd, r->stage_name, old,
					       "the destination") < 0)
			goto out;
	}
	if (move_entries(r->stage_fd, r->dest_fd, "", "", "the restored tree") < 0) {
		if (old_fd >= 0)
			move_entries(old_fd, r->dest_fd, "", "", "the old tree");
		goto out;
	}
	if (old_fd >= 0 && remove_at(r->dest_fd, old) < 0)
		cb_warn(r->log, "cannot remove the old tree '%s/%s' completely: %s", r->dest, old,
			strerror(errno));
	if (unlinkat(r->dest_fd, r->stage_name, AT_REMOVEDIR) == 0)
		r->stage_name[0] = '\0';
	ret = restore_apply_root(r, r->dest_fd);
out:
	if (old_fd >= 0) {
		close(old_fd);
		unlinkat(r->dest_fd, old, AT_REMOVEDIR);   /* after a failure: empty again */
	}
	return ret;
}

/* The old tree, now under the stage's name: removed, or kept. */
static void drop_old(struct restore_job *r, const struct cb_restore_opts *o)
{
	char kept[512];

	if (o->keep_old) {
		snprintf(kept, sizeof(kept), "%s.old-%ld", r->dest_name, (long)time(NULL));
		if (renameat2(r->parent_fd, r->stage_name, r->parent_fd, kept, RENAME_NOREPLACE) == 0) {
			cb_info(r->log, "the old tree is kept as '%s.old-%ld'", r->dest, (long)time(NULL));
			r->stage_name[0] = '\0';
			return;
		}
		cb_warn(r->log, "cannot keep the old tree as '%s': %s; removing it", kept, strerror(errno));
	}
	if (remove_at(r->parent_fd, r->stage_name) < 0)
		cb_warn(r->log, "cannot remove the old tree (now '%s') completely: %s", r->stage_name,
			strerror(errno));
	r->stage_name[0] = '\0';
}

/* The new tree takes DESTDIR's place in one exchange of names. */
static int swap_beside(struct restore_job *r, const struct cb_restore_opts *o)
{
	if (restore_apply_root(r, r->stage_fd) < 0)
		return -1;
	if (r->dest_fd < 0) {
		if (renameat2(r->parent_fd, r->stage_name, r->parent_fd, r->dest_name,
			      RENAME_NOREPLACE) < 0)
			return cb_error_errno("cannot move the restored tree to '%s'", r->dest);
		r->stage_name[0] = '\0';
		return 0;
	}
	if (renameat2(r->parent_fd, r->stage_name, r->parent_fd, r->dest_name,
		      RENAME_EXCHANGE) < 0)
		return cb_error_errno("cannot put the restored tree in place of '%s'", r->dest);
	drop_old(r, o);
	return 0;
}

/* One chosen path into a non-empty DESTDIR: its parents walked (and made
 * like the restored ones) one component at a time, then exchanged. */
static int install_path(struct restore_job *r, const char *path)
{
	char *p = cb_xstrdup(path), *save = NULL, *c, *next;
	int sfd = dup(r->stage_fd), dfd = dup(r->dest_fd), ret = -1;

	c = strtok_r(p, "/", &save);
	while (c && !strcmp(c, "."))
		c = strtok_r(NULL, "/", &save);
	for (; c; c = next) {
		struct stat st;
		int ns, nd;

		while ((next = strtok_r(NULL, "/", &save)) && !strcmp(next, "."))
			;
		if (!next)
			break;
		ns = openat(sfd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (ns < 0) {          /* moved already, with a path above it */
			ret = 0;
			goto out;
		}
		nd = openat(dfd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nd < 0 && errno == ENOENT && fstat(ns, &st) == 0 &&
		    mkdirat(dfd, c, 0700) == 0) {
			nd = openat(dfd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (nd >= 0 && (fchown(nd, st.st_uid, st.st_gid) < 0 ||
					fchmod(nd, st.st_mode & 07777) < 0))
				cb_warn(r->log, "'%s': cannot set owner/mode: %s", c, strerror(errno));
		}
		close(sfd);
		sfd = ns;
		if (nd < 0) {
			cb_error_errno("'%s' in '%s' is not a directory (a symlink is not followed)",
				       c, r->dest);
			goto out;
		}
		close(dfd);
		dfd = nd;
	}
	if (!c || faccessat(sfd, c, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
		ret = 0;            /* the root, or moved already */
		goto out;
	}
	if (renameat2(sfd, c, dfd, c, RENAME_NOREPLACE) == 0 ||
	    (errno == EEXIST && renameat2(sfd, c, dfd, c, RENAME_EXCHANGE) == 0))
		ret = 0;
	else
		cb_error_errno("cannot put '%s' in place in '%s'", path, r->dest);
out:
	close(sfd);
	close(dfd);
	free(p);
	return ret;
}

int restore_dest_finish(struct restore_job *r, const struct cb_restore_opts *o)
{
	if (o->n_paths > 0 && !r->dest_empty) {
		for (size_t i = 0; i < o->n_paths; i++)
			if (install_path(r, o->paths[i]) < 0)
				return -1;
		return restore_apply_root(r, r->dest_fd);
	}
	return r->in_dest ? swap_inside(r) : swap_beside(r, o);
}

int restore_statvfs(struct restore_job *r, struct statvfs *v)
{
	return r->stage_fd >= 0 ? fstatvfs(r->stage_fd, v) : statvfs(r->dest, v);
}

void restore_dest_release(struct restore_job *r)
{
	if (r->cwd_fd >= 0 && fchdir(r->cwd_fd) < 0)
		(void)chdir("/");
	if (r->stage_fd >= 0 && r->stage_name[0] && remove_at(r->stage_dir_fd, r->stage_name) < 0)
		cb_warn(r->log, "cannot remove '%s' completely: %s", r->stage_name, strerror(errno));
	if (r->stage_fd >= 0)
		close(r->stage_fd);
	if (r->dest_fd >= 0)
		close(r->dest_fd);
	if (r->parent_fd >= 0)
		close(r->parent_fd);
	if (r->cwd_fd >= 0)
		close(r->cwd_fd);
	free(r->dest_name);
}

/*
 * The archive has no size totals of its own: a first pass reads its tar
 * headers (decompressing it once without writing anything) and sums what
 * the entries take, then statvfs(DESTDIR) says whether it fits, in blocks
 * and in inodes. With --force a shortfall is only a warning (the estimate
 * is rough; the old tree stays until the new one is complete).
 */
int restore_space_check(struct restore_job *r, const struct cb_restore_opts *o, const struct restore_need *n)
{
	struct statvfs vfs;
	char need_s[32], avail_s[32];
	uint64_t avail;

	if (restore_statvfs(r, &vfs) < 0)
		return cb_error_errno("cannot stat file system of '%s'", r->dest);
	avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	cb_fmt_bytes(need_s, sizeof(need_s), n->bytes);
	cb_fmt_bytes(avail_s, sizeof(avail_s), avail);
	if (o->dry_run)
		cb_info(r->log, "dry run: would restore %llu entries, %s on disk into '%s' (%s "
			"available); nothing written", (unsigned long long)n->entries, need_s,
			o->destdir, avail_s);
	if (n->bytes <= avail && (!vfs.f_files || n->entries <= vfs.f_favail))
		return 0;
	if (n->bytes > avail)
		cb_error("not enough space in '%s': the archive needs %s, %s available", r->dest,
			 need_s, avail_s);
	else
		cb_error("not enough inodes in '%s': the archive has %llu entries, %llu inodes "
			 "available", r->dest, (unsigned long long)n->entries,
			 (unsigned long long)vfs.f_favail);
	if (!o->force)
		return -1;
	cb_warn(r->log, "%s (going on: --force)", cb_last_error());
	return 0;
}
