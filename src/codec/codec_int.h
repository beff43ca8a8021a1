/*
 * codec_int.h: private interface between src/codec.c (the generic writer and
 * reader, detection, stats) and the per-codec files codec_{zstd,lzo,gzip}.c;
 * below them all codec_io.c (the output and input sides, units, CRC, the
 * trial), which uses none of them.
 *
 * Each codec provides a writer and a reader as a tiny vtable over an opaque
 * state. Writers send their compressed bytes through cb_codec_out (which
 * counts them and keeps sink time out of compress_seconds); readers pull raw
 * bytes from cb_codec_in, which already holds the bytes read for detection.
 * The front end (codec.c) cuts the input into chunks and classifies them
 * (compress, trial, store); a writer fills the chunk buffer it hands out and
 * gets each chunk with its class. codec_pool.c runs chunks on worker threads
 * and gives their output back in order (lzo, threaded gzip).
 */
#ifndef CB_CODEC_INT_H
#define CB_CODEC_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "cb_codec.h"

/* Chunks: the unit of the policy decision and of parallel work. */
#define CB_CODEC_CHUNK (1024 * 1024)

enum cb_chunk_class {
	CB_CHUNK_COMPRESS,   /* policy always: compress, no trial */
	CB_CHUNK_TRIAL,      /* the trial decides */
	CB_CHUNK_STORE,      /* the archive writer said: already compressed */
};

/* Why bytes went out stored. */
enum cb_store_reason { CB_STORED_MAGIC, CB_STORED_QCOW2, CB_STORED_TRIAL, CB_STORED_NOGAIN };

struct cb_chunk_meta {
	size_t len;
	enum cb_chunk_class cls;
	enum cb_store_reason reason;       /* for CB_CHUNK_STORE */
	uint64_t first_file, last_file;    /* cb_codec_begin_file() ids it covers */
	int unit_end;                      /* the chunk ends a unit (segment end) */
};

/* Output side shared by all writers; the stats are updated in stream order. */
struct cb_codec_out {
	struct cb_sink *sink;
	uint64_t bytes_out;
	double compress_seconds;
	uint64_t stored[4];                /* by enum cb_store_reason */
	uint64_t files_stored, files_stored_magic;
	uint64_t last_file_counted, last_magic_counted;
	uint64_t u_done;                   /* uncompressed bytes emitted so far */
	struct cb_codec_units units;       /* with their digests (summed as written) */
	unsigned char *inplace;            /* the last cb_codec_out_buffer() */
	/* segments (codec_seg.c): added when cut, closed in emit order */
	struct cb_codec_segs segs;
	size_t segs_closed;                /* segs.v[segs_closed] is being emitted */
	uint64_t seg_c0;                   /* its first compressed byte */
	void *seg_sha;                     /* EVP_MD_CTX over its compressed bytes */
	cb_codec_seg_fn *seg_fn;           /* cb_codec_set_seg_fn */
	void *seg_ctx;
};

/* The backend emitted the last byte of the segment being emitted: pad (a
 * codec's own padding of n bytes: a zstd skippable frame, an empty gzip
 * member; NULL: none) so that every segment is a multiple of CB_SEG_ALIGN
 * long and clones line up, then close it (its compressed range, digest). */
typedef int cb_codec_pad_fn(struct cb_codec_out *o, size_t n);
int cb_codec_out_seg_done(struct cb_codec_out *o, cb_codec_pad_fn *pad, size_t pad_min);

/* A unit starts here: the next byte written is its first (frame, member or
 * block header), for u_done's next bytes. */
void cb_codec_out_unit(struct cb_codec_out *o);

int cb_codec_out_write(struct cb_codec_out *o, const void *buf, size_t len);
/* Writing in place: room in the sink's buffer (NULL on a write error), then
 * the bytes filled. */
unsigned char *cb_codec_out_buffer(struct cb_codec_out *o, size_t *avail);
int cb_codec_out_advance(struct cb_codec_out *o, size_t len);
/* Count a chunk (or, with m NULL, some bytes) emitted stored. */
void cb_codec_out_stored(struct cb_codec_out *o, const struct cb_chunk_meta *m,
			 enum cb_store_reason why, uint64_t bytes);

