/*
 * cb_open_regular: archives, catalogs and side files in a dump directory
 * others may write to. See include/cb_util.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_util.h"

static const char *type_name(mode_t m)
{
	return S_ISFIFO(m) ? "a FIFO" : S_ISDIR(m) ? "a directory" : S_ISCHR(m) ? "a character device"
	       : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* The error for a name that is there but no regular file (errno EINVAL). */
static int not_regular(const char *what, const char *path, const char *kind)
{
	cb_error("%s%s'%s' is %s, not a regular file", what, *what ? " " : "", path, kind);
	errno = EINVAL;
	return -1;
}

static int open_regular(const char *path, int flags, const char *what, struct stat *st)
{
	struct stat sb;
	int fd = open(path, flags | O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	int e = errno;

	if (!st)
		st = &sb;
	if (fd < 0 && e == ELOOP && (flags & O_NOFOLLOW))
		return not_regular(what, path, "a symbolic link");
	if (fd < 0) {
		cb_error("cannot open %s%s'%s': %s", what, *what ? " " : "", path, strerror(e));
		errno = e;
		return -1;
	}
	if (fstat(fd, st) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return cb_error_errno("cannot stat '%s'", path);
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return not_regular(what, path, type_name(st->st_mode));
	}
	/* a regular file: blocking reads as usual from here */
	if (!(flags & O_NONBLOCK))
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

int cb_open_regular(const char *path, int flags, const char *what, struct stat *st)
{
	return open_regular(path, flags | O_NOFOLLOW, what, st);
}

int cb_open_regular_given(const char *path, const char *what, struct stat *st)
{
	return open_regular(path, 0, what, st);
}
