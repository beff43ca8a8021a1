/* cb_private: root-only directories, exclusive files. See include/cb_private.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_private.h"
#include "cb_util.h"

#define PRIVATE_NAME "cbackup"
#define MARKER_SUFFIX ".owner"

static int check_private(int fd, const char *path)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return cb_error_errno("cannot stat '%s'", path);
	if (!S_ISDIR(st.st_mode))
		return cb_error("'%s' is not a directory", path);
	if (st.st_uid != geteuid())
		return cb_error("'%s' is owned by uid %u, not by uid %u (root): refusing to use it",
				path, (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & 077)
		return cb_error("'%s' is accessible by group or others (mode %04o, must be 0700): "
				"refusing to use it", path, (unsigned)(st.st_mode & 07777));
	return 0;
}

static int is_symlink(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

int cb_private_dir_open(const char *path)
{
	int created = mkdir(path, 0700) == 0, fd;

	if (!created && errno != EEXIST)
		return cb_error_errno("cannot create private directory '%s'", path);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR) && is_symlink(path))
		return cb_error("'%s' is a symlink, not a directory: refusing to use it", path);
	if (fd < 0)
		return cb_error_errno("cannot open private directory '%s'", path);
	/* ours, just made: the umask may have taken bits 0700 needs */
	if (created && fchmod(fd, 0700) < 0) {
		cb_error_errno("cannot set mode 0700 on '%s'", path);
		close(fd);
		return -1;
	}
	if (check_private(fd, path) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int cb_create_excl_at(int dirfd, const char *name, mode_t mode)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);

	if (fd >= 0 && fchmod(fd, mode) < 0) {
		int e = errno;
		close(fd);
		unlinkat(dirfd, name, 0);
		errno = e;
		return -1;
	}
	return fd;
}

int cb_create_excl(const char *path, mode_t mode)
{
	return cb_create_excl_at(AT_FDCWD, path, mode);
}

int cb_create_file_at(int dirfd, const char *name, const void *data, size_t len)
{
	int fd = cb_create_excl_at(dirfd, name, 0644);
	int ret = 0;

	if (fd < 0)
		return cb_error_errno("cannot create '%s'", name);
	if (cb_write_all(fd, data, len) < 0 || fsync(fd) < 0)
		ret = cb_error_errno("cannot write '%s'", name);
	if (close(fd) < 0 && ret == 0)
		ret = cb_error_errno("cannot write '%s'", name);
	if (ret < 0)
		unlinkat(dirfd, name, 0);
	return ret;
}

int cb_write_file_replace(const char *path, const char *text, mode_t mode)
{
	return cb_write_file_replace_bytes(path, text, strlen(text), mode);
}

int cb_write_file_replace_bytes(const char *path, const void *data, size_t len, mode_t mode)
{
	char *tmp = cb_xasprintf("%s.tmp", path);
	int fd, ret = 0;

	if (unlink(tmp) < 0 && errno != ENOENT)
		ret = cb_error_errno("cannot remove '%s'", tmp);
	fd = ret < 0 ? -1 : cb_create_excl(tmp, mode);
	if (ret == 0 && fd < 0)
		ret = cb_error_errno("cannot create '%s'", tmp);
	if (ret == 0 && (cb_write_all(fd, data, len) < 0 || fsync(fd) < 0))
		ret = cb_error_errno("cannot write '%s'", tmp);
	if (fd >= 0 && close(fd) < 0 && ret == 0)
		ret = cb_error_errno("cannot write '%s'", tmp);
	if (ret == 0 && rename(tmp, path) < 0)
		ret = cb_error_errno("cannot rename '%s'", tmp);
	if (ret < 0 && fd >= 0)
		unlink(tmp);
	free(tmp);
	return ret;
}

/* ---- staging directories ---- */

/*
 * The marker beside NAME holds the device, inode and ctime of the directory
 * cbackup made, recorded again at the end of each run: a directory made
 * later at the same name (even on a recycled inode number) or changed
 * since has another ctime.
 */
static char *marker_text(const struct stat *st)
{
	return cb_xasprintf("%llu %llu %lld.%09ld\n", (unsigned long long)st->st_dev,
			    (unsigned long long)st->st_ino, (long long)st->st_ctim.tv_sec,
			    st->st_ctim.tv_nsec);
}

