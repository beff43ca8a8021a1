/*
 * Staging engine: the workers of pass 1 (stage-workers).
 *
 * One thread walks the source as before: it lists directories, creates
 * every staged entry in order (directories, special files, hardlinks, and
 * each regular file's staged inode, opened O_EXCL), sets directories'
 * metadata after their entries and builds the index alone, so that
 * nothing on the index or the hardlink map needs a lock. What it hands to
 * the workers is the costly part of a regular file: its data (clone, copy
 * or sparse copy) and its metadata (owner, mode, xattrs, chattr flags,
 * times), both on the two open fds it passes. None of that touches the
 * directory the file is in, so the directory's times, set by the walker,
 * stay as set.
 *
 * The queue is bounded (QUEUE_LEN jobs, two fds each): the walker waits
 * when the workers are behind, so at most 2 * (QUEUE_LEN + workers) fds
 * are open, whatever the tree's size or depth. Each worker has its own
 * buffers, counters and name for messages (a view: a copy of the struct
 * cb_stage with those replaced); bwlimit is one bucket behind a mutex;
 * each worker takes the walker's I/O priority and nice value (ioprio is
 * per thread on Linux). The first error a worker meets stops the others
 * (they close what is queued) and is reported by the walker once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cb_cleanup.h"
#include "stage_int.h"

#define QUEUE_LEN 64
#define BATCH 8                 /* jobs a worker takes at once */
#define IOPRIO_WHO_PROCESS 1

struct pool_job {
	int in, out, fresh;
	struct stat sb;
	char *rel;                  /* "/a/b" for messages */
};

struct stage_pool {
	pthread_mutex_t mu;
	pthread_cond_t not_empty, not_full;
	struct pool_job q[QUEUE_LEN];
	size_t head, n;
	int done;                   /* the walker pushes no more */
	int idle;                   /* workers waiting for jobs */
	int walker_waits;           /* the walker waits for room */
	int failed;
	char err[1024];
	uint64_t bytes;             /* copied by all workers (progress) */
	int ioprio, nice;
	pthread_mutex_t throttle_mu;
	size_t workers;
	pthread_t *th;
	struct cb_stage **views;
	struct cb_stage_stats *stats;
};

static struct cb_stage *view_new(struct cb_stage *st, struct stage_pool *p, size_t i)
{
	struct cb_stage *w = cb_xmalloc(sizeof(*w));

	*w = *st;
	w->stats = &p->stats[i];
	w->buf = cb_xmalloc(STAGE_BUF_SIZE);
	w->xbuf = cb_xmalloc(STAGE_XATTR_MAX);
	w->rel = NULL;
	w->rel_len = w->rel_cap = 0;
	w->since_check = 0;
	w->side_fd = -1;
	/* side store IDs unique across workers: each its own range */
	w->side_seq = (unsigned)(i + 1) << 24;
	w->pool = NULL;
	w->throttle_shared = &st->throttle;
	w->throttle_mu = &p->throttle_mu;
	return w;
}

static void view_free(struct cb_stage *w)
{
	if (w->side_fd >= 0)
		close(w->side_fd);
	free(w->buf);
	free(w->xbuf);
	free(w->rel);
	free(w);
}

static void fail_locked(struct stage_pool *p, const char *msg)
{
	if (!p->failed)
		snprintf(p->err, sizeof(p->err), "%s", msg);
	p->failed = 1;
	pthread_cond_broadcast(&p->not_full);
	pthread_cond_broadcast(&p->not_empty);
}

static int run_job(struct cb_stage *w, struct pool_job *j)
{
	free(w->rel);
	w->rel = j->rel;
	w->rel_len = strlen(j->rel);
	w->rel_cap = w->rel_len + 1;
	j->rel = NULL;
	/* a signal stops the copy between files as it does the walk */
	if (cb_check_interrupt() < 0 || stage_copy_data(w, j->in, j->out, &j->sb) < 0)
		return -1;
	return stage_meta(w, j->in, j->out, -1, -1, NULL, &j->sb, j->fresh);
}

/* Take up to BATCH jobs (under the lock): fewer hand-overs per file. */
static size_t take_jobs(struct stage_pool *p, struct pool_job *out)
{
	size_t k = 0;

	while (p->n && k < BATCH) {
		out[k++] = p->q[p->head];
		p->head = (p->head + 1) % QUEUE_LEN;
		p->n--;
	}
	if (k && p->walker_waits)
		pthread_cond_signal(&p->not_full);
	return k;
}

static void close_job(struct pool_job *j)
{
	close(j->in);
	close(j->out);
	free(j->rel);
	j->rel = NULL;
}

