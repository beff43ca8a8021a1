/*
 * cb_reuse: the previous archive to copy units from. See include/cb_reuse.h.
 * Keys are looked up in an open-addressing table over the catalog's
 * segments; a segment's units (frames, members, blocks) come from the
 * catalog's unit table, relative to the segment's start.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_catalog.h"
#include "cb_index.h"
#include "cb_reuse.h"
#include "cb_util.h"

struct cb_reuse {
	struct cb_idx idx;
	int idx_open;
	int fd;
	char *name;
	char idx_hex[65];                /* SHA-256 of its catalog file */
	uint64_t *slots;                 /* segment number + 1; 0 = empty */
	size_t mask;
	struct cb_codec_seg seg;         /* the last one found */
	struct cb_codec_unit *units;
	size_t cap_units;
};

static uint64_t key_hash(const unsigned char *key)
{
	uint64_t h;

	memcpy(&h, key, sizeof(h));
	return h;
}

static void build_table(struct cb_reuse *r)
{
	size_t n = 16;

	while (n < 2 * r->idx.n_segs)
		n *= 2;
	r->mask = n - 1;
	r->slots = cb_xcalloc(n, sizeof(*r->slots));
	for (uint64_t i = 0; i < r->idx.n_segs; i++) {
		struct cb_codec_seg g;
		size_t at;

		cb_idx_seg(&r->idx, i, &g);
		for (at = key_hash(g.key) & r->mask; r->slots[at]; at = (at + 1) & r->mask)
			;
		r->slots[at] = i + 1;
	}
}

/* The units of g, relative to its start, with the catalog's CRC-32 of
 * each (version 2); 0 if the unit table does not start one at g's first
 * byte (then the segment is not copied). *crcs: 1 if those CRCs cover
 * exactly g's bytes (the unit after g starts where g ends: not so for the
 * archive's last segment, nor before a padding frame), so that the copy
 * can be checked by them. */
static size_t seg_units(struct cb_reuse *r, const struct cb_codec_seg *g, int *crcs)
{
	uint64_t u_off, c_off, i = cb_idx_unit_for(&r->idx, g->u_off, &u_off, &c_off);
	struct cb_codec_unit u;
	size_t n = 0;

	*crcs = 0;
	if (r->idx.n_units == 0 || u_off != g->u_off || c_off != g->c_off)
		return 0;
	for (; i < r->idx.n_units; i++) {
		cb_idx_unit(&r->idx, i, &u);
		if (u.u_off >= g->u_off + g->u_len)
			break;
		if (n == r->cap_units) {
			r->cap_units = r->cap_units ? 2 * r->cap_units : 16;
			r->units = cb_xrealloc(r->units, r->cap_units * sizeof(*r->units));
		}
		r->units[n++] = (struct cb_codec_unit){ u.u_off - g->u_off, u.c_off - g->c_off, u.crc, 0 };
	}
	/* i < n_units: u is the unit after g */
	*crcs = r->idx.version > 1 && n > 0 && i < r->idx.n_units &&
		u.u_off == g->u_off + g->u_len && u.c_off == g->c_off + g->c_len;
	return n;
}

int cb_reuse_lookup(void *ctx, const unsigned char *key, uint64_t u_len, struct cb_codec_reuse_src *src)
{
	struct cb_reuse *r = ctx;

	for (size_t at = key_hash(key) & r->mask; r->slots[at]; at = (at + 1) & r->mask) {
		cb_idx_seg(&r->idx, r->slots[at] - 1, &r->seg);
		if (memcmp(r->seg.key, key, CB_SEG_KEY) != 0 || r->seg.u_len != u_len)
			continue;
		src->n_units = seg_units(r, &r->seg, &src->unit_crcs);
		if (src->n_units == 0)
			return 0;
		src->c_off = r->seg.c_off;
		src->c_len = r->seg.c_len;
		src->cdig = r->seg.cdig;
		src->units = r->units;
		src->name = r->name;
		return 1;
	}
	return 0;
}

/* The newest complete archive of the guest with this codec. */
static const struct cb_backup_file *newest(const struct cb_catalog *cat, enum cb_guest_type type,
					   const char *id)
{
	for (size_t i = 0; i < cat->n; i++) {
		const struct cb_backup_file *f = &cat->files[i];

		/* either name (archive-name); vzdump's own archives have no .sha256 */
		if (f->type == type && strcmp(f->id, id) == 0 && f->has_checksum)
			return f;
	}
	return NULL;
}

