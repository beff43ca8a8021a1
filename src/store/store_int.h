/* Private to src/store/: a night's units written by threads (store_upload.c). */
#ifndef CB_STORE_INT_H
#define CB_STORE_INT_H

#include <stddef.h>

#include "cb_objstore.h"

struct cb_store_upload;
/* threads writers, each on a clone of s (0, or clones that fail: the
 * caller's put writes itself, on s). */
struct cb_store_upload *cb_store_upload_start(struct cb_objstore *s, unsigned threads);
/* Object name with data (malloc'd, taken: freed whatever happens), len
 * bytes; replace: also over an object of that name. Waits while the queue
 * is full. 0, or -1 with an earlier put's error. */
int cb_store_upload_put(struct cb_store_upload *u, struct cb_objstore *s, const char *name,
			unsigned char *data, size_t len, int replace);
/* Every put done: 0, or -1 with the first error. */
int cb_store_upload_finish(struct cb_store_upload *u);
/* Stops the writers (what is queued is dropped); NULL is fine. */
void cb_store_upload_free(struct cb_store_upload *u);

#endif
