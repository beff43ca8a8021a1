/*
 * codec_par: a zstd archive whose units are known (the catalog's, with
 * their CRC-32s, or the seek table's) decoded on several threads while
 * the reader takes the bytes in archive order on its own thread.
 *
 * A restore spends as much CPU decoding as writing the tree; one thread
 * doing both waits for each in turn. Here worker w decodes unit w first
 * (T workers: each has a unit whenever there are T), then whichever unit
 * no worker has taken yet (not a fixed share: a worker that waits for a
 * core holds up only the unit it is in, the others go on), each into slot
 * unit % D of a ring of D slots: a worker waits while the reader still
 * holds the unit D before the next one, so memory stays at D decoded
 * units (and a compressed one a worker). D is about 64 MiB of units, and
 * 2T at least (cb_codec_par_depth): a restore takes units unevenly (one
 * of many small files keeps it long, one of a large file goes at once),
 * and with 2T slots (16 MiB of 4 MiB units on 2 cores) the workers waited
 * for room during the first and the reader for units during the second:
 * 15-20 % of two cores idle, a whole restore of the Debian root 0.89 s
 * against 0.77 s with 16 slots (8 restores each, interleaved). Every
 * unit is read whole with pread (the file offset is nobody's), checked
 * against its CRC-32 when the catalog gave one (the same check and
 * message as the sequential reader's), and decoded in one call into a
 * buffer of exactly the size its table says: a unit that decodes to more
 * or less is damaged too.
 * Workers report no error themselves (cb_error is the reader's): a
 * failed unit keeps its message, the workers start no unit after it, and
 * the reader reports it when it gets there, after every byte before it,
 * as the sequential reader would.
 *
 * A stream (par->stream: a pipe a store's units come through, read once
 * and in order) is read by the workers in turn, unit after unit; the
 * bytes the codec's detection took are still in the reader's buffer.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "cb_util.h"
#include "codec_int.h"

#define PAR_THREADS_MAX 8

struct par_slot {
	unsigned char *d;           /* the unit's decoded bytes */
	size_t d_cap, d_len;
	uint64_t unit;              /* the unit it holds when ready */
	int ready;
	int failed, bad_crc;
	char err[256];
};

struct par_reader;

struct par_worker {
	struct par_reader *p;
	int w;
	ZSTD_DCtx *dctx;
	unsigned char *c;           /* the compressed bytes of the unit it decodes */
	size_t c_cap;
	pthread_t tid;
	int started;
	uint64_t units;             /* decoded by this worker */
};

struct par_reader {
	struct cb_codec_in *in;
	struct cb_codec_unit *u;    /* own copy */
	size_t n;
	uint64_t u_total;           /* the decoded stream's length */
	int crc;                    /* u[].crc are the catalog's */
	int threads, depth;
	struct par_slot *slot;
	struct par_worker *wk;
	pthread_mutex_t mu;
	pthread_cond_t cv_free, cv_ready;
	uint64_t next;              /* the unit the reader is in */
	size_t pos;                 /* its bytes given so far */
	uint64_t fail_at;           /* no unit after it is started */
	uint64_t claim;             /* the next unit no worker has taken */
	int stop;
	int stream;                 /* in->fd is read in order, once */
	uint64_t s_next;            /* stream: the unit whose bytes come next */
};

int cb_codec_par_depth(int threads, uint64_t n, uint64_t u_total)
{
	uint64_t avg = n ? u_total / n : 0, d;

	if (avg == 0)
		avg = 1;
	d = (CB_PAR_RING_BYTES + avg - 1) / avg;
	if (d > CB_PAR_RING_MAX)
		d = CB_PAR_RING_MAX;
	return d < (uint64_t)(2 * threads) ? 2 * threads : (int)d;
}

static uint64_t unit_c_end(const struct par_reader *p, uint64_t k)
{
	return k + 1 < p->n ? p->u[k + 1].c_off : p->in->file_size;
}

static uint64_t unit_u_len(const struct par_reader *p, uint64_t k)
{
	return (k + 1 < p->n ? p->u[k + 1].u_off : p->u_total) - p->u[k].u_off;
}

