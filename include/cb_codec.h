/*
 * cb_codec: the compression stage between the tar stream and the sink.
 *
 * Writer: cb_codec_writer_new() wraps a sink; every byte of tar given to
 * cb_codec_write() comes out compressed as one standard stream:
 *   zstd  — one frame per unit, compressed by a pool (zstd_threads, 0 = cores),
 *   lzo   — the lzop file format (what `lzop -d` reads), LZO1X-1 blocks of
 *           256 KiB with CRC-32 checksums (as `lzop --crc32`), via liblzo2,
 *   gzip  — zlib deflate, gzip wrapper,
 *   none  — bytes pass through.
 * cb_codec_finish() writes the trailer and flushes the sink's buffer (so
 * every byte has been written); it does not commit the sink. The writer
 * does not own the sink.
 *
 * Reader: cb_codec_reader_new() detects the codec from the first bytes
 * (magic numbers, never the file name) and yields decompressed bytes, so
 * restore/verify can hand plain tar to libarchive.
 *
 * Policy (DESIGN §6): the writer cuts the tar stream into chunks of
 * CB_CODEC_CHUNK bytes. With CB_POLICY_AUTO, a chunk is emitted as the
 * format's stored blocks (zstd raw blocks in a raw frame, lzop blocks with
 * equal sizes, deflate stored blocks) when the archive writer said its bytes
 * are already compressed (cb_codec_hint) or when a cheap trial (zstd level 1
 * on a few samples) finds it would not shrink; everything else is compressed.
 * The output is always one standard stream.
 *
 * Threads: zstd — units (frames) compressed by a pool (0 = all cores);
 * lzo — chunks compressed by a pool (0 = all cores); gzip — 0 = one
 * classic deflate stream per unit, 1 = half the cores, N = N threads
 * compressing chunks in parallel (each chunk primed with the 32 KiB before
 * it, a unit's first with none). For zstd, lzo and threaded gzip the bytes
 * do not depend on the thread count.
 */
#ifndef CB_CODEC_H
#define CB_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "cb_opts.h"
#include "cb_progress.h"
#include "cb_sink.h"

struct cb_codec_params {
	enum cb_compress type;
	enum cb_policy policy;
	int level;      /* 0 = codec default (zstd 3, gzip 6, lzo 1) */
	int threads;    /* zstd workers (0 = all cores); gzip: vzdump's pigz value
	                 * (0 = classic single-threaded, 1 = half the cores, N) */
	uint64_t unit_size;  /* bytes of tar per independently decodable unit
	                      * (0 = CB_CODEC_UNIT_DEFAULT) */
};

/*
 * Seekable units (DESIGN §6): the tar stream is cut into segments (below)
 * and every segment is decodable on its own: zstd ends its frame there
 * (frames of raw blocks, for stored runs, are units of their own) and
 * appends the seek table of zstd's seekable format as a skippable frame;
 * gzip ends its member (one member per unit); lzop blocks are independent
 * anyway (one unit per block). A unit is where a reader may start: the
 * uncompressed offset of its first byte and the compressed offset of its
 * first byte (frame / member / block header).
 *
 * Segments, cut by content (DESIGN §5): the archive writer says where each
 * member's first header starts (cb_codec_member) and where its data starts
 * (cb_codec_begin_file). A segment ends before a member when the member
 * before it was big (its data was cut), or when the segment holds at least
 * unit_size/4 bytes and the path of the member before it hashes to a hit
 * (1 in 32), or when it holds unit_size bytes; within a member's data it
 * ends every unit_size bytes from the data's start; and at 2 * unit_size
 * whatever comes. A stream without members is cut every unit_size bytes.
 * So adding, removing or changing a member changes the segments around it
 * only. A segment's compressed bytes are a function of its bytes, the
 * hints given within it (and the hint still running at its start) and the
 * codec's settings: the key (SHA-256 over these) names them, and a segment
 * whose key a previous archive has is copied from there (cb_codec_set_reuse)
 * instead of compressed: the same bytes either way. zstd and gzip pad each
 * segment to a multiple of CB_SEG_ALIGN bytes (a skippable frame, an empty
 * member with an extra field) so that copies can be clones; lzop has no
 * padding (copies are plain copies unless the offsets happen to line up).
 */
