/*
 * gzip codec. Writer, classic (threads 0): one raw zlib deflate stream in
 * one gzip member, written straight into the sink's buffer; the policy
 * switches it to level 0 (stored blocks) and back with deflateParams(). The
 * member's header and trailer are ours, so that the CRC-32 is cb_crc32's
 * (zlib's own would be the slowest part of storing). Writer, threaded: one
 * gzip member whose deflate data is made of chunks deflated independently
 * on a pool, each primed with the 32 KiB before it and ended by a sync
 * flush (byte-aligned, so they simply concatenate); stored chunks are
 * written as stored blocks by hand; the member's CRC is combined from the
 * chunks' CRCs. Chunk boundaries depend on the input only, so the bytes do
 * not depend on the thread count.
 *
 * Reader: inflates, accepting concatenated members (`cat a.gz b.gz`).
 *
 * One idea in 760 lines: the gzip format of cbackup's units, written and
 * read by the same member layout (as the other codecs' files).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cb_util.h"
#include "codec_int.h"

#define DICT_SIZE 32768
#define STORED_MAX 65535

struct gzip_writer {
	struct cb_codec_out *out;
	int level;
	/* classic: one deflate stream; the policy switches it to level 0 */
	z_stream zs;
	int zs_ready, cur_level;
	unsigned char *ibuf;
	struct cb_trial *trial;
	struct gzip_async *as;           /* classic in a worker thread, or NULL */
	/* threaded: chunks deflated in parallel into one member */
	struct cb_pool *pool;
	size_t out_cap;
	unsigned char hist[DICT_SIZE];   /* the last bytes before the next chunk */
	size_t hist_len;
	/* both: the member's data so far, and whether its header is out */
	uint32_t crc;
	uint64_t total;
	int started;
};

struct gzip_job {
	unsigned char dict[DICT_SIZE];
	size_t dict_len;
	uint32_t crc;
	int trial_store;         /* stored chunks: emit writes j->in as stored blocks */
};

struct gzip_scratch {
	z_stream zs;
	int ready;
	struct cb_trial *trial;
};

/*
 * Classic, asynchronous: the one deflate stream lives in a worker thread fed
 * with two alternating input buffers, so that reading and archiving the next
 * chunk overlaps with deflating this one (what `tar | gzip` gets from its
 * second process). The bytes are the same as deflating inline.
 */
struct gzip_async {
	pthread_t th;
	int running;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned char *buf[2];
	size_t len[2];
	int level[2];
	int unit_end[2];
	int full[2];           /* handed to the worker, not deflated yet */
	int fill;              /* the buffer the reader fills */
	int stop, failed;
	char err[512];         /* the worker's cb_error() message */
};

/* ---- the member around the deflate data (both writers) ---- */

/* What zlib's gzip wrapper writes, with no name and mtime 0 (reproducible
 * bytes), OS unix. */
static int gzip_header(struct gzip_writer *g)
{
	unsigned char h[10] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3 };

	g->started = 1;
	cb_codec_out_unit(g->out);
	h[8] = g->level == 9 ? 2 : g->level == 1 ? 4 : 0;
	return cb_codec_out_write(g->out, h, sizeof(h));
}

/* CRC-32 and size (mod 2^32) of the member's data, little-endian. */
static int gzip_trailer(struct gzip_writer *g)
{
	unsigned char t[8];

	for (int i = 0; i < 4; i++) {
		t[i] = (g->crc >> (8 * i)) & 0xff;
		t[4 + i] = (g->total >> (8 * i)) & 0xff;
	}
	return cb_codec_out_write(g->out, t, sizeof(t));
}

/*
 * Padding after a unit, so that every unit starts 4 KiB-aligned and copies
 * can be clones (codec_seg.c): an empty member of exactly n >= PAD_MIN bytes
 * whose FEXTRA field holds one subfield ('C', 'b') of zeros. gzip, GNU tar
 * (through gzip), zlib and our reader read concatenated members and skip
 * an extra field they do not know.
 */
