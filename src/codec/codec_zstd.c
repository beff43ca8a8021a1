/*
 * zstd codec: one frame per unit (or per run of one kind within a unit),
 * compressed by a pool of workers, and streaming decompression. Stored
 * chunks go into frames of raw blocks that we write ourselves (libzstd has
 * no public way to force raw blocks); concatenated frames and the trailing
 * seek table are one valid stream for `zstd -d` and our reader.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "cb_util.h"
#include "codec_int.h"

/* Raw frames: magic, frame header descriptor 0x04 (no content size, the
 * content checksum, not single-segment), window descriptor for 128 KiB
 * (exponent 7: 1 << (10 + 7)), then raw blocks of at most 128 KiB and the
 * checksum (low 32 bits of XXH64 of the content, little-endian). A small
 * window keeps `zstd -d` from reserving memory for data it only copies; the
 * checksum makes every decoder (`zstd -t`, ours) check stored units as it
 * checks compressed ones: a raw block has no other check. */
#define RAW_BLOCK_MAX (128 * 1024)
#define RAW_CHECKSUM 4
static const unsigned char raw_frame_header[6] = { 0x28, 0xb5, 0x2f, 0xfd, 0x04, 7 << 3 };

/*
 * Every frame is a unit's run of one kind (compressed, or stored as raw
 * blocks), so frames are independent: a pool of workers compresses them
 * at once, one single-threaded ZSTD_compress2() each, and they are written
 * in order. Against libzstd's own workers on one stream this loses only
 * the history at each unit's start (about 0.7% at 4 MiB units on a distro
 * root: measured in bench/restore.sh), and keeps every core busy without
 * the drain a frame end costs its workers.
 *
 * A job is a segment: codec_seg.c gathers the segment straight into the
 * input of the job that compresses it (zstd_seg_buf), its frames are taken
 * from there in place, and the job goes to the pool whole. So a segment
 * needs no buffer of its own and no byte is copied on its way to a worker.
 */
struct zstd_writer {
	struct cb_codec_out *out;
	struct cb_pool *pool;
	struct cb_pool_job *job;   /* the segment being gathered, or NULL */
	size_t fill;               /* its bytes taken so far */
	size_t frame_at;           /* where the frame being taken starts */
	int raw;                   /* of raw blocks (stored), not compressed */
	int level;
	size_t out_cap;            /* a job's output buffer */
	struct cb_trial *trial;
	int any;                   /* any frame written */
};

/* A job's frames (in its extra), one after the other in its input. */
struct zstd_frame {
	size_t len;
	int raw;
	size_t out_len;
	unsigned char *spill;      /* its output, when the job's had no room */
};

struct zstd_job {
	struct zstd_frame *f;
	size_t n, cap;
};

struct zstd_scratch {
	ZSTD_CCtx *cctx;
};

static void *zstd_scratch_new(void *ctx)
{
	struct zstd_writer *z = ctx;
	struct zstd_scratch *sc = cb_xcalloc(1, sizeof(*sc));

	sc->cctx = ZSTD_createCCtx();
	if (sc->cctx && (ZSTD_isError(ZSTD_CCtx_setParameter(sc->cctx, ZSTD_c_compressionLevel, z->level)) ||
			 ZSTD_isError(ZSTD_CCtx_setParameter(sc->cctx, ZSTD_c_checksumFlag, 1)))) {
		ZSTD_freeCCtx(sc->cctx);
		sc->cctx = NULL;
	}
	return sc;
}

static void zstd_scratch_free(void *scratch)
{
	struct zstd_scratch *sc = scratch;

	ZSTD_freeCCtx(sc->cctx);
	free(sc);
}

static void zstd_extra_free(void *extra)
{
	struct zstd_job *zj = extra;

	free(zj->f);
}

static void put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (v >> (8 * i)) & 0xff;
}

/* On a worker: compress a frame into dst (cap bytes); for a raw frame
 * (written by emit) only its checksum, here so that the workers share the
 * hashing too. Its output length, or 0 on failure. */