#define CB_CODEC_UNIT_DEFAULT (4ull * 1024 * 1024)

/*
 * A unit's digest: the CRC-32 (gzip's) of the archive bytes from its c_off
 * to the next unit's c_off, the last unit's to the end of the file (the
 * zstd seek table, the lzop end marker, the gzip trailer are in it); only
 * bytes before the first unit (the lzop file header, which has its own
 * checksum) are in none. Summed as the bytes pass (writer: as they are
 * written; reader: as they are decoded), so the writer and a scan of the
 * archive give the same digests; the .idx keeps them.
 */
struct cb_codec_unit {
	uint64_t u_off, c_off;
	uint32_t crc;   /* of the len bytes from c_off summed so far */
	uint64_t len;
};

struct cb_codec_units {
	struct cb_codec_unit *v;
	size_t n, cap;
	uint64_t total;   /* the decoded bytes, when known (cb_codec_units_finish) */
};

/* Add a unit start; one at the same u_off as the last replaces it (a unit
 * that yielded nothing: its bytes go to the unit before it). */
void cb_codec_units_add(struct cb_codec_units *u, uint64_t u_off, uint64_t c_off);
/* The next len archive bytes belong to the last unit (before any unit: to none). */
void cb_codec_units_sum(struct cb_codec_units *u, const void *buf, size_t len);
/* The same for bytes whose CRC-32 is known already (crc of those len bytes). */
void cb_codec_units_sum_crc(struct cb_codec_units *u, uint32_t crc, size_t len);
/* Drop trailing units that start at or after total (the seek table's
 * skippable frame, an empty last member), their bytes going to the unit
 * before them: the writer and a scan of the archive then agree. */
void cb_codec_units_finish(struct cb_codec_units *u, uint64_t total);
void cb_codec_units_release(struct cb_codec_units *u);

#define CB_SEG_ALIGN 4096
#define CB_SEG_KEY 32

struct cb_codec_seg {
	uint64_t u_off, u_len;            /* uncompressed range */
	uint64_t c_off, c_len;            /* compressed range, padding included */
	unsigned char key[CB_SEG_KEY];    /* what its compressed bytes are a function of */
	unsigned char cdig[CB_SEG_KEY];   /* SHA-256 of its compressed bytes */
};

struct cb_codec_segs {
	struct cb_codec_seg *v;
	size_t n, cap;
};

/* A segment of a previous archive with the key asked for: its compressed
 * range in the fd given to cb_codec_set_reuse, the digest those bytes must
 * have, and its units relative to its start (u_off, c_off from 0). */
struct cb_codec_reuse_src {
	uint64_t c_off, c_len;
	const unsigned char *cdig;
	const struct cb_codec_unit *units;
	size_t n_units;
	/* 1: units[i].crc is the catalog's CRC-32 of exactly unit i's bytes
	 * (each unit ends where the next starts, the last where the segment
	 * ends): the copy is checked by those, not by the SHA-256 cdig */
	int unit_crcs;
	const char *name;                 /* the previous archive, for messages */
	/* its c_len compressed bytes, read by the lookup (a unit store's
	 * object), used in place until the copy is done; NULL: read from the
	 * fd given to cb_codec_set_reuse */
	const unsigned char *bytes;
	/* 1: the lookup authenticated bytes as the ones cdig names (a sealed
	 * unit's tag under a key only its bytes' SHA-256 and the secret
	 * give): no SHA-256 of them again; the CRC-32s still run */
	int authentic;
};
/* 1 and *src filled if a segment with this key and u_len is there, else 0. */
typedef int cb_codec_lookup_fn(void *ctx, const unsigned char *key, uint64_t u_len,
			       struct cb_codec_reuse_src *src);

struct cb_codec_writer;

/* The writer's parameters for codec `type` under a job's options: zstd's
 * own threads and level, gzip's pigz threads, lzo on all cores. */
void cb_codec_params_for(const struct cb_opts *o, enum cb_compress type, struct cb_codec_params *p);

