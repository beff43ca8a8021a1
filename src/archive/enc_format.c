/* The encrypted archive's catalog: reading and checking it (enc_int.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "enc_int.h"
#include "cb_util.h"

void enc_put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

uint64_t enc_get64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

void enc_put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

uint32_t enc_get32(const unsigned char *p)
{
	return (uint32_t)enc_get64((const unsigned char[8]){ p[0], p[1], p[2], p[3] });
}

int cb_enc_is_encrypted(const char *name)
{
	size_t n = strlen(name), k = strlen(CB_ENC_SUFFIX);

	return n > k && !strcmp(name + n - k, CB_ENC_SUFFIX);
}

uint64_t enc_frame_size(uint64_t ct_len)
{
	uint64_t n = ENC_FRAME_HDR + ct_len + CB_ENC_TAG;

	return (n + ENC_ALIGN - 1) / ENC_ALIGN * ENC_ALIGN;
}

int enc_read_file(const char *path, unsigned char **buf, size_t *len)
{
	struct stat st;
	int fd = cb_open_regular(path, 0, "", &st);

	if (fd < 0)
		return -1;
	*len = (size_t)st.st_size;
	*buf = cb_xmalloc(*len + 1);
	if (cb_read_all(fd, *buf, *len) < 0) {
		close(fd);
		free(*buf);
		return cb_error_errno("cannot read '%s'", path);
	}
	close(fd);
	return 0;
}

/* The frame records: contiguous in both files, each a whole frame. */
static int parse_frames(struct enc_idx *x, const char *path)
{
	const unsigned char *p = x->buf + ENC_IDX_HEAD;
	uint64_t p_at = 0, e_at = ENC_HEAD;

	x->f = cb_xcalloc(x->n + 1, sizeof(*x->f));
	if (x->enc_size < ENC_HEAD)
		return cb_error("catalog '%s' is damaged: no room for the archive header", path);
	for (uint64_t i = 0; i < x->n; i++, p += ENC_REC) {
		struct enc_frame *f = &x->f[i];
		f->p_off = enc_get64(p);
		f->p_len = enc_get64(p + 8);
		f->e_off = enc_get64(p + 16);
		f->e_len = enc_get64(p + 24);
		memcpy(f->id, p + 32, CB_ENC_ID);
		memcpy(f->sha, p + 64, 32);
		/* in bounds first: no sum below can wrap around */
		if (f->p_len > x->plain_size - p_at || f->e_len > x->enc_size - e_at ||
		    f->p_off != p_at || f->e_off != e_at || f->e_len != enc_frame_size(f->p_len))
			return cb_error("catalog '%s' is damaged: frame %llu out of place", path,
					(unsigned long long)i + 1);
		p_at += f->p_len;
		e_at += f->e_len;
	}
	if (p_at != x->plain_size || e_at != x->enc_size)
		return cb_error("catalog '%s' is damaged: its frames do not add up", path);
	return 0;
}

static int parse_idx(struct enc_idx *x, const char *path)
{
	size_t table;

	if (x->len < ENC_IDX_HEAD + 8 || memcmp(x->buf, ENC_IDX_MAGIC, 8))
		return cb_error("'%s' is not the catalog of an encrypted archive", path);
	if (enc_get32(x->buf + 8) != ENC_VERSION || enc_get32(x->buf + 12) != ENC_CIPHER_AES256GCM)
		return cb_error("catalog '%s': unknown version or cipher", path);
	memcpy(x->fp, x->buf + 16, CB_ENC_FP);
	x->n = enc_get64(x->buf + 48);
	x->plain_size = enc_get64(x->buf + 56);
	x->enc_size = enc_get64(x->buf + 64);
	if (x->n > (x->len - ENC_IDX_HEAD - 8) / ENC_REC)
		return cb_error("catalog '%s' is truncated", path);
	table = ENC_IDX_HEAD + (size_t)x->n * ENC_REC;
	x->blob_len = (size_t)enc_get64(x->buf + table);
	x->blob_at = table + 8;
	if (x->blob_len != x->len - x->blob_at)
		return cb_error("catalog '%s' is truncated or has bytes after its end", path);
	return parse_frames(x, path);
}

int enc_idx_read(const char *path, struct enc_idx *x)
{
	memset(x, 0, sizeof(*x));
	if (enc_read_file(path, &x->buf, &x->len) < 0)
		return cb_error_prefix("catalog of the encrypted archive");
	if (parse_idx(x, path) < 0) {
		enc_idx_release(x);
		return -1;
	}
	return 0;
}

void enc_idx_release(struct enc_idx *x)
{
	free(x->buf);
	free(x->f);
	memset(x, 0, sizeof(*x));
}

int cb_enc_archive_fp(const char *archive, unsigned char fp[CB_ENC_FP])
{
	char *path = cb_xasprintf("%s.idx", archive);
	struct enc_idx x;
	int ret = enc_idx_read(path, &x);

	if (ret == 0)
		memcpy(fp, x.fp, CB_ENC_FP);
	enc_idx_release(&x);
	free(path);
	return ret;
}

int cb_enc_check_key(const char *archive, const struct cb_enckey *k)
{
	unsigned char fp[CB_ENC_FP];

	if (cb_enc_archive_fp(archive, fp) < 0)
		return -1;
	return cb_enckey_check_fp(fp, k);
}

int enc_idx_open_blob(const struct enc_idx *x, const struct cb_enckey *k, unsigned char **plain,
		      size_t *len)
{
	if (cb_enckey_check_fp(x->fp, k) < 0)
		return -1;
	if (cb_enc_blob_open(k, x->buf, x->blob_at, x->buf + x->blob_at, x->blob_len, plain, len) < 0)
		return cb_error("the encrypted catalog failed authentication (damaged)");
	return 0;
}

const unsigned char *enc_blob_get(const unsigned char *b, size_t len, uint32_t type, size_t *out)
{
	for (size_t at = 0; len - at >= 12;) {
		uint32_t t = enc_get32(b + at);
		uint64_t n = enc_get64(b + at + 4);
		if (n > len - at - 12)
			return NULL;
		if (t == type)
			return *out = (size_t)n, b + at + 12;
		at += 12 + (size_t)n;
	}
	return NULL;
}