static size_t frame_run(struct zstd_scratch *sc, const struct zstd_frame *f, const unsigned char *in,
			unsigned char *dst, size_t cap)
{
	size_t r;

	if (f->raw) {
		put_le32(dst, (uint32_t)cb_xxh64(in, f->len));
		return RAW_CHECKSUM;
	}
	if (!sc->cctx)
		return 0;
	r = ZSTD_compress2(sc->cctx, dst, cap, in, f->len);
	return ZSTD_isError(r) ? 0 : r;
}

/* On a worker: the job's frames, their outputs one after the other (a
 * frame that might not fit, of a segment cut in very many, gets its own). */
static int zstd_job_run(void *ctx, struct cb_pool_job *j, void *scratch)
{
	struct zstd_writer *z = ctx;
	struct zstd_job *zj = j->extra;
	const unsigned char *in = j->in;

	j->out_len = 0;
	for (size_t i = 0; i < zj->n; i++) {
		struct zstd_frame *f = &zj->f[i];
		size_t bound = f->raw ? RAW_CHECKSUM : ZSTD_compressBound(f->len);
		unsigned char *dst = j->out + j->out_len;

		if (bound > z->out_cap - j->out_len)
			dst = f->spill = cb_xmalloc(bound);
		f->out_len = frame_run(scratch, f, in, dst, bound);
		if (f->out_len == 0)
			return -1;
		if (!f->spill)
			j->out_len += f->out_len;
		in += f->len;
	}
	return 0;
}

static int raw_block_header(struct cb_codec_out *o, size_t len, int last)
{
	uint32_t h = (uint32_t)len << 3 | (last ? 1 : 0);   /* block type 0: raw */
	unsigned char b[3] = { h & 0xff, (h >> 8) & 0xff, (h >> 16) & 0xff };

	return cb_codec_out_write(o, b, 3);
}

/* A frame of raw blocks; an empty last raw block ends it (what libzstd
 * writes for an empty input, too), then sum, its content checksum. */
static int raw_frame(struct cb_codec_out *o, const unsigned char *data, size_t len,
		     const unsigned char *sum)
{
	if (cb_codec_out_write(o, raw_frame_header, sizeof(raw_frame_header)) < 0)
		return -1;
	for (size_t off = 0; off < len; off += RAW_BLOCK_MAX) {
		size_t k = len - off < RAW_BLOCK_MAX ? len - off : RAW_BLOCK_MAX;

		if (raw_block_header(o, k, 0) < 0 || cb_codec_out_write(o, data + off, k) < 0)
			return -1;
	}
	if (raw_block_header(o, 0, 1) < 0)
		return -1;
	return cb_codec_out_write(o, sum, RAW_CHECKSUM);
}

/* Padding after a segment: a skippable frame of n >= 8 bytes (its own
 * magic, so that nothing mistakes it for the seek table). */
static int zstd_pad(struct cb_codec_out *o, size_t n)
{
	unsigned char *b = cb_xcalloc(1, n);
	int ret;

	b[0] = 0x5b, b[1] = 0x2a, b[2] = 0x4d, b[3] = 0x18;
	b[4] = (unsigned char)(n - 8), b[5] = (unsigned char)((n - 8) >> 8);
	ret = cb_codec_out_write(o, b, n);
	free(b);
	return ret;
}

/* On the calling thread, in order: every frame is a unit. */
static int zstd_job_emit(void *ctx, struct cb_pool_job *j)
{
	struct zstd_writer *z = ctx;
	struct zstd_job *zj = j->extra;
	const unsigned char *in = j->in, *out = j->out;
	int ret = 0;

	for (size_t i = 0; ret == 0 && i < zj->n; i++) {
		const struct zstd_frame *f = &zj->f[i];
		const unsigned char *o = f->spill ? f->spill : out;

		cb_codec_out_unit(z->out);
		z->out->u_done += f->len;
		z->any = 1;
		ret = f->raw ? raw_frame(z->out, in, f->len, o) : cb_codec_out_write(z->out, o, f->out_len);
		in += f->len;
		out += f->spill ? 0 : f->out_len;
	}
	for (size_t i = 0; i < zj->n; i++) {
		free(zj->f[i].spill);
		zj->f[i].spill = NULL;
	}
	if (ret == 0 && j->m.unit_end)
		ret = cb_codec_out_seg_done(z->out, zstd_pad, 8);
	return ret;
}

