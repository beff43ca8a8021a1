/*
 * gzip codec: zlib deflate with the gzip wrapper (windowBits 15+16), and an
 * inflating reader that accepts concatenated members (what parallel gzip
 * writers and `cat a.gz b.gz` produce).
 */
#include <stdlib.h>
#include <zlib.h>

#include "cb_util.h"
#include "codec_int.h"

struct gzip_writer {
	z_stream zs;
	struct cb_codec_out *out;
	unsigned char *obuf;
};

static int gzip_flush(struct gzip_writer *g)
{
	size_t n = CB_CODEC_OUTBUF - g->zs.avail_out;

	g->zs.next_out = g->obuf;
	g->zs.avail_out = CB_CODEC_OUTBUF;
	return cb_codec_out_write(g->out, g->obuf, n);
}

/* Deflate the pending input; with Z_FINISH until the trailer is out. */
static int gzip_run(struct gzip_writer *g, int flush)
{
	for (;;) {
		double t0 = cb_now();
		int rc = deflate(&g->zs, flush);

		g->out->compress_seconds += cb_now() - t0;
		if (rc == Z_STREAM_ERROR)
			return cb_error("gzip compression failed: %s", g->zs.msg ? g->zs.msg : "stream error");
		if (g->zs.avail_out == 0 && gzip_flush(g) < 0)
			return -1;
		if (flush == Z_FINISH ? rc == Z_STREAM_END : (g->zs.avail_in == 0 && g->zs.avail_out > 0))
			return 0;
	}
}

static int gzip_write(void *st, const void *buf, size_t len)
{
	struct gzip_writer *g = st;
	const unsigned char *p = buf;

	/* avail_in is 32-bit: feed huge buffers in pieces */
	while (len > 0) {
		uInt k = len > (1u << 30) ? (1u << 30) : (uInt)len;

		g->zs.next_in = (unsigned char *)p;
		g->zs.avail_in = k;
		if (gzip_run(g, Z_NO_FLUSH) < 0)
			return -1;
		p += k;
		len -= k;
	}
	return 0;
}

static int gzip_finish(void *st)
{
	struct gzip_writer *g = st;

	g->zs.next_in = NULL;
	g->zs.avail_in = 0;
	if (gzip_run(g, Z_FINISH) < 0)
		return -1;
	return gzip_flush(g);
}

static void gzip_wfree(void *st)
{
	struct gzip_writer *g = st;

	deflateEnd(&g->zs);
	free(g->obuf);
	free(g);
}

static const struct cb_codec_wops gzip_wops = { gzip_write, gzip_finish, gzip_wfree };

int cb_codec_gzip_writer(void **st, const struct cb_codec_wops **ops,
			 const struct cb_codec_params *p, struct cb_codec_out *o)
{
	struct gzip_writer *g = cb_xcalloc(1, sizeof(*g));
	int level = p->level ? p->level : 6;

	if (deflateInit2(&g->zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		free(g);
		return cb_error("gzip: cannot initialise compressor (level %d)", level);
	}
	g->out = o;
	g->obuf = cb_xmalloc(CB_CODEC_OUTBUF);
	g->zs.next_out = g->obuf;
	g->zs.avail_out = CB_CODEC_OUTBUF;
	*st = g;
	*ops = &gzip_wops;
	return 0;
}

/* ---- reader ---- */

struct gzip_reader {
	z_stream zs;
	struct cb_codec_in *in;
	int done;
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
	return 0;
}

static int gzip_inflate(struct gzip_reader *g)
{
	struct cb_codec_in *in = g->in;
	int rc;

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
		if (gzip_inflate(g) < 0)
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

static const struct cb_codec_rops gzip_rops = { gzip_read, gzip_rfree };

int cb_codec_gzip_reader(void **st, const struct cb_codec_rops **ops, struct cb_codec_in *in)
{
	struct gzip_reader *g = cb_xcalloc(1, sizeof(*g));

	g->in = in;
	if (inflateInit2(&g->zs, 15 + 16) != Z_OK) {
		free(g);
		return cb_error("gzip: cannot initialise decompressor");
	}
	*st = g;
	*ops = &gzip_rops;
	return 0;
}