static int slot_fail(struct par_slot *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int slot_fail(struct par_slot *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	s->failed = 1;
	return -1;
}

static void *grow(void *buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return buf;
	free(buf);
	*cap = need;
	return cb_xmalloc(need ? need : 1);
}

/* Stream: wait for unit k's turn; 1 when the workers stop instead. */
static int wait_turn(struct par_reader *p, uint64_t k)
{
	int ret;

	pthread_mutex_lock(&p->mu);
	while (!p->stop && k <= p->fail_at && p->s_next != k)
		pthread_cond_wait(&p->cv_free, &p->mu);
	ret = p->stop || k > p->fail_at;
	pthread_mutex_unlock(&p->mu);
	return ret;
}

static void next_turn(struct par_reader *p)
{
	pthread_mutex_lock(&p->mu);
	p->s_next++;
	pthread_cond_broadcast(&p->cv_free);
	pthread_mutex_unlock(&p->mu);
}

/* Up to len bytes at off: pread, or the stream's next bytes (those still
 * in the detection's buffer first). */
static ssize_t read_at(struct par_reader *p, void *buf, size_t len, uint64_t off)
{
	const struct cb_codec_in *in = p->in;

	if (!p->stream)
		return pread(in->fd, buf, len, (off_t)off);
	if (off >= in->base && off < in->base + in->len) {
		size_t n = (size_t)(in->base + in->len - off);

		n = n < len ? n : len;
		memcpy(buf, in->buf + (off - in->base), n);
		return (ssize_t)n;
	}
	return read(in->fd, buf, len);
}

static int read_bytes(struct par_worker *wk, struct par_slot *s, uint64_t k, size_t clen)
{
	struct par_reader *p = wk->p;
	uint64_t off = p->u[k].c_off;
	size_t got = 0;

	wk->c = grow(wk->c, &wk->c_cap, clen);
	while (got < clen) {
		ssize_t r = read_at(p, wk->c + got, clen - got, off + got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return slot_fail(s, "cannot read archive: %s", strerror(errno));
		if (r == 0)
			return slot_fail(s, "truncated zstd stream (unit %llu ends past the file)",
					 (unsigned long long)k);
		got += (size_t)r;
	}
	return 0;
}

static int read_unit(struct par_worker *wk, struct par_slot *s, uint64_t k, size_t clen)
{
	struct par_reader *p = wk->p;
	int rc;

	if (p->stream && wait_turn(p, k))
		return slot_fail(s, "stopped");
	rc = read_bytes(wk, s, k, clen);
	if (p->stream)
		next_turn(p);
	return rc;
}

/* The same check, and words, as the sequential reader's (codec_io.c). */
static int check_crc(struct par_worker *wk, struct par_slot *s, uint64_t k, size_t clen)
{
	struct par_reader *p = wk->p;
	uint32_t crc;

	if (!p->crc || clen > CB_CODEC_CHECK_MAX)
		return 0;
	crc = cb_crc32(0, wk->c, clen);
	if (crc == p->u[k].crc)
		return 0;
	s->bad_crc = 1;
	return slot_fail(s, "unit %llu (archive bytes %llu-%llu) is damaged: its CRC-32 is %08x, the "
			 "catalog says %08x", (unsigned long long)k, (unsigned long long)p->u[k].c_off,
			 (unsigned long long)unit_c_end(p, k) - 1, crc, p->u[k].crc);
}

static int decode_unit(struct par_worker *wk, struct par_slot *s, uint64_t k)
{
	struct par_reader *p = wk->p;
	uint64_t c_end = unit_c_end(p, k), ulen = unit_u_len(p, k);
	size_t clen, r;

	s->failed = s->bad_crc = 0;
	s->d_len = 0;
	if (c_end <= p->u[k].c_off || c_end - p->u[k].c_off > SIZE_MAX / 2 || ulen > SIZE_MAX / 2)
		return slot_fail(s, "unit %llu: the unit table does not fit the archive",
				 (unsigned long long)k);
	clen = (size_t)(c_end - p->u[k].c_off);
	if (read_unit(wk, s, k, clen) < 0 || check_crc(wk, s, k, clen) < 0)
		return -1;
	s->d = grow(s->d, &s->d_cap, (size_t)ulen);
	r = ZSTD_decompressDCtx(wk->dctx, s->d, (size_t)ulen, wk->c, clen);
	if (ZSTD_isError(r))
		return slot_fail(s, "unit %llu (archive bytes %llu-%llu): corrupt zstd data: %s",
				 (unsigned long long)k, (unsigned long long)p->u[k].c_off,
				 (unsigned long long)c_end - 1, ZSTD_getErrorName(r));
	if (r != ulen)
		return slot_fail(s, "unit %llu (archive bytes %llu-%llu) decodes to %zu bytes, its "
				 "table says %llu", (unsigned long long)k,
				 (unsigned long long)p->u[k].c_off, (unsigned long long)c_end - 1, r,
				 (unsigned long long)ulen);
	s->d_len = r;
	return 0;
}

/* The unit worker w decodes next (its first: unit w, so that every
 * worker has one whenever there are as many units as workers; then
 * whichever no worker has taken yet), once its slot is free (the reader
 * is past the unit D before it): 0, or 1 when the workers stop. Taking
 * the next free unit, not a fixed share, keeps a worker busy while
 * another one waits for a core: the reader waits for a unit only while
 * some worker is decoding it. */
static int claim_unit(struct par_reader *p, struct par_worker *wk, int first, uint64_t *k)
{
	int ret;

	pthread_mutex_lock(&p->mu);
	if (first) {
		*k = (uint64_t)wk->w;
	} else {
		while (!p->stop && p->claim < p->n && p->claim <= p->fail_at &&
		       p->claim >= p->next + (uint64_t)p->depth)
			pthread_cond_wait(&p->cv_free, &p->mu);
		*k = p->claim++;
	}
	ret = p->stop || *k >= p->n || *k > p->fail_at;
	pthread_mutex_unlock(&p->mu);
	return ret;
}

static void *worker_main(void *arg)
{
	struct par_worker *wk = arg;
	struct par_reader *p = wk->p;
	uint64_t k;

	for (int first = 1; !claim_unit(p, wk, first, &k); first = 0) {
		struct par_slot *s = &p->slot[k % (uint64_t)p->depth];
		int rc;

		rc = decode_unit(wk, s, k);
		wk->units++;
		pthread_mutex_lock(&p->mu);
		s->unit = k;
		s->ready = 1;
		if (rc < 0 && k < p->fail_at)
			p->fail_at = k;
		pthread_cond_broadcast(&p->cv_ready);
		/* a failure stops workers waiting for later slots */
		if (rc < 0)
			pthread_cond_broadcast(&p->cv_free);
		pthread_mutex_unlock(&p->mu);
	}
	return NULL;
}

/* The reader is done with unit p->next: its slot goes back to the workers. */
static void release_unit(struct par_reader *p)
{
	pthread_mutex_lock(&p->mu);
	p->slot[p->next % (uint64_t)p->depth].ready = 0;
	p->next++;
	p->pos = 0;
	pthread_cond_broadcast(&p->cv_free);
	pthread_mutex_unlock(&p->mu);
}

/* The slot of the unit the reader is in, once decoded (NULL: the error
 * reported, or *end at the stream's end). */
static struct par_slot *current(struct par_reader *p, int *end)
{
	struct par_slot *s;

	*end = 0;
	for (;;) {
		if (p->next >= p->n) {
			*end = 1;
			return NULL;
		}
		s = &p->slot[p->next % (uint64_t)p->depth];
		pthread_mutex_lock(&p->mu);
		while (!(s->ready && s->unit == p->next))
			pthread_cond_wait(&p->cv_ready, &p->mu);
		pthread_mutex_unlock(&p->mu);
		if (s->failed) {
			if (s->bad_crc)
				p->in->bad_unit = p->next + 1;
			cb_error("%s", s->err);
			return NULL;
		}
		if (p->pos < s->d_len)
			return s;
		release_unit(p);
	}
}

/* Up to len bytes of the current unit at *data (valid until the next
 * call): 0 at the end, -1 on error. */
static ssize_t par_view(void *st, const void **data, size_t len)
{
	struct par_reader *p = st;
	struct par_slot *s;
	size_t k;
	int end;

	/* the unit whose last bytes the previous call gave is done now */
	if (p->next < p->n && p->pos && p->pos == p->slot[p->next % (uint64_t)p->depth].d_len)
		release_unit(p);
	s = current(p, &end);
	if (!s)
		return end ? 0 : -1;
	k = s->d_len - p->pos < len ? s->d_len - p->pos : len;
	*data = s->d + p->pos;
	p->pos += k;
	return (ssize_t)k;
}

static ssize_t par_read(void *st, void *buf, size_t len)
{
	const void *data;
	ssize_t n = par_view(st, &data, len);

	if (n > 0)
		memcpy(buf, data, (size_t)n);
	return n;
}

static void par_free(void *st)
{
	struct par_reader *p = st;

	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->cv_free);
	pthread_mutex_unlock(&p->mu);
	for (int w = 0; w < p->threads; w++) {
		if (p->wk[w].started)
			pthread_join(p->wk[w].tid, NULL);
		ZSTD_freeDCtx(p->wk[w].dctx);
		free(p->wk[w].c);
	}
	for (int i = 0; i < p->depth; i++)
		free(p->slot[i].d);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv_free);
	pthread_cond_destroy(&p->cv_ready);
	free(p->slot);
	free(p->wk);
	free(p->u);
	free(p);
}

