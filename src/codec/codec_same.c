/*
 * Does a segment copied from a previous archive hold what this night's
 * segment holds? Its compressed bytes (read and checked against that
 * archive's catalog) are decoded and compared with the uncompressed bytes
 * the segment's key was made of: the catalog and the archive sit in a
 * dump directory others can write to, and a catalog can be made to hold
 * (its digests, its .sha256 line) for bytes that are not what its keys
 * say. Decoding costs a fraction of compressing, which the copy saves.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <lzo/lzo1x.h>
#include <zlib.h>
#include <zstd.h>

#include "cb_util.h"
#include "codec_int.h"

#define OUT_CHUNK (256u * 1024)

static int zstd_same(const unsigned char *c, size_t clen, const unsigned char *u, size_t ulen)
{
	ZSTD_DCtx *d = ZSTD_createDCtx();
	unsigned char *out = cb_xmalloc(OUT_CHUNK);
	ZSTD_inBuffer in = { c, clen, 0 };
	size_t done = 0, r = 0;
	int same = d != NULL;

	while (same && in.pos < in.size) {
		ZSTD_outBuffer o = { out, OUT_CHUNK, 0 };
		size_t was = in.pos;

		r = ZSTD_decompressStream(d, &o, &in);
		same = !ZSTD_isError(r) && o.pos <= ulen - done && !memcmp(out, u + done, o.pos) &&
		       (o.pos > 0 || in.pos > was);
		done += o.pos;
	}
	same = same && r == 0 && done == ulen;   /* r 0: the last frame ended */
	ZSTD_freeDCtx(d);
	free(out);
	return same;
}

static int gzip_same(const unsigned char *c, size_t clen, const unsigned char *u, size_t ulen)
{
	unsigned char *out = cb_xmalloc(OUT_CHUNK);
	z_stream z;
	size_t done = 0, n;
	int r = Z_OK, same;

	memset(&z, 0, sizeof(z));
	same = inflateInit2(&z, 16 + MAX_WBITS) == Z_OK;
	z.next_in = (unsigned char *)c;
	z.avail_in = (uInt)clen;
	while (same && (z.avail_in > 0 || r != Z_STREAM_END)) {
		if (r == Z_STREAM_END && inflateReset(&z) != Z_OK)
			break;
		z.next_out = out;
		z.avail_out = OUT_CHUNK;
		r = inflate(&z, Z_NO_FLUSH);
		n = OUT_CHUNK - z.avail_out;
		same = (r == Z_OK || r == Z_STREAM_END) && n <= ulen - done &&
		       !memcmp(out, u + done, n) && (n > 0 || r == Z_STREAM_END);
		done += n;
	}
	same = same && r == Z_STREAM_END && z.avail_in == 0 && done == ulen;
	inflateEnd(&z);
	free(out);
	return same;
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* lzop blocks as cbackup writes them (CRC-32 of the data, and of the
 * compressed data when it is compressed): decoded, compared. */
static int lzo_same(const unsigned char *c, size_t clen, const unsigned char *u, size_t ulen)
{
	unsigned char *out = NULL;
	size_t pos = 0, done = 0, cap = 0;
	int same = 1;

	while (same && pos + 4 <= clen) {
		uint32_t dlen = be32(c + pos), bl, hdr;
		lzo_uint n;

		if (dlen == 0) {   /* the end marker ends the segment */
			pos += 4;
			break;
		}
		if (pos + 12 > clen)
			return free(out), 0;
		bl = be32(c + pos + 4);
		hdr = bl < dlen ? 16 : 12;
		if (bl == 0 || bl > dlen || dlen > ulen - done || hdr + (size_t)bl > clen - pos)
			return free(out), 0;
		if (bl == dlen) {
			same = !memcmp(c + pos + hdr, u + done, dlen);
		} else {
			if (dlen > cap)
				out = cb_xrealloc(out, cap = dlen);
			n = dlen;
			same = lzo1x_decompress_safe(c + pos + hdr, bl, out, &n, NULL) == LZO_E_OK &&
			       n == dlen && !memcmp(out, u + done, dlen);
		}
		pos += hdr + bl;
		done += dlen;
	}
	free(out);
	return same && pos == clen && done == ulen;
}

int cb_codec_decodes_to(enum cb_compress type, const unsigned char *c, size_t clen,
			const unsigned char *u, size_t ulen)
{
	static const struct {
		enum cb_compress type;
		int (*same)(const unsigned char *, size_t, const unsigned char *, size_t);
	} codecs[] = {
		{ CB_COMPRESS_ZSTD, zstd_same }, { CB_COMPRESS_GZIP, gzip_same },
		{ CB_COMPRESS_LZO, lzo_same },
	};

	for (size_t i = 0; i < sizeof(codecs) / sizeof(codecs[0]); i++)
		if (codecs[i].type == type)
			return codecs[i].same(c, clen, u, ulen);
	return 0;
}
