/*
 * cb_codec: the compression stage. See include/cb_codec.h.
 * This file holds what all codecs share: the writer/reader front ends,
 * magic detection, the pass-through ("none") codec and the buffered input
 * that lets detection peek at the first bytes without losing them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cb_codec.h"
#include "cb_util.h"
#include "codec_int.h"

#define IN_BUF_SIZE (256 * 1024)

struct cb_codec_writer {
	enum cb_compress type;
	const struct cb_codec_wops *ops;
	void *st;
	struct cb_codec_out out;
	uint64_t bytes_in;
	int finished;
};

struct cb_codec_reader {
	enum cb_compress type;
	struct cb_codec_in in;
	const struct cb_codec_rops *ops;
	void *st;
};

int cb_codec_out_write(struct cb_codec_out *o, const void *buf, size_t len)
{
	if (len == 0)
		return 0;
	if (cb_sink_write(o->sink, buf, len) < 0)
		return -1;
	o->bytes_out += len;
	return 0;
}

/* ---- none: bytes pass through ---- */

static int none_write(void *st, const void *buf, size_t len)
{
	return cb_codec_out_write(st, buf, len);
}

static int none_finish(void *st)
{
	(void)st;
	return 0;
}

static void none_free(void *st)
{
	(void)st;
}

static const struct cb_codec_wops none_wops = { none_write, none_finish, none_free };

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

int cb_codec_writer_new(struct cb_codec_writer **out, const struct cb_codec_params *p, struct cb_sink *sink)
{
	struct cb_codec_writer *w = cb_xcalloc(1, sizeof(*w));

	w->type = p->type;
	w->out.sink = sink;
	if (writer_backend(w, p) < 0) {
		free(w);
		return -1;
	}
	*out = w;
	return 0;
}

int cb_codec_write(struct cb_codec_writer *w, const void *buf, size_t len)
{
	if (w->finished)
		return cb_error("codec: write after finish");
	if (len == 0)
		return 0;
	w->bytes_in += len;
	return w->ops->write(w->st, buf, len);
}

int cb_codec_finish(struct cb_codec_writer *w)
{
	if (w->finished)
		return 0;
	w->finished = 1;
	return w->ops->finish(w->st);
}

void cb_codec_writer_free(struct cb_codec_writer *w)
{
	if (!w)
		return;
	w->ops->free(w->st);
	free(w);
}

void cb_codec_writer_stats(const struct cb_codec_writer *w, struct cb_codec_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->bytes_in = w->bytes_in;
	st->bytes_out = w->out.bytes_out;
	st->compress_seconds = w->out.compress_seconds;
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

	if (in->pos > 0) {
		memmove(in->buf, in->buf + in->pos, in->len - in->pos);
		in->len -= in->pos;
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
	return n;
}

static const struct cb_codec_rops none_rops = { none_read, none_free };

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
	if (len == 0)
		return 0;
	return r->ops->read(r->st, buf, len);
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
