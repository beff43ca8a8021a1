/*
 * cb_store_ops: the commands on a unit store's nights (cb_store.h), named
 * STORAGE:NAME on the command line.
 *
 * A night is read back by fetching its units in its manifest's order,
 * each one's length and SHA-256 checked against the manifest before a
 * byte of it is used, into a private directory (TMPDIR/cbackup) as a
 * classic archive with its .idx and .sha256: restore, ls and verify then
 * read it as they read any archive, and it is removed after. A whole
 * restore streams the night instead (cb_store_stream_start): no copy.
 */
#ifndef CB_STORE_OPS_H
#define CB_STORE_OPS_H

#include <stdio.h>

#include "cb_log.h"
#include "cb_objstore.h"
#include "cb_store.h"

/* Which units of a night to fetch: all; none (ls reads the catalog
 * alone); those a restore of paths reads (the others left as holes: a
 * unit the restore reads after all fails its catalog's check, never
 * gives wrong bytes). */
struct cb_store_stream;
struct cb_store_fetch {
	int catalog_only;
	char *const *paths;
	size_t n_paths;
	/* non-NULL, a whole night: streamed rather than fetched when it can
	 * be (cb_store_streamable): *stream set, and NAME is not written */
	struct cb_store_stream **stream;
};
/* Night name of s as DIR/NAME (+ .idx, .sha256): the path (malloc'd), or
 * NULL with the error set (the unit that is missing or damaged named).
 * NAME is a file of the archive's size with the units what asks for. */
char *cb_store_fetch_night(struct cb_objstore *s, const char *name, const char *dir,
			   const struct cb_store_fetch *what);
/* The units of m (want: those i with want[i], NULL: all) into fd, each
 * at its offset (the sum of the lengths before it), checked first, a
 * few at once (store_fetch.c): 0, or -1 (error set: the first unit
 * missing or damaged named). */
int cb_store_fetch_units(struct cb_objstore *s, const struct cb_manifest *m, const unsigned char *want,
			 int fd);
/*
 * A night's units streamed in order through a pipe (store_stream.c): a
 * few fetched ahead (a bounded ring), each checked against its digest
 * before a byte of it is handed over, the last one only once the night's
 * SHA-256 matches the manifest's; a stream that fails ends short. Takes
 * over m. 0, or -1 (error set; free it all the same).
 */
int cb_store_stream_start(struct cb_store_stream **out, struct cb_objstore *s, struct cb_manifest *m);
/* How a night of manifest m streams: *threads fetching at once, *depth
 * units held ahead at most (fewer for larger units: about 24 MiB). */
void cb_store_stream_plan(const struct cb_manifest *m, unsigned *threads, unsigned *depth);
/* The pipe's end to read the night from (the stream's: dup it to keep it). */
int cb_store_stream_fd(const struct cb_store_stream *st);
/* The night's size in bytes. */
uint64_t cb_store_stream_size(const struct cb_store_stream *st);
/* Stop it (the reader is done) and wait for its threads: 0, or -1 with
 * the error that ended it short (the unit missing or damaged named). */
int cb_store_stream_finish(struct cb_store_stream *st);
void cb_store_stream_free(struct cb_store_stream *st);
/* 1 when a restore can read night m (fetched side files at path) as it
 * streams, 0 when it needs the night's copy. */
int cb_store_streamable(const struct cb_manifest *m, const char *path);
/* Remove what cb_store_fetch_night wrote. */
void cb_store_drop_night(const char *path);

/*
 * Every unit of night name (NULL: of every night) read and checked
 * against its manifest: its length and SHA-256. A missing or damaged unit
 * is an ERROR line naming it and every night it breaks. 0 all good, -1
 * (error set: how many units are bad, or why the store cannot be read).
 */
int cb_store_verify_units(struct cb_objstore *s, const char *name, struct cb_log *log);

#endif
