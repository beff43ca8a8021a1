/*
 * lzo codec: the lzop file format (what `lzop -d` reads and writes), with
 * LZO1X-1 blocks from liblzo2.
 *
 * File: magic, header (big-endian fields, adler32 over the header), blocks,
 * a 32-bit zero. Block: uncompressed size, compressed size, CRC-32 of the
 * uncompressed data, CRC-32 of the compressed data (only when the block is
 * actually compressed), data. A block that does not shrink is stored as is
 * with both sizes equal — lzop does the same, and the stored-block policy
 * uses it: chunks that are stored get such blocks without a compression try.
 * Chunks (4 blocks) are compressed in parallel by codec_pool.c.
 */
#include <stdlib.h>
#include <string.h>
#include <lzo/lzo1x.h>

#include "cb_util.h"
#include "codec_int.h"

#define LZOP_VERSION        0x1040
#define LZOP_VERSION_NEEDED 0x0940
#define LZOP_LEVEL          5        /* what lzop records for method 1 */
#define M_LZO1X_1           1
#define M_LZO1X_1_15        2
#define M_LZO1X_999         3
#define F_ADLER32_D         0x00000001u
#define F_ADLER32_C         0x00000002u
#define F_STDIN             0x00000004u
#define F_H_EXTRA_FIELD     0x00000040u
#define F_CRC32_D           0x00000100u
#define F_CRC32_C           0x00000200u
#define F_MULTIPART         0x00000400u
#define F_H_FILTER          0x00000800u
#define F_H_CRC32           0x00001000u
#define F_OS_UNIX           0x03000000u

#define BLOCK_SIZE          (256 * 1024)
#define MAX_BLOCK_SIZE      (64 * 1024 * 1024)   /* lzop's own limit */
#define BLOCK_HDR_MAX       16
#define STORED_HDR          12   /* sizes (equal) and CRC-32 of the data */

