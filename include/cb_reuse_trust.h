/*
 * cb_reuse_trust: the trust map kept with a staging copy: per
 * segment of the archive last written from that copy, its trust key and
 * its key (include/cb_codec.h, "Trust"). It names that archive (file name
 * and its catalog's SHA-256) and serves only a backup whose previous
 * archive (cb_reuse) is that very one: a map of an archive pruned,
 * replaced or not the newest is not used (nothing is then taken on trust:
 * the staged data is read and keyed from its bytes).
 */
#ifndef CB_REUSE_TRUST_H
#define CB_REUSE_TRUST_H

#include "cb_codec.h"

struct cb_trust_map;

/* PATH's map if it names archive NAME whose catalog's SHA-256 is IDX_HEX;
 * NULL with *why (static text; "" when there is no map). */
struct cb_trust_map *cb_trust_map_load(const char *path, const char *name, const char *idx_hex,
				       const char **why);
/* The archive's SHA-256 states the map keeps (cb_sink_resume), sorted. */
struct cb_sink_state;
const struct cb_sink_state *cb_trust_map_states(const struct cb_trust_map *m, size_t *n);
/* Let the writer take segments on trust (the map must outlive its finish). */
void cb_trust_map_attach(struct cb_trust_map *m, struct cb_codec_writer *w);
void cb_trust_map_free(struct cb_trust_map *m);
/* Write PATH (replaced whole, mode 0600) for archive NAME with catalog
 * digest IDX_HEX, and the archive's SHA-256 states: 0 or -1 (error set). */
int cb_trust_map_save(const char *path, const char *name, const char *idx_hex,
		      const struct cb_codec_trust *v, size_t n, const struct cb_sink_state *states,
		      size_t n_states);

#endif