/* What the next bytes given to cb_codec_write() are (archive member data). */
enum cb_data_kind {
	CB_DATA_UNKNOWN = 0,   /* tar headers, ordinary file data: the trial decides */
	CB_DATA_COMPRESSED,    /* a known compressed format (magic number): stored */
	CB_DATA_QCOW2,         /* qcow2 compressed clusters / encrypted image: stored */
};

int cb_codec_writer_new(struct cb_codec_writer **out, const struct cb_codec_params *p, struct cb_sink *sink);
int cb_codec_write(struct cb_codec_writer *w, const void *buf, size_t len);
/* Zero-copy input: where the next bytes would land in the chunk being
 * filled, and how many fit there (*avail, within the current hint). A
 * reader may read into it and then pass exactly that pointer to
 * cb_codec_write(), which then copies nothing. NULL (nothing to gain, or an
 * error that the next cb_codec_write() reports): use a buffer of your own.
 * Valid until the next call into the writer. */
unsigned char *cb_codec_write_buffer(struct cb_codec_writer *w, size_t *avail);
/* Report the uncompressed bytes taken to a progress line (NULL = none). */
void cb_codec_set_progress(struct cb_codec_writer *w, struct cb_progress *progress);
int cb_codec_finish(struct cb_codec_writer *w);
void cb_codec_writer_free(struct cb_codec_writer *w);
/* The units written (after cb_codec_finish); for none, none. */
const struct cb_codec_units *cb_codec_writer_units(const struct cb_codec_writer *w);
/* Every byte of tar given to cb_codec_write() is also shown to tap (the
 * catalog's tar scanner); a tap error fails nothing, it stops the tap. */
typedef int cb_codec_tap_fn(void *ctx, const void *buf, size_t len);
void cb_codec_set_tap(struct cb_codec_writer *w, cb_codec_tap_fn *fn, void *ctx);

/* The next nbytes bytes written are of this kind; afterwards (or at the next
 * hint, which replaces the rest of this one) bytes are CB_DATA_UNKNOWN.
 * Runs of stored kinds too short to be worth a stored block are left to the
 * trial. Ignored with CB_POLICY_ALWAYS and for CB_COMPRESS_NONE. A long run
 * starts a new chunk, which may write: 0 or -1 (error set). */
int cb_codec_hint(struct cb_codec_writer *w, enum cb_data_kind kind, uint64_t nbytes);
/* The data of a new archive member starts here (for the per-file counts
 * and the segments). */
void cb_codec_begin_file(struct cb_codec_writer *w);
/* A member's first header comes next (path as in the archive); NULL: the
 * end-of-archive blocks come next. May cut a segment: 0 or -1. */
int cb_codec_member(struct cb_codec_writer *w, const char *path);
/* Segments whose key lookup() finds are copied from fd (which must stay
 * open until cb_codec_finish) after their compressed bytes are checked
 * against the digest; a damaged one stops the copying (the rest is
 * compressed; cb_codec_reuse_note says why). Only codecs with a sync op
 * and a sink on a file take copies. */
void cb_codec_set_reuse(struct cb_codec_writer *w, int fd, cb_codec_lookup_fn *lookup, void *ctx);
/* Each segment, once all its bytes went to the sink: g (its key, range
 * and digest) and whether it was copied (cb_codec_set_reuse) rather than
 * written; a unit store cuts its objects there. fn's -1 fails the write. */
typedef int cb_codec_seg_fn(void *ctx, const struct cb_codec_seg *g, int copied);
void cb_codec_set_seg_fn(struct cb_codec_writer *w, cb_codec_seg_fn *fn, void *ctx);
/* Why copying stopped, or NULL. */
const char *cb_codec_reuse_note(const struct cb_codec_writer *w);
/* The segments written (after cb_codec_finish); NULL for none, or when the
 * codec could not say where each one ends. */
const struct cb_codec_segs *cb_codec_writer_segs(const struct cb_codec_writer *w);

