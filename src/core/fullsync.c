/* The guest's next final sync walks the whole tree: see include/cb_fullsync.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_fullsync.h"
#include "cb_private.h"
#include "cb_util.h"

/* The private directory's fd (*name: the flag's name in it), or -1. */
static int flag_dir(const char *tmpdir, const char *id, char **name)
{
	char *parent = cb_xasprintf("%s/cbackup", tmpdir);
	int fd = cb_private_dir_open(parent);

	free(parent);
	*name = cb_xasprintf("cbackup-%s.full-sync", id);
	return fd;
}

int cb_fullsync_set(const char *tmpdir, const char *id, const char *why)
{
	char *name, *text;
	int fd = flag_dir(tmpdir, id, &name), ret = -1;

	if (fd >= 0) {
		text = cb_xasprintf("%s\n", why);
		/* a flag left by an earlier run is replaced */
		if (unlinkat(fd, name, 0) < 0 && errno != ENOENT)
			cb_error_errno("cannot remove '%s/cbackup/%s'", tmpdir, name);
		else
			ret = cb_create_file_at(fd, name, text, strlen(text));
		free(text);
		close(fd);
	}
	free(name);
	return ret;
}

int cb_fullsync_pending(const char *tmpdir, const char *id)
{
	char *name;
	int fd = flag_dir(tmpdir, id, &name), ret = -1;
	struct stat st;

	if (fd >= 0) {
		ret = fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
		if (!ret && errno != ENOENT)
			ret = cb_error_errno("cannot stat '%s/cbackup/%s'", tmpdir, name);
		close(fd);
	}
	free(name);
	return ret;
}

int cb_fullsync_clear(const char *tmpdir, const char *id)
{
	char *name;
	int fd = flag_dir(tmpdir, id, &name), ret = -1;

	if (fd >= 0) {
		ret = 0;
		if (unlinkat(fd, name, 0) < 0 && errno != ENOENT)
			ret = cb_error_errno("cannot remove '%s/cbackup/%s'", tmpdir, name);
		close(fd);
	}
	free(name);
	return ret;
}