struct cb_codec_wops {
	/* buffer of CB_CODEC_CHUNK bytes for the next chunk; NULL on error */
	unsigned char *(*chunk_buf)(void *st);
	/* the buffer last handed out holds m->len > 0 bytes */
	int (*chunk)(void *st, const struct cb_chunk_meta *m);
	int (*finish)(void *st);
	void (*free)(void *st);
	/* stored runs shorter than this are left to the trial: a switch to
	 * stored blocks costs (a zstd frame end, a deflate flush) */
	size_t min_store;
	/* optional: emit m->len bytes of a stored run (m->cls CB_CHUNK_STORE)
	 * straight from data, which is only valid during the call; only for
	 * writers that emit in order on the calling thread */
	int (*store)(void *st, const struct cb_chunk_meta *m, const unsigned char *data);
	/* every byte given so far out to cb_codec_out (pools drained, a file
	 * header written), so that copied bytes can follow; NULL: the codec
	 * takes no copied segments */
	int (*sync)(void *st);
	/* optional: where the next segment (codec_seg.c) is gathered, at
	 * least 2 * unit_size bytes, the chunks of its replay then taken
	 * there in place (chunk_buf hands out the same bytes); the codec
	 * takes the buffer over with the segment's last chunk. NULL on error */
	unsigned char *(*seg_buf)(void *st);
};

/* ---- the writer (front end in codec.c, segments in codec_seg.c) ---- */

struct cb_seg_state;

struct cb_codec_writer {
	enum cb_compress type;
	enum cb_policy policy;
	const struct cb_codec_wops *ops;
	void *st;
	struct cb_codec_out out;
	uint64_t bytes_in;
	struct cb_progress *progress;   /* fed with bytes_in; may be NULL */
	int finished, failed;
	unsigned char *cbuf;          /* chunk being filled (from ops->chunk_buf) */
	struct cb_chunk_meta cm;
	enum cb_data_kind hint_kind;  /* kind of the next hint_left bytes */
	uint64_t hint_left;
	uint64_t file_id;
	uint64_t unit_size;           /* S of the cut rule (codec_seg.c) */
	uint64_t chunked;             /* bytes in chunks before the one filled */
	uint64_t unit_end_at;         /* where the unit being replayed ends */
	cb_codec_tap_fn *tap;
	void *tap_ctx;
	struct cb_seg_state *seg;     /* NULL for none */
	uint64_t chunk_copied;        /* bytes the chunker copied into chunks */
};

/* codec_chunk.c, for codec_seg.c: the compression of a segment's bytes. */
int cb_codec_inner_write(struct cb_codec_writer *w, const unsigned char *p, size_t len);
int cb_codec_inner_hint(struct cb_codec_writer *w, enum cb_data_kind kind, uint64_t nbytes);
void cb_codec_inner_begin_file(struct cb_codec_writer *w);
/* ... and for codec.c at the end: the chunk being filled handed over. */
int cb_codec_inner_flush(struct cb_codec_writer *w);
/* codec_trust.c, for codec_seg.c: the tokened pieces of the segment being
 * gathered, their trust key, and the deferred ones read when needed. */
struct seg_piece {
	uint64_t at, n, off;             /* in the segment; in the file */
	unsigned char tok[CB_TOKEN_LEN];
	int fdi;                         /* deferred: index in fds; -1 read */
};
struct seg_trust {
	int on;                          /* record trust keys */
	cb_codec_trust_fn *fn;           /* look them up; NULL: never defer */
	void *ctx;
	struct seg_piece *p;
	size_t n, cap;
	int *fds;                        /* the files of deferred pieces */
	unsigned char *owned;            /* per fd: handed over (closed at the end) */
	size_t n_fds, max_fds;
	unsigned char last_tok[CB_TOKEN_LEN];  /* the file of fds[n_fds - 1] */
	uint64_t deferred;               /* bytes of the segment not read yet */
	struct cb_codec_trust *rec;
	size_t n_rec, cap_rec;
	uint64_t segs, unread;           /* copied on trust; bytes never read */
};
void seg_trust_init(struct seg_trust *t);
int seg_trust_piece(struct seg_trust *t, uint64_t at, const unsigned char *tok, int fd,
		    uint64_t off, uint64_t n);
void seg_trust_key(const struct seg_trust *t, const unsigned char *settings, size_t settings_len,
		   const unsigned char *evd, const unsigned char *buf, uint64_t len,
		   unsigned char *tkey);
