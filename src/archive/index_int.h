/*
 * index_int.h: between the tar scanner (tarscan.c) and the .idx builder and
 * loader (index.c): the members scanned, in archive order. The scanner
 * uses the index's list and builder; the index uses nothing of the scanner.
 */
#ifndef CB_INDEX_INT_H
#define CB_INDEX_INT_H

#include <stdint.h>
#include "cb_index.h"

/* One member as the scanner reads it (cb_idx_list_add packs it). */
struct cb_idx_rec {
	uint64_t hdr_off, data_off, size;
	int64_t mtime;
	uint32_t mtime_nsec, mode, uid, gid, dev_major, dev_minor, flags;
};

/* The members in the .idx's own entry layout (64 bytes each) and its string
 * table: memory goes by entries, so the catalog is held once, as it is
 * written, not as records and then again as the file. */
struct cb_idx_list {
	unsigned char *ent;
	uint64_t n, cap;
	char *str;                       /* NUL-terminated strings */
	uint64_t str_len, str_cap;
	uint64_t too_long;               /* 1 + the first entry the format cannot hold, or 0 */
};

void cb_idx_list_add(struct cb_idx_list *l, const struct cb_idx_rec *r, const char *path,
		     const char *link);
void cb_idx_list_release(struct cb_idx_list *l);
/* cb_idx_build and cb_idx_write_scan (cb_index.h) of a scan's list and
 * tar size: the scanner calls them, so that the index does not call it. */
int cb_idx_build_list(const struct cb_idx_list *l, uint64_t tar_size,
		      const struct cb_codec_units *units, enum cb_compress type,
		      uint64_t archive_size, unsigned char **buf, size_t *len);
int cb_idx_write_list(const char *idx_path, const struct cb_idx_list *l, uint64_t tar_size,
		      const struct cb_codec_units *units, const struct cb_codec_segs *segs,
		      enum cb_compress type, uint64_t archive_size, char *sha256);

/* The file's layout (cbackup-idx(5)): index.c loads and builds it,
 * index_query.c reads it */
#define VERSION 2
#define HDR 64
#define ENT 64
#define UNIT 24       /* version 2 */
#define UNIT_V1 16
#define DIGEST 32
#define SEG 96
#define FLAG_KEYS 1u
#define PATH_MAX_IDX 65535

/* entry fields */
enum { ENT_HDR = 0, ENT_SIZE = 8, ENT_MTIME = 16, ENT_NSEC = 24, ENT_MODE = 28, ENT_UID = 32,
       ENT_GID = 36, ENT_PATH = 40, ENT_LINK = 44, ENT_HLEN = 48, ENT_PLEN = 52, ENT_LLEN = 54,
       ENT_DEV = 56, ENT_FLAGS = 60 };

/* index.c: shared with index_query.c */
uint32_t idx_get32(const unsigned char *p);
uint64_t idx_get64(const unsigned char *p);
const char *cb_idx_key(const char *path, size_t *len);
int idx_key_cmp(const char *a, size_t al, const char *b, size_t bl);
void cb_idx_entry(const struct cb_idx *x, uint64_t i, struct cb_idx_entry *e);

#endif
