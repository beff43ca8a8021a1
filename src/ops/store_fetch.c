/*
 * A night's units fetched into its local copy by a few threads, each on
 * its own handle of the store (a connection of its own on S3) and each
 * unit written at its offset, checked first: a night comes back at the
 * pace of several requests in flight, not of one round trip after
 * another. See cb_store_ops.h.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cb_store.h"
#include "cb_store_ops.h"
#include "cb_util.h"

#define FETCH_THREADS 4

struct fetch {
	struct cb_objstore *s;
	const struct cb_manifest *m;
	const unsigned char *want;   /* NULL: every unit */
	uint64_t *off;               /* each unit's offset in the copy */
	int fd;
	pthread_mutex_t mu;
	size_t next;
	char err[1024];              /* the first error, "" none */
};

static int fetch_one(struct fetch *f, struct cb_objstore *h, size_t i, struct cb_s3_buf *b)
{
	char unit[80];
	int rc;

	b->len = 0;
	rc = cb_store_get_ref(h, &f->m->units[i], b);
	if (rc == 1) {
		cb_store_unit_name(f->m->units[i].hex, unit);
		return cb_error("storage '%s': unit '%s' is missing", f->s->label, unit);
	}
	if (rc < 0)
		return -1;
	if (cb_pwrite_all(f->fd, b->data, b->len, f->off[i]) < 0)
		return cb_error_errno("cannot write the night's copy");
	return 0;
}

/* The next unit to fetch, or n_units when there is none or an error. */
static size_t take(struct fetch *f)
{
	size_t i;

	pthread_mutex_lock(&f->mu);
	while (f->next < f->m->n_units && f->want && !f->want[f->next])
		f->next++;
	i = f->err[0] ? f->m->n_units : f->next;
	if (i < f->m->n_units)
		f->next++;
	pthread_mutex_unlock(&f->mu);
	return i;
}

static void run(struct fetch *f, struct cb_objstore *h)
{
	struct cb_s3_buf b = { 0 };

	for (size_t i; (i = take(f)) < f->m->n_units;) {
		if (fetch_one(f, h, i, &b) == 0)
			continue;
		pthread_mutex_lock(&f->mu);
		if (!f->err[0])
			snprintf(f->err, sizeof(f->err), "%s", cb_last_error());
		pthread_mutex_unlock(&f->mu);
	}
	cb_s3_buf_release(&b);
}

struct worker_arg {
	struct fetch *f;
	struct cb_objstore *h;
};

static void *worker(void *arg)
{
	struct worker_arg *a = arg;

	run(a->f, a->h);
	return NULL;
}

int cb_store_fetch_units(struct cb_objstore *s, const struct cb_manifest *m, const unsigned char *want,
			 int fd)
{
	struct fetch f = { .s = s, .m = m, .want = want, .fd = fd };
	struct worker_arg a[FETCH_THREADS];
	pthread_t th[FETCH_THREADS];
	unsigned n = 0;

	pthread_mutex_init(&f.mu, NULL);
	f.off = cb_xcalloc(m->n_units + 1, sizeof(*f.off));
	for (size_t i = 0; i < m->n_units; i++)
		f.off[i + 1] = f.off[i] + m->units[i].len;
	/* the caller's thread is one of them; a handle or a thread that
	 * cannot start: fewer */
	for (; n + 1 < FETCH_THREADS && n + 1 < m->n_units; n++) {
		a[n] = (struct worker_arg){ &f, s->ops->clone(s) };
		if (!a[n].h)
			break;
		if (cb_thread_start(&th[n], worker, &a[n]) < 0) {
			a[n].h->ops->close(a[n].h);
			break;
		}
	}
	run(&f, s);
	for (unsigned i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		a[i].h->ops->close(a[i].h);
	}
	pthread_mutex_destroy(&f.mu);
	free(f.off);
	return f.err[0] ? cb_error("%s", f.err) : 0;
}
