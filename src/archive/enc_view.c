/*
 * Reading an encrypted archive (cb_encarchive.h): a view is the plain
 * archive, catalog and .sha256 decrypted into a new private directory,
 * which the plain restore, ls, verify, mount and index then read. A frame
 * reaches the view only after its tag, its id (recomputed from the bytes)
 * and its place (the authenticated frame table) all hold.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "cb_catalog.h"
#include "cb_cleanup.h"
#include "cb_private.h"
#include "cb_rmtree.h"
#include "enc_int.h"
#include "cb_util.h"

struct cb_enc_view {
	char *dir, *path;
	uint64_t frames, opened;   /* in the archive, decrypted into the view */
	/* what a signal's cleanup unlinks (no allocation in a handler) */
	char *sides[4];            /* PATH.idx, PATH.sha256, PATH.verified, mark */
	int cleanup;               /* its handle, or -1 */
	int lock;                  /* holds the directory's flock (enc_sweep.c) */
};

/* On SIGINT/SIGTERM: no plain copy of the archive is left behind. */
static void view_cleanup(void *arg)
{
	struct cb_enc_view *v = arg;

	unlink(v->path);
	for (int i = 0; i < 4; i++)
		unlink(v->sides[i]);
	rmdir(v->dir);
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

/* Frame i of the archive open as fd, checked whole, its plain bytes into
 * plain (f->p_len bytes). */
int enc_open_frame(const struct cb_enckey *k, int fd, const struct enc_frame *f, uint64_t i,
		   unsigned char *buf, unsigned char *plain, const char *archive, int check_id)
{
	unsigned char key[32], id[CB_ENC_ID];
	int ret = -1;

	if (cb_pread_all(fd, buf, f->e_len, f->e_off) < 0)
		return cb_error("unit %llu of '%s' (bytes %llu-%llu) is missing: the archive is "
				"truncated", (unsigned long long)i + 1, archive,
				(unsigned long long)f->e_off, (unsigned long long)(f->e_off + f->e_len));
	if (memcmp(buf, ENC_FRAME_MAGIC, 4) || enc_get64(buf + 8) != f->p_len ||
	    memcmp(buf + 16, f->id, CB_ENC_ID))
		return cb_error("unit %llu of '%s' (at byte %llu) is not the unit its catalog names "
				"there (damaged, swapped or copied from another archive)",
				(unsigned long long)i + 1, archive, (unsigned long long)f->e_off);
	if (cb_enc_unit_key(k, f->id, key) == 0 &&
	    cb_enc_open(key, (const unsigned char[CB_ENC_NONCE]){ 0 }, buf, ENC_FRAME_HDR,
			buf + ENC_FRAME_HDR, f->p_len, plain, buf + ENC_FRAME_HDR + f->p_len) == 0 &&
	    (!check_id || (cb_enc_unit_id(k, plain, f->p_len, id) == 0 &&
			   !memcmp(id, f->id, CB_ENC_ID))))
		ret = 0;
	else
		cb_error("unit %llu of '%s' (at byte %llu) failed authentication: damaged",
			 (unsigned long long)i + 1, archive, (unsigned long long)f->e_off);
	OPENSSL_cleanse(key, sizeof(key));
	return ret;
}

/* What a view decrypts: want[i] (NULL: every frame); with salvage a frame
 * that fails is said in log and left a hole, the others still written. */
struct frame_pick {
	const unsigned char *want;
	int salvage, check_id;
	struct cb_log *log;
	EVP_MD_CTX *sum;   /* the plaintext's SHA-256, frame by frame; NULL: none */
};

static int size_problem(const struct enc_idx *x, const char *archive, uint64_t size)
{
	if (size == x->enc_size)
		return 0;
	return cb_error("'%s' has %llu bytes, its catalog says %llu: %s", archive,
			(unsigned long long)size, (unsigned long long)x->enc_size,
			size < x->enc_size ? "truncated" : "bytes appended");
}

static int decrypt_frames(const struct cb_enckey *k, const struct enc_idx *x, const char *archive,
			  int out, const struct frame_pick *pick, uint64_t *opened)
{
	struct stat st;
	int fd = cb_open_regular_given(archive, "archive", &st), ret = 0, r;
	unsigned char *buf = NULL, *plain = NULL;
	size_t cap = 0;

	if (fd < 0)
		return -1;
	if (!pick->salvage)
		ret = size_problem(x, archive, (uint64_t)st.st_size);
	for (uint64_t i = 0; ret == 0 && i < x->n; i++) {
		const struct enc_frame *f = &x->f[i];
		if (pick->want && !pick->want[i])
			continue;
		if (cb_check_interrupt() < 0) {
			ret = -1;
			break;
		}
		if (f->e_len > cap) {
			cap = f->e_len;
			buf = cb_xrealloc(buf, cap);
			plain = cb_xrealloc(plain, cap);
		}
		r = enc_open_frame(k, fd, f, i, buf, plain, archive, pick->check_id);
		if (r < 0 && pick->salvage)
			cb_err(pick->log, "%s: its members are lost", cb_last_error());
		else if (r < 0)
			ret = -1;
		else if (pwrite(out, plain, f->p_len, (off_t)f->p_off) != (ssize_t)f->p_len)
			ret = cb_error_errno("cannot write the decrypted archive");
		else {
			++*opened;
			if (pick->sum)
				EVP_DigestUpdate(pick->sum, plain, f->p_len);
		}
	}
	if (plain)
		OPENSSL_cleanse(plain, cap);
	free(buf);
	free(plain);
	close(fd);
	return ret;
}

/* PATH with the record of an opened catalog (absent: no file). */
static int put_side(const char *path, const unsigned char *blob, size_t len, uint32_t type)
{
	size_t n;
	const unsigned char *p = enc_blob_get(blob, len, type, &n);

	return p ? cb_write_file_replace_bytes(path, p, n, 0600) : 0;
}

/* The sealed .sha256 record has the plain archive's line (archives sealed
 * from a plain file); a backup that seals as it writes keeps only the
 * catalog's line (every frame has its tag: no second SHA-256 of the
 * plaintext at backup time). */
static int has_archive_line(const unsigned char *rec, size_t n)
{
	const unsigned char *nl = rec ? memchr(rec, '\n', n) : NULL;

	return nl && !(nl - rec >= 4 && !memcmp(nl - 4, ".idx", 4));
}

/* PATH.sha256 for the plain readers: the sealed record when it has the
 * archive's line; else that line from sum (the plaintext decrypted in
 * order) before the record's; none for a view of some frames only. */
static int put_sums(const struct cb_enc_view *v, const unsigned char *blob, size_t len,
		    EVP_MD_CTX *sum)
{
	char *path = cb_xasprintf("%s.sha256", v->path), *text, hex[65];
	const unsigned char *rec;
	unsigned char d[32];
	size_t n = 0;
	int ret = 0;

	rec = enc_blob_get(blob, len, ENC_T_SHA256, &n);
	if (has_archive_line(rec, n))
		ret = put_side(path, blob, len, ENC_T_SHA256);
	else if (sum && EVP_DigestFinal_ex(sum, d, NULL) == 1) {
		for (int i = 0; i < 32; i++)
			snprintf(hex + 2 * i, 3, "%02x", d[i]);
		text = cb_xasprintf("%s  %s\n%.*s", hex, base_name(v->path), (int)n,
				    rec ? (const char *)rec : "");
		ret = cb_write_file_replace(path, text, 0600);
		free(text);
	}
	free(path);
	return ret;
}

/* The catalog, opened: it must be this archive's (name sealed in it). */
int enc_open_catalog(const struct cb_enckey *k, const char *archive, struct enc_idx *x,
		     unsigned char **blob, size_t *len)
{
	char *ipath = cb_xasprintf("%s.idx", archive);
	const unsigned char *name;
	size_t n;
	int ret = -1;

	*blob = NULL;
	if (enc_idx_read(ipath, x) < 0 || enc_idx_open_blob(x, k, blob, len) < 0)
		goto out;
	name = enc_blob_get(*blob, *len, ENC_T_NAME, &n);
	if (!name || n != strlen(base_name(archive)) || memcmp(name, base_name(archive), n))
		cb_error("catalog '%s' belongs to another archive ('%.*s')", ipath,
			 name ? (int)n : 0, name ? (const char *)name : "");
	else
		ret = 0;
out:
	free(ipath);
	return ret;
}

static int fill_view(const struct cb_enckey *k, const char *archive, struct cb_enc_view *v,
		     const struct cb_enc_view_opts *o)
{
	struct frame_pick pick = { NULL, o ? o->salvage : 0, o ? !o->tag_only : 1,
				   o ? o->log : NULL, NULL };
	unsigned char *want = NULL;
	struct enc_idx x;
	unsigned char *blob = NULL;
	size_t len = 0, n = 0;
	char *side;
	int out = -1, ret = -1;

	if (enc_open_catalog(k, archive, &x, &blob, &len) < 0)
		goto out;
	side = cb_xasprintf("%s.idx", v->path);
	ret = put_side(side, blob, len, ENC_T_IDX);
	free(side);
	if (ret < 0 || (out = cb_create_excl(v->path, 0600)) < 0 ||
	    ftruncate(out, (off_t)x.plain_size) < 0) {
		ret = out < 0 && ret == 0 ? cb_error_errno("cannot create '%s'", v->path) : -1;
		goto out;
	}
	if (o && o->n_paths && !o->salvage) {
		side = cb_xasprintf("%s.idx", v->path);
		pick.want = want = enc_frames_for_paths(&x, side, o->paths, o->n_paths);
		free(side);
	}
	if (!pick.want && !pick.salvage && !has_archive_line(enc_blob_get(blob, len, ENC_T_SHA256,
									    &n), n) &&
	    (pick.sum = EVP_MD_CTX_new()) &&
	    EVP_DigestInit_ex(pick.sum, EVP_sha256(), NULL) != 1)
		ret = cb_error("SHA-256 (libcrypto)");
	v->frames = x.n;
	if (ret == 0)
		ret = decrypt_frames(k, &x, archive, out, &pick, &v->opened);
	if (ret == 0)
		ret = put_sums(v, blob, len, pick.sum);
	EVP_MD_CTX_free(pick.sum);
	free(want);
out:
	if (out >= 0)
		close(out);
	if (blob)
		OPENSSL_cleanse(blob, len);
	free(blob);
	enc_idx_release(&x);
	return ret;
}

int cb_enc_view_open(const struct cb_enckey *k, const char *archive, const char *tmpdir,
		     struct cb_enc_view **out)
{
	return cb_enc_view_open_opts(k, archive, tmpdir, NULL, out);
}

int cb_enc_view_open_opts(const struct cb_enckey *k, const char *archive, const char *tmpdir,
			  const struct cb_enc_view_opts *o, struct cb_enc_view **out)
{
	const char *name = base_name(archive);
	struct cb_enc_view *v;
	size_t n;

	*out = NULL;
	if (!cb_enc_is_encrypted(name))
		return cb_error("'%s' is not an encrypted archive (no %s suffix)", archive,
				CB_ENC_SUFFIX);
	n = strlen(name) - strlen(CB_ENC_SUFFIX);
	v = cb_xcalloc(1, sizeof(*v));
	v->cleanup = -1;
	v->lock = -1;
	v->dir = cb_xasprintf("%s/cbackup-view.XXXXXX", tmpdir);
	if (!mkdtemp(v->dir)) {   /* mode 0700, a new name */
		cb_error_errno("cannot create a private directory in '%s'", tmpdir);
		free(v->dir);
		free(v);
		return -1;
	}
	v->path = cb_xasprintf("%s/%.*s", v->dir, (int)n, name);
	v->sides[0] = cb_xasprintf("%s.idx", v->path);
	v->sides[1] = cb_xasprintf("%s.sha256", v->path);
	v->sides[2] = cb_xasprintf("%s.verified", v->path);
	v->sides[3] = cb_xasprintf("%s/%s", v->dir, ENC_VIEW_MARK);
	if ((v->cleanup = cb_cleanup_push(view_cleanup, v)) < 0)
		cb_error("too many cleanup actions");
	if (v->cleanup < 0 || (v->lock = enc_view_lock(v->dir)) < 0 || fill_view(k, archive, v, o) < 0) {
		cb_enc_view_free(v);
		return -1;
	}
	*out = v;
	return 0;
}

const char *cb_enc_view_path(const struct cb_enc_view *v)
{
	return v->path;
}

uint64_t cb_enc_view_frames(const struct cb_enc_view *v, uint64_t *total)
{
	*total = v->frames;
	return v->opened;
}

void cb_enc_view_free(struct cb_enc_view *v)
{
	if (!v)
		return;
	if (v->cleanup >= 0)
		cb_cleanup_pop(v->cleanup, 0);
	cb_remove_tree(v->dir);
	if (v->lock >= 0)   /* after the removal: no sweep takes it half-removed */
		close(v->lock);
	free(v->dir);
	free(v->path);
	for (int i = 0; i < 4; i++)
		free(v->sides[i]);
	free(v);
}

/* The SHA-256 ARCHIVE.sha256 gives FILE (its base name), in want. */
static int sum_for(const char *archive, const char *file, char want[65])
{
	char *path = cb_xasprintf("%s.sha256", archive), line[4096], name[4096];
	FILE *f = fopen(path, "re");
	int found = -1;

	while (f && found < 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, "%64s %4095s", want, name) == 2 && !strcmp(name, file))
			found = 0;
	if (f)
		fclose(f);
	if (found < 0)
		cb_error("'%s' has no line for '%s'", path, file);
	free(path);
	return found;
}

