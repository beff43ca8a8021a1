/*
 * A night's units streamed through a pipe, in order, while a restore
 * unpacks them: a few threads fetch the units ahead (each on its own
 * handle of the store, each unit checked against its digest before a
 * byte of it is used) into a ring of slots, and one thread hands them
 * over in the manifest's order, hashing the night as it goes. Memory
 * stays at the ring's units; no copy of the night is written anywhere.
 * The night's last unit is handed over only once the whole night's
 * SHA-256 matches the manifest's: a stream that fails (a unit missing or
 * damaged, the hash) ends short, so the reader can never take it for a
 * whole archive; cb_store_stream_finish() then names the cause. See
 * cb_store_ops.h.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "cb_encarchive.h"
#include "cb_index.h"
#include "cb_store.h"
#include "cb_store_ops.h"
#include "cb_util.h"

/* Fetching is bound by each request's round trip, not by bandwidth: with
 * a store's 1 MiB units, 8 requests in flight and 24 units held ahead
 * restore a night at 0.58x restic's wall where 4 and 8 took 0.92x
 * (bench/s3-restore.sh). Larger units get fewer slots, so that what is
 * held ahead stays near STREAM_BYTES (at least two units). */
#define STREAM_THREADS 8
#define STREAM_DEPTH 24
#define STREAM_BYTES (24u << 20)
/* the pipe holds a few units: the hand-over runs ahead of the decoder
 * rather than waking it for every unit (the most a process may ask for
 * without CAP_SYS_RESOURCE, pipe-max-size, is 1 MiB by default) */
#define STREAM_PIPE (8 << 20)
#define STREAM_PIPE_LESS (1 << 20)

struct slot {
	struct cb_s3_buf b;
	size_t unit;                 /* the unit it holds when ready */
	int ready;
};

struct cb_store_stream {
	struct cb_objstore *s;
	struct cb_manifest m;
	int rfd, wfd;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct slot slot[STREAM_DEPTH];
	unsigned depth;              /* slots in use (cb_store_stream_plan) */
	size_t next_fetch, next_write;
	size_t err_at;               /* the first unit that failed (n_units: none) */
	int stop;                    /* the reader is gone, or finish was called */
	char err[1024];
	struct cb_objstore *h[STREAM_THREADS];
	pthread_t th[STREAM_THREADS], wr;
	unsigned n_th;
	int wr_started;
};

/* The next unit to fetch (its slot free), or n_units when there is none. */
static size_t take(struct cb_store_stream *st)
{
	size_t n = st->m.n_units, k = n;

	pthread_mutex_lock(&st->mu);
	while (!st->stop && st->next_fetch < st->err_at && st->next_fetch < n &&
	       st->next_fetch >= st->next_write + st->depth)
		pthread_cond_wait(&st->cv, &st->mu);
	if (!st->stop && st->next_fetch < st->err_at && st->next_fetch < n)
		k = st->next_fetch++;
	pthread_mutex_unlock(&st->mu);
	return k;
}

static int fetch_one(struct cb_store_stream *st, struct cb_objstore *h, size_t k, struct cb_s3_buf *b)
{
	char unit[80];
	int rc;

	b->len = 0;
	rc = cb_store_get_ref(h, &st->m.units[k], b);
	if (rc == 1) {
		cb_store_unit_name(st->m.units[k].hex, unit);
		return cb_error("storage '%s': unit '%s' is missing", st->s->label, unit);
	}
	return rc < 0 ? -1 : 0;
}

static void *fetcher(void *arg)
{
	struct cb_store_stream *st = ((void **)arg)[0];
	struct cb_objstore *h = ((void **)arg)[1];

	free(arg);
	for (size_t k; (k = take(st)) < st->m.n_units;) {
		struct slot *sl = &st->slot[k % st->depth];
		int rc = fetch_one(st, h, k, &sl->b);

		pthread_mutex_lock(&st->mu);
		if (rc < 0 && k < st->err_at) {
			st->err_at = k;
			snprintf(st->err, sizeof(st->err), "%s", cb_last_error());
		}
		sl->unit = k;
		sl->ready = rc == 0;
		pthread_cond_broadcast(&st->cv);
		pthread_mutex_unlock(&st->mu);
	}
	return NULL;
}

