/*
 * cb_enckey: the encryption key and the sealing of one buffer (libcrypto
 * only; no cryptography written here). Every layer that stores something
 * encrypted uses these: the directory archives (cb_encarchive.h) and a
 * unit store's objects and manifests.
 *
 * A key file holds a random 32-byte secret S in text:
 *   "cbackup-key 1\nsecret <64 hex digits>\n", mode 0600.
 * Everything is derived from S with HKDF-SHA256 (salt "cbackup", the info
 * strings below), so that no derived value reveals S or another one:
 *   fingerprint  = HKDF(S, "cbackup v1 fingerprint")  shown and recorded
 *   K_id         = HKDF(S, "cbackup v1 unit id")
 *   K_cat        = HKDF(S, "cbackup v1 catalog")      catalogs, notes, manifests
 *   unit id      = HMAC-SHA256(K_id, SHA-256(unit bytes))
 *   unit key     = HKDF(S, "cbackup v1 unit key" || unit id), nonce 0
 * A unit's key is a function of its bytes: the same unit always gives the
 * same ciphertext (copies and dedup keep working), and a key never seals
 * two different plaintexts (that would need a SHA-256/HMAC collision), so
 * the fixed nonce is never reused under one key. The cipher is
 * AES-256-GCM (docs/encryption.md says why).
 */
#ifndef CB_ENCKEY_H
#define CB_ENCKEY_H

#include <stddef.h>
#include <stdint.h>

#define CB_ENC_SECRET 32
#define CB_ENC_FP 32
#define CB_ENC_ID 32
#define CB_ENC_TAG 16
#define CB_ENC_NONCE 12
/* the fingerprint as shown: its first 8 bytes in hex */
#define CB_ENC_FP_HEX 17

struct cb_enckey {
	unsigned char secret[CB_ENC_SECRET];
	unsigned char fp[CB_ENC_FP];
	unsigned char k_id[32];
	unsigned char k_cat[32];
};

/* A new random key written to PATH (O_CREAT|O_EXCL, mode 0600); k filled.
 * 0, or -1 (error set; nothing left behind). */
int cb_enckey_create(const char *path, struct cb_enckey *k);
/* Load PATH: refused (-1, error naming the file and why) when it is not a
 * regular file, is readable or writable by group or others, is empty, or
 * is not a whole key file. */
int cb_enckey_load(const char *path, struct cb_enckey *k);
/* Derive everything from k->secret (after filling it). 0 or -1. */
int cb_enckey_derive(struct cb_enckey *k);
/* Zero the key material. */
void cb_enckey_wipe(struct cb_enckey *k);
/* "3f9a1b2c4d5e6f70": the short form of a fingerprint. */
void cb_enckey_fp_hex(const unsigned char *fp, char out[CB_ENC_FP_HEX]);

/*
 * A copy of the key sealed under a passphrase, for the admin's safe:
 * scrypt (libcrypto's EVP_PBE_scrypt, N 65536, r 8, p 1: 64 MiB) turns
 * the passphrase and a random salt into a key that seals the secret with
 * AES-256-GCM; the text file also names the key's fingerprint. protect:
 * PATH created O_EXCL, mode 0600. recover: k filled, or -1 (wrong
 * passphrase or damaged copy: one error).
 */
int cb_enckey_protect(const struct cb_enckey *k, const char *pass, size_t pass_len,
		      const char *path);
int cb_enckey_recover(const char *path, const char *pass, size_t pass_len, struct cb_enckey *k);
/* Write k to PATH as a key file (O_EXCL, mode 0600). */
int cb_enckey_write(const char *path, const struct cb_enckey *k);

/* 0 when fp (recorded in an archive or manifest) is k's, else -1 with the
 * one error "archive was encrypted with key 3f9a..., this key is 71c2...". */
int cb_enckey_check_fp(const unsigned char *fp, const struct cb_enckey *k);

/* The unit id of len bytes: a keyed MAC, never a plain hash of them. */
int cb_enc_unit_id(const struct cb_enckey *k, const void *buf, size_t len,
		   unsigned char id[CB_ENC_ID]);
/* The same from the bytes' SHA-256 (a catalog's digest of a segment). */
int cb_enc_unit_id_sha(const struct cb_enckey *k, const unsigned char sha[32],
		       unsigned char id[CB_ENC_ID]);
/* The key that seals the unit with this id. */
int cb_enc_unit_key(const struct cb_enckey *k, const unsigned char *id, unsigned char key[32]);

/* AES-256-GCM: seal len bytes of in into out (len bytes) and tag. */
int cb_enc_seal(const unsigned char key[32], const unsigned char nonce[CB_ENC_NONCE],
		const void *aad, size_t aad_len, const void *in, size_t len, void *out,
		unsigned char tag[CB_ENC_TAG]);
/* Open: 0 and out filled only when the tag holds; -1 otherwise (out must
 * then be treated as garbage: callers never use it). */
int cb_enc_open(const unsigned char key[32], const unsigned char nonce[CB_ENC_NONCE],
		const void *aad, size_t aad_len, const void *in, size_t len, void *out,
		const unsigned char tag[CB_ENC_TAG]);

/*
 * A small blob (catalog, notes, manifest) sealed under K_cat with a random
 * nonce: out = nonce || ciphertext || tag (len + CB_ENC_BLOB_OVER bytes,
 * malloc'ed). aad binds what must not be moved elsewhere (the clear header
 * it sits behind).
 */
#define CB_ENC_BLOB_OVER (CB_ENC_NONCE + CB_ENC_TAG)
int cb_enc_blob_seal(const struct cb_enckey *k, const void *aad, size_t aad_len, const void *in,
		     size_t len, unsigned char **out, size_t *out_len);
/* The reverse: *out malloc'ed (len - CB_ENC_BLOB_OVER bytes), or -1. */
int cb_enc_blob_open(const struct cb_enckey *k, const void *aad, size_t aad_len, const void *in,
		     size_t len, unsigned char **out, size_t *out_len);

#endif
