/*
 * cb_objstore_upload: many objects put at once with bounded memory. A
 * night's new units go up over `threads` handles (clones of the store: a
 * connection each on S3), from a queue of at most `depth` buffers: the
 * producer (the compressor) waits while the queue is full, so the pool
 * never holds more than depth + threads buffers, whatever the night's size.
 * The first put that fails (after the client's own retries) fails the
 * pool: later puts are refused at once and finish returns that error,
 * naming the storage, the operation and the object.
 */
#ifndef CB_OBJSTORE_UPLOAD_H
#define CB_OBJSTORE_UPLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "cb_objstore.h"

struct cb_upload_pool;

struct cb_upload_stats {
	uint64_t objects;     /* written */
	uint64_t existed;     /* if_absent puts that found the name taken */
	uint64_t bytes;       /* written */
	size_t peak_held;     /* most buffers the pool held at once */
	uint64_t peak_bytes;  /* most bytes it held at once */
	double wait_s;        /* the producer's time waiting for room in the queue */
	double drain_s;       /* finish's time waiting for the last puts */
};

/* threads handles cloned from s (s itself stays the caller's), a queue of
 * depth buffers (0: threads). NULL with cb_error set. */
struct cb_upload_pool *cb_upload_pool_start(struct cb_objstore *s, unsigned threads, unsigned depth);
/* Queue a put of name (copied) with data, which the pool owns from now on
 * (malloc'd; freed once written or refused). Waits while the queue is full.
 * 0 queued; -1 the pool has failed (cb_error: the first failure). */
int cb_upload_pool_put(struct cb_upload_pool *p, const char *name, void *data, size_t len,
		       int if_absent);
/* Wait for every queued put, stop the threads, free the pool; st (may be
 * NULL) gets the figures. 0 every put done; -1 the first failure. */
int cb_upload_pool_finish(struct cb_upload_pool *p, struct cb_upload_stats *st);

#endif
