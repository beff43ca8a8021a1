/*
 * cb_index: the catalog of an archive, ARCHIVE.idx beside it (man page
 * cbackup-idx(5) has the format): per member its path, type, size, mode,
 * owner, mtime, link target and the uncompressed offset of its first header
 * (and of its data), plus the codec's unit table (uncompressed offset <->
 * compressed offset), so that `cbackup ls`, `restore --path` and `mount`
 * find a member without reading the archive, and decode only its units.
 *
 * The catalog is built by a tar scanner fed with the uncompressed stream:
 * while the archive is written (the codec's tap) or from the archive alone
 * (`cbackup index`, or ls/restore of an archive without .idx). Both see the
 * same bytes, so both build the same .idx.
 *
 * The loader maps the file and checks every count, offset and size against
 * the file's size and the archive's sizes before anything is used: a
 * damaged or hostile .idx is refused with a message, never followed.
 */
#ifndef CB_INDEX_H
#define CB_INDEX_H

#include <stddef.h>
#include <stdint.h>
#include "cb_codec.h"
#include "cb_log.h"

#define CB_IDX_HARDLINK 1u   /* a hard link to link (type bits: regular) */
#define CB_IDX_SPARSE   2u   /* stored with a sparse map (pax GNU.sparse 1.0) */

struct cb_idx_entry {
	const char *path;       /* as in the archive ("./etc/passwd"), NUL-terminated */
	const char *link;       /* symlink or hardlink target, "" if none */
	uint64_t hdr_off;       /* uncompressed offset of the member's first header */
	uint64_t data_off;      /* ... of its data (after all its headers) */
	uint64_t size;          /* file size (a sparse file's real size) */
	int64_t mtime;
	uint32_t mtime_nsec;
	uint32_t mode;          /* type bits and permissions */
	uint32_t uid, gid;
	uint32_t dev_major, dev_minor;
	uint32_t flags;         /* CB_IDX_* */
};

/* ---- building ---- */

struct cb_tarscan;

struct cb_tarscan *cb_tarscan_new(void);
/* Feed the next bytes of the tar stream (cb_codec_tap_fn-compatible):
 * 0, or -1 with the reason (not a tar stream, a header out of bounds). */
int cb_tarscan_feed(void *scan, const void *buf, size_t len);
/* The stream ended: it must have ended at tar's end-of-archive. */
int cb_tarscan_end(struct cb_tarscan *s);
uint64_t cb_tarscan_entries(const struct cb_tarscan *s);
void cb_tarscan_free(struct cb_tarscan *s);

/* The .idx bytes for what was scanned (caller frees *buf). archive_size:
 * the compressed archive's size; units: the codec's (NULL or none for an
 * uncompressed archive, or an archive whose units are unknown). */
int cb_idx_build(const struct cb_tarscan *s, const struct cb_codec_units *units,
		 enum cb_compress type, uint64_t archive_size, unsigned char **buf, size_t *len);
/* Write ARCHIVE.idx (.tmp, fsync, rename); *sha256 (65 bytes) gets its hex digest. */
int cb_idx_write_file(const char *idx_path, const unsigned char *buf, size_t len, char *sha256);
/* cb_idx_build and cb_idx_write_file in one, written from the scanner's own
 * memory (a backup's catalog is not held twice); segs (NULL: none) are the
 * codec's segments with their keys, which only the archive writer knows
 * (a catalog rebuilt from the archive has none). */
int cb_idx_write_scan(const char *idx_path, const struct cb_tarscan *s,
		      const struct cb_codec_units *units, const struct cb_codec_segs *segs,
		      enum cb_compress type, uint64_t archive_size, char *sha256);

/* Decode ARCHIVE from its start, scan it and build its .idx in memory: the
 * unit table from the units the decoder met (frames, members, blocks). */
int cb_idx_scan_archive(const char *archive, unsigned char **buf, size_t *len);

/* ---- reading ---- */

struct cb_idx;
/* ARCHIVE.idx if it is there and sound, else (said in the log) a scan of
 * the archive: ls and restore --path work on any archive. */
int cb_idx_open_for(struct cb_idx *x, const char *archive, struct cb_log *log);

