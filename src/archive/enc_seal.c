/*
 * Sealing a plain archive into an encrypted one (cb_encarchive.h): frames
 * cut where the catalog's segments (else its units) start, so that a
 * night's unchanged units make the same frames as the night before, which
 * are then copied from the previous encrypted archive (a clone where the
 * file system can) and read back.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "cb_cleanup.h"
#include "cb_index.h"
#include "cb_private.h"
#include "enc_int.h"
#include "cb_util.h"

/* A segment of the plain catalog: its bytes' SHA-256, which the writer
 * computed as it wrote them (or took, with a copied segment, from the
 * previous catalog after checking the copy): a frame that is exactly one
 * segment gets its id from it, no second SHA-256 pass over its bytes. */
struct seal_seg {
	uint64_t c_off, c_len;
	unsigned char cdig[32];
};

struct seal {
	const struct cb_enckey *k;
	struct seal_seg *segs;        /* by c_off */
	size_t n_segs;
	int in, out, prev, back;   /* back: out opened for reading */
	struct enc_idx prev_idx;      /* frames sorted by id */
	struct enc_frame *f;
	size_t n, cap;
	uint64_t e_at;
	EVP_MD_CTX *sum;
	struct cb_enc_seal_stats *st;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Where frames start: 0 and each segment's (else unit's) first byte;
 * the segments into s. */
static size_t frame_starts(struct seal *s, const char *plain, uint64_t size, uint64_t **out)
{
	char *ipath = cb_xasprintf("%s.idx", plain);
	struct cb_idx x;
	struct cb_codec_seg g;
	struct cb_codec_unit u;
	uint64_t *v = NULL;
	size_t n = 0, cap = 0, m = 1;

	if (cb_idx_read(&x, ipath, size) == 0) {
		uint64_t count = x.n_segs ? x.n_segs : x.n_units;
		v = cb_xcalloc(count + 1, sizeof(*v));
		cap = count + 1;
		s->segs = cb_xcalloc(x.n_segs + 1, sizeof(*s->segs));
		for (uint64_t i = 0; i < count; i++) {
			x.n_segs ? cb_idx_seg(&x, i, &g) : cb_idx_unit(&x, i, &u);
			v[n++] = x.n_segs ? g.c_off : u.c_off;
			if (x.n_segs) {
				s->segs[s->n_segs] = (struct seal_seg){ g.c_off, g.c_len, { 0 } };
				memcpy(s->segs[s->n_segs++].cdig, g.cdig, 32);
			}
		}
		cb_idx_close(&x);
	}
	free(ipath);
	if (n == 0)   /* no units (uncompressed, no catalog): fixed cuts */
		for (uint64_t at = 0; at < size || at == 0; at += ENC_PLAIN_CUT) {
			if (n == cap)
				v = cb_xrealloc(v, (cap = cap ? 2 * cap : 16) * sizeof(*v));
			v[n++] = at;
		}
	v = cb_xrealloc(v, (n + 1) * sizeof(*v));
	v[n++] = 0;
	qsort(v, n, sizeof(*v), cmp_u64);
	for (size_t i = 1; i < n; i++)   /* unique, within the file */
		if (v[i] != v[m - 1] && v[i] < size)
			v[m++] = v[i];
	*out = v;
	return m;
}

static int cmp_id(const void *a, const void *b)
{
	return memcmp(((const struct enc_frame *)a)->id, ((const struct enc_frame *)b)->id, CB_ENC_ID);
}

/* The previous archive's frames, when its catalog is sound and under k. */
static void open_prev(struct seal *s, const char *prev)
{
	char *ipath = cb_xasprintf("%s.idx", prev);
	unsigned char *blob = NULL;
	size_t len;

	s->prev = -1;
	if (enc_idx_read(ipath, &s->prev_idx) == 0 &&
	    enc_idx_open_blob(&s->prev_idx, s->k, &blob, &len) == 0 &&
	    (s->prev = cb_open_regular(prev, 0, "", NULL)) >= 0)
		qsort(s->prev_idx.f, s->prev_idx.n, sizeof(*s->prev_idx.f), cmp_id);
	free(blob);
	free(ipath);
}

static int cmp_seg(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = ((const struct seal_seg *)b)->c_off;
	return x < y ? -1 : x > y;
}

static int read_plain(struct seal *s, unsigned char *plain, uint64_t p_off, uint64_t p_len)
{
	if (cb_pread_all(s->in, plain, p_len, p_off) < 0)
		return cb_error_errno("cannot read the plain archive");
	return 0;
}

/* The frame's id: from its segment's digest when it is exactly one (its
 * bytes not read: a copied frame never needs them), else from its bytes,
 * read into plain (*read set). */
