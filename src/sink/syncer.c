/*
 * cb_syncer: background fdatasync + drop-behind of a file being written.
 * See include/cb_syncer.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "cb_syncer.h"
#include "cb_util.h"

struct cb_syncer {
	int fd;
	char *name;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t written;       /* reported by the writer */
	uint64_t synced;        /* on disk and dropped from the cache below this */
	int quit;
	int err;                /* errno of a failed sync, 0 if none */
};

static void *syncer_main(void *arg)
{
	struct cb_syncer *y = arg;

	pthread_mutex_lock(&y->mu);
	for (;;) {
		uint64_t from = y->synced, upto;

		while (!y->quit && y->written - y->synced < CB_SYNCER_CHUNK)
			pthread_cond_wait(&y->cv, &y->mu);
		if (y->quit)
			break;
		upto = y->written;
		pthread_mutex_unlock(&y->mu);
		/* everything written so far, and perhaps a little more */
		int rc = fdatasync(y->fd) < 0 ? errno : 0;
		if (rc == 0)
			posix_fadvise(y->fd, (off_t)from, (off_t)(upto - from), POSIX_FADV_DONTNEED);
		pthread_mutex_lock(&y->mu);
		if (rc != 0) {
			/* an error is the writer's to report; fdatasync not
			 * offered (EINVAL, ENOTSUP): the final fsync does it all */
			if (rc != EINVAL && rc != ENOTSUP)
				y->err = rc;
			y->synced = UINT64_MAX;   /* never wait for it again */
			pthread_cond_broadcast(&y->cv);
			break;
		}
		y->synced = upto;
		pthread_cond_broadcast(&y->cv);
	}
	pthread_mutex_unlock(&y->mu);
	return NULL;
}

static void syncer_free(struct cb_syncer *y)
{
	pthread_cond_destroy(&y->cv);
	pthread_mutex_destroy(&y->mu);
	free(y->name);
	free(y);
}

struct cb_syncer *cb_syncer_start(int fd, const char *name)
{
	struct cb_syncer *y = cb_xcalloc(1, sizeof(*y));

	y->fd = fd;
	y->name = cb_xstrdup(name);
	pthread_mutex_init(&y->mu, NULL);
	pthread_cond_init(&y->cv, NULL);
	if (cb_thread_start(&y->th, syncer_main, y) < 0) {
		syncer_free(y);
		return NULL;
	}
	return y;
}

static int sync_error(struct cb_syncer *y)
{
	errno = y->err;
	return cb_error_errno("cannot write '%s'", y->name);
}

int cb_syncer_written(struct cb_syncer *y, uint64_t written)
{
	int failed;

	if (!y)
		return 0;
	pthread_mutex_lock(&y->mu);
	y->written = written;
	if (written - y->synced >= CB_SYNCER_CHUNK)
		pthread_cond_broadcast(&y->cv);
	while (y->synced != UINT64_MAX && written - y->synced > CB_SYNCER_MAX_BEHIND)
		pthread_cond_wait(&y->cv, &y->mu);
	failed = y->err != 0;
	pthread_mutex_unlock(&y->mu);
	return failed ? sync_error(y) : 0;
}

/* Let a sync in progress end, then stop the thread. */
static void stop_thread(struct cb_syncer *y)
{
	pthread_mutex_lock(&y->mu);
	y->quit = 1;
	pthread_cond_broadcast(&y->cv);
	pthread_mutex_unlock(&y->mu);
	pthread_join(y->th, NULL);
}

int cb_syncer_stop(struct cb_syncer *y)
{
	int ret;

	if (!y)
		return 0;
	stop_thread(y);
	ret = y->err ? sync_error(y) : 0;
	syncer_free(y);
	return ret;
}

void cb_syncer_cancel(struct cb_syncer *y)
{
	if (!y)
		return;
	stop_thread(y);
	syncer_free(y);
}
