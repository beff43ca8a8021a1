/*
 * What the codecs stand on (codec_int.h): the CRC-32, the units and their
 * digests, the output side every writer sends its bytes through (counted,
 * stored runs noted, segments closed in emit order), the buffered input
 * every reader pulls from (units checked as they pass), the core count and
 * the trial that decides whether a chunk is worth compressing. Uses no
 * codec: the front end (codec.c), the chunker (codec_chunk.c), the
 * segments (codec_seg.c) and codec_{zstd,lzo,gzip}.c use it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>
#include <zstd.h>
#include <isa-l/crc.h>
#include <zlib.h>
#include <openssl/evp.h>

#include "cb_codec.h"
#include "cb_sink.h"
#include "cb_util.h"
#include "codec_int.h"

#if defined(__x86_64__)
/* ISA-L's 128-bit PCLMULQDQ variant (SSE4.1), exported beside the
 * dispatcher but not declared in its header. The dispatcher picks the
 * AVX-512 variant where there is one: 4x faster at the CRC (56 against 14
 * GB/s on the test machine), but it left the core slower at the deflate
 * that followed (gzip -6 of a text tree 4.30 s against 3.71 s, pigz-style
 * on 2 threads 2.44 s against 2.12 s). */
uint32_t crc32_gzip_refl_by8(uint32_t crc, const unsigned char *buf, uint64_t len);

/* libgcc reads CPUID once at start-up: this is a load and a test */
static int crc_pclmul(void)
{
	return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}
#endif

uint32_t cb_crc32(uint32_t crc, const void *buf, size_t len)
{
	if (len == 0)
		return crc;
#if defined(__x86_64__)
	/* without PCLMULQDQ ISA-L would fall back to tables: zlib's are faster */
	return crc_pclmul() ? crc32_gzip_refl_by8(crc, buf, len) : (uint32_t)crc32(crc, buf, len);
#else
	return crc32_gzip_refl(crc, buf, len);
#endif
}


/* The bytes of unit b go to unit a, just before it (a NULL: to no unit). */
static void units_merge(struct cb_codec_unit *a, const struct cb_codec_unit *b)
{
	if (!a || b->len == 0)
		return;
	a->crc = (uint32_t)crc32_combine64(a->crc, b->crc, (z_off64_t)b->len);
	a->len += b->len;
}

void cb_codec_units_add(struct cb_codec_units *u, uint64_t u_off, uint64_t c_off)
{
	if (u->n > 0 && u->v[u->n - 1].u_off == u_off) {
		units_merge(u->n > 1 ? &u->v[u->n - 2] : NULL, &u->v[u->n - 1]);
		u->v[u->n - 1] = (struct cb_codec_unit){ u_off, c_off, 0, 0 };
		return;
	}
	if (u->n == u->cap) {
		u->cap = u->cap ? 2 * u->cap : 64;
		u->v = cb_xrealloc(u->v, u->cap * sizeof(*u->v));
	}
	u->v[u->n++] = (struct cb_codec_unit){ u_off, c_off, 0, 0 };
}

void cb_codec_units_sum(struct cb_codec_units *u, const void *buf, size_t len)
{
	struct cb_codec_unit *last = u->n ? &u->v[u->n - 1] : NULL;

	if (!last || len == 0)
		return;
	last->crc = cb_crc32(last->crc, buf, len);
	last->len += len;
}

void cb_codec_units_sum_crc(struct cb_codec_units *u, uint32_t crc, size_t len)
{
	struct cb_codec_unit *last = u->n ? &u->v[u->n - 1] : NULL;

	if (!last || len == 0)
		return;
	last->crc = last->len ? (uint32_t)crc32_combine64(last->crc, crc, (z_off64_t)len) : crc;
	last->len += len;
}

void cb_codec_units_finish(struct cb_codec_units *u, uint64_t total)
{
	while (u->n > 0 && u->v[u->n - 1].u_off >= total) {
		units_merge(u->n > 1 ? &u->v[u->n - 2] : NULL, &u->v[u->n - 1]);
		u->n--;
	}
}

void cb_codec_units_release(struct cb_codec_units *u)
{
	free(u->v);
	memset(u, 0, sizeof(*u));
}

void cb_codec_out_unit(struct cb_codec_out *o)
{
	cb_codec_units_add(&o->units, o->u_done, o->bytes_out);
}

/* rec: the bytes decoded past since the last sum go to the last unit */
void cb_codec_in_sum(struct cb_codec_in *in, uint64_t to)
{
	if (!in->rec || to <= in->summed || in->summed < in->base)
		return;
	cb_codec_units_sum(in->rec, in->buf + (in->summed - in->base), (size_t)(to - in->summed));
	in->summed = to;
}