int seg_trust_fill(struct seg_trust *t, unsigned char *buf);
void seg_trust_record(struct seg_trust *t, const unsigned char *tkey, const unsigned char *key,
		      uint64_t len);
void seg_trust_reset(struct seg_trust *t);
int seg_trust_keep_fd(struct seg_trust *t, int fd);
void seg_trust_free(struct seg_trust *t);
/* codec_seg.c */
void cb_codec_seg_init(struct cb_codec_writer *w, const struct cb_codec_params *p);
int cb_codec_seg_flush(struct cb_codec_writer *w);
void cb_codec_seg_free(struct cb_codec_writer *w);
void cb_codec_seg_stats(const struct cb_codec_writer *w, struct cb_codec_stats *st);
/* Bytes written so far belong to no segment (the lzop file header). */
void cb_codec_out_seg_skip(struct cb_codec_out *o);

/* The trial: zstd level 1 on a few samples of a chunk. */
struct cb_trial;
/* The least a chunk must shrink, in percent, to be compressed: what the
 * codec's CPU time is worth. zstd and lzo compress hundreds of MiB/s, so
 * 3% pays; gzip -6 about 20 MiB/s on one core, so a chunk that would save
 * less than a tenth of its size is stored (the archive grows by that). */
#define CB_TRIAL_GAIN_FAST 3
#define CB_TRIAL_GAIN_GZIP 10
struct cb_trial *cb_trial_new(unsigned min_gain_pct);
void cb_trial_free(struct cb_trial *t);
/* 1 if the chunk would not shrink enough to be worth compressing. */
int cb_trial_store(struct cb_trial *t, const unsigned char *buf, size_t len);

/* Number of threads for "0 = all cores" style parameters. */
int cb_codec_cores(void);

/* ---- codec_pool.c: chunks compressed in parallel, emitted in order ---- */

struct cb_pool_job {
	struct cb_chunk_meta m;
	unsigned char *in;                 /* CB_CODEC_CHUNK (or in_cap) bytes */
	unsigned char *out;                /* out_cap bytes */
	size_t out_len;
	void *extra;                       /* extra_size bytes for the codec */
	int failed;
	double seconds;
};

struct cb_pool_ops {
	/* on a worker: compress j->in into j->out; no cb_error() here (it is
	 * not thread-safe): set nothing and return -1, emit reports it */
	int (*run)(void *ctx, struct cb_pool_job *j, void *scratch);
	/* on the calling thread, in submission order */
	int (*emit)(void *ctx, struct cb_pool_job *j);
	void *(*scratch_new)(void *ctx);
	void (*scratch_free)(void *scratch);
	/* optional: what a job's extra holds, freed with the pool */
	void (*extra_free)(void *extra);
};

struct cb_pool;

/* threads == 1: jobs run inline on the calling thread (same bytes). Jobs
 * take CB_CODEC_CHUNK bytes, threads + 2 of them; with cb_pool_new_ring()
 * in_cap bytes, threads + spare of them. */
struct cb_pool *cb_pool_new(int threads, size_t out_cap, size_t extra_size,
			    const struct cb_pool_ops *ops, void *ctx);
struct cb_pool *cb_pool_new_ring(int threads, int spare, size_t in_cap, size_t out_cap,
				 size_t extra_size, const struct cb_pool_ops *ops, void *ctx);
/* The job to fill next (waits for and emits older jobs if all slots are in
 * flight); NULL after an emit error. */
struct cb_pool_job *cb_pool_acquire(struct cb_pool *p);
/* Queue the acquired job (its m is set). */
int cb_pool_submit(struct cb_pool *p);
/* Wait for every job and emit it. */
int cb_pool_drain(struct cb_pool *p);
/* Compression time spread over the threads (wall-clock equivalent). */
double cb_pool_seconds(const struct cb_pool *p);
void cb_pool_free(struct cb_pool *p);

/* Input side shared by all readers: a buffer over the archive fd. */
struct cb_codec_in {
	int fd;
	unsigned char *buf;
	size_t pos, len, cap;
	int eof;
	uint64_t base;                     /* file offset of buf[0] */
	uint64_t u_pos;                    /* uncompressed bytes returned so far */
	struct cb_codec_units *rec;        /* unit starts seen, or NULL */
	uint64_t summed;                   /* rec: file offset summed up to */
	const struct cb_codec_units *expect;   /* units to check, or NULL */
	uint64_t file_size;                /* where expect's last unit ends */
	uint64_t bad_unit;                 /* 1 + the unit found damaged */
};

