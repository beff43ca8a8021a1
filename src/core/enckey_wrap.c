/*
 * A passphrase-protected copy of the key (cb_enckey.h). The file is text:
 *   cbackup-key-protected 1
 *   scrypt N R P
 *   salt <32 hex>
 *   fingerprint <64 hex>
 *   sealed <hex: nonce 12, sealed secret 32, tag 16>
 * The lines before "sealed" are the associated data: parameters, salt and
 * fingerprint cannot be changed without the copy failing to open.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>

#include "cb_enckey.h"
#include "cb_private.h"
#include "cb_util.h"

#define WRAP_MAGIC "cbackup-key-protected 1\n"
#define SCRYPT_N 65536
#define SCRYPT_R 8
#define SCRYPT_P 1
#define SCRYPT_MAXMEM (256u << 20)
#define SEALED_LEN (CB_ENC_NONCE + CB_ENC_SECRET + CB_ENC_TAG)

static void put_hex(char *out, const unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
}

static int get_hex(const char *s, unsigned char *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (!s[2 * i] || !s[2 * i + 1] || sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		b[i] = (unsigned char)v;
	}
	return 0;
}

static int wrap_key(const char *pass, size_t len, const unsigned char *salt, unsigned long n,
		    unsigned long r, unsigned long p, unsigned char out[32])
{
	if (n > SCRYPT_N * 16ul || r > 64 || p > 16 ||
	    EVP_PBE_scrypt(pass, len, salt, 16, n, r, p, SCRYPT_MAXMEM, out, 32) != 1)
		return cb_error("scrypt failed (libcrypto) or unreasonable parameters");
	return 0;
}

/* The header lines (the associated data) of a copy. */
static int head_text(char *out, size_t len, unsigned long n, unsigned long r, unsigned long p,
		     const unsigned char *salt, const unsigned char *fp)
{
	char s[33], f[2 * CB_ENC_FP + 1];

	put_hex(s, salt, 16);
	put_hex(f, fp, CB_ENC_FP);
	return snprintf(out, len, WRAP_MAGIC "scrypt %lu %lu %lu\nsalt %s\nfingerprint %s\n", n, r,
			p, s, f);
}

int cb_enckey_protect(const struct cb_enckey *k, const char *pass, size_t pass_len,
		      const char *path)
{
	unsigned char salt[16], wk[32], sealed[SEALED_LEN];
	char text[512], hex[2 * SEALED_LEN + 1];
	int at, fd, ret = -1;

	if (RAND_bytes(salt, sizeof(salt)) != 1 || RAND_bytes(sealed, CB_ENC_NONCE) != 1)
		return cb_error("no random bytes (libcrypto)");
	if (wrap_key(pass, pass_len, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P, wk) < 0)
		return -1;
	at = head_text(text, sizeof(text), SCRYPT_N, SCRYPT_R, SCRYPT_P, salt, k->fp);
	if (cb_enc_seal(wk, sealed, text, (size_t)at, k->secret, CB_ENC_SECRET,
			sealed + CB_ENC_NONCE, sealed + CB_ENC_NONCE + CB_ENC_SECRET) < 0)
		goto out;
	put_hex(hex, sealed, SEALED_LEN);
	at += snprintf(text + at, sizeof(text) - (size_t)at, "sealed %s\n", hex);
	if ((fd = cb_create_excl(path, 0600)) < 0) {
		cb_error_errno("cannot create '%s'", path);
		goto out;
	}
	ret = cb_write_all(fd, text, (size_t)at) < 0 || fsync(fd) < 0
		      ? cb_error_errno("cannot write '%s'", path) : 0;
	close(fd);
	if (ret < 0)
		unlink(path);
out:
	OPENSSL_cleanse(wk, sizeof(wk));
	return ret;
}

static int parse_copy(const char *text, unsigned long *n, unsigned long *r, unsigned long *p,
		      unsigned char *salt, unsigned char *fp, unsigned char *sealed)
{
	char s[64], f[80], x[2 * SEALED_LEN + 8];

	if (strncmp(text, WRAP_MAGIC, strlen(WRAP_MAGIC)) ||
	    sscanf(text + strlen(WRAP_MAGIC), "scrypt %lu %lu %lu\nsalt %63s\nfingerprint %79s\nsealed %127s",
		   n, r, p, s, f, x) != 6 ||
	    strlen(s) != 32 || strlen(f) != 2 * CB_ENC_FP || strlen(x) != 2 * SEALED_LEN ||
	    get_hex(s, salt, 16) < 0 || get_hex(f, fp, CB_ENC_FP) < 0 ||
	    get_hex(x, sealed, SEALED_LEN) < 0)
		return -1;
	return 0;
}

int cb_enckey_recover(const char *path, const char *pass, size_t pass_len, struct cb_enckey *k)
{
	unsigned char salt[16], fp[CB_ENC_FP], sealed[SEALED_LEN], wk[32];
	char text[1024] = "", head[512];
	unsigned long n, r, p;
	FILE *f = fopen(path, "re");
	size_t len = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	int ret = -1, at;

	if (f)
		fclose(f);
	else
		return cb_error_errno("cannot open '%s'", path);
	text[len] = '\0';
	if (parse_copy(text, &n, &r, &p, salt, fp, sealed) < 0)
		return cb_error("'%s' is not a protected copy of a cbackup key", path);
	if (wrap_key(pass, pass_len, salt, n, r, p, wk) < 0)
		return -1;
	at = head_text(head, sizeof(head), n, r, p, salt, fp);
	if (cb_enc_open(wk, sealed, head, (size_t)at, sealed + CB_ENC_NONCE, CB_ENC_SECRET,
			k->secret, sealed + CB_ENC_NONCE + CB_ENC_SECRET) < 0)
		cb_error("wrong passphrase, or '%s' is damaged", path);
	else if (cb_enckey_derive(k) == 0 && memcmp(k->fp, fp, CB_ENC_FP))
		cb_error("'%s' is damaged: the key it holds has another fingerprint", path);
	else
		ret = 0;
	OPENSSL_cleanse(wk, sizeof(wk));
	if (ret < 0)
		cb_enckey_wipe(k);
	return ret;
}
