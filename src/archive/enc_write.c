/*
 * Sealing an archive as the codec writes it (cb_encarchive.h,
 * cb_enc_writer): the codec's sink hands its new bytes here, each segment
 * becomes one frame of the encrypted archive; a segment copied from the
 * previous encrypted archive is that archive's frame, cloned, never
 * decrypted to a file nor sealed again.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "cb_codec.h"
#include "cb_reuse.h"
#include "cb_reuse_trust.h"
#include "cb_sink.h"
#include "enc_int.h"
#include "cb_util.h"

struct cb_enc_writer {
	const struct cb_enckey *k;
	char *out_path;
	struct cb_sink *plain;         /* the codec's: the plain stream, no file */
	struct cb_sink *out;           /* OUT.tmp */
	int segmented, head_done;
	/* the codec emits (on_bytes, on_segment) on its worker's thread while
	 * lookup runs on the caller's */
	pthread_mutex_t mu;
	unsigned char *pend;           /* new plain bytes not yet in a frame */
	size_t pend_len, pend_cap;
	uint64_t pend_off;             /* the plain offset of pend's first */
	struct enc_frame *f;
	size_t n, cap;
	uint64_t copied;
	/* the previous archive: its frames, its plain catalog */
	char *prev;
	int prev_fd;
	struct enc_idx px;
	struct enc_frame *by_id;       /* its frames sorted by unit id */
	struct cb_reuse *reuse;
	struct cb_trust_map *map;      /* OUT's SHA-256 states of prev */
	/* the frame the last lookup found: ciphertext, plaintext */
	const struct enc_frame *found;
	unsigned char *cbuf, *pbuf;
	size_t bcap;
};

static const char *base(const char *path)
{
	const char *s = strrchr(path, '/');
	return s ? s + 1 : path;
}

static int cmp_id(const void *a, const void *b)
{
	return memcmp(((const struct enc_frame *)a)->id, ((const struct enc_frame *)b)->id, CB_ENC_ID);
}

/* prev under k, its catalog sound and naming it: its frames, a reuse of
 * its plain catalog, its bytes open. 0, or -1 with *why. */
static int open_prev(struct cb_enc_writer *w, const char *prev, const char **why)
{
	unsigned char *blob = NULL, *copy;
	const unsigned char *idx;
	char *name;
	size_t len = 0, n;
	struct stat st;

	if (enc_open_catalog(w->k, prev, &w->px, &blob, &len) < 0) {
		*why = cb_last_error();
		goto fail;
	}
	if (!(idx = enc_blob_get(blob, len, ENC_T_IDX, &n))) {
		*why = "it has no plain catalog";
		goto fail;
	}
	w->prev_fd = cb_open_regular(prev, 0, "", &st);
	if (w->prev_fd < 0 || (uint64_t)st.st_size != w->px.enc_size) {
		*why = "it is not a regular file or not the size its catalog says";
		goto fail;
	}
	copy = cb_xmalloc(n);
	memcpy(copy, idx, n);
	name = cb_xasprintf("%.*s", (int)(strlen(base(prev)) - strlen(CB_ENC_SUFFIX)), base(prev));
	w->reuse = cb_reuse_from_idx(copy, n, w->px.plain_size, name, why);
	free(name);
	if (!w->reuse)
		goto fail;
	OPENSSL_cleanse(blob, len);
	free(blob);
	w->prev = cb_xstrdup(prev);
	w->by_id = cb_xmalloc((w->px.n + 1) * sizeof(*w->by_id));
	memcpy(w->by_id, w->px.f, w->px.n * sizeof(*w->by_id));
	qsort(w->by_id, w->px.n, sizeof(*w->by_id), cmp_id);
	return 0;
fail:
	if (blob)
		OPENSSL_cleanse(blob, len);
	free(blob);
	return -1;
}

static int on_bytes(void *ctx, const void *buf, size_t len);

int cb_enc_writer_open(const struct cb_enckey *k, const char *out, const char *prev,
		       enum cb_compress codec, struct cb_enc_writer **wp, const char **why)
{
	struct cb_enc_writer *w;

