/*
 * cb_reuse: the previous archive whose units a backup copies instead of
 * compressing (DESIGN §5). The newest complete archive (it has
 * its .sha256) of the same guest in the same dump directory, written with
 * the same codec, whose catalog has unit keys; its catalog is checked
 * whole (digest included) before a key is looked up, and every unit's
 * compressed bytes again as they are copied (cb_codec_set_reuse).
 */
#ifndef CB_REUSE_H
#define CB_REUSE_H

#include "cb_codec.h"
#include "cb_opts.h"

struct cb_reuse;

/* The previous archive, or NULL with *why (static text, or "" when there
 * is simply none) saying why there is none to copy from. */
struct cb_reuse *cb_reuse_open(const char *dumpdir, enum cb_guest_type type, const char *id,
			       enum cb_compress codec, const char **why);
/* The same over a catalog in memory (idx, len bytes: taken over, freed
 * with the reuse or on failure) of the archive name, archive_size bytes
 * long, whose bytes are elsewhere (a unit store's night): its segments
 * are found by cb_reuse_lookup, read by the caller. */
struct cb_reuse *cb_reuse_from_idx(unsigned char *idx, size_t len, uint64_t archive_size,
				   const char *name, const char **why);
/* cb_codec_lookup_fn over r (ctx): the segment with that key and length. */
int cb_reuse_lookup(void *ctx, const unsigned char *key, uint64_t u_len, struct cb_codec_reuse_src *src);
/* Let the writer copy from it (the reuse must outlive the writer's finish). */
void cb_reuse_attach(struct cb_reuse *r, struct cb_codec_writer *w);
/* "cbackup-ct-101-2026_12_03-01_00_00.tar.zst" */
const char *cb_reuse_name(const struct cb_reuse *r);
/* The SHA-256 (hex) of its catalog file, as its .sha256 lists it: with
 * the name, what a trust map must name (cb_reuse_trust.h). */
const char *cb_reuse_idx_sha256(const struct cb_reuse *r);
/* The open previous archive the writer copies from. */
int cb_reuse_fd(const struct cb_reuse *r);
void cb_reuse_free(struct cb_reuse *r);

#endif
