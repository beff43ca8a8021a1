/*
 * cb_syncer: makes a file durable while it is being written. A thread
 * fdatasyncs the file every CB_SYNCER_CHUNK bytes the writer reports and
 * drops what is on disk from the page cache, so that
 *  - the disk (or the NFS server, or the hypervisor's cache) works while the
 *    archive is produced, instead of all at the final fsync, which would
 *    otherwise stall for as long as writing the whole archive takes;
 *  - dirty memory stays bounded whatever the archive's size: the writer
 *    waits while more than CB_SYNCER_MAX_BEHIND bytes are not on disk;
 *  - a nightly backup does not push the running guests' data out of the
 *    page cache with archive bytes nobody will read again soon.
 * The final fsync stays the caller's: the syncer only shortens it.
 */
#ifndef CB_SYNCER_H
#define CB_SYNCER_H

#include <stdint.h>

#define CB_SYNCER_CHUNK (32ULL * 1024 * 1024)
#define CB_SYNCER_MAX_BEHIND (128ULL * 1024 * 1024)

struct cb_syncer;

/* NULL if no thread could be started (the file is then synced at the end
 * only). name is for messages. */
struct cb_syncer *cb_syncer_start(int fd, const char *name);
/* The writer has written bytes [0, written). May wait for the disk; -1 with
 * the error set when a background sync failed (a writeback error is
 * reported once, to the sync that sees it, so it is this write's error). */
int cb_syncer_written(struct cb_syncer *y, uint64_t written);
/* Stop the thread (after its sync in progress); -1 with the error set if a
 * sync failed. NULL is fine. */
int cb_syncer_stop(struct cb_syncer *y);
/* The same when the file is being abandoned: the error, if any, is moot and
 * the caller's own error stays. */
void cb_syncer_cancel(struct cb_syncer *y);

#endif