	*wp = NULL;
	*why = "";
	if (enc_names_taken(out) < 0)
		return -1;
	w = cb_xcalloc(1, sizeof(*w));
	w->k = k;
	w->out_path = cb_xstrdup(out);
	w->prev_fd = -1;
	w->segmented = codec != CB_COMPRESS_NONE;
	pthread_mutex_init(&w->mu, NULL);
	if (cb_sink_open_file(&w->out, out) < 0) {
		cb_enc_writer_free(w);
		return -1;
	}
	/* the plain stream needs no SHA-256 of its own: every frame has its
	 * tag (a view makes the plain .sha256 as it decrypts) */
	cb_sink_open_split(&w->plain, base(out), on_bytes, w);
	cb_sink_set_checksum(w->plain, 0);
	if (prev && open_prev(w, prev, why) < 0) {
		enc_idx_release(&w->px);
		if (w->prev_fd >= 0)
			close(w->prev_fd);
		w->prev_fd = -1;
	}
	*wp = w;
	return 0;
}

struct cb_sink *cb_enc_writer_sink(struct cb_enc_writer *w)
{
	return w->plain;
}

const struct cb_reuse *cb_enc_writer_prev(const struct cb_enc_writer *w)
{
	return w->reuse;
}

/* ---- frames ---- */

static void add_frame(struct cb_enc_writer *w, uint64_t p_off, uint64_t p_len, uint64_t e_off,
		      const unsigned char *id, const unsigned char *sha)
{
	struct enc_frame *f;

	if (w->n == w->cap)
		w->f = cb_xrealloc(w->f, (w->cap = w->cap ? 2 * w->cap : 256) * sizeof(*w->f));
	f = &w->f[w->n++];
	*f = (struct enc_frame){ p_off, p_len, e_off, enc_frame_size(p_len), { 0 }, { 0 } };
	memcpy(f->id, id, CB_ENC_ID);
	memcpy(f->sha, sha, 32);
}

/* The archive header, before the first frame: copied from prev when it
 * is the same (OUT then starts as prev does: its SHA-256 resumes). */
static int put_head(struct cb_enc_writer *w)
{
	unsigned char h[ENC_HEAD] = { 0 }, had[ENC_HEAD];

	if (w->head_done)
		return 0;
	w->head_done = 1;
	memcpy(h, ENC_MAGIC, 8);
	enc_put32(h + 8, ENC_VERSION);
	enc_put32(h + 12, ENC_CIPHER_AES256GCM);
	memcpy(h + 16, w->k->fp, CB_ENC_FP);
	if (w->prev_fd >= 0 && cb_pread_all(w->prev_fd, had, sizeof(had), 0) == 0 &&
	    !memcmp(had, h, sizeof(h)))
		return cb_sink_copy(w->out, w->prev_fd, 0, sizeof(h), h);
	return cb_sink_write(w->out, h, sizeof(h)) < 0 ? -1 : cb_sink_mark(w->out);
}

/* prev's frame with this id and length, or NULL. */
static const struct enc_frame *prev_frame(const struct cb_enc_writer *w, const unsigned char *id,
					  uint64_t p_len)
{
	struct enc_frame key;
	const struct enc_frame *f;

	if (!w->by_id)
		return NULL;
	memcpy(key.id, id, CB_ENC_ID);
	f = bsearch(&key, w->by_id, w->px.n, sizeof(key), cmp_id);
	return f && f->p_len == p_len ? f : NULL;
}

/* p_len new plain bytes at plain offset p_off: sealed as the next frame;
 * dig: their SHA-256 (the codec's segment digest), NULL: computed. Bytes
 * outside the segments (all of an uncompressed archive's) are cut the
 * same each night: when prev has their frame, it is cloned, checked
 * against the frame just sealed (the same id under one key is the same
 * frame, byte for byte). */
static int seal_frame(struct cb_enc_writer *w, const unsigned char *p, uint64_t p_len,
		      uint64_t p_off, const unsigned char *dig)
{
	unsigned char id[CB_ENC_ID], sha[32], *fr;
	uint64_t at, len = enc_frame_size(p_len);
	const struct enc_frame *had;
	int ret;

	if (put_head(w) < 0 ||
	    (dig ? cb_enc_unit_id_sha(w->k, dig, id) : cb_enc_unit_id(w->k, p, p_len, id)) < 0 ||
	    !(fr = enc_frame_make(w->k, id, p, p_len)))
		return -1;
	at = cb_sink_bytes(w->out);
	SHA256(fr, len, sha);
	had = dig ? NULL : prev_frame(w, id, p_len);
	if (had)
		ret = cb_sink_copy(w->out, w->prev_fd, had->e_off, len, fr);
	else
		ret = cb_sink_write(w->out, fr, len) < 0 || cb_sink_mark(w->out) < 0 ? -1 : 0;
	w->copied += had && ret == 0;
	free(fr);
	if (ret == 0)
		add_frame(w, p_off, p_len, at, id, sha);
	return ret;
}