static int par_reset(void *st)
{
	(void)st;
	return cb_error("a parallel zstd reader does not seek");
}

static int par_threads(const void *st, uint64_t *units, int max)
{
	const struct par_reader *p = st;

	for (int w = 0; w < p->threads && w < max; w++)
		units[w] = p->wk[w].units;
	return p->threads;
}

static const struct cb_codec_rops par_rops = { par_read, par_free, par_reset, par_view,
					       par_threads };

/* The units cover the file from its first byte, in order, each some bytes. */
static int units_usable(const struct cb_codec_units *u, uint64_t u_total, uint64_t file_size)
{
	if (!u || u->n == 0 || u->v[0].c_off != 0 || u->v[0].u_off != 0)
		return 0;
	for (size_t i = 0; i < u->n; i++) {
		uint64_t c_end = i + 1 < u->n ? u->v[i + 1].c_off : file_size;
		uint64_t u_end = i + 1 < u->n ? u->v[i + 1].u_off : u_total;

		if (c_end <= u->v[i].c_off || u_end < u->v[i].u_off)
			return 0;
	}
	return 1;
}

static int start_workers(struct par_reader *p)
{
	for (int w = 0; w < p->threads; w++) {
		struct par_worker *wk = &p->wk[w];

		wk->p = p;
		wk->w = w;
		wk->dctx = ZSTD_createDCtx();
		if (!wk->dctx)
			return cb_error("zstd: cannot create decompression context");
		if (cb_thread_start(&wk->tid, worker_main, wk) < 0)
			return cb_error("cannot start a decoding thread");
		wk->started = 1;
	}
	return 0;
}