static int marker_matches(int pfd, const char *name, const struct stat *dir)
{
	char *marker = cb_xasprintf("%s%s", name, MARKER_SUFFIX), buf[128], *want;
	int fd = openat(pfd, marker, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), same;
	struct stat st;
	ssize_t n = -1;

	free(marker);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid())
		n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	want = marker_text(dir);
	same = !strcmp(buf, want) && S_ISDIR(dir->st_mode) && dir->st_uid == geteuid();
	free(want);
	return same;
}

static int write_marker(int pfd, const char *name, const char *path)
{
	char *marker = cb_xasprintf("%s%s", name, MARKER_SUFFIX), *text = NULL;
	struct stat st;
	int fd = -1, ret = 0;

	if (unlinkat(pfd, marker, 0) < 0 && errno != ENOENT)
		ret = cb_error_errno("cannot record staging directory '%s'", path);
	if (ret == 0 && fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		ret = cb_error_errno("cannot stat staging directory '%s'", path);
	if (ret == 0)
		fd = openat(pfd, marker, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (ret == 0 && fd < 0)
		ret = cb_error_errno("cannot record staging directory '%s'", path);
	if (ret == 0) {
		text = marker_text(&st);
		if (cb_write_all(fd, text, strlen(text)) < 0)
			ret = cb_error_errno("cannot record staging directory '%s'", path);
	}
	if (fd >= 0)
		close(fd);
	free(text);
	free(marker);
	return ret;
}

/* Whatever is at NAME (and its marker) goes: cbackup adopts nothing. */
static int clear_name(int pfd, const char *name, const char *path)
{
	char *marker = cb_xasprintf("%s%s", name, MARKER_SUFFIX);
	int ret = 0;

	if (unlinkat(pfd, marker, 0) < 0 && errno != ENOENT)
		ret = cb_error_errno("cannot remove '%s%s'", path, MARKER_SUFFIX);
	free(marker);
	return ret < 0 ? -1 : cb_remove_tree(path);
}

static int prepare_in(int pfd, const char *name, const char *path, int reuse, int *reused)
{
	struct stat st;

	*reused = reuse && fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		  marker_matches(pfd, name, &st);
	if (*reused)
		return 0;
	if (clear_name(pfd, name, path) < 0)
		return -1;
	if (mkdirat(pfd, name, 0700) < 0)
		return cb_error_errno("cannot create staging directory '%s'", path);
	return write_marker(pfd, name, path);
}

int cb_stage_dir_prepare(const char *tmpdir, const char *id, int reuse, char **path_out,
			 int *reused)
{
	char *parent = cb_xasprintf("%s/%s", tmpdir, PRIVATE_NAME);
	char *name = cb_xasprintf("cbackup-%s.stage", id);
	int pfd = cb_private_dir_open(parent), ret = -1;

	*path_out = cb_xasprintf("%s/%s", parent, name);
	*reused = 0;
	if (pfd >= 0) {
		ret = prepare_in(pfd, name, *path_out, reuse, reused);
		close(pfd);
		if (ret < 0)
			rmdir(parent);   /* ours, checked: leave the tmpdir as found */
	} else {
		cb_error_prefix("staging");
	}
	free(parent);
	free(name);
	return ret;
}

int cb_stage_dir_record(const char *stage_path)
{
	char *parent = cb_xstrdup(stage_path), *slash = strrchr(parent, '/');
	int pfd = -1, ret = -1;

	if (slash) {
		*slash = '\0';
		pfd = cb_private_dir_open(parent);
	}
	if (pfd >= 0) {
		ret = write_marker(pfd, slash + 1, stage_path);
		close(pfd);
	}
	free(parent);
	return ret;
}

int cb_stage_dir_remove(const char *stage_path)
{
	char *marker = cb_xasprintf("%s%s", stage_path, MARKER_SUFFIX);
	char *parent = cb_xstrdup(stage_path), *slash = strrchr(parent, '/');
	int ret = cb_remove_tree(stage_path);

	unlink(marker);
	/* the tmpdir is left as it was found; a kept staging copy stays */
	if (ret == 0 && slash) {
		*slash = '\0';
		rmdir(parent);
	}
	free(parent);
	free(marker);
	return ret;
}
