/*
 * cb_tarread: a libarchive tar reader over cb_codec's decompressing reader
 * (the codec is detected from the data). Used by restore and verify.
 *
 * With want_sha256, a thread reads the file once, hashes it and feeds the
 * bytes through a pipe to the decompressor, so verify reads the archive
 * only once. The struct owns the fd, the reader, the pipe and the archive.
 */
#ifndef CB_TARREAD_H
#define CB_TARREAD_H

#include <pthread.h>
#include <stdint.h>
#include <archive.h>
#include "cb_codec.h"
#include "cb_progress.h"

struct cb_tarread {
	struct archive *a;              /* the tar reader: next_header, read_data... */
	const char *path;               /* the archive (not owned) */
	struct cb_codec_reader *reader;
	int fd;                         /* what the codec reads: the file or the pipe */
	int file_fd;
	unsigned char *buf;
	int codec_failed;               /* set when the codec reported the error */
	uint64_t total;                 /* decompressed bytes read so far */
	uint64_t data_end;              /* offset just past the last non-zero byte */
	uint64_t limit;                 /* cb_tarread_at's limit (0: none) */
	/* set after opening: progress_base + total is reported as read */
	struct cb_progress *progress;
	uint64_t progress_base;
	/* sha256 tee */
	int want_sha256;
	pthread_t tee;
	int tee_started;
	int tee_error;                  /* errno of a failed read in the tee */
	char sha256[65];
	char expect_sha256[65];         /* what ARCHIVE.sha256 says, or "" */
	struct cb_codec_units units;    /* the .idx's units the reader checks */
};

/* The whole archive from its start: a zstd one with units (the catalog's
 * or the seek table's) is decoded on several threads
 * (cb_codec_reader_parallel), the tee then hashing the file beside it. */
int cb_tarread_open(struct cb_tarread *t, const char *path, int want_sha256);
/*
 * Open to read the whole archive with its checks: each unit against the
 * digest ARCHIVE.idx gives it (if the catalog is there and sound:
 * cb_codec_reader_check_units), and ARCHIVE.sha256 (if there is one):
 *   CB_SUM_FILE     the whole file hashed as it streams (the tee): verify
 *   CB_SUM_CATALOG  the catalog against its line in the .sha256, checked
 *                   here (a mismatch fails the open): its unit digests
 *                   cover every byte of the file, read once (restore; the
 *                   whole file hashed as CB_SUM_FILE when the .sha256
 *                   names no catalog, or there is no usable one)
 *   CB_SUM_NONE     the .sha256 not read (--ignore-checksum)
 * cb_tarread_end() then says whether all held.
 */
enum cb_tarread_sum { CB_SUM_FILE, CB_SUM_CATALOG, CB_SUM_NONE };
int cb_tarread_open_checked(struct cb_tarread *t, const char *path, enum cb_tarread_sum sum);
/* The whole archive from fd, a stream read once, in order (a pipe; t owns
 * fd, label names it), size bytes long; units: its catalog's (their
 * CRC-32s checked; zstd then decoded on several threads), or NULL. The
 * stream's source checks the whole (no .sha256 here). */
int cb_tarread_open_stream(struct cb_tarread *t, int fd, const char *label, uint64_t size,
			   const struct cb_codec_units *units);
/* After the last entry: cb_tarread_finish_stream(), then the .sha256 if one
 * was expected. 0, or -1 naming the archive and the damage. */
int cb_tarread_end(struct cb_tarread *t);
/* The hex digest ARCHIVE.sha256 gives the archive: 0 found, 1 there is no
 * .sha256, -1 it is not in sha256sum's format. */
int cb_tarread_expected_sha256(const char *archive, char hex[65]);
/* Open at a member: decode from the unit at compressed offset c_off
 * (uncompressed u_off), drop skip bytes; the next header read is the
 * member's (restore --path, mount). units: the catalog's (cb_idx_units),
 * each unit decoded is checked against its digest first; NULL: none. */
struct cb_tarread_at {
	uint64_t c_off, u_off, skip;
	const struct cb_codec_units *units;
	/* 0, or the bytes the tar reader gets after skip: the stream ends
	 * there for it, and no unit past them is read (restore --salvage
	 * stops before a damaged one) */
	uint64_t limit;
};
int cb_tarread_open_at(struct cb_tarread *t, const char *path, const struct cb_tarread_at *at);
/* Record the error of a failed libarchive call on t->a (the codec's message
 * if the codec failed, else libarchive's); returns -1. */
int cb_tarread_error(struct cb_tarread *t, const char *what);
/*
 * After the last entry: read the rest of the stream to its end, so that the
 * codec checks its own end (zstd frame checksum and last block, gzip
 * trailer CRC and ISIZE, lzop end marker and block checksums) and nothing
 * follows it; then the tar stream must end on a block boundary with at
 * least the two zero blocks of tar's end-of-archive. 0, or -1 with the
 * reason (a cut or extended archive).
 */
int cb_tarread_finish_stream(struct cb_tarread *t);
/* Finish the tee (drains the file) and fill t->sha256; -1 if reading failed. */
int cb_tarread_finish_sha256(struct cb_tarread *t);
void cb_tarread_close(struct cb_tarread *t);

#endif
