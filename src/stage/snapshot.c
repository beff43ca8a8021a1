/*
 * cb_snapshot: btrfs read-only snapshots through the kernel's ioctls (no
 * `btrfs` command), behind the backend interface. See include/cb_snapshot.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <linux/btrfs.h>
#include <linux/fs.h>
#include <linux/magic.h>

#include "cb_cleanup.h"
#include "cb_rmtree.h"
#include "cb_snapshot.h"
#include "cb_util.h"

/* Every btrfs subvolume's root directory has this inode number. */
#define BTRFS_SUBVOL_ROOT_INO 256

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static const char *fs_name(long type)
{
	static const struct { long magic; const char *name; } known[] = {
		{ BTRFS_SUPER_MAGIC, "btrfs" }, { EXT4_SUPER_MAGIC, "ext4" },
		{ XFS_SUPER_MAGIC, "xfs" }, { TMPFS_MAGIC, "tmpfs" }, { OVERLAYFS_SUPER_MAGIC, "overlayfs" },
		{ NFS_SUPER_MAGIC, "nfs" }, { 0, NULL }
	};

	for (int i = 0; known[i].name; i++)
		if (known[i].magic == type)
			return known[i].name;
	return "a file system without a snapshot backend";
}

/* The snapshot goes beside the volume: its parent must be on the same
 * mount (a subvolume mounted on its own has no room beside it). */
static int same_mount_as_parent(const char *volume)
{
	struct statx a, b;
	char *parent = cb_xasprintf("%s/..", volume);
	int same = statx(AT_FDCWD, volume, 0, STATX_MNT_ID, &a) == 0 &&
		   statx(AT_FDCWD, parent, 0, STATX_MNT_ID, &b) == 0 &&
		   (a.stx_mask & b.stx_mask & STATX_MNT_ID) && a.stx_mnt_id == b.stx_mnt_id;

	free(parent);
	return same;
}

static int btrfs_detect(const char *volume, char *why, size_t len)
{
	struct statfs fs;
	struct stat st;

	if (statfs(volume, &fs) < 0 || stat(volume, &st) < 0)
		return snprintf(why, len, "'%s': %s", volume, strerror(errno)), 0;
	if (fs.f_type != BTRFS_SUPER_MAGIC)
		return snprintf(why, len, "'%s' is on %s", volume, fs_name(fs.f_type)), 0;
	if (st.st_ino != BTRFS_SUBVOL_ROOT_INO)
		return snprintf(why, len, "'%s' is a directory on btrfs, not a subvolume", volume), 0;
	if (!same_mount_as_parent(volume))
		return snprintf(why, len, "'%s' is the top of its mount: no room beside it for a "
				"snapshot", volume), 0;
	return 1;
}

static int btrfs_create(struct cb_snapshot *s)
{
	struct btrfs_ioctl_vol_args_v2 args;

	memset(&args, 0, sizeof(args));
	args.fd = s->vol_fd;
	args.flags = BTRFS_SUBVOL_RDONLY;
	snprintf(args.name, sizeof(args.name), "%s", s->name);
	if (ioctl(s->dir_fd, BTRFS_IOC_SNAP_CREATE_V2, &args) < 0)
		return cb_error_errno("cannot create snapshot '%s'", s->path);
	return 0;
}

/* No allocation, no stdio: the cleanup stack calls this from a handler. */
static int btrfs_remove(int dir_fd, const char *name)
{
	struct btrfs_ioctl_vol_args_v2 v2;
	struct btrfs_ioctl_vol_args v1;
	size_t n = strlen(name);

	if (n >= sizeof(v2.name) || n >= sizeof(v1.name))
		return errno = ENAMETOOLONG, -1;
	memset(&v2, 0, sizeof(v2));
	memcpy(v2.name, name, n);
	if (ioctl(dir_fd, BTRFS_IOC_SNAP_DESTROY_V2, &v2) == 0)
		return 0;
	if (errno != ENOTTY && errno != EOPNOTSUPP && errno != EINVAL)
		return -1;
	memset(&v1, 0, sizeof(v1));   /* kernels before 5.7 */
	memcpy(v1.name, name, n);
	return ioctl(dir_fd, BTRFS_IOC_SNAP_DESTROY, &v1);
}

static int btrfs_is_snapshot(int dir_fd, const char *name)
{
	struct statfs fs;
	struct stat st;
	int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int yes = fd >= 0 && fstatfs(fd, &fs) == 0 && fstat(fd, &st) == 0 &&
		  fs.f_type == BTRFS_SUPER_MAGIC && st.st_ino == BTRFS_SUBVOL_ROOT_INO;

	if (fd >= 0)
		close(fd);
	return yes;
}

static const struct cb_snap_backend btrfs_backend = {
	"btrfs", btrfs_detect, btrfs_create, btrfs_remove, btrfs_is_snapshot,
};