/* The slot of unit k once fetched; NULL when it failed or the stream stops. */
static struct slot *wait_unit(struct cb_store_stream *st, size_t k)
{
	struct slot *sl = &st->slot[k % st->depth];

	pthread_mutex_lock(&st->mu);
	while (!st->stop && k < st->err_at && !(sl->ready && sl->unit == k))
		pthread_cond_wait(&st->cv, &st->mu);
	if (st->stop || k >= st->err_at)
		sl = NULL;
	pthread_mutex_unlock(&st->mu);
	return sl;
}

static void fail_at(struct cb_store_stream *st, size_t k, const char *msg)
{
	pthread_mutex_lock(&st->mu);
	if (k < st->err_at) {
		st->err_at = k;
		snprintf(st->err, sizeof(st->err), "%s", msg);
	}
	pthread_cond_broadcast(&st->cv);
	pthread_mutex_unlock(&st->mu);
}

/* The last unit goes only to a night whose bytes hash to the manifest's. */
static int night_matches(struct cb_store_stream *st, EVP_MD_CTX *sha)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	char hex[65], *msg;

	EVP_DigestFinal_ex(sha, md, &n);
	for (unsigned i = 0; i < 32 && i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	if (!strcmp(hex, st->m.sha256))
		return 1;
	msg = cb_xasprintf("storage '%s': night '%s': its units hash to %s, its manifest says %s",
			   st->s->label, st->m.name, hex, st->m.sha256);
	fail_at(st, st->m.n_units - 1, msg);
	free(msg);
	return 0;
}

static void *writer(void *arg)
{
	struct cb_store_stream *st = arg;
	EVP_MD_CTX *sha = EVP_MD_CTX_new();
	struct slot *sl;

	EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
	for (size_t k = 0; k < st->m.n_units && (sl = wait_unit(st, k)); k++) {
		EVP_DigestUpdate(sha, sl->b.data, sl->b.len);
		if (k + 1 == st->m.n_units && !night_matches(st, sha))
			break;
		if (cb_write_all(st->wfd, sl->b.data, sl->b.len) < 0) {
			/* the reader stopped: nothing more to fetch */
			pthread_mutex_lock(&st->mu);
			st->stop = 1;
			pthread_cond_broadcast(&st->cv);
			pthread_mutex_unlock(&st->mu);
			break;
		}
		pthread_mutex_lock(&st->mu);
		sl->ready = 0;
		st->next_write++;
		pthread_cond_broadcast(&st->cv);
		pthread_mutex_unlock(&st->mu);
	}
	close(st->wfd);   /* the stream's end, short if it failed */
	st->wfd = -1;
	EVP_MD_CTX_free(sha);
	return NULL;
}

void cb_store_stream_plan(const struct cb_manifest *m, unsigned *threads, unsigned *depth)
{
	uint64_t largest = 1;
	uint64_t d;

	for (size_t k = 0; k < m->n_units; k++)
		if (m->units[k].len > largest)
			largest = m->units[k].len;
	d = STREAM_BYTES / largest;
	*depth = d < 2 ? 2 : d > STREAM_DEPTH ? STREAM_DEPTH : (unsigned)d;
	*threads = *depth < STREAM_THREADS ? *depth : STREAM_THREADS;
}

