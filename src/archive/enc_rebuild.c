/*
 * `cbackup index` of an encrypted archive (cb_encarchive.h): its frames
 * are self-describing, so a lost or damaged catalog is made again from the
 * archive alone: every frame read in file order and checked (tag, id),
 * the plain archive decrypted into a private directory and scanned as any
 * archive is, then the catalog sealed and the .sha256 written anew. The
 * frames' order is the file's: each unit authenticates, their sequence is
 * only checked by the plain scan (a tar stream out of order does not scan).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "cb_index.h"
#include "cb_private.h"
#include "cb_rmtree.h"
#include "enc_int.h"
#include "cb_util.h"

struct rescan {
	const struct cb_enckey *k;
	const char *archive;
	int in, out;
	uint64_t size, p_at;
	struct enc_frame *f;
	size_t n, cap;
	EVP_MD_CTX *all;      /* the encrypted archive's SHA-256 */
};

static void hex32(const unsigned char *d, char out[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The frame at e_off: checked, its plain bytes written; its length. */
static int one_frame(struct rescan *r, uint64_t e_off, uint64_t *len)
{
	unsigned char h[ENC_FRAME_HDR], *buf = NULL, *plain = NULL;
	struct enc_frame f = { .p_off = r->p_at, .e_off = e_off };
	int ret = -1;

	if (cb_pread_all(r->in, h, sizeof(h), e_off) < 0 || memcmp(h, ENC_FRAME_MAGIC, 4) ||
	    (f.p_len = enc_get64(h + 8)) > r->size || (f.e_len = enc_frame_size(f.p_len)) > r->size - e_off)
		return cb_error("unit %zu of '%s' (at byte %llu): no whole frame there (truncated or "
				"damaged)", r->n + 1, r->archive, (unsigned long long)e_off);
	memcpy(f.id, h + 16, CB_ENC_ID);
	buf = cb_xmalloc(f.e_len);
	plain = cb_xmalloc(f.e_len);
	if (enc_open_frame(r->k, r->in, &f, r->n, buf, plain, r->archive, 1) < 0)
		goto out;
	if (pwrite(r->out, plain, f.p_len, (off_t)f.p_off) != (ssize_t)f.p_len) {
		cb_error_errno("cannot write the decrypted archive");
		goto out;
	}
	SHA256(buf, f.e_len, f.sha);
	EVP_DigestUpdate(r->all, buf, f.e_len);
	if (r->n == r->cap)
		r->f = cb_xrealloc(r->f, (r->cap = r->cap ? 2 * r->cap : 64) * sizeof(*r->f));
	r->f[r->n++] = f;
	r->p_at += f.p_len;
	*len = f.e_len;
	ret = 0;
out:
	OPENSSL_cleanse(plain, f.e_len);
	free(plain);
	free(buf);
	return ret;
}

static int all_frames(struct rescan *r)
{
	unsigned char head[ENC_HEAD];
	uint64_t at = ENC_HEAD, len = 0;

	if (cb_pread_all(r->in, head, sizeof(head), 0) < 0 || memcmp(head, ENC_MAGIC, 8))
		return cb_error("'%s' is not an encrypted archive", r->archive);
	if (cb_enckey_check_fp(head + 16, r->k) < 0)
		return -1;
	EVP_DigestUpdate(r->all, head, sizeof(head));
	for (; at < r->size; at += len)
		if (one_frame(r, at, &len) < 0)
			return -1;
	return 0;
}

/* The plain catalog and .sha256 beside the decrypted archive. */
static int plain_sides(const char *plain)
{
	char *ipath = cb_xasprintf("%s.idx", plain), *spath = cb_xasprintf("%s.sha256", plain);
	char idx_hex[65], hex[65], *text = NULL;
	unsigned char *buf = NULL, *all = NULL, d[32];
	size_t len, alen;
	int ret = -1;

	if (cb_idx_scan_archive(plain, &buf, &len) < 0 || cb_idx_write_file(ipath, buf, len, idx_hex) < 0 ||
	    enc_read_file(plain, &all, &alen) < 0)
		goto out;
	SHA256(all, alen, d);
	hex32(d, hex);
	text = cb_xasprintf("%s  %s\n%s  %s.idx\n", hex, strrchr(plain, '/') + 1, idx_hex,
			    strrchr(plain, '/') + 1);
	ret = cb_write_file_replace(spath, text, 0600);
out:
	free(text);
	free(all);
	free(buf);
	free(ipath);
	free(spath);
	return ret;
}

static int rebuild_in(struct rescan *r, const char *dir, int dry_run, uint64_t *frames)
{
	const char *name = strrchr(r->archive, '/') ? strrchr(r->archive, '/') + 1 : r->archive;
	char *plain = cb_xasprintf("%s/%.*s", dir, (int)(strlen(name) - strlen(CB_ENC_SUFFIX)), name);
	char idx_hex[65], hex[65];
	unsigned char d[32];
	int ret = -1;

	if ((r->out = cb_create_excl(plain, 0600)) < 0) {
		cb_error_errno("cannot create '%s'", plain);
		goto out;
	}
	if (all_frames(r) < 0 || plain_sides(plain) < 0)
		goto out;
	*frames = r->n;
	EVP_DigestFinal_ex(r->all, d, NULL);
	hex32(d, hex);
	ret = dry_run ? 0
		      : enc_write_catalog(r->k, r->f, r->n, r->size, plain, r->archive, r->p_at,
					  idx_hex) < 0 ||
			enc_write_sums(r->archive, hex, idx_hex) < 0 ? -1 : 0;
out:
	free(plain);
	return ret;
}

int cb_enc_rebuild_catalog(const struct cb_enckey *k, const char *archive, const char *tmpdir,
			   int dry_run, uint64_t *frames)
{
	struct rescan r = { .k = k, .archive = archive, .in = -1, .out = -1 };
	/* a view's name and lock: if this run is killed, the next reader
	 * removes the plain copy it leaves (cb_enc_views_sweep) */
	char *dir = cb_xasprintf("%s/cbackup-view.XXXXXX", tmpdir);
	struct stat st;
	int ret = -1, lock = -1;

	r.all = EVP_MD_CTX_new();
	if (!r.all || EVP_DigestInit_ex(r.all, EVP_sha256(), NULL) != 1) {
		cb_error("SHA-256 (libcrypto)");
		goto out;
	}
	if ((r.in = cb_open_regular_given(archive, "archive", &st)) < 0)
		goto out;
	r.size = (uint64_t)st.st_size;
	if (!mkdtemp(dir)) {
		cb_error_errno("cannot create a private directory in '%s'", tmpdir);
		goto out;
	}
	if ((lock = enc_view_lock(dir)) >= 0)
		ret = rebuild_in(&r, dir, dry_run, frames);
	cb_remove_tree(dir);
	if (lock >= 0)
		close(lock);
out:
	if (r.in >= 0)
		close(r.in);
	if (r.out >= 0)
		close(r.out);
	EVP_MD_CTX_free(r.all);
	free(r.f);
	free(dir);
	return ret;
}
