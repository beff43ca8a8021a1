/*
 * cb_codec: the compression stage between the tar stream and the sink.
 *
 * Writer: cb_codec_writer_new() wraps a sink; every byte of tar given to
 * cb_codec_write() comes out compressed as one standard stream:
 *   zstd  — libzstd streaming (ZSTD_c_nbWorkers = zstd_threads, 0 = cores),
 *   lzo   — the lzop file format (what `lzop -d` reads), LZO1X-1 blocks of
 *           256 KiB with adler32 checksums, via liblzo2,
 *   gzip  — zlib deflate, gzip wrapper,
 *   none  — bytes pass through.
 * cb_codec_finish() flushes and writes the trailer; it does not commit the
 * sink. The writer does not own the sink.
 *
 * Reader: cb_codec_reader_new() detects the codec from the first bytes
 * (magic numbers, never the file name) and yields decompressed bytes, so
 * restore/verify can hand plain tar to libarchive.
 *
 * Later issue: per-chunk policy (stored blocks for incompressible data) and
 * parallel lzo/gzip; the writer API stays the same.
 */
#ifndef CB_CODEC_H
#define CB_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "cb_opts.h"
#include "cb_sink.h"

struct cb_codec_params {
	enum cb_compress type;
	enum cb_policy policy;
	int level;      /* 0 = codec default (zstd 3, gzip 6, lzo 1) */
	int threads;    /* zstd workers / pigz threads; 0 = all cores */
};

struct cb_codec_writer;

int cb_codec_writer_new(struct cb_codec_writer **out, const struct cb_codec_params *p, struct cb_sink *sink);
int cb_codec_write(struct cb_codec_writer *w, const void *buf, size_t len);
int cb_codec_finish(struct cb_codec_writer *w);
void cb_codec_writer_free(struct cb_codec_writer *w);

struct cb_codec_stats {
	uint64_t bytes_in;        /* uncompressed bytes given */
	uint64_t bytes_out;       /* compressed bytes sent to the sink */
	uint64_t bytes_stored;    /* bytes emitted as stored/raw blocks (policy) */
	double compress_seconds;  /* CPU-side time spent compressing */
};
void cb_codec_writer_stats(const struct cb_codec_writer *w, struct cb_codec_stats *st);

struct cb_codec_reader;

/* fd is read from; detection reads the first bytes. */
int cb_codec_reader_new(struct cb_codec_reader **out, int fd);
/* Returns bytes produced (0 at end of stream), -1 on error (corrupt data,
 * truncated stream: cb_last_error() says which). */
ssize_t cb_codec_read(struct cb_codec_reader *r, void *buf, size_t len);
enum cb_compress cb_codec_reader_type(const struct cb_codec_reader *r);
void cb_codec_reader_free(struct cb_codec_reader *r);

/* Detect from a buffer holding at least the first 4 bytes; -1 if none of
 * zstd/lzop/gzip magic (then it is taken as plain tar by the reader). */
int cb_codec_detect(const void *buf, size_t len, enum cb_compress *type);

#endif