static int start_threads(struct cb_store_stream *st)
{
	unsigned threads;

	cb_store_stream_plan(&st->m, &threads, &st->depth);
	for (; st->n_th < threads && st->n_th < st->m.n_units; st->n_th++) {
		void **arg = cb_xmalloc(2 * sizeof(*arg));

		st->h[st->n_th] = st->s->ops->clone(st->s);
		arg[0] = st;
		arg[1] = st->h[st->n_th];
		if (!st->h[st->n_th] || cb_thread_start(&st->th[st->n_th], fetcher, arg) < 0) {
			if (st->h[st->n_th])
				st->h[st->n_th]->ops->close(st->h[st->n_th]);
			free(arg);
			break;
		}
	}
	if (st->n_th == 0 && st->m.n_units)
		return cb_error("storage '%s': cannot start a fetching thread", st->s->label);
	if (cb_thread_start(&st->wr, writer, st) < 0)
		return cb_error("cannot start the thread that hands the night over");
	st->wr_started = 1;
	return 0;
}

int cb_store_stream_start(struct cb_store_stream **out, struct cb_objstore *s, struct cb_manifest *m)
{
	struct cb_store_stream *st = cb_xcalloc(1, sizeof(*st));
	int p[2];

	st->s = s;
	st->m = *m;
	memset(m, 0, sizeof(*m));
	st->err_at = st->m.n_units;
	st->rfd = st->wfd = -1;
	pthread_mutex_init(&st->mu, NULL);
	pthread_cond_init(&st->cv, NULL);
	*out = st;
	if (pipe2(p, O_CLOEXEC) < 0)
		return cb_error_errno("cannot create pipe");
	st->rfd = p[0];
	st->wfd = p[1];
	if (fcntl(st->wfd, F_SETPIPE_SZ, STREAM_PIPE) < 0)
		(void)fcntl(st->wfd, F_SETPIPE_SZ, STREAM_PIPE_LESS);
	return start_threads(st);
}

int cb_store_stream_fd(const struct cb_store_stream *st)
{
	return st->rfd;
}

uint64_t cb_store_stream_size(const struct cb_store_stream *st)
{
	return st->m.size;
}

int cb_store_stream_finish(struct cb_store_stream *st)
{
	int failed;

	if (!st)
		return 0;
	pthread_mutex_lock(&st->mu);
	st->stop = 1;
	pthread_cond_broadcast(&st->cv);
	pthread_mutex_unlock(&st->mu);
	if (st->rfd >= 0)
		close(st->rfd);   /* a writer blocked on a full pipe gets EPIPE */
	st->rfd = -1;
	if (st->wr_started)
		pthread_join(st->wr, NULL);
	st->wr_started = 0;
	for (; st->n_th > 0; st->n_th--) {
		pthread_join(st->th[st->n_th - 1], NULL);
		st->h[st->n_th - 1]->ops->close(st->h[st->n_th - 1]);
	}
	failed = st->err[0] != '\0';
	return failed ? cb_error("%s", st->err) : 0;
}

void cb_store_stream_free(struct cb_store_stream *st)
{
	if (!st)
		return;
	cb_store_stream_finish(st);
	if (st->wfd >= 0)
		close(st->wfd);
	for (int i = 0; i < STREAM_DEPTH; i++)
		cb_s3_buf_release(&st->slot[i].b);
	pthread_mutex_destroy(&st->mu);
	pthread_cond_destroy(&st->cv);
	cb_manifest_release(&st->m);
	free(st);
}

/* A night streams when a restore can read it as it comes: its catalog
 * (at path.idx) is there and sound (the space check and the decoder's
 * units come from it), and it is not encrypted (its decrypted view is a
 * file). */
int cb_store_streamable(const struct cb_manifest *m, const char *path)
{
	char *idx = cb_xasprintf("%s.idx", path);
	struct cb_idx x;
	int ok = m->catalog.hex[0] && !m->sealed && !cb_enc_is_encrypted(m->name) &&
		 cb_idx_read(&x, idx, m->size) == 0;

	free(idx);
	if (!ok)
		return 0;
	ok = cb_idx_check_digest(&x) == 0;
	cb_idx_close(&x);
	return ok;
}
