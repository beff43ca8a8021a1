/*
 * cb_verify: `cbackup verify ARCHIVE`: the archive is read once; its
 * SHA-256 is compared with ARCHIVE.sha256 (when present) while the stream
 * is decompressed (codec checksums checked) and every tar entry is read to
 * the end. Any problem is an error naming it: "checksum mismatch",
 * "truncated zstd stream", "corrupt archive at entry './x': ...". On
 * success ARCHIVE.verified records when it was verified (for `list`).
 */
#ifndef CB_VERIFY_H
#define CB_VERIFY_H

#include <stdint.h>
#include "cb_log.h"

struct cb_verify_stats {
	uint64_t entries;
	uint64_t bytes;            /* file data bytes read */
	int checksum_checked;      /* a .sha256 file was there and matched */
};

/* dry_run: the same checks, but no ARCHIVE.verified is written.
 * progress: a progress line on stderr when it is a terminal (cb_progress;
 * a percent and ETA when ARCHIVE.idx gives the stream's size). */
int cb_verify_run(const char *archive, int dry_run, int progress, struct cb_log *log,
		  struct cb_verify_stats *st);

/* Write ARCHIVE.verified (now); a failure is a warning in log. */
void cb_verify_mark(const char *archive, struct cb_log *log);

#endif
