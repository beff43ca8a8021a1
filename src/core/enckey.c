/* cb_enckey: the key file and one-buffer sealing. See include/cb_enckey.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include "cb_enckey.h"
#include "cb_private.h"
#include "cb_util.h"

#define KEY_MAGIC "cbackup-key 1\nsecret "
#define KEY_TEXT_LEN (sizeof(KEY_MAGIC) - 1 + 2 * CB_ENC_SECRET + 1)

static int hkdf(const unsigned char *secret, const void *info, size_t info_len,
		unsigned char out[32])
{
	EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
	size_t len = 32;
	int ok = c && EVP_PKEY_derive_init(c) > 0 &&
		 EVP_PKEY_CTX_set_hkdf_md(c, EVP_sha256()) > 0 &&
		 EVP_PKEY_CTX_set1_hkdf_salt(c, (const unsigned char *)"cbackup", 7) > 0 &&
		 EVP_PKEY_CTX_set1_hkdf_key(c, secret, CB_ENC_SECRET) > 0 &&
		 EVP_PKEY_CTX_add1_hkdf_info(c, info, (int)info_len) > 0 &&
		 EVP_PKEY_derive(c, out, &len) > 0 && len == 32;

	EVP_PKEY_CTX_free(c);
	return ok ? 0 : cb_error("key derivation failed (libcrypto)");
}

int cb_enckey_derive(struct cb_enckey *k)
{
	static const char fp[] = "cbackup v1 fingerprint", id[] = "cbackup v1 unit id",
			  cat[] = "cbackup v1 catalog";

	if (hkdf(k->secret, fp, sizeof(fp) - 1, k->fp) < 0 ||
	    hkdf(k->secret, id, sizeof(id) - 1, k->k_id) < 0 ||
	    hkdf(k->secret, cat, sizeof(cat) - 1, k->k_cat) < 0)
		return -1;
	return 0;
}

void cb_enckey_wipe(struct cb_enckey *k)
{
	OPENSSL_cleanse(k, sizeof(*k));
}

void cb_enckey_fp_hex(const unsigned char *fp, char out[CB_ENC_FP_HEX])
{
	for (int i = 0; i < 8; i++)
		snprintf(out + 2 * i, 3, "%02x", fp[i]);
}

int cb_enckey_check_fp(const unsigned char *fp, const struct cb_enckey *k)
{
	char a[CB_ENC_FP_HEX], b[CB_ENC_FP_HEX];

	if (!memcmp(fp, k->fp, CB_ENC_FP))
		return 0;
	cb_enckey_fp_hex(fp, a);
	cb_enckey_fp_hex(k->fp, b);
	return cb_error("archive was encrypted with key %s, this key is %s", a, b);
}

static void key_text(const struct cb_enckey *k, char text[KEY_TEXT_LEN + 1])
{
	size_t at = sizeof(KEY_MAGIC) - 1;

	memcpy(text, KEY_MAGIC, at);
	for (int i = 0; i < CB_ENC_SECRET; i++, at += 2)
		snprintf(text + at, 3, "%02x", k->secret[i]);
	text[at++] = '\n';
	text[at] = '\0';
}

int cb_enckey_create(const char *path, struct cb_enckey *k)
{
	if (RAND_bytes(k->secret, CB_ENC_SECRET) != 1)
		return cb_error("no random bytes for a key (libcrypto)");
	if (cb_enckey_derive(k) < 0)
		return -1;
	return cb_enckey_write(path, k);
}

int cb_enckey_write(const char *path, const struct cb_enckey *k)
{
	char text[KEY_TEXT_LEN + 1];
	int fd, ret = -1;

	fd = cb_create_excl(path, 0600);
	if (fd < 0)
		return cb_error_errno("cannot create key file '%s'", path);
	key_text(k, text);
	if (write(fd, text, KEY_TEXT_LEN) != (ssize_t)KEY_TEXT_LEN || fsync(fd) < 0)
		cb_error_errno("cannot write key file '%s'", path);
	else
		ret = 0;
	OPENSSL_cleanse(text, sizeof(text));
	if (close(fd) < 0 && ret == 0)
		ret = cb_error_errno("cannot write key file '%s'", path);
	if (ret < 0)
		unlink(path);
	return ret;
}

static int unhex(const char *s, unsigned char *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1 || !strchr("0123456789abcdef", s[2 * i]) ||
		    !strchr("0123456789abcdef", s[2 * i + 1]))
			return -1;
		out[i] = (unsigned char)v;
	}
	return 0;
}

/* The file as it is open: what is wrong with it, or NULL. */
static const char *key_file_problem(int fd, struct stat *st)
{
	if (fstat(fd, st) < 0)
		return "cannot be read";
	if (S_ISDIR(st->st_mode))
		return "is a directory";
	if (!S_ISREG(st->st_mode))
		return "is not a regular file";
	if (st->st_mode & 077)
		return "is accessible by group or others (chmod 600 it)";
	if (st->st_size == 0)
		return "is empty";
	if (st->st_size != (off_t)KEY_TEXT_LEN)
		return "is not a cbackup key file (wrong length: short or damaged)";
	return NULL;
}

