/*
 * cb_unit_cache: the units of a guest's last night to a unit store, kept
 * on the local tmpdir beside its kept staging copy (DIR is
 * TMPDIR/cbackup/cbackup-ID.stage.units), one file each, named by the
 * SHA-256 of its bytes.
 *
 * Why: a night's .sha256 is the SHA-256 of the whole archive, the units'
 * bytes in order (what `sha256sum -c` checks after a stock-tools
 * download), and SHA-256 cannot be put together from the digests of the
 * parts: every byte of a unit copied from the previous night must be
 * hashed again. Read from the store, that is a GET of nearly the whole
 * previous night each night; read from here, it is a local read. The
 * bytes are checked by the codec before use as any copy is (the
 * catalog's CRC-32 of each unit, or the unit's SHA-256), so a damaged
 * file costs a compression, never a wrong archive; a unit not here is
 * read from the store as before.
 *
 * The night owns its cache (cb_store_night_cache): every unit it
 * compresses or reads from the store is put here, and once its manifest
 * is written the files of units it does not name are removed.
 */
#ifndef CB_UNIT_CACHE_H
#define CB_UNIT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "cb_s3.h"
#include "cb_store.h"

struct cb_unit_cache;

/* DIR (created 0700 when missing): the cache, or NULL with the error set. */
struct cb_unit_cache *cb_unit_cache_open(const char *dir);
/* Unit dig of len bytes into out (replacing what it held): 1, or 0 when
 * there is no such file of that length. */
int cb_unit_cache_get(struct cb_unit_cache *c, const unsigned char *dig, uint64_t len, struct cb_s3_buf *out);
/* Keep len bytes as unit dig (replace: even if a file of that length is
 * there). Best effort: a cache that cannot be written is a slower next
 * night, not a failed one. */
void cb_unit_cache_put(struct cb_unit_cache *c, const unsigned char *dig, const void *p, size_t len,
		       int replace);
/* Remove every file but the units in refs. */
void cb_unit_cache_keep(struct cb_unit_cache *c, const struct cb_store_ref *refs, size_t n);
void cb_unit_cache_free(struct cb_unit_cache *c);

#endif
