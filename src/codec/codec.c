/*
 * cb_codec: the compression stage. See include/cb_codec.h.
 * This file holds what all codecs share: the writer/reader front ends,
 * magic detection, the pass-through ("none") codec and the buffered input
 * that lets detection peek at the first bytes without losing them.
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
#include "cb_util.h"
#include "codec_int.h"

#define IN_BUF_SIZE (256 * 1024)

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


struct cb_codec_reader {
	enum cb_compress type;
	struct cb_codec_in in;
	const struct cb_codec_rops *ops;
	void *st;
};

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
static void in_sum(struct cb_codec_in *in, uint64_t to)
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
		in_sum(in, in->base + in->pos);
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

/* ---- none: bytes pass through ---- */

static void none_free(void *st)
{
	(void)st;
}

static int none_reset(void *st)
{
	(void)st;
	return 0;
}

static const struct cb_codec_wops none_wops = { NULL, NULL, NULL, none_free, 0, NULL, NULL };

/* ---- writer front end ---- */

static int writer_backend(struct cb_codec_writer *w, const struct cb_codec_params *p)
{
	switch (p->type) {
	case CB_COMPRESS_NONE:
		w->ops = &none_wops;
		w->st = &w->out;
		return 0;
	case CB_COMPRESS_ZSTD:
		return cb_codec_zstd_writer(&w->st, &w->ops, p, &w->out);
	case CB_COMPRESS_LZO:
		return cb_codec_lzo_writer(&w->st, &w->ops, p, &w->out);
	case CB_COMPRESS_GZIP:
		return cb_codec_gzip_writer(&w->st, &w->ops, p, &w->out);
	}
	return cb_error("unknown compression type %d", (int)p->type);
}

void cb_codec_params_for(const struct cb_opts *o, enum cb_compress type, struct cb_codec_params *p)
{
	*p = (struct cb_codec_params){
		.type = type, .policy = o->compress_policy,
		.level = type == CB_COMPRESS_ZSTD ? o->zstd_level : 0,
		/* zstd: its own option; gzip: vzdump's pigz; lzo: all cores */
		.threads = type == CB_COMPRESS_ZSTD ? o->zstd_threads
			   : type == CB_COMPRESS_GZIP ? o->pigz_threads : 0,
		.unit_size = (uint64_t)(o->unit_size_mib > 0 ? o->unit_size_mib : 4) << 20,
	};
}

int cb_codec_writer_new(struct cb_codec_writer **out, const struct cb_codec_params *p, struct cb_sink *sink)
{
	struct cb_codec_writer *w = cb_xcalloc(1, sizeof(*w));

	w->type = p->type;
	w->policy = p->policy;
	w->unit_size = p->unit_size ? p->unit_size : CB_CODEC_UNIT_DEFAULT;
	w->out.sink = sink;
	if (writer_backend(w, p) < 0) {
		free(w);
		return -1;
	}
	cb_codec_seg_init(w, p);
	*out = w;
	return 0;
}

static int emit_chunk(struct cb_codec_writer *w);

int cb_codec_inner_hint(struct cb_codec_writer *w, enum cb_data_kind kind, uint64_t nbytes)
{
	if (w->policy == CB_POLICY_ALWAYS || w->type == CB_COMPRESS_NONE)
		return 0;
	if (kind != CB_DATA_UNKNOWN && nbytes < w->ops->min_store)
		kind = CB_DATA_UNKNOWN;
	w->hint_kind = kind;
	w->hint_left = nbytes;
	/* a long run starts a chunk of its own, so the trial sees the run
	 * alone rather than straddled with what came before */
	if (nbytes >= CB_CODEC_CHUNK / 2 && w->cm.len > 0)
		return emit_chunk(w);
	return 0;
}

void cb_codec_inner_begin_file(struct cb_codec_writer *w)
{
	w->file_id++;
}

/* Bytes from the end of the chunk being filled to the end of the unit (the
 * segment being replayed, see codec_seg.c). */