/* The pending bytes before plain offset upto: a frame of their own (the
 * lzop header; the zstd seek table). */
static int pending_before(struct cb_enc_writer *w, uint64_t upto)
{
	size_t k = (size_t)(upto - w->pend_off);

	if (upto < w->pend_off || k > w->pend_len)
		return cb_error("encryption: a segment starts outside the bytes written");
	if (k == 0)
		return 0;
	if (seal_frame(w, w->pend, k, w->pend_off, NULL) < 0)
		return -1;
	memmove(w->pend, w->pend + k, w->pend_len - k);
	w->pend_len -= k;
	w->pend_off = upto;
	return 0;
}

static int on_bytes(void *ctx, const void *buf, size_t len)
{
	struct cb_enc_writer *w = ctx;
	int rc = 0;

	pthread_mutex_lock(&w->mu);
	if (w->pend_len + len > w->pend_cap) {
		w->pend_cap = (w->pend_len + len) * 2;
		w->pend = cb_xrealloc(w->pend, w->pend_cap);
	}
	memcpy(w->pend + w->pend_len, buf, len);
	w->pend_len += len;
	while (rc == 0 && !w->segmented && w->pend_len >= ENC_PLAIN_CUT)
		rc = pending_before(w, w->pend_off + ENC_PLAIN_CUT);
	pthread_mutex_unlock(&w->mu);
	return rc;
}

/* A segment the codec copied: the frame the lookup found for it, cloned
 * and read back (cb_sink_copy) against the bytes whose tag held. */
static int put_copy(struct cb_enc_writer *w, const struct cb_codec_seg *g)
{
	const struct enc_frame *f = w->found;

	w->found = NULL;
	if (!f || f->p_len != g->c_len)
		return cb_error("encryption: a copied segment has no frame of the previous archive");
	if (put_head(w) < 0)
		return -1;
	add_frame(w, g->c_off, g->c_len, cb_sink_bytes(w->out), f->id, f->sha);
	if (cb_sink_copy(w->out, w->prev_fd, f->e_off, f->e_len, w->cbuf) < 0)
		return -1;
	w->copied++;
	w->pend_off = g->c_off + g->c_len;
	return 0;
}

static int on_segment(void *ctx, const struct cb_codec_seg *g, int copied)
{
	struct cb_enc_writer *w = ctx;
	int rc;

	/* without a checksum the sink keeps a segment's last bytes at its
	 * end: they come to on_bytes first */
	if (cb_sink_flush(w->plain) < 0)
		return -1;
	pthread_mutex_lock(&w->mu);
	rc = pending_before(w, g->c_off);
	if (rc == 0 && copied)
		rc = put_copy(w, g);
	else if (rc == 0 && w->pend_len != g->c_len)
		rc = cb_error("encryption: segment of %llu bytes, %zu written",
			      (unsigned long long)g->c_len, w->pend_len);
	else if (rc == 0) {
		rc = seal_frame(w, w->pend, g->c_len, g->c_off, g->cdig);
		w->pend_len = 0;
		w->pend_off = g->c_off + g->c_len;
	}
	pthread_mutex_unlock(&w->mu);
	return rc;
}

static int cmp_p_off(const void *key, const void *elem)
{
	uint64_t k = *(const uint64_t *)key, o = ((const struct enc_frame *)elem)->p_off;

	return k < o ? -1 : k > o;
}

/* cb_codec_lookup_fn: the previous catalog's segment with this key, if
 * the previous archive has it as one frame of the same unit id whose tag
 * holds; its plaintext given to the codec (checked there by the CRC-32s,
 * or decoded against the data read), its ciphertext kept for put_copy. */
static int lookup(void *ctx, const unsigned char *key, uint64_t u_len, struct cb_codec_reuse_src *src)
{
	struct cb_enc_writer *w = ctx;
	const struct enc_frame *f;
	unsigned char id[CB_ENC_ID];

	w->found = NULL;
	if (!cb_reuse_lookup(w->reuse, key, u_len, src) ||
	    !(f = bsearch(&src->c_off, w->px.f, w->px.n, sizeof(*f), cmp_p_off)) ||
	    f->p_len != src->c_len || cb_enc_unit_id_sha(w->k, src->cdig, id) < 0 ||
	    memcmp(id, f->id, CB_ENC_ID))
		return 0;
	if (f->e_len > w->bcap) {
		w->bcap = f->e_len;
		w->cbuf = cb_xrealloc(w->cbuf, w->bcap);
		w->pbuf = cb_xrealloc(w->pbuf, w->bcap);
	}
	if (enc_open_frame(w->k, w->prev_fd, f, (uint64_t)(f - w->px.f), w->cbuf, w->pbuf, w->prev,
			   0) < 0)
		return 0;   /* damaged: compressed and sealed anew */
	src->bytes = w->pbuf;
	src->authentic = 1;
	w->found = f;
	return 1;
}

