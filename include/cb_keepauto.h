/*
 * cb_keepauto: keep-staging auto, the default. Whether a container's
 * staging copy stays in the tmpdir after the run is decided before the
 * first sync, from the room its file system keeps free with the copy in
 * it: at least keep-staging-free (a percentage of the file system, or a
 * size). The caller logs the reason as an INFO line.
 */
#ifndef CB_KEEPAUTO_H
#define CB_KEEPAUTO_H

#include <stddef.h>
#include <stdint.h>

/*
 * TMPDIR's room after a copy of NEED more bytes (0 when the copy is kept
 * there already: it takes its room now) against FREE_SPEC (cb_room_parse).
 * Returns 1 (keep), 0 (do not keep) or -1 (statvfs failed, error set);
 * WHY gets "keeping the staging copy (tmpdir 63% free after it)" or "the
 * staging copy is not kept: tmpdir would have 12% free, keep-staging-free
 * is 20%".
 */
int cb_keep_auto_decide(const char *tmpdir, const char *free_spec, uint64_t need, char *why,
			size_t len);

#endif