/*
 * Trust (DESIGN §5): the data of a staged file that is the same
 * as when the previous archive was written need not be read. A token names
 * a staged file's content as the kernel keeps it (CB_TOKEN_LEN bytes: the
 * archive writer's choice, cb_archive.c: device, inode, size, mtime and a
 * ctime older than the archive's start, which any later write moves). A
 * segment holding file data given with tokens gets a trust key: SHA-256
 * over the rules' version, the settings, its hints, its other bytes and,
 * for each piece of tokened data, the token, offset and length. The trust
 * key of a segment of the previous archive maps to that segment's key
 * (a cb_reuse_trust map kept with the staging copy); a segment whose trust
 * key maps is copied under the key mapped, its deferred data never read.
 * Any other segment reads its deferred data and is keyed from its bytes.
 */
#define CB_TOKEN_LEN 48
struct cb_codec_trust {
	unsigned char tkey[CB_SEG_KEY];   /* trust key */
	unsigned char key[CB_SEG_KEY];    /* the segment's key (of its bytes) */
	uint64_t u_len;
};
/* 1 and *key set when tkey (a segment of u_len bytes) maps to a key. */
typedef int cb_codec_trust_fn(void *ctx, const unsigned char *tkey, uint64_t u_len,
			      unsigned char *key);
/* Record trust keys (cb_codec_writer_trust); with fn, also look them up
 * and let data be deferred (cb_codec_piece). */
void cb_codec_set_trust(struct cb_codec_writer *w, cb_codec_trust_fn *fn, void *ctx);
/* The next len bytes written are bytes [off, off + len) of the file with
 * token tok, open as fd; len must fit the room cb_codec_write_buffer() just
 * gave, and the bytes must be written there, in place. 1: the writer takes
 * them unread (the caller writes that buffer as it is, without reading the
 * file; the writer reads fd later if it must, so the caller ends its use
 * of fd with cb_codec_keep_fd); 0: read them into it as usual. */
int cb_codec_piece(struct cb_codec_writer *w, const unsigned char *tok, int fd, uint64_t off,
		   uint64_t len);
/* The caller is done with fd, a file it gave pieces of (or tried to): 1 if
 * the writer keeps it for the pieces it deferred (and closes it itself),
 * 0 if the caller closes it. Every fd given to cb_codec_piece ends here,
 * on error paths too: one the writer still reads is never closed under it. */
int cb_codec_keep_fd(struct cb_codec_writer *w, int fd);
/* Per segment that held tokened data, its trust key (after cb_codec_finish). */
const struct cb_codec_trust *cb_codec_writer_trust(const struct cb_codec_writer *w, size_t *n);

struct cb_codec_stats {
	uint64_t bytes_in;        /* uncompressed bytes given */
	uint64_t bytes_out;       /* compressed bytes sent to the sink */
	uint64_t bytes_stored;    /* bytes emitted as stored/raw blocks (policy) */
	double compress_seconds;  /* CPU-side time spent compressing */
	/* why bytes were stored (bytes_stored also counts lzo blocks that did
	 * not shrink, which belong to none of these) */
	uint64_t bytes_stored_magic;   /* known compressed formats */
	uint64_t bytes_stored_qcow2;   /* qcow2 compressed clusters, encrypted qcow2 */
	uint64_t bytes_stored_trial;   /* chunks the trial found incompressible */
	uint64_t files_stored;         /* files with bytes stored for one of these reasons */
	uint64_t files_stored_magic;   /* of which recognised by magic number */
	/* segments copied from a previous archive / compressed here */
	uint64_t segs_reused, segs_reused_bytes;          /* tar bytes */
	uint64_t segs_reused_archive_bytes;               /* their compressed bytes */
	uint64_t segs_checked_crc;  /* of the reused: checked by unit CRC-32s, not SHA-256 */
	uint64_t segs_compressed, segs_compressed_bytes;  /* tar bytes */
	/* segments copied on trust, and the staged data they never read */
	uint64_t segs_trusted, trusted_unread_bytes;
};
void cb_codec_writer_stats(const struct cb_codec_writer *w, struct cb_codec_stats *st);
/* "149MiB in 201 files (known formats 140MiB in 190 files, qcow2 clusters
 * 0B, trial 9MiB)", for the log line "stored raw (incompressible): ..." */