void cb_enc_writer_attach(struct cb_enc_writer *w, struct cb_codec_writer *codec)
{
	if (w->reuse)
		cb_codec_set_reuse(codec, -1, lookup, w);   /* lookup gives the bytes */
	cb_codec_set_seg_fn(codec, on_segment, w);
}

/* ---- SHA-256 states ---- */

/* The SHA-256 (hex) of FILE's bytes, as its .sha256 would say. */
static int file_sha256(const char *path, char hex[65])
{
	unsigned char *b, d[32];
	size_t len;

	if (enc_read_file(path, &b, &len) < 0)
		return -1;
	SHA256(b, len, d);
	free(b);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	return 0;
}

void cb_enc_writer_resume(struct cb_enc_writer *w, const char *enc_trust)
{
	const struct cb_sink_state *v;
	char *ipath, hex[65];
	const char *why;
	size_t m;

	if (!w->reuse)
		return;
	ipath = cb_xasprintf("%s.idx", w->prev);
	if (enc_trust && file_sha256(ipath, hex) == 0)
		w->map = cb_trust_map_load(enc_trust, base(w->prev), hex, &why);
	free(ipath);
	if (w->map && (v = cb_trust_map_states(w->map, &m)))
		cb_sink_resume(w->out, w->prev_fd, v, m);
}

/* ---- the end ---- */

/* OUT's states for the next night, naming OUT and its catalog; a
 * failure costs the next night a SHA-256 pass, nothing else. */
static void save_states(struct cb_enc_writer *w, const char *enc_trust, const char *idx_hex)
{
	const struct cb_sink_state *v;
	size_t n;

	if (!enc_trust)
		return;
	unlink(enc_trust);
	v = cb_sink_states(w->out, &n);
	if (n)
		cb_trust_map_save(enc_trust, base(w->out_path), idx_hex, NULL, 0, v, n);
}

int cb_enc_writer_finish(struct cb_enc_writer *w, const char *plain, const char *enc_trust,
			 struct cb_enc_seal_stats *st)
{
	uint64_t p_size = cb_sink_bytes(w->plain);
	char idx_hex[65];

	memset(st, 0, sizeof(*st));
	if (cb_sink_prepare(w->plain) < 0 || pending_before(w, w->pend_off + w->pend_len) < 0 ||
	    put_head(w) < 0 || cb_sink_prepare(w->out) < 0)
		return -1;
	if (enc_write_catalog(w->k, w->f, w->n, cb_sink_bytes(w->out), plain, w->out_path, p_size,
			      idx_hex) < 0 ||
	    enc_write_sums(w->out_path, cb_sink_sha256(w->out), idx_hex) < 0 ||
	    cb_sink_commit(w->out) < 0) {
		enc_remove_outputs(w->out_path, NULL);
		return -1;
	}
	save_states(w, enc_trust, idx_hex);
	st->frames = w->n;
	st->frames_copied = w->copied;
	st->bytes = cb_sink_bytes(w->out);
	st->resumed = cb_sink_resumed_bytes(w->out);
	snprintf(st->sha256, sizeof(st->sha256), "%s", cb_sink_sha256(w->out));
	return 0;
}

void cb_enc_writer_free(struct cb_enc_writer *w)
{
	if (!w)
		return;
	cb_sink_free(w->out);
	cb_sink_free(w->plain);
	cb_reuse_free(w->reuse);
	cb_trust_map_free(w->map);
	enc_idx_release(&w->px);
	if (w->prev_fd >= 0)
		close(w->prev_fd);
	if (w->pend)
		OPENSSL_cleanse(w->pend, w->pend_cap);
	if (w->pbuf)
		OPENSSL_cleanse(w->pbuf, w->bcap);
	free(w->pend);
	free(w->pbuf);
	free(w->cbuf);
	free(w->f);
	free(w->by_id);
	free(w->prev);
	free(w->out_path);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
