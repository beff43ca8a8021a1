/* cb_lock: flock-based locks. See include/cb_lock.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cb_cleanup.h"
#include "cb_lock.h"
#include "cb_private.h"
#include "cb_util.h"

const char *cb_lock_dir(void)
{
	const char *d = getenv("CBACKUP_LOCK_DIR");
	return d && *d ? d : "/run/cbackup";
}

int cb_lock_dir_check(void)
{
	int fd = cb_private_dir_open(cb_lock_dir());

	if (fd < 0)
		return cb_error_prefix("lock directory");
	close(fd);
	return 0;
}

/* Never through a symlink, never anything but a plain file. */
static int open_lock_file(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	struct stat st;

	if (fd < 0)
		return cb_error_errno("cannot open lock file '%s'", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return cb_error("lock file '%s' is not a regular file", path);
	}
	return fd;
}

int cb_lock_acquire(struct cb_lock *l, const char *path, double wait_seconds)
{
	double deadline = cb_now() + wait_seconds;
	struct timespec nap = { 0, 100 * 1000 * 1000 };

	l->fd = open_lock_file(path);
	if (l->fd < 0)
		return -1;
	l->path = cb_xstrdup(path);
	for (;;) {
		if (flock(l->fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR) {
			cb_error_errno("cannot lock '%s'", path);
			break;
		}
		if (cb_check_interrupt() < 0)
			break;
		if (cb_now() >= deadline) {
			cb_lock_release(l);
			return 1;
		}
		nanosleep(&nap, NULL);
	}
	cb_lock_release(l);
	return -1;
}

void cb_lock_release(struct cb_lock *l)
{
	if (l->fd >= 0)
		close(l->fd);   /* closing drops the flock */
	l->fd = -1;
	free(l->path);
	l->path = NULL;
}

int cb_lock_guest(struct cb_lock *local, struct cb_lock *store, const char *dumpdir,
		  const char *type, const char *id)
{
	char *lp = cb_xasprintf("%s/cbackup-%s.lock", cb_lock_dir(), id);
	char *sp = cb_xasprintf("%s/.cbackup-%s-%s.lock", dumpdir, type, id);
	int ret = cb_lock_acquire(local, lp, 0);

	if (ret == 0 && store) {
		ret = cb_lock_acquire(store, sp, 0);
		if (ret == 1) {
			cb_error("lock '%s' held", sp);
			ret = 2;
		}
		if (ret != 0)
			cb_lock_release(local);
	}
	free(lp);
	free(sp);
	return ret;
}
