/*
 * cb_sink: where the archive bytes go. Either a storage file written as
 * FINAL.tmp, fsynced and renamed to FINAL only by cb_sink_commit(); or an
 * already-open fd (stdout). A sink that is freed without commit removes its
 * .tmp (and a cleanup-stack action does the same on a signal), so a failed
 * backup never leaves a partial archive in storage.
 *
 * The sink counts bytes and computes the SHA-256 of everything written (for
 * the .sha256 file). Bytes are gathered into 1 MiB slots; a full slot is
 * written by the caller while a thread of the sink hashes it, so write
 * errors surface at the write that fills a slot, at cb_sink_flush() or at
 * cb_sink_prepare().
 */
#ifndef CB_SINK_H
#define CB_SINK_H

#include <stddef.h>
#include <stdint.h>

struct cb_sink;

/* A storage file computes the SHA-256 (for the .sha256 beside it); an fd
 * sink (stdout) does not, unless cb_sink_set_checksum() says so before the
 * first byte. */
int cb_sink_open_file(struct cb_sink **out, const char *final_path);
int cb_sink_open_fd(struct cb_sink **out, int fd, const char *name);
void cb_sink_set_checksum(struct cb_sink *s, int on);
/* A sink whose bytes go to a unit store (cb_store.h) instead of a file:
 * every byte written is handed to fn in order (fn's -1 fails the write);
 * cb_sink_copy() hands nothing (the store has those bytes already) but
 * hashes them; prepare and commit only finish the SHA-256. */
typedef int cb_sink_split_fn(void *ctx, const void *buf, size_t len);
int cb_sink_open_split(struct cb_sink **out, const char *name, cb_sink_split_fn *fn, void *ctx);
int cb_sink_write(struct cb_sink *s, const void *buf, size_t len);
/* Zero-copy writing: room in the current slot (*avail >= 1 bytes) to fill,
 * then cb_sink_advance() by the bytes filled. NULL on a write error. */
unsigned char *cb_sink_buffer(struct cb_sink *s, size_t *avail);
int cb_sink_advance(struct cb_sink *s, size_t len);
/* Append len bytes that are at offset off of src_fd and in bytes (read
 * and checked by the caller): copy_file_range(2), so a clone where the
 * file systems can (btrfs, xfs; server-side on NFS 4.2), else a copy;
 * bytes is hashed for the .sha256, and written itself if the kernel
 * cannot copy between these files. src_fd may change under the copy (a
 * dump directory others write to): what the kernel wrote is read back and
 * compared with bytes, and written again from bytes where it differs. */
int cb_sink_copy(struct cb_sink *s, int src_fd, uint64_t off, uint64_t len,
		 const unsigned char *bytes);
/*
 * SHA-256 states at segment ends, kept for the guest's next archive: one
 * that starts with the same bytes, copied from this archive at the same
 * offsets (cb_sink_copy), resumes its .sha256 from the state where those
 * bytes end instead of hashing them again (a night that copies most units
 * spent a tenth of its CPU there). A state is a function of the bytes
 * before it only.
 */
#define CB_SINK_STATE_LEN 112
struct cb_sink_state {
	uint64_t off;                         /* after this many bytes */
	unsigned char st[CB_SINK_STATE_LEN];
};
/* Before the first byte: the previous archive (what cb_sink_copy copies
 * from is read through src_fd) and its states, n of them sorted by off;
 * the caller's until the sink is freed. A prefix with no state at its end
 * is read back from this file (its copies are checked) and hashed. */
void cb_sink_resume(struct cb_sink *s, int src_fd, const struct cb_sink_state *v, size_t n);
/* A segment ends at the bytes written so far: its state is kept. */
int cb_sink_mark(struct cb_sink *s);
/* After cb_sink_prepare(): the states kept (sorted), and how many bytes
 * the digest took over from the previous archive's state. */
const struct cb_sink_state *cb_sink_states(const struct cb_sink *s, size_t *n);
uint64_t cb_sink_resumed_bytes(const struct cb_sink *s);
/* Ranges of cb_sink_copy() whose kernel copy differed from the bytes given
 * (the source changed after they were read from it): written from those. */
uint64_t cb_sink_copies_fixed(const struct cb_sink *s);
/* Write out what is gathered (the hash may still be running). */
int cb_sink_flush(struct cb_sink *s);
/* Finish the digest, fsync and close the .tmp (no rename yet), so that the
 * caller can write what must exist before the archive does (.sha256). */
int cb_sink_prepare(struct cb_sink *s);
/* cb_sink_prepare() if not done, rename .tmp to the final name, fsync the
 * directory. */
int cb_sink_commit(struct cb_sink *s);
/* Abort if not committed (unlink .tmp), close, free. NULL is fine. */
void cb_sink_free(struct cb_sink *s);

/* Limit writes to kib_per_s KiB/s (0 = unlimited). */
void cb_sink_set_bwlimit(struct cb_sink *s, long kib_per_s);

uint64_t cb_sink_bytes(const struct cb_sink *s);
/* Hex SHA-256 of all bytes written (valid after cb_sink_prepare; "" when
 * no checksum was computed). */
const char *cb_sink_sha256(const struct cb_sink *s);
double cb_sink_write_seconds(const struct cb_sink *s);  /* time spent in write(2) */
double cb_sink_throttled_seconds(const struct cb_sink *s);  /* time held back by bwlimit */

#endif
