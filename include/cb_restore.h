/*
 * cb_restore: `cbackup restore ARCHIVE DESTDIR [--force]`.
 *
 * Reads any cbackup archive (codec detected from the data by cb_codec's
 * reader; plain tar too) with libarchive and extracts below DESTDIR with
 * owners (numeric), modes, times, xattrs, ACLs, hardlinks and holes.
 * Refuses absolute paths, ".." components and writing through symlinks
 * (libarchive's SECURE_* flags plus its own checks); a non-empty DESTDIR
 * needs force.
 */
#ifndef CB_RESTORE_H
#define CB_RESTORE_H

#include <stdint.h>
#include "cb_log.h"

struct cb_restore_opts {
	const char *archive;
	const char *destdir;
	int force;
	char *const *paths;   /* --path: only these entries and subtrees (n_paths 0: all) */
	size_t n_paths;
	int ignore_checksum;  /* a .sha256 that does not match is no error */
	int dry_run;          /* check and say what would be restored; write nothing */
};

struct cb_restore_stats {
	uint64_t entries;
	uint64_t bytes;
};

int cb_restore_run(const struct cb_restore_opts *o, struct cb_log *log, struct cb_restore_stats *st);

#endif
