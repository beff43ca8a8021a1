/*
 * The encrypted archive's bytes (docs/encryption.md, the reference for
 * contrib/cbackup-decrypt.py). Integers little-endian.
 *
 * NAME.cbenc: header of ENC_HEAD bytes: "CBENC\0\0\1", u32 version 1,
 * u32 cipher 1 (AES-256-GCM), the key's fingerprint (32), zeros. Then per
 * frame: "CBUF", u32 flags 0, u64 ct_len, unit id (32) — these 48 bytes
 * are the AEAD's associated data — ct_len bytes of ciphertext, the 16-byte
 * tag, zeros to a multiple of 4096 (copies stay clones).
 *
 * NAME.cbenc.idx: "CBENCIDX", u32 version 1, u32 cipher 1, fingerprint
 * (32), u64 frames, u64 plain size, u64 encrypted size; per frame u64
 * plain offset, plain length, encrypted offset, encrypted length, unit
 * id (32), SHA-256 of its stored bytes (32); then u64 blob length and the
 * blob sealed under K_cat with all bytes before it as associated data:
 * records of u32 type, u64 length, bytes (ENC_T_*).
 */
#ifndef ENC_INT_H
#define ENC_INT_H

#include <stdint.h>
#include "cb_encarchive.h"

#define ENC_MAGIC "CBENC\0\0\1"
#define ENC_IDX_MAGIC "CBENCIDX"
#define ENC_FRAME_MAGIC "CBUF"
#define ENC_HEAD 4096
#define ENC_ALIGN 4096
#define ENC_FRAME_HDR 48
#define ENC_IDX_HEAD 72
#define ENC_REC 96
#define ENC_VERSION 1
#define ENC_CIPHER_AES256GCM 1
/* frames of an archive without units (uncompressed): every 4 MiB */
#define ENC_PLAIN_CUT (4ull << 20)

enum { ENC_T_NAME = 1, ENC_T_IDX = 2, ENC_T_SHA256 = 3 };

struct enc_frame {
	uint64_t p_off, p_len, e_off, e_len;
	unsigned char id[CB_ENC_ID], sha[32];
};

/* A parsed NAME.cbenc.idx (the clear part; blob still sealed). */
struct enc_idx {
	unsigned char *buf;
	size_t len;
	unsigned char fp[CB_ENC_FP];
	uint64_t n, plain_size, enc_size;
	struct enc_frame *f;
	size_t blob_at, blob_len;   /* the sealed blob within buf */
};

void enc_put64(unsigned char *p, uint64_t v);
uint64_t enc_get64(const unsigned char *p);
void enc_put32(unsigned char *p, uint32_t v);
uint32_t enc_get32(const unsigned char *p);
/* Read and parse PATH (a regular file, not through a symlink). 0 or -1. */
int enc_idx_read(const char *path, struct enc_idx *x);
void enc_idx_release(struct enc_idx *x);
/* The bytes a frame of ct_len ciphertext bytes takes. */
uint64_t enc_frame_size(uint64_t ct_len);
/* Open x's blob: its records, malloc'ed in *plain (*len). */
int enc_idx_open_blob(const struct enc_idx *x, const struct cb_enckey *k, unsigned char **plain,
		      size_t *len);
/* Record `type` of an opened blob: its bytes and length, or NULL. */
const unsigned char *enc_blob_get(const unsigned char *b, size_t len, uint32_t type, size_t *out);
/* For restore --path: which frames hold the members below paths (by the
 * plain catalog at plain_idx), malloc'ed, x->n flags; NULL: every frame. */
unsigned char *enc_frames_for_paths(const struct enc_idx *x, const char *plain_idx,
				    char *const *paths, size_t n_paths);
/* OUT.idx from the frames and the plain catalog and .sha256 beside PLAIN
 * (replaced if there); its SHA-256 in idx_hex. */
int enc_write_catalog(const struct cb_enckey *k, const struct enc_frame *f, size_t n,
		      uint64_t e_size, const char *plain, const char *out, uint64_t p_size,
		      char idx_hex[65]);
/* A frame sealing p_len plain bytes whose unit id is id (malloc'ed,
 * enc_frame_size(p_len) bytes), or NULL (error set). */
unsigned char *enc_frame_make(const struct cb_enckey *k, const unsigned char *id,
			      const unsigned char *plain, uint64_t p_len);
/* -1 (error set) when OUT, OUT.idx or OUT.sha256 exists: never replaced. */
int enc_names_taken(const char *out);
/* OUT.idx, OUT.sha256 and tmp (NULL: none) removed: a failed archive. */
void enc_remove_outputs(const char *out, const char *tmp);
/* ARCHIVE's catalog, read and opened (*blob: its records): it must be
 * under k and name this archive. 0, or -1 (error set). */
int enc_open_catalog(const struct cb_enckey *k, const char *archive, struct enc_idx *x,
		     unsigned char **blob, size_t *len);
/* OUT.sha256: the archive's and its catalog's lines. */
int enc_write_sums(const char *out, const char *hex, const char *idx_hex);
/* Frame i of the archive open as fd (f its record), checked whole (tag,
 * the id f names; with check_id also the id computed from the bytes), its
 * plain bytes into plain; buf holds f->e_len bytes. */
int enc_open_frame(const struct cb_enckey *k, int fd, const struct enc_frame *f, uint64_t i,
		   unsigned char *buf, unsigned char *plain, const char *archive, int check_id);
/* A view's owner marks its directory (ENC_VIEW_MARK) with the lock held:
 * the fd holding it, or -1 (error set). */
#define ENC_VIEW_MARK ".reader"
int enc_view_lock(const char *dir);

/* The whole of a regular file (not through a symlink), malloc'ed. */
int enc_read_file(const char *path, unsigned char **buf, size_t *len);

#endif