static const struct cb_pool_ops zstd_pool_ops = {
	zstd_job_run, zstd_job_emit, zstd_scratch_new, zstd_scratch_free, zstd_extra_free
};

/* The frame being taken ends where the bytes taken end. */
static void frame_close(struct zstd_writer *z)
{
	struct zstd_job *zj = z->job->extra;

	if (z->fill == z->frame_at)
		return;
	if (zj->n == zj->cap) {
		zj->cap = zj->cap ? 2 * zj->cap : 8;
		zj->f = cb_xrealloc(zj->f, zj->cap * sizeof(*zj->f));
	}
	zj->f[zj->n++] = (struct zstd_frame){ z->fill - z->frame_at, z->raw, 0, NULL };
	z->frame_at = z->fill;
}

/* Hand the segment taken to the pool; unit_end: it ends a segment. */
static int job_submit(struct zstd_writer *z, int unit_end)
{
	struct zstd_job *zj;
	int raw = 1;

	if (!z->job)
		return 0;
	frame_close(z);
	zj = z->job->extra;
	if (zj->n == 0)
		return 0;   /* a segment still being gathered stays */
	for (size_t i = 0; i < zj->n; i++)
		raw &= zj->f[i].raw;
	z->job->m.unit_end = unit_end;
	z->job->m.len = z->fill;
	z->job->m.cls = raw ? CB_CHUNK_STORE : CB_CHUNK_COMPRESS;
	z->job = NULL;
	z->fill = z->frame_at = 0;
	return cb_pool_submit(z->pool);
}

static struct cb_pool_job *job_get(struct zstd_writer *z)
{
	if (!z->job && (z->job = cb_pool_acquire(z->pool)))
		((struct zstd_job *)z->job->extra)->n = 0;
	return z->job;
}

static unsigned char *zstd_chunk_buf(void *st)
{
	struct zstd_writer *z = st;

	return job_get(z) ? z->job->in + z->fill : NULL;
}

/* The next segment is gathered in the job that will compress it. */
static unsigned char *zstd_seg_buf(void *st)
{
	struct zstd_writer *z = st;

	return job_get(z) ? z->job->in : NULL;
}

static int zstd_chunk(void *st, const struct cb_chunk_meta *m)
{
	struct zstd_writer *z = st;
	int raw = m->cls == CB_CHUNK_STORE;

	/* a short chunk is not worth a frame switch */
	if (!raw && m->cls == CB_CHUNK_TRIAL && m->len >= 512 * 1024 &&
	    cb_trial_store(z->trial, z->job->in + z->fill, m->len)) {
		raw = 1;
		cb_codec_out_stored(z->out, m, CB_STORED_TRIAL, m->len);
	} else if (raw) {
		cb_codec_out_stored(z->out, m, m->reason, m->len);
	}
	/* a chunk of the other kind starts a frame of its own */
	if (raw != z->raw) {
		frame_close(z);
		z->raw = raw;
	}
	z->fill += m->len;
	return m->unit_end ? job_submit(z, 1) : 0;
}

/*
 * The seek table of zstd's seekable format (contrib/seekable_format): a
 * skippable frame (magic 0x184D2A5E, its size) holding per frame its
 * compressed and decompressed size (no checksums: the frames carry their
 * own), then the footer: number of frames, descriptor 0, magic 0x8F92EAB1.
 * Decoders that know nothing of it skip it. Every frame is a unit.
 */
static int seek_table(struct zstd_writer *z)
{
	const struct cb_codec_units *u = &z->out->units;
	size_t n = u->n, len = 8 + 8 * n + 9;
	unsigned char *t = cb_xmalloc(len);
	int ret;

	put_le32(t, 0x184D2A5Eu);
	put_le32(t + 4, (uint32_t)(len - 8));
	for (size_t i = 0; i < n; i++) {
		uint64_t cend = i + 1 < n ? u->v[i + 1].c_off : z->out->bytes_out;
		uint64_t uend = i + 1 < n ? u->v[i + 1].u_off : z->out->u_done;

		put_le32(t + 8 + 8 * i, (uint32_t)(cend - u->v[i].c_off));
		put_le32(t + 12 + 8 * i, (uint32_t)(uend - u->v[i].u_off));
	}
	put_le32(t + 8 + 8 * n, (uint32_t)n);
	t[12 + 8 * n] = 0;
	put_le32(t + 13 + 8 * n, 0x8F92EAB1u);
	ret = cb_codec_out_write(z->out, t, len);
	free(t);
	return ret;
}

