/* cb_trust: files root may act on. See include/cb_trust.h. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cb_trust.h"
#include "cb_util.h"

static void owner_name(uid_t uid, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];

	if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) == 0 && res)
		snprintf(buf, len, "%s (uid %u)", res->pw_name, (unsigned)uid);
	else
		snprintf(buf, len, "uid %u", (unsigned)uid);
}

/* dir: a directory (sticky ones may be writable by all) or the file. */
static int bad_modes(const struct stat *st, int dir, int root_group)
{
	mode_t w = root_group && st->st_gid == 0 ? 002 : 022;

	if (st->st_uid != 0 && st->st_uid != geteuid())
		return 1;
	return (st->st_mode & w) && !(dir && (st->st_mode & S_ISVTX));
}

static int refuse(const char *what, const char *file, const char *dir, const struct stat *st)
{
	char owner[300];

	owner_name(st->st_uid, owner, sizeof(owner));
	if (dir)
		return cb_error("%s '%s' is not trusted: its directory '%s' is owned by %s, mode "
				"%04o (running as root, it must be root's and writable by no one "
				"else)", what, file, dir, owner, (unsigned)(st->st_mode & 07777));
	return cb_error("%s '%s' is not trusted: owned by %s, mode %04o (running as root, it "
			"must be root's and writable by no one else)", what, file, owner,
			(unsigned)(st->st_mode & 07777));
}

/* Every directory from the one holding path up to "/". */
static int check_dirs(const char *path, const char *what, const char *file, int root_group)
{
	char *copy = cb_xstrdup(path), *dir = realpath(dirname(copy), NULL);
	struct stat st;
	int ret = 0;

	free(copy);
	if (!dir)
		return cb_error_errno("cannot resolve the directory of %s '%s'", what, file);
	for (;;) {
		char *slash;
		if (stat(dir, &st) < 0) {
			ret = cb_error_errno("cannot stat '%s'", dir);
			break;
		}
		if (bad_modes(&st, 1, root_group)) {
			ret = refuse(what, file, dir, &st);
			break;
		}
		slash = strrchr(dir, '/');
		if (!slash || slash == dir) {
			if (dir[1] == '\0')
				break;
			dir[1] = '\0';   /* last, "/" itself */
			continue;
		}
		*slash = '\0';
	}
	free(dir);
	return ret;
}

static int trust(int fd, const char *path, const char *what, int root_group)
{
	struct stat st;
	char *real;
	int ret;

	if (geteuid() != 0)
		return 0;
	if (fstat(fd, &st) < 0)
		return cb_error_errno("cannot stat %s '%s'", what, path);
	if (bad_modes(&st, 0, root_group))
		return refuse(what, path, NULL, &st);
	/* where the name is, and where a symlink leads */
	if (check_dirs(path, what, path, root_group) < 0)
		return -1;
	real = realpath(path, NULL);
	if (!real)
		return cb_error_errno("cannot resolve %s '%s'", what, path);
	ret = check_dirs(real, what, path, root_group);
	free(real);
	return ret;
}

int cb_trust_file(int fd, const char *path, const char *what)
{
	return trust(fd, path, what, 0);
}

int cb_trust_file_root_group(int fd, const char *path, const char *what)
{
	return trust(fd, path, what, 1);
}