#define PAD_MIN 26

static int gzip_pad(struct cb_codec_out *o, size_t n)
{
	unsigned char *b = cb_xcalloc(1, n);
	size_t xlen = n - 22, sub = xlen - 4;
	int ret;

	b[0] = 0x1f, b[1] = 0x8b, b[2] = 8, b[3] = 4;   /* FLG: FEXTRA */
	b[9] = 3;
	b[10] = xlen & 0xff, b[11] = (xlen >> 8) & 0xff;
	b[12] = 'C', b[13] = 'b';
	b[14] = sub & 0xff, b[15] = (sub >> 8) & 0xff;
	/* an empty final fixed-Huffman block, then CRC-32 0 and size 0 */
	b[12 + xlen] = 0x03;
	ret = cb_codec_out_write(o, b, n);
	free(b);
	return ret;
}

/* ---- classic: a single deflate stream ---- */

/* Point zlib's output at the room left in the sink's buffer. */
static int gzip_out_begin(struct gzip_writer *g)
{
	size_t avail;

	if (!g->started && gzip_header(g) < 0)
		return -1;
	g->zs.next_out = cb_codec_out_buffer(g->out, &avail);
	if (!g->zs.next_out)
		return -1;
	g->zs.avail_out = avail > UINT32_MAX ? UINT32_MAX : (uInt)avail;
	return 0;
}

/* Count what zlib wrote there. */
static int gzip_out_end(struct gzip_writer *g, const unsigned char *start)
{
	return cb_codec_out_advance(g->out, (size_t)(g->zs.next_out - start));
}

/* Deflate the pending input; with Z_FINISH until the stream is ended. */
static int gzip_run(struct gzip_writer *g, int flush)
{
	for (;;) {
		unsigned char *start;
		double t0;
		int rc;

		if (gzip_out_begin(g) < 0)
			return -1;
		start = g->zs.next_out;
		t0 = cb_now();
		rc = deflate(&g->zs, flush);
		g->out->compress_seconds += cb_now() - t0;
		if (gzip_out_end(g, start) < 0)
			return -1;
		if (rc == Z_STREAM_ERROR)
			return cb_error("gzip compression failed: %s", g->zs.msg ? g->zs.msg : "stream error");
		if (flush == Z_FINISH ? rc == Z_STREAM_END : (g->zs.avail_in == 0 && g->zs.avail_out > 0))
			return 0;
	}
}

/* Level 0 makes zlib emit stored blocks straight from the input. Changing
 * the level flushes the current block first, which needs output room. */
static int gzip_set_level(struct gzip_writer *g, int level)
{
	int rc;

	if (level == g->cur_level)
		return 0;
	do {
		unsigned char *start;

		if (gzip_out_begin(g) < 0)
			return -1;
		start = g->zs.next_out;
		rc = deflateParams(&g->zs, level, Z_DEFAULT_STRATEGY);
		if (gzip_out_end(g, start) < 0)
			return -1;
	} while (rc == Z_BUF_ERROR);
	if (rc != Z_OK)
		return cb_error("gzip: cannot change the level to %d", level);
	g->cur_level = level;
	return 0;
}

static unsigned char *gzip_classic_buf(void *st)
{
	struct gzip_writer *g = st;
	return g->as ? g->as->buf[g->as->fill] : g->ibuf;
}

/* End the member: the deflate stream, the trailer; the next bytes start a
 * new member with a fresh stream (deflateReset keeps the level). */
