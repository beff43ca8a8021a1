/*
 * Parallel pass 2: the whole-tree walk of pass 2 is
 * bound by one lstat per entry. For each directory listed, the stats are
 * taken by the caller and the pool's workers together (chunks of the
 * listing, claimed with an atomic counter); the merge against the index
 * then runs serially on them, as before. The guest is frozen, so a stat
 * taken a little earlier is the same stat.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stage_int.h"

#define CHUNK 32
/* smaller listings are not worth waking a worker for */
#define PAR_MIN 64

struct stat_job {
	int dfd;
	char **names;
	struct stat *sb;
	int *err;
	size_t n;
	atomic_size_t next, done;
};

struct p2_pool {
	pthread_mutex_t lock;
	pthread_cond_t work, idle;
	struct stat_job *job;       /* NULL: nothing to do */
	unsigned gen;               /* bumped for each job */
	int active;                 /* workers inside the job: it lives on the
				     * caller's stack until they are out */
	int stop;
	int n_threads;
	pthread_t *threads;
};

/* Take chunks of the job until none is left. */
static void run_chunks(struct stat_job *j)
{
	size_t i;

	while ((i = atomic_fetch_add(&j->next, CHUNK)) < j->n) {
		size_t end = i + CHUNK < j->n ? i + CHUNK : j->n;
		for (size_t k = i; k < end; k++)
			j->err[k] = fstatat(j->dfd, j->names[k], &j->sb[k], AT_SYMLINK_NOFOLLOW) < 0
					    ? errno : 0;
		atomic_fetch_add(&j->done, end - i);
	}
}

static void *worker_main(void *arg)
{
	struct p2_pool *p = arg;
	unsigned seen = 0;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		while (!p->stop && (p->gen == seen || !p->job))
			pthread_cond_wait(&p->work, &p->lock);
		if (p->stop)
			break;
		seen = p->gen;
		p->active++;
		struct stat_job *j = p->job;
		pthread_mutex_unlock(&p->lock);
		run_chunks(j);
		pthread_mutex_lock(&p->lock);
		p->active--;
		pthread_cond_signal(&p->idle);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

struct p2_pool *p2_pool_new(void)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	struct p2_pool *p;
	const char *env = getenv("CB_P2_THREADS");  /* tests and benches */
	int n = env && *env ? atoi(env) : (int)(cores > 8 ? 8 : cores);

	if (n < 2)
		return NULL;
	p = cb_xcalloc(1, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->idle, NULL);
	p->threads = cb_xcalloc((size_t)n - 1, sizeof(*p->threads));
	for (int i = 0; i < n - 1; i++) {
		if (cb_thread_start(&p->threads[i], worker_main, p) < 0)
			break;
		p->n_threads++;
	}
	return p;
}

void p2_pool_free(struct p2_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = 1;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (int i = 0; i < p->n_threads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->idle);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p);
}

/* lstat every name of l below dfd: *sb and *err (0 or an errno) per name,
 * allocated here (the caller frees both), or both NULL when the listing is
 * too small to share out (the caller stats as it goes). */
void p2_pool_stat(struct p2_pool *p, int dfd, const struct listing *l, struct stat **sb,
		     int **err)
{
	struct stat_job j = { dfd, l->v, NULL, NULL, l->n, 0, 0 };

	*sb = NULL;
	*err = NULL;
	if (!p || !p->n_threads || l->n < PAR_MIN)
		return;
	j.sb = *sb = cb_xmalloc(l->n * sizeof(**sb));
	j.err = *err = cb_xmalloc(l->n * sizeof(**err));
	pthread_mutex_lock(&p->lock);
	p->job = &j;
	p->gen++;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	run_chunks(&j);
	pthread_mutex_lock(&p->lock);
	while (atomic_load(&j.done) < j.n || p->active)
		pthread_cond_wait(&p->idle, &p->lock);
	p->job = NULL;
	pthread_mutex_unlock(&p->lock);
}
