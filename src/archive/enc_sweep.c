/*
 * Views of readers that were killed (SIGKILL, a crash: no cleanup ran)
 * hold a plain copy of an archive on the tmpdir. A view's owner holds an
 * flock on its directory for the view's life (the kernel drops it when
 * the process dies, however it dies, and a mount's daemon inherits it);
 * it marks the directory once the lock is held. The next reader removes
 * a marked view whose lock it can take: its owner is gone. An unmarked
 * one may be a reader between mkdtemp and its lock: left alone (empty).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_rmtree.h"
#include "enc_int.h"
#include "cb_util.h"

#define VIEW_PREFIX "cbackup-view."

int enc_view_lock(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), mark = -1;

	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0 ||
	    (mark = openat(fd, ENC_VIEW_MARK, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			   0600)) < 0) {
		cb_error_errno("cannot lock the private directory '%s'", dir);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(mark);
	return fd;
}

/* 1: dir/name is a view of ours whose owner is gone (its lock taken,
 * and held in *fd until it is removed). */
static int view_abandoned(int dfd, const char *name, int *fd)
{
	struct stat st;

	*fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0)
		return 0;
	if (fstat(*fd, &st) == 0 && st.st_uid == geteuid() && flock(*fd, LOCK_EX | LOCK_NB) == 0 &&
	    faccessat(*fd, ENC_VIEW_MARK, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return 1;
	close(*fd);
	*fd = -1;
	return 0;
}

void cb_enc_views_sweep(const char *tmpdir, struct cb_log *log)
{
	size_t k = strlen(VIEW_PREFIX);
	int dfd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;

	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		int fd;
		char *p;
		if (strncmp(de->d_name, VIEW_PREFIX, k) || strlen(de->d_name) != k + 6 ||
		    !view_abandoned(dfd, de->d_name, &fd))
			continue;
		p = cb_xasprintf("%s/%s", tmpdir, de->d_name);
		cb_info(log, "removing '%s', left by a reader that was killed", p);
		cb_remove_tree(p);
		free(p);
		close(fd);
	}
	closedir(d);
}
