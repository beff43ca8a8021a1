/*
 * zstd codec: libzstd streaming compression (multithreaded through
 * ZSTD_c_nbWorkers) and streaming decompression. libzstd writes straight
 * into the sink's write-behind slots, which gather the output into large
 * writes.
 *
 * Stored chunks end the current frame and go into a frame of raw blocks
 * that we write ourselves (libzstd has no public way to force raw blocks);
 * concatenated frames are one valid stream for `zstd -d` and our reader.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "cb_util.h"
#include "codec_int.h"

/* Raw frames: magic, frame header descriptor 0 (no content size, no
 * checksum, not single-segment), window descriptor for 128 KiB (exponent
 * 7: 1 << (10 + 7)), then raw blocks of at most 128 KiB. A small window
 * keeps `zstd -d` from reserving memory for data it only copies. */
#define RAW_BLOCK_MAX (128 * 1024)
static const unsigned char raw_frame_header[6] = { 0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3 };

struct zstd_writer {
	ZSTD_CCtx *cctx;
	struct cb_codec_out *out;
	unsigned char *ibuf;      /* the chunk */
	struct cb_trial *trial;
	int in_frame;             /* compressed frame open (bytes given since its start) */
	int in_raw;               /* raw frame open */
	int any;                  /* any frame written */
};

/* Run the compressor until it needs no more room for this call; it writes
 * straight into the sink's buffer. */
static int zstd_run(struct zstd_writer *z, ZSTD_inBuffer *ib, ZSTD_EndDirective mode)
{
	for (;;) {
		size_t avail, rem;
		ZSTD_outBuffer ob = { cb_codec_out_buffer(z->out, &avail), 0, 0 };
		double t0 = cb_now();

		if (!ob.dst)
			return -1;
		ob.size = avail;
		rem = ZSTD_compressStream2(z->cctx, &ob, ib, mode);
		z->out->compress_seconds += cb_now() - t0;
		if (ZSTD_isError(rem))
			return cb_error("zstd compression failed: %s", ZSTD_getErrorName(rem));
		if (cb_codec_out_advance(z->out, ob.pos) < 0)
			return -1;
		if (mode == ZSTD_e_end ? rem == 0 : ib->pos == ib->size)
			return 0;
	}
}

static int raw_block_header(struct zstd_writer *z, size_t len, int last)
{
	uint32_t h = (uint32_t)len << 3 | (last ? 1 : 0);   /* block type 0: raw */
	unsigned char b[3] = { h & 0xff, (h >> 8) & 0xff, (h >> 16) & 0xff };

	return cb_codec_out_write(z->out, b, 3);
}

/* An empty last raw block ends the raw frame (what libzstd writes for an
 * empty input, too). */
static int raw_close(struct zstd_writer *z)
{
	if (!z->in_raw)
		return 0;
	z->in_raw = 0;
	return raw_block_header(z, 0, 1);
}

static int frame_end(struct zstd_writer *z)
{
	ZSTD_inBuffer ib = { NULL, 0, 0 };

	if (!z->in_frame)
		return 0;
	z->in_frame = 0;
	return zstd_run(z, &ib, ZSTD_e_end);
}

/* A unit ends with its chunk: whichever frame is open is closed. */
static int unit_close(struct zstd_writer *z, const struct cb_chunk_meta *m)
{
	z->out->u_done += m->len;
	if (!m->unit_end)
		return 0;
	return raw_close(z) < 0 ? -1 : frame_end(z);
}

static int raw_chunk(struct zstd_writer *z, const unsigned char *data, size_t len)
{
	if (frame_end(z) < 0)
		return -1;
	if (!z->in_raw)
		cb_codec_out_unit(z->out);
	if (!z->in_raw && cb_codec_out_write(z->out, raw_frame_header, sizeof(raw_frame_header)) < 0)
		return -1;
	z->in_raw = z->any = 1;
	for (size_t off = 0; off < len; off += RAW_BLOCK_MAX) {
		size_t k = len - off < RAW_BLOCK_MAX ? len - off : RAW_BLOCK_MAX;

		if (raw_block_header(z, k, 0) < 0 || cb_codec_out_write(z->out, data + off, k) < 0)
			return -1;
	}
	return 0;
}

static const struct cb_codec_wops zstd_wops;

static unsigned char *zstd_chunk_buf(void *st)
{
	return ((struct zstd_writer *)st)->ibuf;
}