int cb_codec_zstd_par_reader(void **st, const struct cb_codec_rops **ops, struct cb_codec_in *in,
			     const struct cb_codec_par *par)
{
	struct par_reader *p;
	int t = par->threads > 0 ? par->threads : cb_codec_cores();

	if (!units_usable(par->units, par->u_total, par->file_size))
		return 1;
	in->file_size = par->file_size;
	p = cb_xcalloc(1, sizeof(*p));
	p->in = in;
	p->n = par->units->n;
	p->u = cb_xmalloc(p->n * sizeof(*p->u));
	memcpy(p->u, par->units->v, p->n * sizeof(*p->u));
	p->u_total = par->u_total;
	p->crc = par->crc;
	p->stream = par->stream;
	/* at least two: the decoding leaves the reader's thread even on one
	 * core; at most 8 */
	p->threads = t < 2 ? 2 : t > PAR_THREADS_MAX ? PAR_THREADS_MAX : t;
	p->depth = cb_codec_par_depth(p->threads, p->n, p->u_total);
	p->fail_at = UINT64_MAX;
	p->claim = (uint64_t)p->threads;
	p->slot = cb_xcalloc((size_t)p->depth, sizeof(*p->slot));
	p->wk = cb_xcalloc((size_t)p->threads, sizeof(*p->wk));
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv_free, NULL);
	pthread_cond_init(&p->cv_ready, NULL);
	if (start_workers(p) < 0) {
		par_free(p);
		return -1;
	}
	*st = p;
	*ops = &par_rops;
	return 0;
}