/* ZFS and LVM-thin would go here. */
static const struct cb_snap_backend *const backends[] = { &btrfs_backend, NULL };

int cb_snapshot_detect(const char *volume, const struct cb_snap_backend **be, char *why,
		       size_t len)
{
	why[0] = '\0';
	for (int i = 0; backends[i]; i++) {
		if (backends[i]->detect(volume, why, len)) {
			*be = backends[i];
			return 1;
		}
	}
	return 0;
}

/* ---- one volume's snapshot ---- */

static void snap_cleanup(void *arg)
{
	struct cb_snapshot *s = arg;

	if (s->exists && s->be->remove(s->dir_fd, s->name) == 0)
		s->exists = 0;
	if (s->has_dir && !s->exists && unlinkat(s->parent_fd, s->dir_name, AT_REMOVEDIR) == 0)
		s->has_dir = 0;
}

/* Only a directory root made with our mode is ours to empty: anyone else's
 * .cbackup-snap-* is refused, never followed or removed. */
static int open_own_dir(struct cb_snapshot *s, int *fd)
{
	struct stat st;

	*fd = openat(s->parent_fd, s->dir_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0 && errno == ENOENT)
		return 0;
	if (*fd < 0)
		return cb_error_errno("cannot open snapshot directory '%s'", s->dir);
	if (fstat(*fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 07777) != 0700) {
		close(*fd);
		*fd = -1;
		return cb_error("'%s' is in the way and is not cbackup's (not a root-only directory "
				"owned by root): remove it", s->dir);
	}
	return 1;
}

static int remove_stale_entry(struct cb_snapshot *s, int fd, const char *name)
{
	char *path = cb_xasprintf("%s/%s", s->dir, name);
	int ret = 0;

	if (s->be->is_snapshot(fd, name)) {
		if (s->be->remove(fd, name) < 0)
			ret = cb_error_errno("cannot remove stale snapshot '%s'", path);
	} else if (unlinkat(fd, name, 0) < 0 && cb_remove_tree(path) < 0) {
		ret = -1;
	}
	free(path);
	return ret;
}

/* What a killed run left (vzdump removes its stale snapshots too). */
static int remove_stale(struct cb_snapshot *s, struct cb_log *log)
{
	struct dirent *de;
	DIR *d;
	int fd, ret = open_own_dir(s, &fd);

	if (ret <= 0)
		return ret;
	ret = 0;
	cb_info(log, "removing stale snapshot directory '%s' left by an interrupted run", s->dir);
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return cb_error_errno("cannot read '%s'", s->dir);
	}
	while (ret == 0 && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			ret = remove_stale_entry(s, dirfd(d), de->d_name);
	closedir(d);
	if (ret == 0 && unlinkat(s->parent_fd, s->dir_name, AT_REMOVEDIR) < 0)
		ret = cb_error_errno("cannot remove '%s'", s->dir);
	return ret;
}

static void name_paths(struct cb_snapshot *s, const char *volume, const char *id, unsigned index)
{
	char *copy = cb_xstrdup(volume), *parent, *base;
	size_t n = strlen(copy);

	while (n > 1 && copy[n - 1] == '/')
		copy[--n] = '\0';
	base = cb_xstrdup(basename(copy));
	parent = dirname(copy);
	if (index)
		snprintf(s->dir_name, sizeof(s->dir_name), ".cbackup-snap-%s-mp%u", id, index);
	else
		snprintf(s->dir_name, sizeof(s->dir_name), ".cbackup-snap-%s", id);
	snprintf(s->name, sizeof(s->name), "%s", base);
	s->volume = cb_xstrdup(volume);
	s->dir = cb_xasprintf("%s/%s", strcmp(parent, "/") ? parent : "", s->dir_name);
	s->path = cb_xasprintf("%s/%s", s->dir, s->name);
	free(base);
	free(copy);
}