static int zstd_chunk(void *st, const struct cb_chunk_meta *m)
{
	struct zstd_writer *z = st;
	ZSTD_inBuffer ib = { z->ibuf, m->len, 0 };

	if (m->cls == CB_CHUNK_STORE) {
		cb_codec_out_stored(z->out, m, m->reason, m->len);
		return raw_chunk(z, z->ibuf, m->len) < 0 ? -1 : unit_close(z, m);
	}
	/* a short chunk is not worth a frame switch */
	if (m->cls == CB_CHUNK_TRIAL && m->len >= zstd_wops.min_store &&
	    cb_trial_store(z->trial, z->ibuf, m->len)) {
		cb_codec_out_stored(z->out, m, CB_STORED_TRIAL, m->len);
		return raw_chunk(z, z->ibuf, m->len) < 0 ? -1 : unit_close(z, m);
	}
	if (raw_close(z) < 0)
		return -1;
	if (!z->in_frame)
		cb_codec_out_unit(z->out);
	z->in_frame = z->any = 1;
	return zstd_run(z, &ib, ZSTD_e_continue) < 0 ? -1 : unit_close(z, m);
}

/* Stored bytes straight from the archive writer's buffer: no chunk copy. */
static int zstd_store(void *st, const struct cb_chunk_meta *m, const unsigned char *data)
{
	struct zstd_writer *z = st;

	cb_codec_out_stored(z->out, m, m->reason, m->len);
	return raw_chunk(z, data, m->len) < 0 ? -1 : unit_close(z, m);
}

static void put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (v >> (8 * i)) & 0xff;
}

/*
 * The seek table of zstd's seekable format (contrib/seekable_format): a
 * skippable frame (magic 0x184D2A5E, its size) holding per frame its
 * compressed and decompressed size (no checksums: the frames carry their
 * own), then the footer: number of frames, descriptor 0, magic 0x8F92EAB1.
 * Decoders that know nothing of it skip it. Every frame is a unit (units
 * that yielded nothing were merged into the next by cb_codec_units_add,
 * which then spans both frames: still one decodable run of bytes).
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

	if (raw_close(z) < 0)
		return -1;
	/* an empty input still makes one (empty) frame: a valid .zst */
	if (!z->any) {
		cb_codec_out_unit(z->out);
		z->in_frame = 1;
	}
	if (frame_end(z) < 0)
		return -1;
	cb_codec_units_finish(&z->out->units, z->out->u_done);
	return seek_table(z);
}

static void zstd_wfree(void *st)
{
	struct zstd_writer *z = st;

	ZSTD_freeCCtx(z->cctx);
	cb_trial_free(z->trial);
	cb_free_huge(z->ibuf, CB_CODEC_CHUNK);
	free(z);
}

/* A frame end drains libzstd's workers and loses the history: only runs of
 * a few chunks are worth it. */
static const struct cb_codec_wops zstd_wops = {
	zstd_chunk_buf, zstd_chunk, zstd_finish, zstd_wfree, 512 * 1024, zstd_store
};

static int zstd_set(ZSTD_CCtx *cctx, ZSTD_cParameter param, int value, const char *what)
{
	size_t r = ZSTD_CCtx_setParameter(cctx, param, value);

	if (ZSTD_isError(r))
		return cb_error("zstd: cannot set %s to %d: %s", what, value, ZSTD_getErrorName(r));
	return 0;
}

/* A frame end waits for every worker: jobs of a unit's share per thread
 * keep them all busy within each unit (libzstd's floor is 512 KiB). */
static void set_job_size(ZSTD_CCtx *cctx, const struct cb_codec_params *p, int threads)
{
	uint64_t unit = p->unit_size ? p->unit_size : CB_CODEC_UNIT_DEFAULT;
	uint64_t job = unit / (uint64_t)threads;

	if (job < 512 * 1024)
		job = 512 * 1024;
	if (job < unit)
		ZSTD_CCtx_setParameter(cctx, ZSTD_c_jobSize, (int)job);
}

int cb_codec_zstd_writer(void **st, const struct cb_codec_wops **ops,
			 const struct cb_codec_params *p, struct cb_codec_out *o)
{
	struct zstd_writer *z = cb_xcalloc(1, sizeof(*z));
	int threads = p->threads > 0 ? p->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);

	z->out = o;
	z->cctx = ZSTD_createCCtx();
	if (!z->cctx) {
		free(z);
		return cb_error("zstd: cannot create compression context");
	}
	if (zstd_set(z->cctx, ZSTD_c_compressionLevel, p->level ? p->level : 3, "level") < 0 ||
	    zstd_set(z->cctx, ZSTD_c_checksumFlag, 1, "checksum flag") < 0)
		goto fail;
	/* A libzstd built without threads refuses nbWorkers: compress on the
	 * calling thread then, which is still correct output. */
	if (threads > 1 && !ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_nbWorkers, threads)))
		set_job_size(z->cctx, p, threads);
	z->ibuf = cb_xmalloc_huge(CB_CODEC_CHUNK);
	z->trial = cb_trial_new(CB_TRIAL_GAIN_FAST);
	*st = z;
	*ops = &zstd_wops;
	return 0;
fail:
	ZSTD_freeCCtx(z->cctx);
	free(z);
	return -1;
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
		if (z->last == 0)
			cb_codec_in_unit(in, ob.pos);
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

static const struct cb_codec_rops zstd_rops = { zstd_read, zstd_rfree, zstd_reset };

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