static void *worker(void *arg)
{
	struct cb_stage *w = arg;
	struct stage_pool *p = w->pool_of;
	struct pool_job jobs[BATCH];
	size_t k;

	syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, p->ioprio);
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), p->nice);
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->n && !p->done) {
			p->idle++;
			pthread_cond_wait(&p->not_empty, &p->mu);
			p->idle--;
		}
		if (!(k = take_jobs(p, jobs)))
			break;
		int failed = p->failed;   /* an error elsewhere: only close */
		pthread_mutex_unlock(&p->mu);
		for (size_t i = 0; i < k; i++) {
			int r = failed ? 0 : run_job(w, &jobs[i]);
			close_job(&jobs[i]);
			if (r < 0) {
				pthread_mutex_lock(&p->mu);
				fail_locked(p, cb_last_error());
				pthread_mutex_unlock(&p->mu);
				failed = 1;
			}
		}
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int stage_pool_start(struct cb_stage *st, int workers)
{
	struct stage_pool *p = cb_xcalloc(1, sizeof(*p));

	pthread_mutex_init(&p->mu, NULL);
	pthread_mutex_init(&p->throttle_mu, NULL);
	pthread_cond_init(&p->not_empty, NULL);
	pthread_cond_init(&p->not_full, NULL);
	p->ioprio = (int)syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS, 0);
	errno = 0;
	p->nice = getpriority(PRIO_PROCESS, 0);
	p->th = cb_xcalloc((size_t)workers, sizeof(*p->th));
	p->views = cb_xcalloc((size_t)workers, sizeof(*p->views));
	p->stats = cb_xcalloc((size_t)workers, sizeof(*p->stats));
	st->pool = p;
	for (; p->workers < (size_t)workers; p->workers++) {
		struct cb_stage *w = view_new(st, p, p->workers);
		w->pool_of = p;
		w->pool_bytes = &p->bytes;
		if (cb_thread_start(&p->th[p->workers], worker, w) < 0) {
			view_free(w);
			break;
		}
		p->views[p->workers] = w;
	}
	if (p->workers)
		return 0;
	stage_pool_finish(st);  /* no thread: the walker copies alone */
	return 0;
}

/* Hand over a regular file: in (source) and out (its new staged inode)
 * are the pool's now. 0, or -1 (error set) once any worker failed. */
int stage_pool_push(struct cb_stage *st, int in, int out, const struct stat *sb, int fresh)
{
	struct stage_pool *p = st->pool;
	struct pool_job *j;

	pthread_mutex_lock(&p->mu);
	while (p->n == QUEUE_LEN && !p->failed) {
		p->walker_waits = 1;
		pthread_cond_wait(&p->not_full, &p->mu);
		p->walker_waits = 0;
	}
	if (p->failed) {
		pthread_mutex_unlock(&p->mu);
		close(in);
		close(out);
		return cb_error("%s", p->err);
	}
	j = &p->q[(p->head + p->n) % QUEUE_LEN];
	j->in = in;
	j->out = out;
	j->fresh = fresh;
	j->sb = *sb;
	j->rel = cb_xstrdup(st->rel);
	p->n++;
	/* wake a worker for a batch, not for each file */
	if (p->idle && p->n >= BATCH)
		pthread_cond_signal(&p->not_empty);
	pthread_mutex_unlock(&p->mu);
	return 0;
}

/* Before the walker lists a directory (which may hold no file for a
 * while): what is queued gets a worker. */
void stage_pool_kick(struct cb_stage *st)
{
	struct stage_pool *p = st->pool;

	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	if (p->idle && p->n)
		pthread_cond_signal(&p->not_empty);
	pthread_mutex_unlock(&p->mu);
}

/* 1 if a worker failed (the walker stops early), else 0. */
int stage_pool_failed(struct cb_stage *st)
{
	int f;

	if (!st->pool)
		return 0;
	pthread_mutex_lock(&st->pool->mu);
	f = st->pool->failed;
	pthread_mutex_unlock(&st->pool->mu);
	return f;
}

static void merge_stats(struct cb_stage_stats *to, const struct cb_stage_stats *s)
{
	to->files_transferred += s->files_transferred;
	to->transferred_size += s->transferred_size;
	to->cloned_files += s->cloned_files;
	to->cloned_size += s->cloned_size;
	to->skipped += s->skipped;
}

/* Wait for every queued file, stop the workers, add their counts to the
 * pass's. -1 (error set) if any of them failed. No-op without a pool. */
int stage_pool_finish(struct cb_stage *st)
{
	struct stage_pool *p = st->pool;
	int ret;

	if (!p)
		return 0;
	pthread_mutex_lock(&p->mu);
	p->done = 1;
	pthread_cond_broadcast(&p->not_empty);
	pthread_mutex_unlock(&p->mu);
	for (size_t i = 0; i < p->workers; i++) {
		pthread_join(p->th[i], NULL);
		merge_stats(st->stats, &p->stats[i]);
		st->warned_xattr += p->views[i]->warned_xattr;
		view_free(p->views[i]);
	}
	ret = p->failed ? cb_error("%s", p->err) : 0;
	pthread_mutex_destroy(&p->mu);
	pthread_mutex_destroy(&p->throttle_mu);
	pthread_cond_destroy(&p->not_empty);
	pthread_cond_destroy(&p->not_full);
	free(p->th);
	free(p->views);
	free(p->stats);
	free(p);
	st->pool = NULL;
	return ret;
}