static uint64_t unit_room(const struct cb_codec_writer *w)
{
	return w->unit_end_at - (w->chunked + w->cm.len);
}

static int emit_chunk(struct cb_codec_writer *w)
{
	int ret;

	w->cm.unit_end = unit_room(w) == 0;
	ret = w->ops->chunk(w->st, &w->cm);
	w->chunked += w->cm.len;
	w->cbuf = NULL;
	w->cm.len = 0;
	if (ret < 0)
		w->failed = 1;
	return ret;
}

/* Class and store reason of the next bytes, and for how many bytes. */
static enum cb_chunk_class next_class(const struct cb_codec_writer *w, enum cb_store_reason *why,
				      uint64_t *run)
{
	*run = UINT64_MAX;
	*why = CB_STORED_TRIAL;
	if (w->policy == CB_POLICY_ALWAYS)
		return CB_CHUNK_COMPRESS;
	if (w->hint_left == 0)
		return CB_CHUNK_TRIAL;
	*run = w->hint_left;
	if (w->hint_kind == CB_DATA_UNKNOWN)
		return CB_CHUNK_TRIAL;
	*why = w->hint_kind == CB_DATA_QCOW2 ? CB_STORED_QCOW2 : CB_STORED_MAGIC;
	return CB_CHUNK_STORE;
}

/* A stored run for a writer that takes it in place: what is pending goes
 * first, then the run, with no copy into a chunk. */
static int store_direct(struct cb_codec_writer *w, enum cb_store_reason why, const unsigned char *p,
			size_t len)
{
	if (w->cm.len > 0 && emit_chunk(w) < 0)
		return -1;
	while (len > 0) {
		uint64_t room = unit_room(w);
		size_t k = room < len ? (size_t)room : len;
		struct cb_chunk_meta m = { k, CB_CHUNK_STORE, why, w->file_id, w->file_id, k == room };

		if (w->ops->store(w->st, &m, p) < 0) {
			w->failed = 1;
			return -1;
		}
		w->chunked += k;
		p += k;
		len -= k;
	}
	return 0;
}

/* Append len bytes of one class to chunks, emitting full ones and cutting
 * where the class changes (a chunk has one class). */
static int append(struct cb_codec_writer *w, enum cb_chunk_class cls, enum cb_store_reason why,
		  const unsigned char *p, size_t len)
{
	while (len > 0) {
		size_t k;

		if (w->cm.len > 0 && (w->cm.cls != cls || w->cm.reason != why) && emit_chunk(w) < 0)
			return -1;
		if (!w->cbuf && !(w->cbuf = w->ops->chunk_buf(w->st))) {
			w->failed = 1;
			return -1;
		}
		if (w->cm.len == 0)
			w->cm = (struct cb_chunk_meta){ 0, cls, why, w->file_id, 0, 0 };
		k = CB_CODEC_CHUNK - w->cm.len < len ? CB_CODEC_CHUNK - w->cm.len : len;
		if (unit_room(w) < k)
			k = (size_t)unit_room(w);
		/* bytes read in place (cb_codec_write_buffer) are already there;
		 * anything else may overlap the chunk (a part of such bytes) */
		if (p != w->cbuf + w->cm.len)
			memmove(w->cbuf + w->cm.len, p, k);
		w->cm.len += k;
		w->cm.last_file = w->file_id;
		p += k;
		len -= k;
		if ((w->cm.len == CB_CODEC_CHUNK || unit_room(w) == 0) &&
		    emit_chunk(w) < 0)
			return -1;
	}
	return 0;
}

void cb_codec_set_progress(struct cb_codec_writer *w, struct cb_progress *progress)
{
	w->progress = progress;
}

/* Bytes of the segment being replayed (codec_seg.c), in runs of one class. */
int cb_codec_inner_write(struct cb_codec_writer *w, const unsigned char *p, size_t len)
{
	while (len > 0) {
		enum cb_store_reason why;
		uint64_t run;
		enum cb_chunk_class cls = next_class(w, &why, &run);
		size_t k = run < len ? (size_t)run : len;
		int direct = cls == CB_CHUNK_STORE && w->ops->store;

		if ((direct ? store_direct(w, why, p, k) : append(w, cls, why, p, k)) < 0)
			return -1;
		if (w->hint_left)
			w->hint_left -= k;
		p += k;
		len -= k;
	}
	return 0;
}