static void hex32(const unsigned char *d, char out[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* Every stored frame against its SHA-256; the archive's digest in hex. */
static int check_frames(const struct enc_idx *x, const char *archive, char hex[65])
{
	struct stat st;
	int fd = cb_open_regular_given(archive, "archive", &st), ret = 0;
	EVP_MD_CTX *all = EVP_MD_CTX_new();
	unsigned char head[ENC_HEAD], *buf = NULL, d[32];
	size_t cap = 0;

	if (fd < 0 || !all || EVP_DigestInit_ex(all, EVP_sha256(), NULL) != 1)
		ret = fd < 0 ? -1 : cb_error("SHA-256 (libcrypto)");
	else if (size_problem(x, archive, (uint64_t)st.st_size) < 0)
		ret = -1;
	else if (cb_pread_all(fd, head, sizeof(head), 0) < 0 || memcmp(head, ENC_MAGIC, 8))
		ret = cb_error("'%s' has no encrypted archive header", archive);
	else
		EVP_DigestUpdate(all, head, sizeof(head));
	for (uint64_t i = 0; ret == 0 && i < x->n; i++) {
		const struct enc_frame *f = &x->f[i];
		if (f->e_len > cap)
			buf = cb_xrealloc(buf, cap = f->e_len);
		if (cb_pread_all(fd, buf, f->e_len, f->e_off) < 0)
			ret = cb_error_errno("cannot read '%s'", archive);
		else if (SHA256(buf, f->e_len, d), memcmp(d, f->sha, 32))
			ret = cb_error("unit %llu of '%s' (at byte %llu) is damaged: its SHA-256 is not "
				       "the catalog's", (unsigned long long)i + 1, archive,
				       (unsigned long long)f->e_off);
		else
			EVP_DigestUpdate(all, buf, f->e_len);
	}
	if (ret == 0) {
		EVP_DigestFinal_ex(all, d, NULL);
		hex32(d, hex);
	}
	EVP_MD_CTX_free(all);
	free(buf);
	if (fd >= 0)
		close(fd);
	return ret;
}

int cb_enc_check_stored(const char *archive, uint64_t *frames)
{
	char *ipath = cb_xasprintf("%s.idx", archive), want[65], have[65], *iname;
	struct enc_idx x;
	unsigned char d[32];
	int ret = -1;

	iname = cb_xasprintf("%s.idx", base_name(archive));
	if (enc_idx_read(ipath, &x) < 0)
		goto out;
	SHA256(x.buf, x.len, d);
	hex32(d, have);
	if (sum_for(archive, iname, want) < 0 || strcasecmp(want, have)) {
		if (!cb_last_error()[0] || strcasecmp(want, have))
			cb_error("checksum mismatch: '%s.sha256' says %s for the catalog, it has %s",
				 archive, want, have);
		goto out;
	}
	if (check_frames(&x, archive, have) < 0 || sum_for(archive, base_name(archive), want) < 0)
		goto out;
	if (strcasecmp(want, have))
		cb_error("checksum mismatch: '%s.sha256' says %s, the archive has %s", archive, want,
			 have);
	else
		ret = 0;
	*frames = x.n;
out:
	enc_idx_release(&x);
	free(iname);
	free(ipath);
	return ret;
}

char *cb_enc_prev_archive(const char *dumpdir, enum cb_guest_type type, const char *id,
			  enum cb_compress codec)
{
	struct cb_catalog cat;
	char *path = NULL;

	if (cb_catalog_scan(&cat, dumpdir, id) < 0)
		return NULL;
	for (size_t i = 0; i < cat.n && !path; i++) {
		const struct cb_backup_file *f = &cat.files[i];
		if (f->type == type && !strcmp(f->id, id) && f->has_checksum && f->encrypted &&
		    f->compress == codec)
			path = cb_xstrdup(f->path);
	}
	cb_catalog_release(&cat);
	return path;
}

int cb_enc_notes_write(const struct cb_enckey *k, int dirfd, const char *name, const char *text)
{
	static const char magic[8] = "CBENCNOT";
	unsigned char *blob, *all;
	size_t len;
	int ret;

	if (cb_enc_blob_seal(k, magic, sizeof(magic), text, strlen(text), &blob, &len) < 0)
		return -1;
	all = cb_xmalloc(len + sizeof(magic));
	memcpy(all, magic, sizeof(magic));
	memcpy(all + sizeof(magic), blob, len);
	ret = cb_create_file_at(dirfd, name, all, len + sizeof(magic));
	free(all);
	free(blob);
	return ret;
}