static int open_parent(struct cb_snapshot *s)
{
	char *parent = cb_xasprintf("%s/..", s->volume);

	s->vol_fd = open(s->volume, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	s->parent_fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(parent);
	if (s->vol_fd < 0 || s->parent_fd < 0)
		return cb_error_errno("cannot open volume '%s' or its parent", s->volume);
	return 0;
}

static int make_dir(struct cb_snapshot *s)
{
	int ret;

	if (mkdirat(s->parent_fd, s->dir_name, 0700) < 0)
		return cb_error_errno("cannot create snapshot directory '%s'", s->dir);
	s->has_dir = 1;
	ret = open_own_dir(s, &s->dir_fd);   /* checks what mkdir made (umask, races) */
	return ret == 1 ? 0 : ret == 0 ? cb_error("'%s' vanished", s->dir) : -1;
}

int cb_snapshot_prepare(struct cb_snapshot *s, const struct cb_snap_backend *be,
			const char *volume, const char *id, unsigned index, struct cb_log *log)
{
	memset(s, 0, sizeof(*s));
	s->be = be;
	s->parent_fd = s->dir_fd = s->vol_fd = s->snap_fd = s->cleanup_handle = -1;
	name_paths(s, volume, id, index);
	if (open_parent(s) < 0 || remove_stale(s, log) < 0)
		return -1;
	s->cleanup_handle = cb_cleanup_push(snap_cleanup, s);
	if (make_dir(s) < 0)
		return -1;
	/* Taking a snapshot writes out the volume's dirty data and commits a
	 * transaction: done now, while the guest runs, the one in the freeze
	 * has only what was written since. */
	if (syncfs(s->vol_fd) < 0)
		cb_warn(log, "cannot sync '%s' before its snapshot: %s", s->volume, strerror(errno));
	return 0;
}

/* The snapshot just made, by its name in our own directory's fd: the
 * root of a subvolume on the volume's file system, or refused. */
static int open_snapshot(struct cb_snapshot *s)
{
	struct stat st;

	s->snap_fd = openat(s->dir_fd, s->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s->snap_fd < 0)
		return cb_error_errno("cannot open snapshot '%s'", s->path);
	if (fstat(s->snap_fd, &st) < 0 || st.st_ino != BTRFS_SUBVOL_ROOT_INO)
		return cb_error("'%s' is not the snapshot cbackup made", s->path);
	return 0;
}

int cb_snapshot_create(struct cb_snapshot *s)
{
	if (s->be->create(s) < 0)
		return -1;
	s->exists = 1;
	return open_snapshot(s);
}

int cb_snapshot_fd(const struct cb_snapshot *s)
{
	return s->snap_fd;
}

int cb_snapshot_check(const struct cb_snapshot *s)
{
	struct stat now, ours;

	if (fstat(s->dir_fd, &ours) < 0)
		return cb_error_errno("cannot stat snapshot directory '%s'", s->dir);
	if (fstatat(s->parent_fd, s->dir_name, &now, AT_SYMLINK_NOFOLLOW) < 0)
		return cb_error_errno("snapshot directory '%s' was replaced while the backup ran",
				      s->dir);
	if (now.st_dev != ours.st_dev || now.st_ino != ours.st_ino)
		return cb_error("snapshot directory '%s' was replaced while the backup ran (it is "
				"now %s): the backup is refused", s->dir,
				S_ISLNK(now.st_mode) ? "a symlink" : S_ISDIR(now.st_mode) ?
				"another directory" : "another file");
	return 0;
}

const char *cb_snapshot_path(const struct cb_snapshot *s)
{
	return s->path;
}

int cb_snapshot_remove(struct cb_snapshot *s)
{
	int had = s->exists;

	if (!s->be)
		return 0;
	cb_cleanup_pop(s->cleanup_handle, 0);
	s->cleanup_handle = -1;
	snap_cleanup(s);
	if (s->exists)
		return cb_error_errno("cannot remove snapshot '%s'", s->path);
	if (s->has_dir)
		return cb_error_errno("cannot remove snapshot directory '%s'", s->dir);
	return had;
}

void cb_snapshot_release(struct cb_snapshot *s)
{
	if (!s->be)
		return;   /* never prepared: nothing opened or allocated */
	cb_snapshot_remove(s);
	close_fd(&s->parent_fd);
	close_fd(&s->dir_fd);
	close_fd(&s->vol_fd);
	close_fd(&s->snap_fd);
	free(s->volume);
	free(s->dir);
	free(s->path);
	memset(s, 0, sizeof(*s));
	s->parent_fd = s->dir_fd = s->vol_fd = s->snap_fd = s->cleanup_handle = -1;
}

/* ---- reflink staging ---- */

/* The first regular file in DIR or one level below (bounded: a probe). */
static int find_regular(int dir, int depth, int *budget)
{
	DIR *d = fdopendir(dup(dir));
	struct dirent *de;
	int fd = -1;

	while (d && fd < 0 && (*budget)-- > 0 && (de = readdir(d))) {
		if (de->d_name[0] == '.' && (!de->d_name[1] || !strcmp(de->d_name, "..")))
			continue;
		int f = openat(dir, de->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat st;
		if (f >= 0 && fstat(f, &st) == 0 && S_ISREG(st.st_mode))
			fd = f, f = -1;
		else if (f >= 0 && S_ISDIR(st.st_mode) && depth > 0)
			fd = find_regular(f, depth - 1, budget);
		if (f >= 0)
			close(f);
	}
	if (d)
		closedir(d);
	return fd;
}

int cb_reflink_possible(const char *src, const char *tmpdir)
{
	int budget = 1000, dir = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int in = dir < 0 ? -1 : find_regular(dir, 2, &budget);
	int out = in < 0 ? -1 : open(tmpdir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	int yes = out >= 0 && ioctl(out, FICLONE, in) == 0;

	close_fd(&dir);
	close_fd(&in);
	close_fd(&out);
	return yes;
}