static void put32(unsigned char *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

static uint32_t get32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The checksum the writer puts on blocks (F_CRC32_D / F_CRC32_C). */
static uint32_t block_sum(const void *buf, size_t len)
{
	return cb_crc32(0, buf, len);
}

static uint32_t adler(uint32_t a, const void *buf, size_t len)
{
	return lzo_adler32(a, buf, len);
}

/* Worst case of one block in the output: header and LZO1X expansion (per
 * the liblzo2 documentation). */
#define BLOCK_OUT_MAX (BLOCK_HDR_MAX + BLOCK_SIZE + BLOCK_SIZE / 16 + 64 + 3)
#define CHUNK_OUT_MAX ((CB_CODEC_CHUNK / BLOCK_SIZE + 1) * BLOCK_OUT_MAX)

struct lzo_writer {
	struct cb_codec_out *out;
	struct cb_pool *pool;
	int started;             /* file header written */
};

struct lzo_scratch {
	void *wrkmem;
	struct cb_trial *trial;
};

/* What a job reports besides its bytes. */
struct lzo_job {
	uint64_t nogain;         /* bytes stored because LZO did not shrink them */
	int trial_store;
	/* where each compressed block ends in out (each block is a unit) */
	size_t bend[CB_CODEC_CHUNK / BLOCK_SIZE + 1];
};

static int lzo_write_header(struct lzo_writer *z)
{
	unsigned char h[64];
	size_t n = 0;

	memcpy(h, CB_LZOP_MAGIC, CB_LZOP_MAGIC_LEN);
	n = CB_LZOP_MAGIC_LEN;
	h[n++] = LZOP_VERSION >> 8;
	h[n++] = LZOP_VERSION & 0xff;
	h[n++] = (lzo_version() >> 8) & 0xff;
	h[n++] = lzo_version() & 0xff;
	h[n++] = LZOP_VERSION_NEEDED >> 8;
	h[n++] = LZOP_VERSION_NEEDED & 0xff;
	h[n++] = M_LZO1X_1;
	h[n++] = LZOP_LEVEL;
	/* F_STDIN: like `tar | lzop`, no name, mode 0; mtime 0 keeps the
	 * archive bytes reproducible */
	/* block checksums are CRC-32 (`lzop --crc32`): every stored byte is
	 * summed, and cb_crc32 runs four times as fast as lzo's adler32 */
	put32(h + n, F_OS_UNIX | F_STDIN | F_CRC32_D | F_CRC32_C);
	put32(h + n + 4, 0);                               /* mode */
	put32(h + n + 8, 0);                               /* mtime low */
	put32(h + n + 12, 0);                              /* mtime high */
	n += 16;
	h[n++] = 0;                                        /* name length */
	put32(h + n, adler(1, h + CB_LZOP_MAGIC_LEN, n - CB_LZOP_MAGIC_LEN));
	n += 4;
	z->started = 1;
	if (cb_codec_out_write(z->out, h, n) < 0)
		return -1;
	/* the file header belongs to no segment */
	cb_codec_out_seg_skip(z->out);
	return 0;
}

/* The header of a stored block: both sizes len, the checksum of the data
 * (which follows it, from the chunk itself). */
static void stored_header(unsigned char *h, const unsigned char *in, size_t len)
{
	put32(h, len);
	put32(h + 4, len);
	put32(h + 8, block_sum(in, len));
}

/* One compressed lzop block of len bytes at dst; returns its size in the
 * output. A block that does not shrink is stored (counted in *nogain). */
static size_t lzo_block(const unsigned char *in, size_t len, unsigned char *dst, void *wrkmem,
			uint64_t *nogain)
{
	lzo_uint clen = len;

	if (lzo1x_1_compress(in, len, dst + 16, &clen, wrkmem) == LZO_E_OK && clen < len) {
		put32(dst, len);
		put32(dst + 4, clen);
		put32(dst + 8, block_sum(in, len));
		put32(dst + 12, block_sum(dst + 16, clen));
		return 16 + clen;
	}
	*nogain += len;
	stored_header(dst, in, len);
	memcpy(dst + STORED_HDR, in, len);
	return STORED_HDR + len;
}

/* Stored chunks (the policy said so) get only their block headers here:
 * emit writes the data straight from j->in, so no worker copies it. */
static int chunk_is_stored(const struct cb_pool_job *j)
{
	return j->m.cls == CB_CHUNK_STORE || ((struct lzo_job *)j->extra)->trial_store;
}

static int lzo_run(void *ctx, struct cb_pool_job *j, void *scratch)
{
	struct lzo_scratch *sc = scratch;
	struct lzo_job *lj = j->extra;

	(void)ctx;
	lj->nogain = 0;
	lj->trial_store = j->m.cls == CB_CHUNK_TRIAL && cb_trial_store(sc->trial, j->in, j->m.len);
	j->out_len = 0;
	for (size_t off = 0; off < j->m.len; off += BLOCK_SIZE) {
		size_t k = j->m.len - off < BLOCK_SIZE ? j->m.len - off : BLOCK_SIZE;

		if (chunk_is_stored(j)) {
			stored_header(j->out + j->out_len, j->in + off, k);
			j->out_len += STORED_HDR;
		} else {
			j->out_len += lzo_block(j->in + off, k, j->out + j->out_len, sc->wrkmem,
						&lj->nogain);
		}
		lj->bend[off / BLOCK_SIZE] = j->out_len;
	}
	return 0;
}

static int lzo_emit(void *ctx, struct cb_pool_job *j)
{
	struct lzo_writer *z = ctx;
	struct lzo_job *lj = j->extra;

	if (!z->started && lzo_write_header(z) < 0)
		return -1;
	if (j->m.cls == CB_CHUNK_STORE)
		cb_codec_out_stored(z->out, &j->m, j->m.reason, j->m.len);
	else if (lj->trial_store)
		cb_codec_out_stored(z->out, &j->m, CB_STORED_TRIAL, j->m.len);
	cb_codec_out_stored(z->out, NULL, CB_STORED_NOGAIN, lj->nogain);
	for (size_t off = 0, h = 0; off < j->m.len; off += BLOCK_SIZE, h += STORED_HDR) {
		size_t k = j->m.len - off < BLOCK_SIZE ? j->m.len - off : BLOCK_SIZE;
		size_t b = off / BLOCK_SIZE, bstart = b ? lj->bend[b - 1] : 0;

		cb_codec_out_unit(z->out);
		z->out->u_done += k;
		if (!chunk_is_stored(j) ? cb_codec_out_write(z->out, j->out + bstart, lj->bend[b] - bstart) < 0
		    : (cb_codec_out_write(z->out, j->out + h, STORED_HDR) < 0 ||
		       cb_codec_out_write(z->out, j->in + off, k) < 0))
			return -1;
	}
	/* lzop has no padding: segments are as long as their blocks */
	return j->m.unit_end ? cb_codec_out_seg_done(z->out, NULL, 0) : 0;
}

static void *lzo_scratch_new(void *ctx)
{
	struct lzo_scratch *sc = cb_xcalloc(1, sizeof(*sc));

	(void)ctx;
	sc->wrkmem = cb_xmalloc(LZO1X_1_MEM_COMPRESS);
	sc->trial = cb_trial_new(CB_TRIAL_GAIN_FAST);
	return sc;
}

static void lzo_scratch_free(void *scratch)
{
	struct lzo_scratch *sc = scratch;

	free(sc->wrkmem);
	cb_trial_free(sc->trial);
	free(sc);
}

static const struct cb_pool_ops lzo_pool_ops = {
	lzo_run, lzo_emit, lzo_scratch_new, lzo_scratch_free, NULL
};

static unsigned char *lzo_chunk_buf(void *st)
{
	struct lzo_writer *z = st;
	struct cb_pool_job *j = cb_pool_acquire(z->pool);

	return j ? j->in : NULL;
}

static int lzo_chunk(void *st, const struct cb_chunk_meta *m)
{
	struct lzo_writer *z = st;
	struct cb_pool_job *j = cb_pool_acquire(z->pool);

	if (!j)
		return -1;
	j->m = *m;
	return cb_pool_submit(z->pool);
}

static int lzo_finish(void *st)
{
	struct lzo_writer *z = st;
	unsigned char end[4] = { 0, 0, 0, 0 };
	int ret = cb_pool_drain(z->pool);

	z->out->compress_seconds += cb_pool_seconds(z->pool);
	if (ret < 0 || (!z->started && lzo_write_header(z) < 0))
		return -1;
	return cb_codec_out_write(z->out, end, sizeof(end));
}

static int lzo_sync(void *st)
{
	struct lzo_writer *z = st;

	if (cb_pool_drain(z->pool) < 0)
		return -1;
	return z->started ? 0 : lzo_write_header(z);
}

static void lzo_wfree(void *st)
{
	struct lzo_writer *z = st;

	cb_pool_free(z->pool);
	free(z);
}

static const struct cb_codec_wops lzo_wops = {
	lzo_chunk_buf, lzo_chunk, lzo_finish, lzo_wfree, 16 * 1024, NULL, lzo_sync, NULL
};

int cb_codec_lzo_writer(void **st, const struct cb_codec_wops **ops,
			const struct cb_codec_params *p, struct cb_codec_out *o)
{
	struct lzo_writer *z;

	if (lzo_init() != LZO_E_OK)
		return cb_error("lzo: library initialisation failed");
	z = cb_xcalloc(1, sizeof(*z));
	z->out = o;
	z->pool = cb_pool_new(p->threads > 0 ? p->threads : cb_codec_cores(), CHUNK_OUT_MAX,
			      sizeof(struct lzo_job), &lzo_pool_ops, z);
	*st = z;
	*ops = &lzo_wops;
	return 0;
}

/* ---- reader ---- */

struct lzo_reader {
	struct cb_codec_in *in;
	uint32_t flags;
	unsigned char *cbuf, *dbuf;   /* compressed / decompressed block */
	size_t cap;
	size_t dpos, dlen;            /* unread part of dbuf */
	unsigned block;               /* 1-based number of the current block */
	int done;
};

/* Header bytes are collected in h to compute the header checksum. */
struct lzo_hdr {
	unsigned char h[512];
	size_t n;
};

static int hdr_take(struct cb_codec_in *in, struct lzo_hdr *hd, size_t len)
{
	int rc;

	if (hd->n + len > sizeof(hd->h))
		return cb_error("corrupt lzo header");
	rc = cb_codec_in_take(in, hd->h + hd->n, len);
	if (rc < 0)
		return -1;
	if (rc > 0)
		return cb_error("truncated lzo stream (in header)");
	hd->n += len;
	return 0;
}

static int hdr_u32(struct cb_codec_in *in, struct lzo_hdr *hd, uint32_t *v)
{
	if (hdr_take(in, hd, 4) < 0)
		return -1;
	*v = get32(hd->h + hd->n - 4);
	return 0;
}

static int check_header_sum(struct cb_codec_in *in, struct lzo_hdr *hd, uint32_t flags)
{
	const unsigned char *b = hd->h + CB_LZOP_MAGIC_LEN;
	size_t blen = hd->n - CB_LZOP_MAGIC_LEN;
	uint32_t want, got;
	unsigned char s[4];

	got = flags & F_H_CRC32 ? cb_crc32(0, b, blen) : adler(1, b, blen);
	if (cb_codec_in_take(in, s, 4) != 0)
		return cb_error("truncated lzo stream (in header)");
	want = get32(s);
	if (want != got)
		return cb_error("corrupt lzo header: checksum mismatch");
	return 0;
}

/* Extra field: length, data, checksum; its content is of no use to us. */
static int skip_extra_field(struct cb_codec_in *in)
{
	unsigned char s[4];
	uint32_t len;

	if (cb_codec_in_take(in, s, 4) != 0)
		return cb_error("truncated lzo stream (in header)");
	len = get32(s);
	if (len > 64 * 1024)
		return cb_error("corrupt lzo header: extra field of %u bytes", len);
	for (uint32_t i = 0; i < len + 4; i++)
		if (cb_codec_in_take(in, s, 1) != 0)
			return cb_error("truncated lzo stream (in header)");
	return 0;
}

static int parse_header(struct lzo_reader *z)
{
	struct lzo_hdr hd = { .n = 0 };
	uint32_t flags, u;
	unsigned version, method;

	if (hdr_take(z->in, &hd, CB_LZOP_MAGIC_LEN + 4) < 0)
		return -1;
	version = hd.h[9] << 8 | hd.h[10];
	if (version >= 0x0940) {
		if (hdr_take(z->in, &hd, 2) < 0)
			return -1;
		if ((hd.h[hd.n - 2] << 8 | hd.h[hd.n - 1]) > LZOP_VERSION)
			return cb_error("lzo stream needs a newer lzop format (0x%02x%02x)",
					hd.h[hd.n - 2], hd.h[hd.n - 1]);
	}
	if (hdr_take(z->in, &hd, version >= 0x0940 ? 2 : 1) < 0)
		return -1;
	method = hd.h[version >= 0x0940 ? hd.n - 2 : hd.n - 1];
	if (method != M_LZO1X_1 && method != M_LZO1X_1_15 && method != M_LZO1X_999)
		return cb_error("unsupported lzo method %u", method);
	if (hdr_u32(z->in, &hd, &flags) < 0)
		return -1;
	if (flags & (F_H_FILTER | F_MULTIPART))
		return cb_error("unsupported lzop feature (filter or multipart)");
	/* mode, mtime low, [mtime high], name length */
	if (hdr_u32(z->in, &hd, &u) < 0 || hdr_u32(z->in, &hd, &u) < 0 ||
	    (version >= 0x0940 && hdr_u32(z->in, &hd, &u) < 0) || hdr_take(z->in, &hd, 1) < 0)
		return -1;
	if (hdr_take(z->in, &hd, hd.h[hd.n - 1]) < 0 || check_header_sum(z->in, &hd, flags) < 0)
		return -1;
	if ((flags & F_H_EXTRA_FIELD) && skip_extra_field(z->in) < 0)
		return -1;
	z->flags = flags;
	return 0;
}

static int take_block(struct lzo_reader *z, void *dst, size_t len)
{
	int rc = cb_codec_in_take(z->in, dst, len);

	if (rc > 0)
		return cb_error("truncated lzo stream (block %u)", z->block);
	return rc;
}

/* The checksum words present for this block, in file order. */
static int block_sums(struct lzo_reader *z, int compressed, uint32_t sums[4])
{
	static const uint32_t order[4] = { F_ADLER32_D, F_CRC32_D, F_ADLER32_C, F_CRC32_C };
	unsigned char s[4];

	for (int i = 0; i < 4; i++) {
		sums[i] = 0;
		if (!(z->flags & order[i]) || (i >= 2 && !compressed))
			continue;
		if (take_block(z, s, 4) < 0)
			return -1;
		sums[i] = get32(s);
	}
	return 0;
}

static int verify_c(struct lzo_reader *z, const uint32_t sums[4], uint32_t clen)
{
	if (((z->flags & F_ADLER32_C) && adler(1, z->cbuf, clen) != sums[2]) ||
	    ((z->flags & F_CRC32_C) && cb_crc32(0, z->cbuf, clen) != sums[3]))
		return cb_error("lzo block %u: checksum mismatch (compressed data)", z->block);
	return 0;
}

static int verify_d(struct lzo_reader *z, const uint32_t sums[4], uint32_t dlen)
{
	if (((z->flags & F_ADLER32_D) && adler(1, z->dbuf, dlen) != sums[0]) ||
	    ((z->flags & F_CRC32_D) && cb_crc32(0, z->dbuf, dlen) != sums[1]))
		return cb_error("lzo block %u: checksum mismatch", z->block);
	return 0;
}

static int decode_block(struct lzo_reader *z, uint32_t clen, uint32_t dlen)
{
	uint32_t sums[4];
	lzo_uint out = dlen;

	if (clen == 0 || clen > dlen)
		return cb_error("lzo block %u: bad compressed size %u", z->block, clen);
	if (block_sums(z, clen < dlen, sums) < 0)
		return -1;
	if (dlen > z->cap) {
		z->cbuf = cb_xrealloc(z->cbuf, dlen);
		z->dbuf = cb_xrealloc(z->dbuf, dlen);
		z->cap = dlen;
	}
	if (take_block(z, clen < dlen ? z->cbuf : z->dbuf, clen) < 0)
		return -1;
	if (clen < dlen && verify_c(z, sums, clen) < 0)
		return -1;
	if (clen < dlen && (lzo1x_decompress_safe(z->cbuf, clen, z->dbuf, &out, NULL) != LZO_E_OK ||
			    out != dlen))
		return cb_error("lzo block %u: corrupt compressed data", z->block);
	if (verify_d(z, sums, dlen) < 0)
		return -1;
	z->dpos = 0;
	z->dlen = dlen;
	return 0;
}

static int next_block(struct lzo_reader *z, uint64_t produced)
{
	unsigned char s[4];
	uint32_t dlen;

	z->block++;
	if (cb_codec_in_unit(z->in, produced) < 0 || take_block(z, s, 4) < 0)
		return -1;
	dlen = get32(s);
	if (dlen == 0) {   /* the end marker: nothing may follow it */
		int end = cb_codec_in_at_end(z->in);
		z->done = 1;
		if (end == 0)
			return cb_error("lzo: data after the end of the stream (block %u)", z->block);
		return end < 0 ? -1 : 0;
	}
	if (dlen > MAX_BLOCK_SIZE)
		return cb_error("lzo block %u: size %u exceeds the limit", z->block, dlen);
	if (take_block(z, s, 4) < 0)
		return -1;
	return decode_block(z, get32(s), dlen);
}

static ssize_t lzo_read(void *st, void *buf, size_t len)
{
	struct lzo_reader *z = st;
	size_t k;

	while (z->dpos == z->dlen) {
		if (z->done)
			return 0;
		if (next_block(z, 0) < 0)
			return -1;
	}
	k = z->dlen - z->dpos;
	if (k > len)
		k = len;
	memcpy(buf, z->dbuf + z->dpos, k);
	z->dpos += k;
	return k;
}

static void lzo_rfree(void *st)
{
	struct lzo_reader *z = st;

	free(z->cbuf);
	free(z->dbuf);
	free(z);
}

/* The header was read at the start (its flags say which checksums the
 * blocks carry); a unit is a block. */
static int lzo_reset(void *st)
{
	struct lzo_reader *z = st;

	z->dpos = z->dlen = 0;
	z->done = 0;
	return 0;
}

static const struct cb_codec_rops lzo_rops = { lzo_read, lzo_rfree, lzo_reset, NULL, NULL };

int cb_codec_lzo_reader(void **st, const struct cb_codec_rops **ops, struct cb_codec_in *in)
{
	struct lzo_reader *z;

	if (lzo_init() != LZO_E_OK)
		return cb_error("lzo: library initialisation failed");
	z = cb_xcalloc(1, sizeof(*z));
	z->in = in;
	if (parse_header(z) < 0) {
		free(z);
		return -1;
	}
	*st = z;
	*ops = &lzo_rops;
	return 0;
}
