/*
 * codec_int.h: private interface between src/codec.c (the generic writer and
 * reader, detection, stats) and the per-codec files codec_{zstd,lzo,gzip}.c.
 *
 * Each codec provides a writer and a reader as a tiny vtable over an opaque
 * state. Writers send their compressed bytes through cb_codec_out (which
 * counts them and keeps sink time out of compress_seconds); readers pull raw
 * bytes from cb_codec_in, which already holds the bytes read for detection.
 * The later per-chunk policy and parallel lzo/gzip plug in behind the same
 * vtables: a writer only ever sees write/finish.
 */
#ifndef CB_CODEC_INT_H
#define CB_CODEC_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "cb_codec.h"

/* Output side shared by all writers. */
struct cb_codec_out {
	struct cb_sink *sink;
	uint64_t bytes_out;
	double compress_seconds;
};

int cb_codec_out_write(struct cb_codec_out *o, const void *buf, size_t len);

struct cb_codec_wops {
	int (*write)(void *st, const void *buf, size_t len);
	int (*finish)(void *st);
	void (*free)(void *st);
};

/* Input side shared by all readers: a buffer over the archive fd. */
struct cb_codec_in {
	int fd;
	unsigned char *buf;
	size_t pos, len, cap;
	int eof;
};

/* Read more raw bytes into the buffer (compacting it first).
 * Returns bytes added, 0 at end of file, -1 on a read error. */
ssize_t cb_codec_in_fill(struct cb_codec_in *in);
/* Copy exactly len raw bytes; 0 ok, 1 if the file ended first, -1 error. */
int cb_codec_in_take(struct cb_codec_in *in, void *dst, size_t len);

struct cb_codec_rops {
	/* bytes produced (>0), 0 at end of stream, -1 on error */
	ssize_t (*read)(void *st, void *buf, size_t len);
	void (*free)(void *st);
};

/* Output buffer size for writers: the sink gets chunks at least this big. */
#define CB_CODEC_OUTBUF (256 * 1024)

int cb_codec_zstd_writer(void **st, const struct cb_codec_wops **ops,
			 const struct cb_codec_params *p, struct cb_codec_out *o);
int cb_codec_lzo_writer(void **st, const struct cb_codec_wops **ops,
			const struct cb_codec_params *p, struct cb_codec_out *o);
int cb_codec_gzip_writer(void **st, const struct cb_codec_wops **ops,
			 const struct cb_codec_params *p, struct cb_codec_out *o);

int cb_codec_zstd_reader(void **st, const struct cb_codec_rops **ops, struct cb_codec_in *in);
int cb_codec_lzo_reader(void **st, const struct cb_codec_rops **ops, struct cb_codec_in *in);
int cb_codec_gzip_reader(void **st, const struct cb_codec_rops **ops, struct cb_codec_in *in);

/* lzop file format constants shared by the lzo writer and reader. */
#define CB_LZOP_MAGIC_LEN 9
#define CB_LZOP_MAGIC "\x89LZO\x00\r\n\x1a\n"

#endif