static int frame_id(struct seal *s, unsigned char *plain, uint64_t p_off, uint64_t p_len,
		    unsigned char id[CB_ENC_ID], int *read)
{
	const struct seal_seg *g = s->n_segs ? bsearch(&p_off, s->segs, s->n_segs, sizeof(*s->segs),
						       cmp_seg) : NULL;

	*read = 0;
	if (g && g->c_len == p_len)
		return cb_enc_unit_id_sha(s->k, g->cdig, id);
	if (read_plain(s, plain, p_off, p_len) < 0)
		return -1;
	*read = 1;
	return cb_enc_unit_id(s->k, plain, p_len, id);
}

/* Frame id of p_len plain bytes is in the previous archive (whose every
 * frame the caller's view authenticated): cloned to out's end, read back
 * and compared with the previous archive's bytes (no second encryption:
 * the same id and length under one key is the same frame, byte for
 * byte). The previous frame record, or NULL (then the frame is sealed). */
static const struct enc_frame *copy_prev(struct seal *s, const unsigned char *id, uint64_t p_len)
{
	struct enc_frame key, *p;
	unsigned char *back, *want;
	loff_t from, to = (loff_t)s->e_at;
	uint64_t len = enc_frame_size(p_len);
	int same;

	if (s->prev < 0)
		return NULL;
	memcpy(key.id, id, CB_ENC_ID);
	p = bsearch(&key, s->prev_idx.f, s->prev_idx.n, sizeof(key), cmp_id);
	if (!p || p->p_len != p_len || p->e_len != len)
		return NULL;
	from = (loff_t)p->e_off;
	if (copy_file_range(s->prev, &from, s->out, &to, len, 0) != (ssize_t)len)
		return NULL;
	back = cb_xmalloc(len);
	want = cb_xmalloc(len);
	same = cb_pread_all(s->back, back, len, s->e_at) == 0 &&
	       cb_pread_all(s->prev, want, len, p->e_off) == 0 && !memcmp(back, want, len);
	if (same)
		EVP_DigestUpdate(s->sum, back, len);
	free(back);
	free(want);
	return same ? p : NULL;
}

static struct enc_frame *add_frame(struct seal *s, uint64_t p_off, uint64_t p_len, uint64_t len,
				   const unsigned char *id)
{
	struct enc_frame *f;

	if (s->n == s->cap)
		s->f = cb_xrealloc(s->f, (s->cap = s->cap ? 2 * s->cap : 64) * sizeof(*s->f));
	f = &s->f[s->n++];
	*f = (struct enc_frame){ p_off, p_len, s->e_at, len, { 0 }, { 0 } };
	memcpy(f->id, id, CB_ENC_ID);
	s->e_at += len;
	s->st->frames++;
	return f;
}

/* Frame [p_off, p_off + p_len) of the plain archive; plain: room for it. */
static int put_frame(struct seal *s, unsigned char *plain, uint64_t p_off, uint64_t p_len)
{
	uint64_t len = enc_frame_size(p_len);
	unsigned char *fr, id[CB_ENC_ID];
	const struct enc_frame *prev;
	int ret = -1, read;

	if (frame_id(s, plain, p_off, p_len, id, &read) < 0)
		return -1;
	if ((prev = copy_prev(s, id, p_len))) {
		s->st->frames_copied++;
		/* the previous (authenticated) table has its SHA-256 already */
		memcpy(add_frame(s, p_off, p_len, len, id)->sha, prev->sha, 32);
		return 0;
	}
	if (!read && read_plain(s, plain, p_off, p_len) < 0)
		return -1;
	if (!(fr = enc_frame_make(s->k, id, plain, p_len)))
		return -1;
	if (pwrite(s->out, fr, len, (off_t)s->e_at) != (ssize_t)len) {
		cb_error_errno("cannot write the encrypted archive");
		goto out;
	}
	EVP_DigestUpdate(s->sum, fr, len);
	SHA256(fr, len, add_frame(s, p_off, p_len, len, id)->sha);
	ret = 0;
out:
	free(fr);
	return ret;
}

unsigned char *enc_frame_make(const struct cb_enckey *k, const unsigned char *id,
			      const unsigned char *plain, uint64_t p_len)
{
	uint64_t len = enc_frame_size(p_len);
	unsigned char *fr = cb_xcalloc(1, len), key[32];
	int ret;

	memcpy(fr, ENC_FRAME_MAGIC, 4);
	enc_put64(fr + 8, p_len);
	memcpy(fr + 16, id, CB_ENC_ID);
	ret = cb_enc_unit_key(k, id, key) < 0 ||
	      cb_enc_seal(key, (const unsigned char[CB_ENC_NONCE]){ 0 }, fr, ENC_FRAME_HDR, plain,
			  p_len, fr + ENC_FRAME_HDR, fr + ENC_FRAME_HDR + p_len) < 0 ? -1 : 0;
	OPENSSL_cleanse(key, sizeof(key));
	if (ret < 0) {
		free(fr);
		return NULL;
	}
	return fr;
}