struct cb_idx {
	const unsigned char *map;
	size_t size;
	enum cb_compress codec;
	uint32_t version;         /* 2; 1 (no unit digests) is read too */
	uint64_t unit_len;        /* bytes per unit record: 24 (version 1: 16) */
	uint64_t n_entries, n_units, tar_size, archive_size, flags, n_segs;
	const unsigned char *entries, *order, *units, *strtab, *segs;
	uint64_t strtab_len;
};

/* Map and check path; archive_size is the archive file's size (the idx
 * must describe that archive), or 0 to take the idx's word. */
int cb_idx_open(struct cb_idx *x, const char *path, uint64_t archive_size);
/* The same, read into memory: a catalog in a dump directory others may
 * write to cannot change under the checks made on it (a mapping can). */
int cb_idx_read(struct cb_idx *x, const char *path, uint64_t archive_size);
/* Check and take over a malloc'ed buffer (freed at close, also on error). */
int cb_idx_load(struct cb_idx *x, unsigned char *buf, size_t len, uint64_t archive_size);
/* The SHA-256 (hex) ARCHIVE.sha256 gives ARCHIVE.idx (its line "HEX
 * NAME.idx"): 0; 1 if there is no .sha256 or no such line; -1 (error set)
 * if the .sha256 is there but no regular file, or cannot be opened. */
int cb_idx_expected_sha256(const char *archive, char hex[65]);
/* The SHA-256 of x's bytes, in hex. */
void cb_idx_sha256_hex(const struct cb_idx *x, char hex[65]);
/* x, the catalog of archive, has the SHA-256 want (hex, its line in
 * archive's .sha256): 0, or -1 (error set: both files, both digests). */
int cb_idx_check_sha256(const struct cb_idx *x, const char *want, const char *archive);
/* Segment i of the keys section (i < n_segs). */
void cb_idx_seg(const struct cb_idx *x, uint64_t i, struct cb_codec_seg *g);
/* The SHA-256 over the body matches its trailer (verify). */
int cb_idx_check_digest(const struct cb_idx *x);
void cb_idx_close(struct cb_idx *x);

/* Entry i in archive order. */
void cb_idx_entry(const struct cb_idx *x, uint64_t i, struct cb_idx_entry *e);
/* Where entry i's bytes end in the tar stream: the next member's first
 * header, or the stream's end. */
uint64_t cb_idx_member_end(const struct cb_idx *x, uint64_t i);
/* The entries that are path or below it (archive order, ascending): a
 * malloc'ed array of entry numbers in *out, their count returned. */
uint64_t cb_idx_select(const struct cb_idx *x, const char *path, uint64_t **out);
/* Positions [*first, *first + n) of the path order that are path or below
 * it; n returned. cb_idx_order_at() maps a position to its entry. */
uint64_t cb_idx_range(const struct cb_idx *x, const char *path, uint64_t *first);
uint64_t cb_idx_order_at(const struct cb_idx *x, uint64_t pos);
/* The entry named path (the last of that name, as an extraction would
 * leave it), or -1. */
int64_t cb_idx_find(const struct cb_idx *x, const char *path);
/* The unit holding uncompressed offset off (0 if there are no units). */
uint64_t cb_idx_unit_for(const struct cb_idx *x, uint64_t off, uint64_t *u_off, uint64_t *c_off);

/* Where a reader starts to reach uncompressed offset off: the unit
 * holding it (an uncompressed archive: off itself). */
void cb_idx_seek_for(const struct cb_idx *x, uint64_t off, uint64_t *u_off, uint64_t *c_off);
/* The unit table with its digests into u (caller releases), for
 * cb_codec_reader_check_units(); the number of units, 0 for a version 1
 * catalog (it has no digests). */
uint64_t cb_idx_units(const struct cb_idx *x, struct cb_codec_units *u);
/* The entries whose headers or data lie in tar bytes [from, to): a
 * malloc'ed array of entry numbers in *out, their count returned. */
uint64_t cb_idx_members_in(const struct cb_idx *x, uint64_t from, uint64_t to, uint64_t **out);
/* Where unit u starts (the tar size for u past the last). */
uint64_t cb_idx_unit_start(const struct cb_idx *x, uint64_t u);
/* Unit u (< n_units): its offsets and CRC-32 (0 in a version 1 catalog). */
void cb_idx_unit(const struct cb_idx *x, uint64_t u, struct cb_codec_unit *out);

/* "./a/b/" -> "a/b": the key paths are compared by. */
const char *cb_idx_key(const char *path, size_t *len);

#endif