int cb_codec_finish(struct cb_codec_writer *w)
{
	if (w->finished)
		return 0;
	if (w->failed)
		return cb_error("codec: finish after an error");
	if (w->type != CB_COMPRESS_NONE && cb_codec_seg_flush(w) < 0)
		return -1;
	w->finished = 1;
	if (w->type != CB_COMPRESS_NONE &&
	    ((w->cm.len > 0 && emit_chunk(w) < 0) || w->ops->finish(w->st) < 0))
		return -1;
	cb_codec_units_finish(&w->out.units, w->bytes_in);
	/* every byte out of the sink's buffer: write errors belong to this stage */
	return cb_sink_flush(w->out.sink);
}

void cb_codec_writer_free(struct cb_codec_writer *w)
{
	if (!w)
		return;
	w->ops->free(w->st);
	cb_codec_seg_free(w);
	cb_codec_units_release(&w->out.units);
	free(w);
}

const struct cb_codec_units *cb_codec_writer_units(const struct cb_codec_writer *w)
{
	return &w->out.units;
}

void cb_codec_set_tap(struct cb_codec_writer *w, cb_codec_tap_fn *fn, void *ctx)
{
	w->tap = fn;
	w->tap_ctx = ctx;
}

void cb_codec_writer_stats(const struct cb_codec_writer *w, struct cb_codec_stats *st)
{
	const struct cb_codec_out *o = &w->out;

	memset(st, 0, sizeof(*st));
	st->bytes_in = w->bytes_in;
	st->bytes_out = o->bytes_out;
	st->compress_seconds = o->compress_seconds;
	st->bytes_stored_magic = o->stored[CB_STORED_MAGIC];
	st->bytes_stored_qcow2 = o->stored[CB_STORED_QCOW2];
	st->bytes_stored_trial = o->stored[CB_STORED_TRIAL];
	st->bytes_stored = st->bytes_stored_magic + st->bytes_stored_qcow2 + st->bytes_stored_trial +
			   o->stored[CB_STORED_NOGAIN];
	st->files_stored = o->files_stored;
	st->files_stored_magic = o->files_stored_magic;
	cb_codec_seg_stats(w, st);
}

void cb_codec_stats_summary(const struct cb_codec_stats *st, char *buf, size_t len)
{
	char all[32], magic[32], qcow2[32], trial[32];

	cb_fmt_bytes(all, sizeof(all), st->bytes_stored);
	cb_fmt_bytes(magic, sizeof(magic), st->bytes_stored_magic);
	cb_fmt_bytes(qcow2, sizeof(qcow2), st->bytes_stored_qcow2);
	cb_fmt_bytes(trial, sizeof(trial), st->bytes_stored_trial);
	snprintf(buf, len, "%s in %llu files (known formats %s in %llu files, qcow2 clusters %s, trial %s)",
		 all, (unsigned long long)st->files_stored, magic,
		 (unsigned long long)st->files_stored_magic, qcow2, trial);
}

/* ---- detection ---- */

