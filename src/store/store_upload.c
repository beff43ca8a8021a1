/*
 * A night's units written by a few threads, each on its own handle of the
 * store (cb_objstore clone: a connection of its own on S3), so that the
 * codec goes on while units are written (a directory's fsyncs, S3's round
 * trips). At most 2 units a thread wait or are written at once: memory
 * stays bounded whatever the night's size. The first error is kept and
 * given back by the next put or by finish; what is still queued then is
 * dropped (the night fails, no manifest is written).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cb_util.h"
#include "store_int.h"

struct job {
	char name[80];
	unsigned char *data;
	size_t len;
	int replace;
};

struct cb_store_upload {
	struct cb_objstore **h;
	pthread_t *th;
	unsigned n_th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct job *q;                 /* a ring of cap jobs */
	size_t cap, head, n, busy;
	int quit;
	char err[1024];                /* the first error, "" none */
};

static void job_run(struct cb_store_upload *u, struct cb_objstore *h, struct job *j)
{
	int rc = h->ops->put(h, j->name, j->data, j->len, !j->replace);

	free(j->data);
	if (rc >= 0)
		return;
	pthread_mutex_lock(&u->mu);
	if (!u->err[0])
		snprintf(u->err, sizeof(u->err), "%s", cb_last_error());
	pthread_mutex_unlock(&u->mu);
}

static void *worker(void *arg)
{
	struct cb_store_upload *u = ((void **)arg)[0];
	struct cb_objstore *h = ((void **)arg)[1];
	struct job j;

	free(arg);
	pthread_mutex_lock(&u->mu);
	for (;;) {
		while (!u->n && !u->quit)
			pthread_cond_wait(&u->cv, &u->mu);
		if (!u->n)
			break;
		j = u->q[u->head];
		u->head = (u->head + 1) % u->cap;
		u->n--;
		u->busy++;
		pthread_cond_broadcast(&u->cv);
		pthread_mutex_unlock(&u->mu);
		job_run(u, h, &j);
		pthread_mutex_lock(&u->mu);
		u->busy--;
		pthread_cond_broadcast(&u->cv);
	}
	pthread_mutex_unlock(&u->mu);
	return NULL;
}

struct cb_store_upload *cb_store_upload_start(struct cb_objstore *s, unsigned threads)
{
	struct cb_store_upload *u = cb_xcalloc(1, sizeof(*u));

	pthread_mutex_init(&u->mu, NULL);
	pthread_cond_init(&u->cv, NULL);
	u->cap = 2 * (threads ? threads : 1);
	u->q = cb_xcalloc(u->cap, sizeof(*u->q));
	u->h = cb_xcalloc(threads, sizeof(*u->h));
	u->th = cb_xcalloc(threads, sizeof(*u->th));
	for (unsigned i = 0; i < threads; i++) {
		void **arg = cb_xmalloc(2 * sizeof(*arg));

		/* a thread that cannot start: fewer threads, or none (then
		 * every put is written by the caller) */
		if (!(u->h[u->n_th] = s->ops->clone(s))) {
			free(arg);
			break;
		}
		arg[0] = u;
		arg[1] = u->h[u->n_th];
		if (cb_thread_start(&u->th[u->n_th], worker, arg) < 0) {
			free(arg);
			u->h[u->n_th]->ops->close(u->h[u->n_th]);
			break;
		}
		u->n_th++;
	}
	return u;
}

static int first_error(struct cb_store_upload *u)
{
	return u->err[0] ? cb_error("%s", u->err) : 0;
}

int cb_store_upload_put(struct cb_store_upload *u, struct cb_objstore *s, const char *name,
			unsigned char *data, size_t len, int replace)
{
	struct job j = { .data = data, .len = len, .replace = replace };
	int rc;

	snprintf(j.name, sizeof(j.name), "%s", name);
	if (!u->n_th) {
		rc = s->ops->put(s, name, data, len, !replace) < 0 ? -1 : 0;
		free(data);
		return rc;
	}
	pthread_mutex_lock(&u->mu);
	while (u->n == u->cap && !u->err[0])
		pthread_cond_wait(&u->cv, &u->mu);
	rc = first_error(u);
	if (rc == 0) {
		u->q[(u->head + u->n) % u->cap] = j;
		u->n++;
		pthread_cond_broadcast(&u->cv);
	}
	pthread_mutex_unlock(&u->mu);
	if (rc < 0)
		free(data);
	return rc;
}

int cb_store_upload_finish(struct cb_store_upload *u)
{
	int rc;

	pthread_mutex_lock(&u->mu);
	while ((u->n || u->busy) && !u->err[0])
		pthread_cond_wait(&u->cv, &u->mu);
	/* after an error, the ones being written end before we answer */
	while (u->busy)
		pthread_cond_wait(&u->cv, &u->mu);
	rc = first_error(u);
	pthread_mutex_unlock(&u->mu);
	return rc;
}

void cb_store_upload_free(struct cb_store_upload *u)
{
	if (!u)
		return;
	pthread_mutex_lock(&u->mu);
	/* what is still queued is dropped: the night has failed */
	while (u->n) {
		free(u->q[u->head].data);
		u->head = (u->head + 1) % u->cap;
		u->n--;
	}
	u->quit = 1;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	for (unsigned i = 0; i < u->n_th; i++) {
		pthread_join(u->th[i], NULL);
		u->h[i]->ops->close(u->h[i]);
	}
	pthread_cond_destroy(&u->cv);
	pthread_mutex_destroy(&u->mu);
	free(u->q);
	free(u->h);
	free(u->th);
	free(u);
}
