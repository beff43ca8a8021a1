/*
 * zstd codec: libzstd streaming compression (multithreaded through
 * ZSTD_c_nbWorkers) and streaming decompression. Output is collected into a
 * CB_CODEC_OUTBUF buffer so the sink sees few, large writes.
 */
#include <stdlib.h>
#include <unistd.h>
#include <zstd.h>

#include "cb_util.h"
#include "codec_int.h"

struct zstd_writer {
	ZSTD_CCtx *cctx;
	struct cb_codec_out *out;
	unsigned char *obuf;
	ZSTD_outBuffer ob;
};

static int zstd_flush(struct zstd_writer *z)
{
	int ret = cb_codec_out_write(z->out, z->obuf, z->ob.pos);

	z->ob.pos = 0;
	return ret;
}

/* Run the compressor until it needs no more room for this call. */
static int zstd_run(struct zstd_writer *z, ZSTD_inBuffer *ib, ZSTD_EndDirective mode)
{
	for (;;) {
		double t0 = cb_now();
		size_t rem = ZSTD_compressStream2(z->cctx, &z->ob, ib, mode);

		z->out->compress_seconds += cb_now() - t0;
		if (ZSTD_isError(rem))
			return cb_error("zstd compression failed: %s", ZSTD_getErrorName(rem));
		if (z->ob.pos == z->ob.size && zstd_flush(z) < 0)
			return -1;
		if (mode == ZSTD_e_end ? rem == 0 : ib->pos == ib->size)
			return 0;
	}
}

static int zstd_write(void *st, const void *buf, size_t len)
{
	ZSTD_inBuffer ib = { buf, len, 0 };

	return zstd_run(st, &ib, ZSTD_e_continue);
}

static int zstd_finish(void *st)
{
	ZSTD_inBuffer ib = { NULL, 0, 0 };

	if (zstd_run(st, &ib, ZSTD_e_end) < 0)
		return -1;
	return zstd_flush(st);
}

static void zstd_wfree(void *st)
{
	struct zstd_writer *z = st;

	ZSTD_freeCCtx(z->cctx);
	free(z->obuf);
	free(z);
}

static const struct cb_codec_wops zstd_wops = { zstd_write, zstd_finish, zstd_wfree };

static int zstd_set(ZSTD_CCtx *cctx, ZSTD_cParameter param, int value, const char *what)
{
	size_t r = ZSTD_CCtx_setParameter(cctx, param, value);

	if (ZSTD_isError(r))
		return cb_error("zstd: cannot set %s to %d: %s", what, value, ZSTD_getErrorName(r));
	return 0;
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
	if (threads > 1)
		ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_nbWorkers, threads);
	z->obuf = cb_xmalloc(CB_CODEC_OUTBUF);
	z->ob = (ZSTD_outBuffer){ z->obuf, CB_CODEC_OUTBUF, 0 };
	*st = z;
	*ops = &zstd_wops;
	return 0;
fail:
	ZSTD_freeCCtx(z->cctx);
	free(z);
	return -1;
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

static const struct cb_codec_rops zstd_rops = { zstd_read, zstd_rfree };

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