int cb_codec_detect(const void *buf, size_t len, enum cb_compress *type)
{
	const unsigned char *b = buf;

	if (len >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd)
		*type = CB_COMPRESS_ZSTD;
	else if (len >= CB_LZOP_MAGIC_LEN && memcmp(b, CB_LZOP_MAGIC, CB_LZOP_MAGIC_LEN) == 0)
		*type = CB_COMPRESS_LZO;
	else if (len >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		*type = CB_COMPRESS_GZIP;
	else
		return -1;
	return 0;
}

/* ---- buffered input ---- */

ssize_t cb_codec_in_fill(struct cb_codec_in *in)
{
	ssize_t n;

	in_sum(in, in->base + in->pos);   /* before the bytes are dropped */
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

/* ---- none reader: buffered bytes first, then straight from the fd ---- */

static ssize_t none_read(void *st, void *buf, size_t len)
{
	struct cb_codec_in *in = st;
	size_t avail = in->len - in->pos;
	ssize_t n;

	if (avail > 0) {
		size_t k = avail < len ? avail : len;
		memcpy(buf, in->buf + in->pos, k);
		in->pos += k;
		return k;
	}
	if (in->eof)
		return 0;
	do
		n = read(in->fd, buf, len);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return cb_error_errno("cannot read archive");
	if (n == 0)
		in->eof = 1;
	in->base += n;
	return n;
}

static const struct cb_codec_rops none_rops = { none_read, none_free, none_reset };

/* ---- reader front end ---- */

/* Read until the longest magic fits or the file ends. */
static int peek_magic(struct cb_codec_in *in)
{
	while (in->len < CB_LZOP_MAGIC_LEN && !in->eof)
		if (cb_codec_in_fill(in) < 0)
			return -1;
	return 0;
}

static int reader_backend(struct cb_codec_reader *r)
{
	switch (r->type) {
	case CB_COMPRESS_ZSTD:
		return cb_codec_zstd_reader(&r->st, &r->ops, &r->in);
	case CB_COMPRESS_LZO:
		return cb_codec_lzo_reader(&r->st, &r->ops, &r->in);
	case CB_COMPRESS_GZIP:
		return cb_codec_gzip_reader(&r->st, &r->ops, &r->in);
	case CB_COMPRESS_NONE:
		break;
	}
	r->ops = &none_rops;
	r->st = &r->in;
	return 0;
}

int cb_codec_reader_new(struct cb_codec_reader **out, int fd)
{
	struct cb_codec_reader *r = cb_xcalloc(1, sizeof(*r));

	r->in.fd = fd;
	r->in.cap = IN_BUF_SIZE;
	r->in.buf = cb_xmalloc(r->in.cap);
	if (peek_magic(&r->in) < 0)
		goto fail;
	if (cb_codec_detect(r->in.buf, r->in.len, &r->type) < 0)
		r->type = CB_COMPRESS_NONE;
	if (reader_backend(r) < 0)
		goto fail;
	*out = r;
	return 0;
fail:
	free(r->in.buf);
	free(r);
	return -1;
}

ssize_t cb_codec_read(struct cb_codec_reader *r, void *buf, size_t len)
{
	ssize_t n;

	if (len == 0)
		return 0;
	n = r->ops->read(r->st, buf, len);
	if (n > 0)
		r->in.u_pos += (uint64_t)n;
	if (n == 0)   /* the stream's end: its last bytes are the last unit's */
		in_sum(&r->in, r->in.base + r->in.len);
	return n;
}

void cb_codec_reader_record_units(struct cb_codec_reader *r, struct cb_codec_units *u)
{
	r->in.rec = u;
	r->in.summed = r->in.base + r->in.pos;
}

void cb_codec_reader_check_units(struct cb_codec_reader *r, const struct cb_codec_units *expect,
				 uint64_t file_size)
{
	r->in.expect = expect && expect->n ? expect : NULL;
	r->in.file_size = file_size;
}

uint64_t cb_codec_reader_bad_unit(const struct cb_codec_reader *r)
{
	return r->in.bad_unit;
}

int cb_codec_reader_seek(struct cb_codec_reader *r, uint64_t c_off, uint64_t u_off)
{
	if (lseek(r->in.fd, (off_t)c_off, SEEK_SET) < 0)
		return cb_error_errno("cannot seek in archive");
	r->in.pos = r->in.len = 0;
	r->in.eof = 0;
	r->in.base = c_off;
	r->in.u_pos = u_off;
	return r->ops->reset(r->st);
}

enum cb_compress cb_codec_reader_type(const struct cb_codec_reader *r)
{
	return r->type;
}

void cb_codec_reader_free(struct cb_codec_reader *r)
{
	if (!r)
		return;
	r->ops->free(r->st);
	free(r->in.buf);
	free(r);
}