static int put_head(struct seal *s)
{
	unsigned char h[ENC_HEAD] = { 0 };

	memcpy(h, ENC_MAGIC, 8);
	enc_put32(h + 8, ENC_VERSION);
	enc_put32(h + 12, ENC_CIPHER_AES256GCM);
	memcpy(h + 16, s->k->fp, CB_ENC_FP);
	if (pwrite(s->out, h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return cb_error_errno("cannot write the encrypted archive");
	EVP_DigestUpdate(s->sum, h, sizeof(h));
	s->e_at = ENC_HEAD;
	return 0;
}

static int put_frames(struct seal *s, uint64_t size, const uint64_t *starts, size_t n)
{
	unsigned char *buf = NULL;
	size_t cap = 0;
	int ret = 0;

	for (size_t i = 0; i < n && ret == 0; i++) {
		uint64_t len = (i + 1 < n ? starts[i + 1] : size) - starts[i];
		if (len > cap)
			buf = cb_xrealloc(buf, cap = len);
		if (cb_check_interrupt() < 0)   /* SIGINT/SIGTERM: no half archive left */
			ret = -1;
		else
			ret = put_frame(s, buf, starts[i], len);
	}
	free(buf);
	return ret;
}

static void put_record(unsigned char **b, size_t *len, uint32_t type, const void *data, size_t n)
{
	*b = cb_xrealloc(*b, *len + 12 + n);
	enc_put32(*b + *len, type);
	enc_put64(*b + *len + 4, n);
	memcpy(*b + *len + 12, data, n);
	*len += 12 + n;
}

/* The records sealed in the catalog: the archive's name, the plain
 * catalog and .sha256 (either may be missing: a catalog that could not be
 * made is a warning of the plain writer too). */
static void catalog_records(const char *plain, const char *out, unsigned char **b, size_t *len)
{
	static const struct { uint32_t type; const char *suffix; } side[] = {
		{ ENC_T_IDX, ".idx" }, { ENC_T_SHA256, ".sha256" } };
	const char *name = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;

	*b = NULL;
	*len = 0;
	put_record(b, len, ENC_T_NAME, name, strlen(name));
	for (size_t i = 0; i < 2; i++) {
		char *p = cb_xasprintf("%s%s", plain, side[i].suffix);
		unsigned char *data;
		size_t n;
		if (enc_read_file(p, &data, &n) == 0) {
			put_record(b, len, side[i].type, data, n);
			free(data);
		}
		free(p);
	}
}

int enc_write_catalog(const struct cb_enckey *k, const struct enc_frame *f, size_t n,
		      uint64_t e_size, const char *plain, const char *out, uint64_t p_size,
		      char idx_hex[65])
{
	size_t table = ENC_IDX_HEAD + n * ENC_REC, rec_len, blob_len;
	unsigned char *h = cb_xcalloc(1, table + 8), *rec, *blob, *all, d[32];
	char *path = cb_xasprintf("%s.idx", out);
	int ret;

	memcpy(h, ENC_IDX_MAGIC, 8);
	enc_put32(h + 8, ENC_VERSION);
	enc_put32(h + 12, ENC_CIPHER_AES256GCM);
	memcpy(h + 16, k->fp, CB_ENC_FP);
	enc_put64(h + 48, n);
	enc_put64(h + 56, p_size);
	enc_put64(h + 64, e_size);
	for (size_t i = 0; i < n; i++) {
		unsigned char *p = h + ENC_IDX_HEAD + i * ENC_REC;
		enc_put64(p, f[i].p_off);
		enc_put64(p + 8, f[i].p_len);
		enc_put64(p + 16, f[i].e_off);
		enc_put64(p + 24, f[i].e_len);
		memcpy(p + 32, f[i].id, CB_ENC_ID);
		memcpy(p + 64, f[i].sha, 32);
	}
	catalog_records(plain, out, &rec, &rec_len);
	enc_put64(h + table, rec_len + CB_ENC_BLOB_OVER);
	ret = cb_enc_blob_seal(k, h, table + 8, rec, rec_len, &blob, &blob_len);
	OPENSSL_cleanse(rec, rec_len);
	free(rec);
	if (ret == 0) {
		all = cb_xmalloc(table + 8 + blob_len);
		memcpy(all, h, table + 8);
		memcpy(all + table + 8, blob, blob_len);
		SHA256(all, table + 8 + blob_len, d);
		for (int i = 0; i < 32; i++)
			snprintf(idx_hex + 2 * i, 3, "%02x", d[i]);
		ret = cb_write_file_replace_bytes(path, all, table + 8 + blob_len, 0640);
		free(all);
		free(blob);
	}
	free(h);
	free(path);
	return ret;
}

int enc_write_sums(const char *out, const char *hex, const char *idx_hex)
{
	const char *name = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
	char *path = cb_xasprintf("%s.sha256", out);
	char *text = cb_xasprintf("%s  %s\n%s  %s.idx\n", hex, name, idx_hex, name);
	int ret = cb_write_file_replace(path, text, 0644);

	free(path);
	free(text);
	return ret;
}

/* Catalog and .sha256 first, then the archive under its name, fsynced,
 * never replacing one: an archive under its final name always has both. */
static int finish(struct seal *s, const char *plain, const char *out, const char *tmp,
		  uint64_t p_size)
{
	char idx_hex[65];
	unsigned char d[32];

	EVP_DigestFinal_ex(s->sum, d, NULL);
	for (int i = 0; i < 32; i++)
		snprintf(s->st->sha256 + 2 * i, 3, "%02x", d[i]);
	s->st->bytes = s->e_at;
	if (fsync(s->out) < 0)
		return cb_error_errno("cannot write '%s'", tmp);
	if (enc_write_catalog(s->k, s->f, s->n, s->e_at, plain, out, p_size, idx_hex) < 0 ||
	    enc_write_sums(out, s->st->sha256, idx_hex) < 0)
		return -1;
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, out, RENAME_NOREPLACE) < 0)
		return cb_error_errno("cannot rename '%s'", tmp);
	return 0;
}

