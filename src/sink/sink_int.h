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

/* sink_copy.c: fd (write-only) opened again for reading, or -1. */
int sink_reopen_read(int fd);
/* The len bytes at offset at of the file (fd to write, rfd to read; -1:
 * none, then they are written again) are want: what differs is written
 * again from want (*fixed = 1). 0, or -1 (errno set) on a write error. */
int sink_copy_check(int fd, int rfd, uint64_t at, uint64_t len, const unsigned char *want,
		    int *fixed);

#endif