int cb_enckey_load(const char *path, struct cb_enckey *k)
{
	char text[KEY_TEXT_LEN + 1];
	const char *why;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY), ret = -1;

	if (fd < 0)
		return cb_error_errno("key file '%s'", path);
	why = key_file_problem(fd, &st);
	if (!why && read(fd, text, KEY_TEXT_LEN) != (ssize_t)KEY_TEXT_LEN)
		why = "cannot be read whole";
	if (!why && (memcmp(text, KEY_MAGIC, sizeof(KEY_MAGIC) - 1) || text[KEY_TEXT_LEN - 1] != '\n' ||
		     unhex(text + sizeof(KEY_MAGIC) - 1, k->secret, CB_ENC_SECRET) < 0))
		why = "is not a cbackup key file (damaged)";
	if (why)
		cb_error("key file '%s' %s", path, why);
	else
		ret = cb_enckey_derive(k);
	OPENSSL_cleanse(text, sizeof(text));
	close(fd);
	if (ret < 0)
		cb_enckey_wipe(k);
	return ret;
}

int cb_enc_unit_id(const struct cb_enckey *k, const void *buf, size_t len,
		   unsigned char id[CB_ENC_ID])
{
	unsigned char d[SHA256_DIGEST_LENGTH];

	SHA256(buf, len, d);
	return cb_enc_unit_id_sha(k, d, id);
}

int cb_enc_unit_id_sha(const struct cb_enckey *k, const unsigned char sha[32],
		       unsigned char id[CB_ENC_ID])
{
	unsigned int n = CB_ENC_ID;

	if (!HMAC(EVP_sha256(), k->k_id, sizeof(k->k_id), sha, SHA256_DIGEST_LENGTH, id, &n) ||
	    n != CB_ENC_ID)
		return cb_error("unit id: HMAC failed (libcrypto)");
	return 0;
}

int cb_enc_unit_key(const struct cb_enckey *k, const unsigned char *id, unsigned char key[32])
{
	static const char label[] = "cbackup v1 unit key";
	unsigned char info[sizeof(label) - 1 + CB_ENC_ID];

	memcpy(info, label, sizeof(label) - 1);
	memcpy(info + sizeof(label) - 1, id, CB_ENC_ID);
	return hkdf(k->secret, info, sizeof(info), key);
}

static int gcm(int enc, const unsigned char key[32], const unsigned char *nonce, const void *aad,
	       size_t aad_len, const void *in, size_t len, void *out, unsigned char *tag)
{
	EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
	int n, ok;

	ok = c && EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, key, nonce, enc) == 1 &&
	     (enc || EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, CB_ENC_TAG, tag) == 1) &&
	     (!aad_len || EVP_CipherUpdate(c, NULL, &n, aad, (int)aad_len) == 1);
	/* EVP takes int lengths: feed big units in pieces */
	for (size_t at = 0; ok && at < len;) {
		size_t step = len - at > (1u << 30) ? (1u << 30) : len - at;
		ok = EVP_CipherUpdate(c, (unsigned char *)out + at, &n,
				      (const unsigned char *)in + at, (int)step) == 1;
		at += step;
	}
	ok = ok && EVP_CipherFinal_ex(c, (unsigned char *)out + len, &n) == 1 &&
	     (!enc || EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, CB_ENC_TAG, tag) == 1);
	EVP_CIPHER_CTX_free(c);
	return ok ? 0 : -1;
}

int cb_enc_seal(const unsigned char key[32], const unsigned char nonce[CB_ENC_NONCE],
		const void *aad, size_t aad_len, const void *in, size_t len, void *out,
		unsigned char tag[CB_ENC_TAG])
{
	if (gcm(1, key, nonce, aad, aad_len, in, len, out, tag) < 0)
		return cb_error("AES-256-GCM sealing failed (libcrypto)");
	return 0;
}

int cb_enc_open(const unsigned char key[32], const unsigned char nonce[CB_ENC_NONCE],
		const void *aad, size_t aad_len, const void *in, size_t len, void *out,
		const unsigned char tag[CB_ENC_TAG])
{
	unsigned char t[CB_ENC_TAG];

	memcpy(t, tag, sizeof(t));
	if (gcm(0, key, nonce, aad, aad_len, in, len, out, t) < 0)
		return cb_error("authentication failed (damaged, or sealed under another key)");
	return 0;
}

int cb_enc_blob_seal(const struct cb_enckey *k, const void *aad, size_t aad_len, const void *in,
		     size_t len, unsigned char **out, size_t *out_len)
{
	unsigned char *b = cb_xmalloc(len + CB_ENC_BLOB_OVER);

	if (RAND_bytes(b, CB_ENC_NONCE) != 1) {
		free(b);
		return cb_error("no random bytes for a nonce (libcrypto)");
	}
	if (cb_enc_seal(k->k_cat, b, aad, aad_len, in, len, b + CB_ENC_NONCE,
			b + CB_ENC_NONCE + len) < 0) {
		free(b);
		return -1;
	}
	*out = b;
	*out_len = len + CB_ENC_BLOB_OVER;
	return 0;
}

int cb_enc_blob_open(const struct cb_enckey *k, const void *aad, size_t aad_len, const void *in,
		     size_t len, unsigned char **out, size_t *out_len)
{
	const unsigned char *b = in;
	unsigned char *p;
	size_t n;

	if (len < CB_ENC_BLOB_OVER)
		return cb_error("sealed data is truncated");
	n = len - CB_ENC_BLOB_OVER;
	p = cb_xmalloc(n + 1);
	if (cb_enc_open(k->k_cat, b, aad, aad_len, b + CB_ENC_NONCE, n, p,
			b + CB_ENC_NONCE + n) < 0) {
		OPENSSL_cleanse(p, n);
		free(p);
		return -1;
	}
	p[n] = '\0';
	*out = p;
	*out_len = n;
	return 0;
}