void enc_remove_outputs(const char *out, const char *tmp)
{
	static const char *const sides[] = { ".idx", ".sha256", NULL };

	if (tmp)
		unlink(tmp);
	for (int i = 0; sides[i]; i++) {
		char *p = cb_xasprintf("%s%s", out, sides[i]);
		unlink(p);
		free(p);
	}
}

/* An archive or side file already under the name is never replaced nor,
 * when this one fails, removed. */
int enc_names_taken(const char *out)
{
	static const char *const sides[] = { "", ".idx", ".sha256", NULL };
	struct stat st;

	for (int i = 0; sides[i]; i++) {
		char *p = cb_xasprintf("%s%s", out, sides[i]);
		int taken = lstat(p, &st) == 0 || errno != ENOENT;
		if (taken)
			cb_error("'%s' exists already: not replaced", p);
		free(p);
		if (taken)
			return -1;
	}
	return 0;
}

int cb_enc_seal_archive(const struct cb_enckey *k, const char *plain, const char *out,
			const char *prev, struct cb_enc_seal_stats *st)
{
	struct seal s = { .k = k, .in = -1, .out = -1, .prev = -1, .back = -1, .st = st };
	char *tmp = cb_xasprintf("%s.tmp", out);
	uint64_t *starts = NULL;
	struct stat sb;
	size_t n;
	int ret = -1;

	memset(st, 0, sizeof(*st));
	if (enc_names_taken(out) < 0) {
		free(tmp);
		return -1;
	}
	s.sum = EVP_MD_CTX_new();
	if (!s.sum || EVP_DigestInit_ex(s.sum, EVP_sha256(), NULL) != 1) {
		cb_error("SHA-256 (libcrypto)");
		goto out;
	}
	if ((s.in = cb_open_regular(plain, 0, "plain archive", &sb)) < 0)
		goto out;
	if ((s.out = cb_create_excl(tmp, 0640)) < 0) {
		cb_error_errno("cannot create '%s'", tmp);
		goto out;
	}
	if (prev && (s.back = open(tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) >= 0)
		open_prev(&s, prev);
	n = frame_starts(&s, plain, (uint64_t)sb.st_size, &starts);
	if (put_head(&s) < 0 || put_frames(&s, (uint64_t)sb.st_size, starts, n) < 0 ||
	    finish(&s, plain, out, tmp, (uint64_t)sb.st_size) < 0) {
		enc_remove_outputs(out, tmp);
		goto out;
	}
	ret = 0;
out:
	if (s.in >= 0)
		close(s.in);
	if (s.out >= 0)
		close(s.out);
	if (s.prev >= 0)
		close(s.prev);
	if (s.back >= 0)
		close(s.back);
	EVP_MD_CTX_free(s.sum);
	enc_idx_release(&s.prev_idx);
	free(s.segs);
	free(s.f);
	free(starts);
	free(tmp);
	return ret;
}
