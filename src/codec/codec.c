/*
 * cb_codec: the compression stage. See include/cb_codec.h.
 * This file holds the writer/reader front ends (a codec chosen, the
 * segments and the chunker set up, finished, freed; a reader's codec
 * detected by its magic), the pass-through ("none") codec and the stats.
 * What every codec stands on is codec_io.c; the chunker codec_chunk.c.
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

struct cb_codec_reader {
	enum cb_compress type;
	struct cb_codec_in in;
	const struct cb_codec_rops *ops;
	void *st;
};

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

static const struct cb_codec_wops none_wops = { NULL, NULL, NULL, none_free, 0, NULL, NULL, NULL };

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

/* unit-size 0: 4 MiB for an archive file; 1 MiB on a unit store, where a
 * unit is what a changed page costs a night in upload and storage */
static uint64_t unit_mib(const struct cb_opts *o)
{
	if (o->unit_size_mib > 0)
		return (uint64_t)o->unit_size_mib;
	return !o->to_stdout && (o->layout == CB_LAYOUT_STORE || o->storage_type == CB_STORAGE_S3) ? 1 : 4;
}

void cb_codec_params_for(const struct cb_opts *o, enum cb_compress type, struct cb_codec_params *p)
{
	*p = (struct cb_codec_params){
		.type = type, .policy = o->compress_policy,
		.level = type == CB_COMPRESS_ZSTD ? o->zstd_level : 0,
		/* zstd: its own option; gzip: vzdump's pigz; lzo: all cores */
		.threads = type == CB_COMPRESS_ZSTD ? o->zstd_threads
			   : type == CB_COMPRESS_GZIP ? o->pigz_threads : 0,
		.unit_size = unit_mib(o) << 20,
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

void cb_codec_set_progress(struct cb_codec_writer *w, struct cb_progress *progress)
{
	w->progress = progress;
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
	    (cb_codec_inner_flush(w) < 0 || w->ops->finish(w->st) < 0))
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

static const struct cb_codec_rops none_rops = { none_read, none_free, none_reset, NULL, NULL };

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
		cb_codec_in_sum(&r->in, r->in.base + r->in.len);
	return n;
}

ssize_t cb_codec_read_view(struct cb_codec_reader *r, void *buf, size_t len, const void **data)
{
	ssize_t n;

	*data = buf;
	if (!r->ops->view)
		return cb_codec_read(r, buf, len);
	n = len ? r->ops->view(r->st, data, len) : 0;
	if (n > 0)
		r->in.u_pos += (uint64_t)n;
	return n;
}

int cb_codec_reader_parallel(struct cb_codec_reader *r, const struct cb_codec_par *par)
{
	const struct cb_codec_rops *ops;
	void *st;
	int rc;

	if (r->type != CB_COMPRESS_ZSTD || r->in.u_pos || r->in.rec)
		return 1;
	rc = cb_codec_zstd_par_reader(&st, &ops, &r->in, par);
	if (rc != 0)
		return rc;
	r->ops->free(r->st);
	r->ops = ops;
	r->st = st;
	return 0;
}

int cb_codec_reader_threads(const struct cb_codec_reader *r, uint64_t *units, int max)
{
	return r->ops->threads ? r->ops->threads(r->st, units, max) : 0;
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
