/*
 * The upload pool of cb_objstore_upload.h: worker threads, each on its own
 * clone of the store, take puts from a bounded ring; a full ring makes
 * the producer wait (that wait is the memory bound).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cb_objstore_upload.h"
#include "cb_util.h"

#define SKIPPED 2   /* a put not tried: the pool had failed */

struct upload_job {
	char *name;
	void *data;
	size_t len;
	int if_absent;
};

struct upload_worker {
	struct cb_upload_pool *p;
	struct cb_objstore *s;
	pthread_t thread;
	int started;
};

struct cb_upload_pool {
	struct upload_worker *workers;
	unsigned n_workers;
	struct upload_job *ring;
	unsigned depth, head, queued;
	size_t held;                 /* queued + being written */
	uint64_t held_bytes;
	int closing;
	char *error;                 /* the first failure: the pool has failed */
	struct cb_upload_stats st;
	pthread_mutex_t mu;
	pthread_cond_t not_full, not_empty;
};

static void job_free(struct upload_job *j)
{
	free(j->name);
	free(j->data);
}

/* Under mu: a buffer left the pool. */
static void put_done(struct cb_upload_pool *p, const struct upload_job *j, int rc)
{
	p->held--;
	p->held_bytes -= j->len;
	if (rc == 0) {
		p->st.objects++;
		p->st.bytes += j->len;
	} else if (rc == 1) {
		p->st.existed++;
	} else if (rc < 0 && !p->error) {
		p->error = cb_xstrdup(cb_last_error());
		pthread_cond_broadcast(&p->not_full);   /* a waiting producer hears it */
	}
}

/* Under mu: the next job, 0; 1 the pool is closing and empty. */
static int next_job(struct cb_upload_pool *p, struct upload_job *j)
{
	while (!p->queued && !p->closing)
		pthread_cond_wait(&p->not_empty, &p->mu);
	if (!p->queued)
		return 1;
	*j = p->ring[p->head];
	p->head = (p->head + 1) % p->depth;
	p->queued--;
	pthread_cond_signal(&p->not_full);
	return 0;
}

static void *work(void *arg)
{
	struct upload_worker *w = arg;
	struct cb_upload_pool *p = w->p;
	struct upload_job j;
	int rc, failed;

	pthread_mutex_lock(&p->mu);
	while (next_job(p, &j) == 0) {
		failed = p->error != NULL;
		pthread_mutex_unlock(&p->mu);
		/* after a failure the queue drains without writing */
		rc = failed ? SKIPPED : w->s->ops->put(w->s, j.name, j.data, j.len, j.if_absent);
		pthread_mutex_lock(&p->mu);
		put_done(p, &j, rc);
		job_free(&j);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* Stop the threads (the queue drained), close the clones, free. */
static void pool_free(struct cb_upload_pool *p)
{
	pthread_mutex_lock(&p->mu);
	p->closing = 1;
	pthread_cond_broadcast(&p->not_empty);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->n_workers; i++) {
		if (p->workers[i].started)
			pthread_join(p->workers[i].thread, NULL);
		if (p->workers[i].s)
			p->workers[i].s->ops->close(p->workers[i].s);
	}
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->not_full);
	pthread_cond_destroy(&p->not_empty);
	free(p->workers);
	free(p->ring);
	free(p->error);
	free(p);
}

struct cb_upload_pool *cb_upload_pool_start(struct cb_objstore *s, unsigned threads, unsigned depth)
{
	struct cb_upload_pool *p = cb_xcalloc(1, sizeof(*p));

	p->n_workers = threads ? threads : 1;
	p->depth = depth ? depth : p->n_workers;
	p->workers = cb_xcalloc(p->n_workers, sizeof(*p->workers));
	p->ring = cb_xcalloc(p->depth, sizeof(*p->ring));
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->not_full, NULL);
	pthread_cond_init(&p->not_empty, NULL);
	for (unsigned i = 0; i < p->n_workers; i++) {
		struct upload_worker *w = &p->workers[i];
		w->p = p;
		if (!(w->s = s->ops->clone(s)))
			goto fail;
		if (pthread_create(&w->thread, NULL, work, w) != 0) {
			cb_error("storage '%s': cannot start an upload thread", s->label);
			goto fail;
		}
		w->started = 1;
	}
	return p;
fail:
	pool_free(p);
	return NULL;
}

int cb_upload_pool_put(struct cb_upload_pool *p, const char *name, void *data, size_t len,
		       int if_absent)
{
	double t0 = cb_now();
	int rc = 0;

	pthread_mutex_lock(&p->mu);
	while (p->queued == p->depth && !p->error)
		pthread_cond_wait(&p->not_full, &p->mu);
	p->st.wait_s += cb_now() - t0;
	if (p->error) {
		rc = cb_error("%s", p->error);
		free(data);
	} else {
		p->ring[(p->head + p->queued++) % p->depth] =
			(struct upload_job){ cb_xstrdup(name), data, len, if_absent };
		p->held++;
		p->held_bytes += len;
		if (p->held > p->st.peak_held)
			p->st.peak_held = p->held;
		if (p->held_bytes > p->st.peak_bytes)
			p->st.peak_bytes = p->held_bytes;
		pthread_cond_signal(&p->not_empty);
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

int cb_upload_pool_finish(struct cb_upload_pool *p, struct cb_upload_stats *st)
{
	double t0 = cb_now();
	int rc;

	pthread_mutex_lock(&p->mu);
	p->closing = 1;
	pthread_cond_broadcast(&p->not_empty);
	pthread_mutex_unlock(&p->mu);
	for (unsigned i = 0; i < p->n_workers; i++)
		if (p->workers[i].started) {
			pthread_join(p->workers[i].thread, NULL);
			p->workers[i].started = 0;
		}
	p->st.drain_s = cb_now() - t0;
	rc = p->error ? cb_error("%s", p->error) : 0;
	if (st)
		*st = p->st;
	pool_free(p);
	return rc;
}
