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
#include <stdio.h>
#include "cb_log.h"

struct cb_restore_opts {
	const char *archive;
	const char *destdir;
	int force;            /* a non-empty DESTDIR is replaced (with --path: those paths) */
	int keep_old;         /* --keep-old: the replaced tree is kept as DESTDIR.old-TIME */
	char *const *paths;   /* --path: only these entries and subtrees (n_paths 0: all) */
	size_t n_paths;
	int ignore_checksum;  /* a .sha256 that does not match is no error */
	int dry_run;          /* check and say what would be restored; write nothing */
	int salvage;          /* damaged units cost only their members (restore_salvage.c) */
	int progress;         /* a progress line on stderr when it is a terminal (cb_progress) */
	const char *map_ids;  /* --map-ids: an unprivileged container's config whose ID map
			       * shifts owners, ACLs and capabilities to the host's IDs */
	/* a whole restore whose archive's bytes come through stream_fd, in
	 * order, once (a store's night, cb_store_ops.h): archive names no
	 * file, only its catalog ARCHIVE.idx; stream_size is its size */
	int stream, stream_fd;
	uint64_t stream_size;
};

/* A member restore --salvage could not restore: a byte of it (or of the
 * member it is a hardlink to) is in damaged unit `unit`. */
struct cb_restore_lost {
	char *path;           /* as in the archive ("./etc/passwd") */
	uint64_t unit;
};

struct cb_restore_stats {
	uint64_t entries;
	uint64_t bytes;
	/* --salvage: the damaged units (ascending) and the members lost */
	uint64_t *bad_units;
	size_t n_bad_units;
	struct cb_restore_lost *lost;
	size_t n_lost;
};

/* --map-ids FILE names an unprivileged container's config with an ID map:
 * 0, else -1 with the error set (a usage error: nothing restored). */
int cb_restore_check_map_ids(const char *file);
/* 0 when the restore finished (with --salvage: members may be lost, each
 * said as an ERROR line when found), -1 with the error set. st is filled
 * either way; release it with cb_restore_stats_release. */
int cb_restore_run(const struct cb_restore_opts *o, struct cb_log *log, struct cb_restore_stats *st);
void cb_restore_stats_release(struct cb_restore_stats *st);
/* The result as a JSON document (--output-format json): status "ok",
 * "partial" (salvaged, members lost) or "failed" (error: why). */
void cb_restore_json(FILE *out, const struct cb_restore_opts *o, const struct cb_restore_stats *st,
		     const char *error);

#endif