/* A unit starts at the next raw byte, extra bytes past u_pos: recorded,
 * and checked whole against its digest (-1, error set, if it is damaged). */
int cb_codec_in_unit(struct cb_codec_in *in, uint64_t extra);

/* The units recorded (in->rec) summed up to file offset to. */
void cb_codec_in_sum(struct cb_codec_in *in, uint64_t to);
/* 1 when no raw byte is left, 0 when some are, -1 on a read error. */
int cb_codec_in_at_end(struct cb_codec_in *in);
/* Read more raw bytes into the buffer (compacting it first).
 * Returns bytes added, 0 at end of file, -1 on a read error. */
ssize_t cb_codec_in_fill(struct cb_codec_in *in);
/* Copy exactly len raw bytes; 0 ok, 1 if the file ended first, -1 error. */
int cb_codec_in_take(struct cb_codec_in *in, void *dst, size_t len);

struct cb_codec_rops {
	/* bytes produced (>0), 0 at end of stream, -1 on error */
	ssize_t (*read)(void *st, void *buf, size_t len);
	void (*free)(void *st);
	/* forget the stream state: the input now starts at a unit */
	int (*reset)(void *st);
	/* optional: up to len bytes at *data, valid until the next call */
	ssize_t (*view)(void *st, const void **data, size_t len);
	/* optional: the decoding threads, the units each decoded */
	int (*threads)(const void *st, uint64_t *units, int max);
};

/* CRC-32 as gzip and lzop define it (zlib's crc32() values, chainable the
 * same way), through ISA-L: folding with carry-less multiplies runs at 14
 * GB/s where zlib's tables manage 5.8, and lzop blocks and gzip members sum
 * every byte, stored ones included. */
uint32_t cb_crc32(uint32_t crc, const void *buf, size_t len);

/* XXH64 with seed 0 (xxh64.c): the zstd content checksum is its low 32 bits. */
uint64_t cb_xxh64(const void *buf, size_t len);

int cb_codec_zstd_writer(void **st, const struct cb_codec_wops **ops,
			 const struct cb_codec_params *p, struct cb_codec_out *o);
int cb_codec_lzo_writer(void **st, const struct cb_codec_wops **ops,
			const struct cb_codec_params *p, struct cb_codec_out *o);
int cb_codec_gzip_writer(void **st, const struct cb_codec_wops **ops,
			 const struct cb_codec_params *p, struct cb_codec_out *o);

int cb_codec_zstd_reader(void **st, const struct cb_codec_rops **ops, struct cb_codec_in *in);
int cb_codec_lzo_reader(void **st, const struct cb_codec_rops **ops, struct cb_codec_in *in);
int cb_codec_gzip_reader(void **st, const struct cb_codec_rops **ops, struct cb_codec_in *in);
/* codec_par.c: the ring's slots for threads workers over n units that
 * decode to u_total bytes: 2 a worker at least, and about
 * CB_PAR_RING_BYTES of decoded units, at most CB_PAR_RING_MAX. */
#define CB_PAR_RING_BYTES ((uint64_t)64 << 20)
#define CB_PAR_RING_MAX 64
int cb_codec_par_depth(int threads, uint64_t n, uint64_t u_total);
/* codec_par.c: 1 (nothing done) when par's units do not cover the file. */
int cb_codec_zstd_par_reader(void **st, const struct cb_codec_rops **ops, struct cb_codec_in *in,
			     const struct cb_codec_par *par);

/* codec_same.c: 1 if the clen bytes c (whole units of a previous archive
 * of codec type, as cbackup writes them) decode to exactly the ulen bytes
 * u, else 0. */
int cb_codec_decodes_to(enum cb_compress type, const unsigned char *c, size_t clen,
			const unsigned char *u, size_t ulen);

/* lzop file format constants shared by the lzo writer and reader. */
#define CB_LZOP_MAGIC_LEN 9
#define CB_LZOP_MAGIC "\x89LZO\x00\r\n\x1a\n"

#endif
