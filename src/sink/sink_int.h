/* Private to src/sink/: SHA-256 states saved and loaded (sink_state.c). */
#ifndef CB_SINK_INT_H
#define CB_SINK_INT_H

#include <stdint.h>
#include <openssl/sha.h>

struct cb_sink_state;
/* The state c is in after off bytes, into out. */
void sink_state_save(const SHA256_CTX *c, uint64_t off, struct cb_sink_state *out);
/* c as in was saved: 0, or -1 (and c fresh) when in does not hold a state
 * after in->off bytes. */
int sink_state_load(const struct cb_sink_state *in, SHA256_CTX *c);
/* The state saved at off in v (n of them, sorted by off), or NULL. */
const struct cb_sink_state *sink_state_find(const struct cb_sink_state *v, size_t n, uint64_t off);

#endif