static int gzip_member_end(struct gzip_writer *g)
{
	g->zs.next_in = NULL;
	g->zs.avail_in = 0;
	if (gzip_run(g, Z_FINISH) < 0 || gzip_trailer(g) < 0)
		return -1;
	/* the next member starts at the writer's level whatever this one
	 * ended with (a fresh stream: no output), as after a copied unit */
	if (deflateReset(&g->zs) != Z_OK || deflateParams(&g->zs, g->level, Z_DEFAULT_STRATEGY) != Z_OK)
		return cb_error("gzip: cannot reset compressor");
	g->cur_level = g->level;
	g->crc = 0;
	g->total = 0;
	g->started = 0;
	return 0;
}

static int gzip_deflate_chunk(struct gzip_writer *g, unsigned char *in, size_t len, int level,
			      int unit_end)
{
	if (!g->started && gzip_header(g) < 0)
		return -1;
	g->out->u_done += len;
	g->crc = cb_crc32(g->crc, in, len);
	g->total += len;
	if (gzip_set_level(g, level) < 0)
		return -1;
	g->zs.next_in = in;
	g->zs.avail_in = (uInt)len;
	if (gzip_run(g, Z_NO_FLUSH) < 0)
		return -1;
	if (!unit_end)
		return 0;
	return gzip_member_end(g) < 0 ? -1 : cb_codec_out_seg_done(g->out, gzip_pad, PAD_MIN);
}