/* The unit of expect starting at file offset c, or -1. */
static int64_t expected_unit(const struct cb_codec_units *e, uint64_t c)
{
	size_t lo = 0, hi = e->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (e->v[mid].c_off < c)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < e->n && e->v[lo].c_off == c ? (int64_t)lo : -1;
}

/* Read until the buffer holds need bytes from pos (or the file ends). */
static int in_hold(struct cb_codec_in *in, size_t need)
{
	if (in->cap - in->pos < need) {
		in->cap = in->pos + need;
		in->buf = cb_xrealloc(in->buf, in->cap);
	}
	while (in->len - in->pos < need) {
		ssize_t n = cb_codec_in_fill(in);

		if (n < 0)
			return -1;
		if (n == 0)
			break;
	}
	return 0;
}

/* Unit k of expect, starting at the next raw byte, read whole and summed. */
static int in_check(struct cb_codec_in *in, uint64_t k)
{
	const struct cb_codec_unit *u = &in->expect->v[k];
	uint64_t end = k + 1 < in->expect->n ? in->expect->v[k + 1].c_off : in->file_size;
	size_t need;
	uint32_t crc;

	if (end <= u->c_off || end - u->c_off > CB_CODEC_CHECK_MAX)
		return 0;
	need = (size_t)(end - u->c_off);
	if (in_hold(in, need) < 0)
		return -1;
	if (in->len - in->pos < need)
		crc = cb_crc32(0, in->buf + in->pos, in->len - in->pos) ^ 1;   /* cut short */
	else
		crc = cb_crc32(0, in->buf + in->pos, need);
	if (crc == u->crc)
		return 0;
	in->bad_unit = k + 1;
	return cb_error("unit %llu (archive bytes %llu-%llu) is damaged: its CRC-32 is %08x, the "
			"catalog says %08x", (unsigned long long)k, (unsigned long long)u->c_off,
			(unsigned long long)end - 1, crc, u->crc);
}

int cb_codec_in_unit(struct cb_codec_in *in, uint64_t extra)
{
	int64_t k;

	if (in->rec) {
		cb_codec_in_sum(in, in->base + in->pos);
		cb_codec_units_add(in->rec, in->u_pos + extra, in->base + in->pos);
	}
	if (in->expect && (k = expected_unit(in->expect, in->base + in->pos)) >= 0)
		return in_check(in, (uint64_t)k);
	return 0;
}

int cb_codec_out_write(struct cb_codec_out *o, const void *buf, size_t len)
{
	if (len == 0)
		return 0;
	if (cb_sink_write(o->sink, buf, len) < 0)
		return -1;
	if (o->seg_sha)
		EVP_DigestUpdate(o->seg_sha, buf, len);
	cb_codec_units_sum(&o->units, buf, len);
	o->bytes_out += len;
	return 0;
}

unsigned char *cb_codec_out_buffer(struct cb_codec_out *o, size_t *avail)
{
	o->inplace = cb_sink_buffer(o->sink, avail);
	return o->inplace;
}

int cb_codec_out_advance(struct cb_codec_out *o, size_t len)
{
	/* summed before the sink may write the buffer out */
	if (o->seg_sha && len > 0)
		EVP_DigestUpdate(o->seg_sha, o->inplace, len);
	cb_codec_units_sum(&o->units, o->inplace, len);
	if (cb_sink_advance(o->sink, len) < 0)
		return -1;
	o->bytes_out += len;
	return 0;
}

/* Files first..last not counted yet (ids only grow, chunks come in order). */
static uint64_t new_files(uint64_t *last_counted, const struct cb_chunk_meta *m)
{
	uint64_t from = m->first_file > *last_counted ? m->first_file : *last_counted + 1;

	if (m->last_file == 0 || from > m->last_file)
		return 0;
	*last_counted = m->last_file;
	return m->last_file - from + 1;
}

void cb_codec_out_stored(struct cb_codec_out *o, const struct cb_chunk_meta *m,
			 enum cb_store_reason why, uint64_t bytes)
{
	o->stored[why] += bytes;
	if (!m || why == CB_STORED_NOGAIN)
		return;
	o->files_stored += new_files(&o->last_file_counted, m);
	if (why == CB_STORED_MAGIC)
		o->files_stored_magic += new_files(&o->last_magic_counted, m);
}

int cb_codec_cores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}

/* ---- the trial ---- */

#define TRIAL_PIECE 4096
#define TRIAL_PIECES 4
#define TRIAL_SAMPLE (TRIAL_PIECE * TRIAL_PIECES)

struct cb_trial {
	ZSTD_CCtx *cctx;
	unsigned min_gain_pct;
	unsigned char sample[TRIAL_SAMPLE];
	unsigned char out[ZSTD_COMPRESSBOUND(TRIAL_SAMPLE)];
};