static int zstd_finish(void *st)
{
	struct zstd_writer *z = st;
	int ret = job_submit(z, 1);

	ret = cb_pool_drain(z->pool) < 0 ? -1 : ret;
	z->out->compress_seconds += cb_pool_seconds(z->pool);
	if (ret < 0)
		return -1;
	/* an empty input still makes one (empty) frame: a valid .zst (copied
	 * segments are frames too) */
	if (!z->any && z->out->bytes_out == 0) {
		unsigned char sum[RAW_CHECKSUM];

		put_le32(sum, (uint32_t)cb_xxh64("", 0));
		cb_codec_out_unit(z->out);
		if (raw_frame(z->out, NULL, 0, sum) < 0)
			return -1;
	}
	cb_codec_units_finish(&z->out->units, z->out->u_done);
	return seek_table(z);
}

static int zstd_sync(void *st)
{
	struct zstd_writer *z = st;

	return job_submit(z, 1) < 0 ? -1 : cb_pool_drain(z->pool);
}

static void zstd_wfree(void *st)
{
	struct zstd_writer *z = st;

	cb_pool_free(z->pool);
	cb_trial_free(z->trial);
	free(z);
}

static const struct cb_codec_wops zstd_wops = {
	zstd_chunk_buf, zstd_chunk, zstd_finish, zstd_wfree, 512 * 1024, NULL, zstd_sync, zstd_seg_buf
};

int cb_codec_zstd_writer(void **st, const struct cb_codec_wops **ops,
			 const struct cb_codec_params *p, struct cb_codec_out *o)
{
	struct zstd_writer *z = cb_xcalloc(1, sizeof(*z));
	int threads = p->threads > 0 ? p->threads : cb_codec_cores();
	/* a frame is at most a segment: 2 units (codec_seg.c) */
	size_t unit = 2 * (p->unit_size ? (size_t)p->unit_size : CB_CODEC_UNIT_DEFAULT);

	z->out = o;
	z->level = p->level ? p->level : 3;
	if (z->level < ZSTD_minCLevel() || z->level > ZSTD_maxCLevel()) {
		int level = z->level;

		free(z);
		return cb_error("zstd: bad level %d", level);
	}
	z->trial = cb_trial_new(CB_TRIAL_GAIN_FAST);
	/* room for the outputs of a segment's frames: a bound each */
	z->out_cap = ZSTD_compressBound(unit) + 64 * 1024;
	/* one job more than the threads: the segment being gathered */
	z->pool = cb_pool_new_ring(threads, 1, unit, z->out_cap, sizeof(struct zstd_job), &zstd_pool_ops, z);
	*st = z;
	*ops = &zstd_wops;
	return 0;
}

/* ---- the seek table, read back ---- */

#define SKIPPABLE_MAGIC 0x184D2A5Eu
#define SEEKABLE_MAGIC 0x8F92EAB1u
#define FOOTER 9
#define TABLE_MAX (64u * 1024 * 1024)