static void *gzip_async_main(void *arg)
{
	struct gzip_writer *g = arg;
	struct gzip_async *a = g->as;
	int k = 0;

	pthread_mutex_lock(&a->mu);
	for (;;) {
		while (!a->full[k] && !a->stop)
			pthread_cond_wait(&a->cv, &a->mu);
		if (!a->full[k])
			break;   /* stopped, and the reader submits in order: nothing left */
		int skip = a->failed;
		pthread_mutex_unlock(&a->mu);
		int rc = skip ? 0 : gzip_deflate_chunk(g, a->buf[k], a->len[k], a->level[k],
							a->unit_end[k]);
		pthread_mutex_lock(&a->mu);
		if (rc < 0) {
			a->failed = 1;
			snprintf(a->err, sizeof(a->err), "%s", cb_last_error());
		}
		a->full[k] = 0;
		pthread_cond_broadcast(&a->cv);
		k ^= 1;
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

/* Hand the filled buffer over; wait until the other one is free. */
static int gzip_async_submit(struct gzip_writer *g, size_t len, int level, int unit_end)
{
	struct gzip_async *a = g->as;
	int k = a->fill, failed;

	pthread_mutex_lock(&a->mu);
	a->len[k] = len;
	a->level[k] = level;
	a->unit_end[k] = unit_end;
	a->full[k] = 1;
	pthread_cond_broadcast(&a->cv);
	while (a->full[k ^ 1] && !a->failed)
		pthread_cond_wait(&a->cv, &a->mu);
	failed = a->failed;
	pthread_mutex_unlock(&a->mu);
	a->fill = k ^ 1;
	return failed ? cb_error("%s", a->err) : 0;
}

/* Wait until the worker has deflated everything handed to it: the stream
 * is then the caller's until the next submit. */
static int gzip_async_idle(struct gzip_writer *g)
{
	struct gzip_async *a = g->as;
	int failed;

	pthread_mutex_lock(&a->mu);
	while ((a->full[0] || a->full[1]) && !a->failed)
		pthread_cond_wait(&a->cv, &a->mu);
	failed = a->failed;
	pthread_mutex_unlock(&a->mu);
	return failed ? cb_error("%s", a->err) : 0;
}

/* Let the worker finish what it has and end; its error, if any. */
static int gzip_async_stop(struct gzip_writer *g)
{
	struct gzip_async *a = g->as;

	if (!a || !a->running)
		return 0;
	pthread_mutex_lock(&a->mu);
	a->stop = 1;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	pthread_join(a->th, NULL);
	a->running = 0;
	return a->failed ? cb_error("%s", a->err) : 0;
}

static void gzip_async_start(struct gzip_writer *g)
{
	struct gzip_async *a = cb_xcalloc(1, sizeof(*a));

	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
	a->buf[0] = cb_xmalloc_huge(2 * CB_CODEC_CHUNK);
	a->buf[1] = a->buf[0] + CB_CODEC_CHUNK;
	g->as = a;
	a->running = cb_thread_start(&a->th, gzip_async_main, g) == 0;
	if (!a->running) {        /* no thread: deflate inline, as on one core */
		cb_free_huge(a->buf[0], 2 * CB_CODEC_CHUNK);
		free(a);
		g->as = NULL;
	}
}

static void gzip_async_free(struct gzip_writer *g)
{
	if (!g->as)
		return;
	gzip_async_stop(g);
	pthread_mutex_destroy(&g->as->mu);
	pthread_cond_destroy(&g->as->cv);
	cb_free_huge(g->as->buf[0], 2 * CB_CODEC_CHUNK);
	free(g->as);
	g->as = NULL;
}

static int gzip_classic_chunk(void *st, const struct cb_chunk_meta *m)
{
	struct gzip_writer *g = st;
	unsigned char *in = gzip_classic_buf(st);
	int store = m->cls == CB_CHUNK_STORE;

	if (m->cls == CB_CHUNK_TRIAL && cb_trial_store(g->trial, in, m->len)) {
		store = 1;
		cb_codec_out_stored(g->out, m, CB_STORED_TRIAL, m->len);
	} else if (store) {
		cb_codec_out_stored(g->out, m, m->reason, m->len);
	}
	/* storing is a copy: done here, it saves a hand-over and keeps a third
	 * busy thread from competing with the sink's hasher for the cores */
	if (g->as && !store)
		return gzip_async_submit(g, m->len, g->level, m->unit_end);
	if (g->as && gzip_async_idle(g) < 0)
		return -1;
	return gzip_deflate_chunk(g, in, m->len, store ? 0 : g->level, m->unit_end);
}

static int gzip_classic_finish(void *st)
{
	struct gzip_writer *g = st;

	if (gzip_async_stop(g) < 0)
		return -1;
	/* the last unit ended its member; an empty input still gets one */
	if (!g->started && g->out->bytes_out > 0)
		return 0;
	if (!g->started && gzip_header(g) < 0)
		return -1;
	return gzip_member_end(g);
}

/* ---- threaded: raw deflate per chunk, one gzip member around them ---- */

/* Stored blocks straight from the input. After a sync flush or a stored
 * block the stream is byte-aligned, so each stored block header (BFINAL 0,
 * BTYPE 00) is one zero byte, then LEN and NLEN. */
static int put_stored(struct cb_codec_out *o, const unsigned char *in, size_t len)
{
	for (size_t off = 0; off < len; off += STORED_MAX) {
		size_t k = len - off < STORED_MAX ? len - off : STORED_MAX;
		unsigned char h[5] = { 0, k & 0xff, k >> 8, ~k & 0xff, (~k >> 8) & 0xff };

		if (cb_codec_out_write(o, h, sizeof(h)) < 0 || cb_codec_out_write(o, in + off, k) < 0)
			return -1;
	}
	return 0;
}

static int deflate_chunk(struct gzip_scratch *sc, struct cb_pool_job *j, size_t cap)
{
	struct gzip_job *gj = j->extra;

	if (deflateReset(&sc->zs) != Z_OK)
		return -1;
	if (gj->dict_len && deflateSetDictionary(&sc->zs, gj->dict, gj->dict_len) != Z_OK)
		return -1;
	sc->zs.next_in = j->in;
	sc->zs.avail_in = j->m.len;
	sc->zs.next_out = j->out;
	sc->zs.avail_out = cap;
	/* a sync flush ends the chunk byte-aligned, so the next chunk's blocks
	 * can simply follow */
	if (deflate(&sc->zs, Z_SYNC_FLUSH) != Z_OK || sc->zs.avail_in != 0 || sc->zs.avail_out == 0)
		return -1;
	j->out_len = cap - sc->zs.avail_out;
	return 0;
}

static int gzip_par_run(void *ctx, struct cb_pool_job *j, void *scratch)
{
	struct gzip_writer *g = ctx;
	struct gzip_scratch *sc = scratch;
	struct gzip_job *gj = j->extra;

	gj->crc = cb_crc32(0, j->in, j->m.len);
	gj->trial_store = j->m.cls == CB_CHUNK_TRIAL && cb_trial_store(sc->trial, j->in, j->m.len);
	if (j->m.cls == CB_CHUNK_STORE || gj->trial_store) {
		j->out_len = 0;          /* emit writes j->in: no copy here */
		return 0;
	}
	if (!sc->ready)
		return -1;
	return deflate_chunk(sc, j, g->out_cap);
}

/* An empty final fixed-Huffman block ends the member's deflate stream. */
static int gzip_par_member_end(struct gzip_writer *g)
{
	static const unsigned char last_block[2] = { 0x03, 0x00 };

	if (cb_codec_out_write(g->out, last_block, sizeof(last_block)) < 0 || gzip_trailer(g) < 0)
		return -1;
	g->crc = 0;
	g->total = 0;
	g->started = 0;
	return 0;
}

static int gzip_par_emit(void *ctx, struct cb_pool_job *j)
{
	struct gzip_writer *g = ctx;
	struct gzip_job *gj = j->extra;

	if (!g->started && gzip_header(g) < 0)
		return -1;
	if (j->m.cls == CB_CHUNK_STORE)
		cb_codec_out_stored(g->out, &j->m, j->m.reason, j->m.len);
	else if (gj->trial_store)
		cb_codec_out_stored(g->out, &j->m, CB_STORED_TRIAL, j->m.len);
	g->crc = crc32_combine(g->crc, gj->crc, j->m.len);
	g->total += j->m.len;
	g->out->u_done += j->m.len;
	if ((j->m.cls == CB_CHUNK_STORE || gj->trial_store) ? put_stored(g->out, j->in, j->m.len) < 0
	    : cb_codec_out_write(g->out, j->out, j->out_len) < 0)
		return -1;
	if (!j->m.unit_end)
		return 0;
	return gzip_par_member_end(g) < 0 ? -1 : cb_codec_out_seg_done(g->out, gzip_pad, PAD_MIN);
}

static void *gzip_scratch_new(void *ctx)
{
	struct gzip_writer *g = ctx;
	struct gzip_scratch *sc = cb_xcalloc(1, sizeof(*sc));

	/* raw deflate (-15): the member header and trailer are ours */
	sc->ready = deflateInit2(&sc->zs, g->level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK;
	sc->trial = cb_trial_new(CB_TRIAL_GAIN_GZIP);
	return sc;
}

static void gzip_scratch_free(void *scratch)
{
	struct gzip_scratch *sc = scratch;

	if (sc->ready)
		deflateEnd(&sc->zs);
	cb_trial_free(sc->trial);
	free(sc);
}

static const struct cb_pool_ops gzip_pool_ops = {
	gzip_par_run, gzip_par_emit, gzip_scratch_new, gzip_scratch_free, NULL
};

static unsigned char *gzip_par_buf(void *st)
{
	struct gzip_writer *g = st;
	struct cb_pool_job *j = cb_pool_acquire(g->pool);

	return j ? j->in : NULL;
}

/* The chunk gets the 32 KiB of stream before it as its dictionary. */
static void update_history(struct gzip_writer *g, const unsigned char *in, size_t len)
{
	if (len >= DICT_SIZE) {
		memcpy(g->hist, in + len - DICT_SIZE, DICT_SIZE);
		g->hist_len = DICT_SIZE;
		return;
	}
	if (g->hist_len + len > DICT_SIZE) {
		size_t drop = g->hist_len + len - DICT_SIZE;

		memmove(g->hist, g->hist + drop, g->hist_len - drop);
		g->hist_len -= drop;
	}
	memcpy(g->hist + g->hist_len, in, len);
	g->hist_len += len;
}

static int gzip_par_chunk(void *st, const struct cb_chunk_meta *m)
{
	struct gzip_writer *g = st;
	struct cb_pool_job *j = cb_pool_acquire(g->pool);
	struct gzip_job *gj;

	if (!j)
		return -1;
	gj = j->extra;
	j->m = *m;
	gj->dict_len = g->hist_len;
	memcpy(gj->dict, g->hist, g->hist_len);
	update_history(g, j->in, m->len);
	/* a new member starts with no history */
	if (m->unit_end)
		g->hist_len = 0;
	return cb_pool_submit(g->pool);
}

static int gzip_par_finish(void *st)
{
	struct gzip_writer *g = st;
	int ret = cb_pool_drain(g->pool);

	g->out->compress_seconds += cb_pool_seconds(g->pool);
	if (ret < 0)
		return -1;
	/* the last unit ended its member; an empty input still gets one */
	if (!g->started && g->out->bytes_out > 0)
		return 0;
	if (!g->started && gzip_header(g) < 0)
		return -1;
	return gzip_par_member_end(g);
}

/* Every byte given so far is out (units end their members), so that
 * copied units can follow. */
static int gzip_classic_sync(void *st)
{
	struct gzip_writer *g = st;

	return g->as ? gzip_async_idle(g) : 0;
}

static int gzip_par_sync(void *st)
{
	struct gzip_writer *g = st;

	return cb_pool_drain(g->pool);
}

/* ---- common ---- */

static void gzip_wfree(void *st)
{
	struct gzip_writer *g = st;

	gzip_async_free(g);   /* before the stream it uses goes */
	if (g->zs_ready)
		deflateEnd(&g->zs);
	cb_pool_free(g->pool);
	cb_trial_free(g->trial);
	cb_free_huge(g->ibuf, CB_CODEC_CHUNK);
	free(g);
}

static const struct cb_codec_wops gzip_classic_wops = {
	gzip_classic_buf, gzip_classic_chunk, gzip_classic_finish, gzip_wfree, 16 * 1024, NULL,
	gzip_classic_sync, NULL
};
static const struct cb_codec_wops gzip_par_wops = {
	gzip_par_buf, gzip_par_chunk, gzip_par_finish, gzip_wfree, 16 * 1024, NULL, gzip_par_sync,
	NULL
};

static int gzip_classic_init(struct gzip_writer *g)
{
	/* raw deflate (-15): the member header and trailer are ours */
	if (deflateInit2(&g->zs, g->level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return cb_error("gzip: cannot initialise compressor (level %d)", g->level);
	g->zs_ready = 1;
	g->cur_level = g->level;
	g->ibuf = cb_xmalloc_huge(CB_CODEC_CHUNK);
	g->trial = cb_trial_new(CB_TRIAL_GAIN_GZIP);
	return 0;
}

/* Output room for one chunk: deflate's bound plus the sync flush, or the
 * stored blocks' headers, whichever is larger. */
static size_t par_out_cap(int level)
{
	z_stream zs = { 0 };
	size_t bound = CB_CODEC_CHUNK + 5 * (CB_CODEC_CHUNK / STORED_MAX + 1);

	if (deflateInit2(&zs, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK) {
		size_t d = deflateBound(&zs, CB_CODEC_CHUNK) + 64;
		bound = d > bound ? d : bound;
		deflateEnd(&zs);
	}
	return bound;
}

int cb_codec_gzip_writer(void **st, const struct cb_codec_wops **ops,
			 const struct cb_codec_params *p, struct cb_codec_out *o)
{
	struct gzip_writer *g = cb_xcalloc(1, sizeof(*g));
	int threads = p->threads == 1 ? (cb_codec_cores() + 1) / 2 : p->threads;

	g->out = o;
	g->level = p->level ? p->level : 6;
	if (g->level < 1 || g->level > 9) {
		free(g);
		return cb_error("gzip: bad level %d", p->level);
	}
	if (threads == 0) {
		if (gzip_classic_init(g) < 0) {
			gzip_wfree(g);
			return -1;
		}
		if (cb_codec_cores() > 1)
			gzip_async_start(g);
		*ops = &gzip_classic_wops;
	} else {
		g->out_cap = par_out_cap(g->level);
		g->pool = cb_pool_new(threads, g->out_cap, sizeof(struct gzip_job), &gzip_pool_ops, g);
		*ops = &gzip_par_wops;
	}
	*st = g;
	return 0;
}

/* ---- reader ---- */

struct gzip_reader {
	z_stream zs;
	struct cb_codec_in *in;
	int done;
	int member_start;    /* the next input byte starts a member */
};

/* After a member ended: another member follows, or the stream is over. */
static int gzip_next_member(struct gzip_reader *g)
{
	struct cb_codec_in *in = g->in;

	if (in->pos == in->len && cb_codec_in_fill(in) < 0)
		return -1;
	if (in->pos == in->len) {
		g->done = 1;
		return 0;
	}
	if (inflateReset(&g->zs) != Z_OK)
		return cb_error("gzip: cannot reset decompressor");
	g->member_start = 1;
	return 0;
}

static int gzip_inflate(struct gzip_reader *g, uint64_t produced)
{
	struct cb_codec_in *in = g->in;
	int rc;

	if (g->member_start && cb_codec_in_unit(in, produced) < 0)
		return -1;
	g->member_start = 0;
	g->zs.next_in = in->buf + in->pos;
	g->zs.avail_in = in->len - in->pos;
	rc = inflate(&g->zs, Z_NO_FLUSH);
	in->pos = in->len - g->zs.avail_in;
	if (rc == Z_STREAM_END)
		return gzip_next_member(g);
	if (rc == Z_OK || rc == Z_BUF_ERROR)
		return 0;
	return cb_error("corrupt gzip data: %s", g->zs.msg ? g->zs.msg : zError(rc));
}

static ssize_t gzip_read(void *st, void *buf, size_t len)
{
	struct gzip_reader *g = st;

	if (len > (1u << 30))
		len = 1u << 30;
	g->zs.next_out = buf;
	g->zs.avail_out = len;
	while (g->zs.avail_out == len && !g->done) {
		if (g->in->pos == g->in->len) {
			ssize_t n = cb_codec_in_fill(g->in);
			if (n < 0)
				return -1;
			if (n == 0)
				return cb_error("truncated gzip stream");
		}
		if (gzip_inflate(g, len - g->zs.avail_out) < 0)
			return -1;
	}
	return len - g->zs.avail_out;
}

static void gzip_rfree(void *st)
{
	struct gzip_reader *g = st;

	inflateEnd(&g->zs);
	free(g);
}

static int gzip_reset(void *st)
{
	struct gzip_reader *g = st;

	if (inflateReset(&g->zs) != Z_OK)
		return cb_error("gzip: cannot reset decompressor");
	g->done = 0;
	g->member_start = 1;
	return 0;
}

static const struct cb_codec_rops gzip_rops = { gzip_read, gzip_rfree, gzip_reset, NULL, NULL };

int cb_codec_gzip_reader(void **st, const struct cb_codec_rops **ops, struct cb_codec_in *in)
{
	struct gzip_reader *g = cb_xcalloc(1, sizeof(*g));

	g->in = in;
	g->member_start = 1;
	if (inflateInit2(&g->zs, 15 + 16) != Z_OK) {
		free(g);
		return cb_error("gzip: cannot initialise decompressor");
	}
	*st = g;
	*ops = &gzip_rops;
	return 0;
}