/* Its catalog as its .sha256 names it: a dump directory others can write
 * to may hold a catalog whose own digest was made to hold again, and the
 * copies are checked by that catalog. 0, or -1 with *why. */
static int check_idx_sum(struct cb_reuse *r, const char *archive, const char **why)
{
	char want[65];
	int has = cb_idx_expected_sha256(archive, want);

	cb_idx_sha256_hex(&r->idx, r->idx_hex);
	if (has < 0)
		*why = "its .sha256 is not a regular file";
	else if (has > 0)
		*why = "its .sha256 names no catalog";
	else if (strcasecmp(r->idx_hex, want))
		*why = "its catalog does not match its .sha256";
	return has == 0 && !strcasecmp(r->idx_hex, want) ? 0 : -1;
}

static int open_prev(struct cb_reuse *r, const struct cb_backup_file *f, const char **why)
{
	char *ipath = cb_xasprintf("%s.idx", f->path);
	struct stat st;
	int ret = -1;

	r->fd = cb_open_regular(f->path, 0, "", &st);
	if (r->fd < 0)
		*why = "it is not a regular file or cannot be opened";
	else if (cb_idx_read(&r->idx, ipath, (uint64_t)st.st_size) < 0)
		*why = "its catalog is missing or damaged";
	else if ((r->idx_open = 1) && cb_idx_check_digest(&r->idx) < 0)
		*why = "its catalog is damaged";
	else if (check_idx_sum(r, f->path, why) < 0)
		;
	else if (r->idx.n_segs == 0)
		*why = "its catalog has no unit keys";
	else
		ret = 0;
	free(ipath);
	return ret;
}

struct cb_reuse *cb_reuse_open(const char *dumpdir, enum cb_guest_type type, const char *id,
			       enum cb_compress codec, const char **why)
{
	struct cb_catalog cat = { 0 };
	const struct cb_backup_file *f;
	struct cb_reuse *r = NULL;

	*why = "";
	if (codec == CB_COMPRESS_NONE || cb_catalog_scan(&cat, dumpdir, id) < 0 ||
	    !(f = newest(&cat, type, id)))
		goto out;
	if (f->compress != codec) {
		*why = "it was written with another codec";
		goto out;
	}
	r = cb_xcalloc(1, sizeof(*r));
	r->fd = -1;
	r->name = cb_xstrdup(f->name);
	if (open_prev(r, f, why) < 0) {
		cb_reuse_free(r);
		r = NULL;
		goto out;
	}
	build_table(r);
out:
	cb_catalog_release(&cat);
	return r;
}

struct cb_reuse *cb_reuse_from_idx(unsigned char *idx, size_t len, uint64_t archive_size,
				   const char *name, const char **why)
{
	struct cb_reuse *r = cb_xcalloc(1, sizeof(*r));

	r->fd = -1;
	r->name = cb_xstrdup(name);
	*why = "";
	if (cb_idx_load(&r->idx, idx, len, archive_size) < 0)
		*why = "its catalog is damaged";
	else if ((r->idx_open = 1) && cb_idx_check_digest(&r->idx) < 0)
		*why = "its catalog is damaged";
	else if (r->idx.n_segs == 0)
		*why = "its catalog has no unit keys";
	if (*why[0]) {
		cb_reuse_free(r);
		return NULL;
	}
	cb_idx_sha256_hex(&r->idx, r->idx_hex);
	build_table(r);
	return r;
}

void cb_reuse_attach(struct cb_reuse *r, struct cb_codec_writer *w)
{
	cb_codec_set_reuse(w, r->fd, cb_reuse_lookup, r);
}

const char *cb_reuse_name(const struct cb_reuse *r)
{
	return r->name;
}

const char *cb_reuse_idx_sha256(const struct cb_reuse *r)
{
	return r->idx_hex;
}

int cb_reuse_fd(const struct cb_reuse *r)
{
	return r->fd;
}

void cb_reuse_free(struct cb_reuse *r)
{
	if (!r)
		return;
	if (r->idx_open)
		cb_idx_close(&r->idx);
	if (r->fd >= 0)
		close(r->fd);
	free(r->slots);
	free(r->units);
	free(r->name);
	free(r);
}