void cb_codec_stats_summary(const struct cb_codec_stats *st, char *buf, size_t len);

struct cb_codec_reader;

/* fd is read from; detection reads the first bytes. */
int cb_codec_reader_new(struct cb_codec_reader **out, int fd);
/* Returns bytes produced (0 at end of stream), -1 on error (corrupt data,
 * truncated stream: cb_last_error() says which). */
ssize_t cb_codec_read(struct cb_codec_reader *r, void *buf, size_t len);
enum cb_compress cb_codec_reader_type(const struct cb_codec_reader *r);
void cb_codec_reader_free(struct cb_codec_reader *r);
/* Record the unit starts met while reading into u (before the first read):
 * `cbackup index` rebuilds the unit table from the archive alone. */
void cb_codec_reader_record_units(struct cb_codec_reader *r, struct cb_codec_units *u);
/* Go to the unit that starts at compressed offset c_off (uncompressed
 * u_off): the fd must be seekable; the next read decodes from there. */
int cb_codec_reader_seek(struct cb_codec_reader *r, uint64_t c_off, uint64_t u_off);
/*
 * Check every unit of expect (with its digests: the .idx's; the reader
 * does not own it) before decoding any of it: when the decoder reaches a
 * unit's start, the unit's bytes (up to CB_CODEC_CHECK_MAX) are read whole
 * and their CRC-32 compared, so no byte of a damaged unit is ever returned:
 * the read fails naming the unit. file_size: the archive's, where the last
 * unit ends. Larger units (none that cbackup writes) keep the codec's own
 * checks only.
 */
#define CB_CODEC_CHECK_MAX (80ull * 1024 * 1024)
void cb_codec_reader_check_units(struct cb_codec_reader *r, const struct cb_codec_units *expect,
				 uint64_t file_size);
/* 1 + the number of the unit found damaged, or 0. */
uint64_t cb_codec_reader_bad_unit(const struct cb_codec_reader *r);

/*
 * A zstd archive whose units are known decoded on several threads, one
 * ring of decoded units (~64 MiB, 2 a thread at least) read in order
 * (codec_par.c): for a reader that has read nothing yet, on a file it
 * may pread. units: every unit from the file's first byte (the
 * catalog's, crc 1: their CRC-32s are checked as the sequential reader
 * checks them; or the seek table's, crc 0), u_total: the decoded
 * stream's length, threads: 0 = the cores (at least 2). 0 switched, 1
 * left sequential (another codec, units that do not cover the file), -1
 * on error.
 */
struct cb_codec_par {
	const struct cb_codec_units *units;
	uint64_t u_total, file_size;
	int crc, threads;
	int stream;   /* the fd is a stream (a pipe) read once, in order */
};
int cb_codec_reader_parallel(struct cb_codec_reader *r, const struct cb_codec_par *par);
/* As cb_codec_read, the bytes at *data: in buf, or (a parallel reader) in
 * its ring, valid until the next read. */
ssize_t cb_codec_read_view(struct cb_codec_reader *r, void *buf, size_t len, const void **data);
/* A parallel reader's threads (0: sequential), units[i] the units thread
 * i decoded (up to max of them). */
int cb_codec_reader_threads(const struct cb_codec_reader *r, uint64_t *units, int max);

/*
 * The seek table of zstd's seekable format at the end of a zstd archive of
 * file_size bytes: table holds its len bytes (skippable frame header,
 * entries, footer). Its frames as units in u (normalized as the writer's).
 * 0, or -1 with the reason: a table whose sizes do not add up to the file,
 * bad magic numbers, reserved bits set.
 */
int cb_zstd_seek_table(const unsigned char *table, size_t len, uint64_t file_size,
		       struct cb_codec_units *u);
/* Read it from fd: 0, 1 if the archive has none, -1 if it is malformed. */
int cb_zstd_read_seek_table(int fd, uint64_t file_size, struct cb_codec_units *u);

/* Detect from a buffer holding at least the first 4 bytes; -1 if none of
 * zstd/lzop/gzip magic (then it is taken as plain tar by the reader). */
int cb_codec_detect(const void *buf, size_t len, enum cb_compress *type);

#endif