struct cb_trial *cb_trial_new(unsigned min_gain_pct)
{
	struct cb_trial *t = cb_xcalloc(1, sizeof(*t));

	t->min_gain_pct = min_gain_pct;
	t->cctx = ZSTD_createCCtx();
	if (!t->cctx) {
		/* only fails when out of memory, like cb_xmalloc */
		fputs("cbackup: out of memory (zstd context)\n", stderr);
		abort();
	}
	return t;
}

void cb_trial_free(struct cb_trial *t)
{
	if (!t)
		return;
	ZSTD_freeCCtx(t->cctx);
	free(t);
}

/* Evenly spaced pieces, so a chunk that is half text, half random is seen
 * as both; a chunk that is compressed data with a few headers as stored. */
int cb_trial_store(struct cb_trial *t, const unsigned char *buf, size_t len)
{
	const unsigned char *src = buf;
	size_t n = len, r;

	if (len > TRIAL_SAMPLE) {
		for (size_t i = 0; i < TRIAL_PIECES; i++)
			memcpy(t->sample + i * TRIAL_PIECE,
			       buf + i * (len - TRIAL_PIECE) / (TRIAL_PIECES - 1), TRIAL_PIECE);
		src = t->sample;
		n = TRIAL_SAMPLE;
	}
	r = ZSTD_compressCCtx(t->cctx, t->out, sizeof(t->out), src, n, 1);
	if (ZSTD_isError(r))
		return 0;
	return r * 100 >= n * (100 - t->min_gain_pct);
}

/* ---- buffered input ---- */

ssize_t cb_codec_in_fill(struct cb_codec_in *in)
{
	ssize_t n;

	cb_codec_in_sum(in, in->base + in->pos);   /* before the bytes are dropped */
	if (in->pos > 0) {
		memmove(in->buf, in->buf + in->pos, in->len - in->pos);
		in->len -= in->pos;
		in->base += in->pos;
		in->pos = 0;
	}
	if (in->eof)
		return 0;
	if (in->len == in->cap)
		return cb_error("codec: input buffer full");
	do
		n = read(in->fd, in->buf + in->len, in->cap - in->len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return cb_error_errno("cannot read archive");
	if (n == 0)
		in->eof = 1;
	in->len += n;
	return n;
}

int cb_codec_in_at_end(struct cb_codec_in *in)
{
	ssize_t n = in->pos < in->len ? 1 : cb_codec_in_fill(in);

	return n < 0 ? -1 : n == 0;
}

int cb_codec_in_take(struct cb_codec_in *in, void *dst, size_t len)
{
	unsigned char *d = dst;

	while (len > 0) {
		size_t avail = in->len - in->pos;
		ssize_t n;

		if (avail > 0) {
			size_t k = avail < len ? avail : len;
			memcpy(d, in->buf + in->pos, k);
			in->pos += k;
			d += k;
			len -= k;
			continue;
		}
		n = cb_codec_in_fill(in);
		if (n < 0)
			return -1;
		if (n == 0)
			return 1;
	}
	return 0;
}

/* ---- the compressed side: segments closed in emit order ---- */

int cb_codec_out_seg_done(struct cb_codec_out *o, cb_codec_pad_fn *pad, size_t pad_min)
{
	struct cb_codec_seg *g;
	uint64_t len = o->bytes_out - o->seg_c0;
	size_t n = (size_t)((CB_SEG_ALIGN - len % CB_SEG_ALIGN) % CB_SEG_ALIGN);

	if (o->segs_closed >= o->segs.n)
		return cb_error("codec: a segment ends that was never cut");
	if (pad && n > 0 && n < pad_min)
		n += CB_SEG_ALIGN;
	if (pad && n > 0 && pad(o, n) < 0)
		return -1;
	g = &o->segs.v[o->segs_closed++];
	g->c_off = o->seg_c0;
	g->c_len = o->bytes_out - o->seg_c0;
	EVP_DigestFinal_ex(o->seg_sha, g->cdig, NULL);
	EVP_DigestInit_ex(o->seg_sha, EVP_sha256(), NULL);
	o->seg_c0 = o->bytes_out;
	/* the archive's SHA-256 state here, for the next night (cb_sink.h) */
	if (cb_sink_mark(o->sink) < 0)
		return -1;
	return o->seg_fn ? o->seg_fn(o->seg_ctx, g, 0) : 0;
}

/* Bytes written so far belong to no segment (the lzop file header). */
void cb_codec_out_seg_skip(struct cb_codec_out *o)
{
	if (!o->seg_sha)
		return;
	EVP_DigestInit_ex(o->seg_sha, EVP_sha256(), NULL);
	o->seg_c0 = o->bytes_out;
}