static uint32_t get_le32(const unsigned char *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Bytes of the whole table a footer announces (0: not a footer). */
static uint64_t table_len(const unsigned char *footer)
{
	uint64_t n = get_le32(footer);
	unsigned desc = footer[4];

	if (get_le32(footer + 5) != SEEKABLE_MAGIC || (desc & 0x7f))
		return 0;
	return 8 + n * (desc & 0x80 ? 12 : 8) + FOOTER;
}

int cb_zstd_seek_table(const unsigned char *t, size_t len, uint64_t file_size,
		       struct cb_codec_units *u)
{
	uint64_t want, n, esize, c = 0, d = 0;

	if (len < 8 + FOOTER || (want = table_len(t + len - FOOTER)) != len || len > file_size)
		return cb_error("zstd seek table: bad footer");
	if (get_le32(t) != SKIPPABLE_MAGIC || get_le32(t + 4) != len - 8)
		return cb_error("zstd seek table: bad skippable frame header");
	n = get_le32(t + len - FOOTER);
	esize = t[len - FOOTER + 4] & 0x80 ? 12 : 8;
	u->n = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint32_t cs = get_le32(t + 8 + i * esize), ds = get_le32(t + 12 + i * esize);

		if (cs == 0 || c + cs > file_size - len)
			return cb_error("zstd seek table: frame %llu lies beyond the archive",
					(unsigned long long)i);
		cb_codec_units_add(u, d, c);
		c += cs;
		d += ds;
	}
	if (c != file_size - len)
		return cb_error("zstd seek table: its frames cover %llu bytes, the archive has %llu "
				"before the table", (unsigned long long)c,
				(unsigned long long)(file_size - len));
	cb_codec_units_finish(u, d);
	return 0;
}

int cb_zstd_read_seek_table(int fd, uint64_t file_size, struct cb_codec_units *u)
{
	unsigned char footer[FOOTER], *t;
	uint64_t len;
	int ret;

	if (file_size < 8 + FOOTER || pread(fd, footer, FOOTER, (off_t)(file_size - FOOTER)) != FOOTER)
		return 1;
	len = table_len(footer);
	if (len == 0)
		return 1;
	if (len > file_size || len > TABLE_MAX)
		return cb_error("zstd seek table: %llu bytes announced", (unsigned long long)len);
	t = cb_xmalloc((size_t)len);
	ret = pread(fd, t, (size_t)len, (off_t)(file_size - len)) == (ssize_t)len
	      ? cb_zstd_seek_table(t, (size_t)len, file_size, u)
	      : cb_error_errno("cannot read the zstd seek table");
	free(t);
	return ret;
}

/* ---- reader ---- */

struct zstd_reader {
	ZSTD_DCtx *dctx;
	struct cb_codec_in *in;
	size_t last;      /* last ZSTD_decompressStream result: 0 = frame complete */
	int started;      /* any input seen (an empty file is no stream at all) */
};

static ssize_t zstd_read(void *st, void *buf, size_t len)
{
	struct zstd_reader *z = st;
	ZSTD_outBuffer ob = { buf, len, 0 };

	while (ob.pos == 0) {
		struct cb_codec_in *in = z->in;
		ZSTD_inBuffer ib;

		if (in->pos == in->len) {
			ssize_t n = cb_codec_in_fill(in);
			if (n < 0)
				return -1;
			if (n == 0) {
				if (z->last != 0 || !z->started)
					return cb_error("truncated zstd stream");
				return 0;
			}
		}
		z->started = 1;
		if (z->last == 0 && cb_codec_in_unit(in, ob.pos) < 0)
			return -1;
		ib = (ZSTD_inBuffer){ in->buf, in->len, in->pos };
		z->last = ZSTD_decompressStream(z->dctx, &ob, &ib);
		in->pos = ib.pos;
		if (ZSTD_isError(z->last))
			return cb_error("corrupt zstd data: %s", ZSTD_getErrorName(z->last));
	}
	return ob.pos;
}

static void zstd_rfree(void *st)
{
	struct zstd_reader *z = st;

	ZSTD_freeDCtx(z->dctx);
	free(z);
}

static int zstd_reset(void *st)
{
	struct zstd_reader *z = st;

	ZSTD_DCtx_reset(z->dctx, ZSTD_reset_session_only);
	z->last = 0;
	z->started = 0;
	return 0;
}

static const struct cb_codec_rops zstd_rops = { zstd_read, zstd_rfree, zstd_reset, NULL, NULL };

int cb_codec_zstd_reader(void **st, const struct cb_codec_rops **ops, struct cb_codec_in *in)
{
	struct zstd_reader *z = cb_xcalloc(1, sizeof(*z));

	z->in = in;
	z->dctx = ZSTD_createDCtx();
	if (!z->dctx) {
		free(z);
		return cb_error("zstd: cannot create decompression context");
	}
	*st = z;
	*ops = &zstd_rops;
	return 0;
}
