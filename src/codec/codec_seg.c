/*
 * Segments of the tar stream (include/cb_codec.h): where they are cut,
 * the key of each one, and whether it is compressed (its bytes and hints
 * replayed into the codec, codec.c) or copied from a previous archive.
 *
 * A segment is gathered whole before the codec sees any of it, so that the
 * choice is made before any CPU is spent on it, and so that the codec sees
 * the same calls whatever the archive writer's read sizes were: its bytes
 * are a function of the segment's bytes, its hints and the settings alone.
 *
 * One idea in 600 lines: a segment's life, cut, keyed, then compressed or
 * copied; its parts share the segment's state and are read in that order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <lzo/lzo1x.h>
#include <openssl/evp.h>
#include <zlib.h>
#include <zstd.h>

#include "cb_codec.h"
#include "cb_sink.h"
#include "cb_util.h"
#include "codec_int.h"

/* A member's path ends a segment 1 time in HIT_MASK + 1. */
#define HIT_MASK 31u

enum ev_type { EV_HINT, EV_FILE };

struct seg_ev {
	uint64_t at, n;
	enum ev_type type;
	enum cb_data_kind kind;
};

struct cb_seg_state {
	unsigned char *buf;              /* NULL: to be had from the codec */
	size_t len, cap;                 /* cap: the hard cut, 2 * unit_size */
	int lent;                        /* buf is the codec's (wops->seg_buf) */
	struct seg_ev *ev;
	size_t n_ev, cap_ev;
	EVP_MD_CTX *bytes_sha, *ev_sha;
	unsigned char settings[96];
	size_t settings_len;
	uint64_t start;                  /* stream offset of buf[0] */
	size_t min_store;                /* the codec's, for the hint mirror */
	/* the hint as codec.c will hold it after these bytes (cb_codec_inner_hint) */
	enum cb_data_kind kind;
	uint64_t left;
	/* the cut rule */
	int grid;                        /* in a member's data, or a stream without members */
	uint64_t grid_origin;
	int grid_cut;                    /* a cut fell in the current member's data */
	int prev_hit;
	/* copying */
	int src_fd;
	cb_codec_lookup_fn *lookup;
	void *lookup_ctx;
	int reuse_off;
	char note[512];
	unsigned char *cbuf;
	size_t ccap;
	/* the segment fetched: cbuf, or the lookup's bytes as they are */
	const unsigned char *cdata;
	uint32_t *ucrc;             /* the CRC-32 of each unit in cdata (fetch) */
	size_t ucap;
	uint64_t reused, reused_bytes, reused_cbytes, compressed, compressed_bytes;
	uint64_t checked_by_crc;    /* reused segments checked by unit CRC-32s */
	struct seg_trust trust;          /* codec_trust.c */
};

static size_t seg_room(const struct cb_codec_writer *w);

/* The buffer the segment is gathered in: the codec's, if it takes
 * segments over (then replaying one copies nothing), else our own. NULL
 * on an error (said). */
static unsigned char *seg_buf(struct cb_codec_writer *w)
{
	struct cb_seg_state *s = w->seg;

	if (!s->buf && !(s->buf = w->ops->seg_buf(w->st)))
		w->failed = 1;
	return s->buf;
}

static EVP_MD_CTX *sha_new(void)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();

	if (!c || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
		fputs("cbackup: cannot initialise SHA-256\n", stderr);
		abort();
	}
	return c;
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* What else the compressed bytes depend on: the codec, its settings, the
 * library that compresses, and this code's version of the rules. */
static void settings_tag(struct cb_seg_state *s, const struct cb_codec_params *p, uint64_t unit)
{
	int n = snprintf((char *)s->settings, sizeof(s->settings),
			 "cbseg1 %d %d %d %d %llu %u %s %x", (int)p->type, (int)p->policy, p->level,
			 p->type == CB_COMPRESS_GZIP && p->threads == 0, (unsigned long long)unit,
			 ZSTD_versionNumber(), zlibVersion(), (unsigned)lzo_version());

	s->settings_len = n > 0 && (size_t)n < sizeof(s->settings) ? (size_t)n : sizeof(s->settings);
}

static void seg_begin(struct cb_seg_state *s)
{
	unsigned char st[17];

	EVP_DigestInit_ex(s->ev_sha, EVP_sha256(), NULL);
	/* the hint still running from the segment before */
	st[0] = 'S';
	put64(st + 1, (uint64_t)s->kind);
	put64(st + 9, s->left);
	EVP_DigestUpdate(s->ev_sha, st, sizeof(st));
	s->len = 0;
	s->n_ev = 0;
}

void cb_codec_seg_init(struct cb_codec_writer *w, const struct cb_codec_params *p)
{
	struct cb_seg_state *s;

	w->out.segs_closed = 0;
	if (w->type == CB_COMPRESS_NONE)
		return;
	s = cb_xcalloc(1, sizeof(*s));
	s->cap = (size_t)(2 * w->unit_size);
	s->lent = w->ops->seg_buf != NULL;
	s->buf = s->lent ? NULL : cb_xmalloc_pages(s->cap);
	s->bytes_sha = sha_new();
	s->ev_sha = sha_new();
	s->min_store = w->ops->min_store;
	s->src_fd = -1;
	s->grid = 1;                     /* until the first member is announced */
	settings_tag(s, p, w->unit_size);
	seg_begin(s);
	w->seg = s;
	w->out.seg_sha = sha_new();
}

void cb_codec_seg_free(struct cb_codec_writer *w)
{
	struct cb_seg_state *s = w->seg;

	if (w->out.seg_sha)
		EVP_MD_CTX_free(w->out.seg_sha);
	free(w->out.segs.v);
	if (!s)
		return;
	if (!s->lent)
		cb_free_huge(s->buf, s->cap);
	free(s->ev);
	free(s->cbuf);
	free(s->ucrc);
	seg_trust_free(&s->trust);
	EVP_MD_CTX_free(s->bytes_sha);
	EVP_MD_CTX_free(s->ev_sha);
	free(s);
}

void cb_codec_set_reuse(struct cb_codec_writer *w, int fd, cb_codec_lookup_fn *lookup, void *ctx)
{
	if (!w->seg)
		return;
	w->seg->src_fd = fd;
	w->seg->lookup = lookup;
	w->seg->lookup_ctx = ctx;
}

void cb_codec_set_seg_fn(struct cb_codec_writer *w, cb_codec_seg_fn *fn, void *ctx)
{
	w->out.seg_fn = fn;
	w->out.seg_ctx = ctx;
}

void cb_codec_set_trust(struct cb_codec_writer *w, cb_codec_trust_fn *fn, void *ctx)
{
	if (!w->seg)
		return;
	seg_trust_init(&w->seg->trust);
	w->seg->trust.on = 1;
	w->seg->trust.fn = fn;
	w->seg->trust.ctx = ctx;
}

int cb_codec_piece(struct cb_codec_writer *w, const unsigned char *tok, int fd, uint64_t off,
		   uint64_t len)
{
	struct cb_seg_state *s = w->seg;

	if (!s || w->failed || w->finished || len > seg_room(w))
		return 0;
	return seg_trust_piece(&s->trust, s->len, tok, fd, off, len);
}

int cb_codec_keep_fd(struct cb_codec_writer *w, int fd)
{
	return w->seg ? seg_trust_keep_fd(&w->seg->trust, fd) : 0;
}

const struct cb_codec_trust *cb_codec_writer_trust(const struct cb_codec_writer *w, size_t *n)
{
	*n = w->seg && w->finished ? w->seg->trust.n_rec : 0;
	return *n ? w->seg->trust.rec : NULL;
}

const char *cb_codec_reuse_note(const struct cb_codec_writer *w)
{
	return w->seg && w->seg->note[0] ? w->seg->note : NULL;
}

const struct cb_codec_segs *cb_codec_writer_segs(const struct cb_codec_writer *w)
{
	const struct cb_codec_out *o = &w->out;

	if (!w->seg || !w->finished || o->segs_closed != o->segs.n)
		return NULL;
	return &o->segs;
}

/* ---- the cut rule ---- */

static int path_hit(const char *path)
{
	size_t n;
	uint64_t h = 1469598103934665603ull;

	if (path[0] == '.' && path[1] == '/')
		path += 2;
	n = strlen(path);
	while (n > 0 && path[n - 1] == '/')
		n--;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)path[i]) * 1099511628211ull;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return (h & HIT_MASK) == 0;
}

/* Bytes the segment may still take before a cut. */
static size_t seg_room(const struct cb_codec_writer *w)
{
	const struct cb_seg_state *s = w->seg;
	size_t room = s->cap - s->len;

	if (s->grid) {
		uint64_t g = w->unit_size - (s->start + s->len - s->grid_origin) % w->unit_size;

		if (g < room)
			room = (size_t)g;
	}
	return room;
}

static void add_event(struct cb_seg_state *s, enum ev_type type, enum cb_data_kind kind, uint64_t n)
{
	if (s->n_ev == s->cap_ev) {
		s->cap_ev = s->cap_ev ? 2 * s->cap_ev : 64;
		s->ev = cb_xrealloc(s->ev, s->cap_ev * sizeof(*s->ev));
	}
	s->ev[s->n_ev++] = (struct seg_ev){ s->len, n, type, kind };
	if (type == EV_HINT) {
		unsigned char r[25];

		r[0] = 'H';
		put64(r + 1, s->len);
		put64(r + 9, (uint64_t)kind);
		put64(r + 17, n);
		EVP_DigestUpdate(s->ev_sha, r, sizeof(r));
	}
}

/* ---- compress or copy ---- */

static int replay(struct cb_codec_writer *w)
{
	struct cb_seg_state *s = w->seg;
	size_t pos = 0;

	w->unit_end_at = w->chunked + w->cm.len + s->len;
	for (size_t i = 0; i < s->n_ev; i++) {
		const struct seg_ev *e = &s->ev[i];

		if (e->at > pos && cb_codec_inner_write(w, s->buf + pos, (size_t)(e->at - pos)) < 0)
			return -1;
		pos = (size_t)e->at;
		if (e->type == EV_FILE)
			cb_codec_inner_begin_file(w);
		else if (cb_codec_inner_hint(w, e->kind, e->n) < 0)
			return -1;
	}
	if (pos < s->len && cb_codec_inner_write(w, s->buf + pos, s->len - pos) < 0)
		return -1;
	s->compressed++;
	s->compressed_bytes += s->len;
	return 0;
}

/* What the checked bytes hold is this segment's own bytes (the catalog
 * they were checked by may be forged, its digests made to hold): decoded
 * and compared. A segment taken on trust has data not read: its catalog
 * is the one its trust map (cbackup's own) names, so the SHA-256 there
 * vouches for the bytes, not a CRC-32 anyone can forge. 1 sound, 0 not. */
static int confirm(struct cb_seg_state *s, enum cb_compress type,
		   const struct cb_codec_reuse_src *src, uint64_t u_len)
{
	unsigned char dig[CB_SEG_KEY];

	if (s->trust.deferred == 0)
		return cb_codec_decodes_to(type, s->cdata, (size_t)src->c_len, s->buf, (size_t)u_len);
	if (!src->unit_crcs || src->authentic)
		return 1;   /* fetch checked the SHA-256, or the lookup its tag */
	EVP_Digest(s->cdata, (size_t)src->c_len, dig, NULL, EVP_sha256(), NULL);
	return memcmp(dig, src->cdig, CB_SEG_KEY) == 0;
}

/* The previous archive's segment, read and checked: 1, or 0 (a note says
 * why copying stops). */
static int fetch(struct cb_seg_state *s, enum cb_compress type, const struct cb_codec_reuse_src *src,
		 uint64_t u_len)
{
	unsigned char dig[CB_SEG_KEY];
	uint64_t pu = 0, pc = 0;
	int bad = src->n_units == 0 || src->c_len == 0 || src->c_len > 4 * (uint64_t)s->cap;

	for (size_t i = 0; !bad && i < src->n_units; i++) {
		const struct cb_codec_unit *u = &src->units[i];

		bad = i == 0 ? (u->u_off || u->c_off)
			     : (u->u_off <= pu || u->c_off <= pc || u->u_off >= u_len || u->c_off >= src->c_len);
		pu = u->u_off;
		pc = u->c_off;
	}
	if (!bad && !src->bytes && src->c_len > s->ccap) {
		free(s->cbuf);
		s->ccap = (size_t)src->c_len;
		s->cbuf = cb_xmalloc(s->ccap);
	}
	s->cdata = src->bytes ? src->bytes : s->cbuf;
	if (!bad && !src->bytes && cb_pread_all(s->src_fd, s->cbuf, (size_t)src->c_len, src->c_off) < 0)
		bad = 1;
	if (!bad && src->n_units > s->ucap) {
		s->ucap = src->n_units;
		s->ucrc = cb_xrealloc(s->ucrc, s->ucap * sizeof(*s->ucrc));
	}
	/* each unit's CRC-32 (the new catalog's too: try_copy) is checked
	 * against the catalog's where those cover the segment exactly (CRC-32
	 * runs at memory speed; the SHA-256 of every copied byte cost a sixth
	 * of a night's CPU), else the segment by its SHA-256: either way every
	 * byte copied is checked first */
	for (size_t i = 0; !bad && i < src->n_units; i++) {
		uint64_t c = src->units[i].c_off;
		uint64_t end = i + 1 < src->n_units ? src->units[i + 1].c_off : src->c_len;

		s->ucrc[i] = cb_crc32(0, s->cdata + c, (size_t)(end - c));
		bad = src->unit_crcs && s->ucrc[i] != src->units[i].crc;
	}
	if (!bad && !src->unit_crcs && !src->authentic) {
		EVP_Digest(s->cdata, (size_t)src->c_len, dig, NULL, EVP_sha256(), NULL);
		bad = memcmp(dig, src->cdig, CB_SEG_KEY) != 0;
	}
	if (!bad && confirm(s, type, src, u_len)) {
		s->checked_by_crc += src->unit_crcs;
		return 1;
	}
	snprintf(s->note, sizeof(s->note),
		 bad ? "previous archive '%s' damaged at compressed offset %llu: compressing the rest"
		     : "previous archive '%s' does not hold what its catalog says at compressed "
		       "offset %llu: compressing the rest",
		 src->name, (unsigned long long)src->c_off);
	s->reuse_off = 1;
	return 0;
}

/* Copy the segment from the previous archive: 1 copied, 0 not there (or
 * not sound), -1 error. */
static int try_copy(struct cb_codec_writer *w, const unsigned char *key)
{
	struct cb_seg_state *s = w->seg;
	struct cb_codec_out *o = &w->out;
	struct cb_codec_reuse_src src;
	struct cb_codec_seg *g;

	if (!s->lookup || s->reuse_off || !w->ops->sync)
		return 0;
	memset(&src, 0, sizeof(src));
	if (!s->lookup(s->lookup_ctx, key, s->len, &src) || !fetch(s, w->type, &src, s->len))
		return 0;
	if (w->ops->sync(w->st) < 0 || cb_sink_copy(o->sink, s->src_fd, src.c_off, src.c_len, s->cdata) < 0)
		return -1;
	for (size_t i = 0; i < src.n_units; i++) {
		uint64_t c = src.units[i].c_off;
		uint64_t end = i + 1 < src.n_units ? src.units[i + 1].c_off : src.c_len;

		cb_codec_units_add(&o->units, o->u_done + src.units[i].u_off, o->bytes_out + c);
		cb_codec_units_sum_crc(&o->units, s->ucrc[i], (size_t)(end - c));
	}
	g = &o->segs.v[o->segs_closed++];
	g->c_off = o->bytes_out;
	g->c_len = src.c_len;
	memcpy(g->cdig, src.cdig, CB_SEG_KEY);
	o->bytes_out += src.c_len;
	o->u_done += s->len;
	o->seg_c0 = o->bytes_out;
	/* the codec stands where it would after compressing the segment */
	w->chunked += s->len;
	w->unit_end_at = w->chunked;
	w->hint_kind = s->kind;
	w->hint_left = s->left;
	for (size_t i = 0; i < s->n_ev; i++)
		if (s->ev[i].type == EV_FILE)
			cb_codec_inner_begin_file(w);
	s->reused++;
	s->reused_bytes += s->len;
	s->reused_cbytes += src.c_len;
	return o->seg_fn && o->seg_fn(o->seg_ctx, g, 1) < 0 ? -1 : 1;
}

/* The segment's key: SHA-256 over the settings, its hints (evd) and the
 * digest and length of its bytes (all in the buffer by now). */
static void seg_key(struct cb_seg_state *s, const unsigned char *evd, unsigned char *key)
{
	unsigned char bd[CB_SEG_KEY], len[8];
	EVP_MD_CTX *k;

	EVP_DigestInit_ex(s->bytes_sha, EVP_sha256(), NULL);
	EVP_DigestUpdate(s->bytes_sha, s->buf, s->len);
	EVP_DigestFinal_ex(s->bytes_sha, bd, NULL);
	put64(len, s->len);
	k = sha_new();
	EVP_DigestUpdate(k, s->settings, s->settings_len);
	EVP_DigestUpdate(k, evd, CB_SEG_KEY);
	EVP_DigestUpdate(k, bd, sizeof(bd));
	EVP_DigestUpdate(k, len, sizeof(len));
	EVP_DigestFinal_ex(k, key, NULL);
	EVP_MD_CTX_free(k);
}

/* A segment with tokened data whose trust key maps: copied under the key
 * mapped, its deferred data never read. 1 copied, 0 not, -1 error. */
static int copy_on_trust(struct cb_codec_writer *w, struct cb_codec_seg *g, const unsigned char *tkey)
{
	struct cb_seg_state *s = w->seg;
	uint64_t unread = s->trust.deferred;
	int r;

	if (!s->trust.fn || !s->trust.fn(s->trust.ctx, tkey, s->len, g->key))
		return 0;
	r = try_copy(w, g->key);
	if (r == 1) {
		s->trust.segs++;
		s->trust.unread += unread;
	}
	return r;
}

/* The segment ends here: key it, copy or compress it, start the next. */
static int seg_end(struct cb_codec_writer *w)
{
	struct cb_seg_state *s = w->seg;
	struct cb_codec_out *o = &w->out;
	unsigned char evd[CB_SEG_KEY], tkey[CB_SEG_KEY];
	struct cb_codec_seg *g;
	int r = 0, tokened = s->trust.n > 0, replayed = 0;

	if (s->len == 0)
		return 0;
	EVP_DigestFinal_ex(s->ev_sha, evd, NULL);
	if (o->segs.n == o->segs.cap) {
		o->segs.cap = o->segs.cap ? 2 * o->segs.cap : 256;
		o->segs.v = cb_xrealloc(o->segs.v, o->segs.cap * sizeof(*o->segs.v));
	}
	g = &o->segs.v[o->segs.n++];
	memset(g, 0, sizeof(*g));
	g->u_off = s->start;
	g->u_len = s->len;
	if (tokened) {
		seg_trust_key(&s->trust, s->settings, s->settings_len, evd, s->buf, s->len, tkey);
		r = copy_on_trust(w, g, tkey);
	}
	if (r == 0 && seg_trust_fill(&s->trust, s->buf) < 0)
		r = -1;
	if (r == 0) {
		seg_key(s, evd, g->key);
		r = try_copy(w, g->key);
	}
	if (r == 0) {
		r = replay(w);
		replayed = r == 0;
	}
	seg_trust_reset(&s->trust);
	if (r < 0) {
		w->failed = 1;
		return -1;
	}
	if (tokened)
		seg_trust_record(&s->trust, tkey, g->key, s->len);
	s->start += s->len;
	if (replayed && s->lent)
		s->buf = NULL;   /* the codec's job has it now */
	else
		cb_pages_trim(s->buf, s->cap, s->cap / 2, s->len);
	seg_begin(s);
	return 0;
}

int cb_codec_seg_flush(struct cb_codec_writer *w)
{
	return seg_end(w);
}

/* ---- what the archive writer calls ---- */

int cb_codec_member(struct cb_codec_writer *w, const char *path)
{
	struct cb_seg_state *s = w->seg;
	uint64_t len;
	int cut, hit;

	if (!s || w->failed || w->finished)
		return w->failed ? -1 : 0;
	len = s->len;
	hit = path ? path_hit(path) : 0;
	cut = len > 0 && (s->grid_cut || (s->prev_hit && len >= w->unit_size / 4) ||
			  len >= w->unit_size);
	s->grid = 0;
	s->grid_cut = 0;
	s->prev_hit = hit;
	return cut ? seg_end(w) : 0;
}

int cb_codec_hint(struct cb_codec_writer *w, enum cb_data_kind kind, uint64_t nbytes)
{
	struct cb_seg_state *s = w->seg;

	/* codec.c's rules, mirrored: the hint the codec will hold */
	if (!s || w->policy == CB_POLICY_ALWAYS)
		return 0;
	if (kind != CB_DATA_UNKNOWN && nbytes < s->min_store)
		kind = CB_DATA_UNKNOWN;
	add_event(s, EV_HINT, kind, nbytes);
	s->kind = kind;
	s->left = nbytes;
	return 0;
}

void cb_codec_begin_file(struct cb_codec_writer *w)
{
	struct cb_seg_state *s = w->seg;

	if (!s) {
		w->file_id++;
		return;
	}
	add_event(s, EV_FILE, CB_DATA_UNKNOWN, 0);
	s->grid = 1;
	s->grid_origin = s->start + s->len;
	s->grid_cut = 0;
}

unsigned char *cb_codec_write_buffer(struct cb_codec_writer *w, size_t *avail)
{
	if (!w->seg || w->finished || w->failed || !seg_buf(w))
		return NULL;
	*avail = seg_room(w);
	return w->seg->buf + w->seg->len;
}

int cb_codec_write(struct cb_codec_writer *w, const void *buf, size_t len)
{
	struct cb_seg_state *s = w->seg;
	const unsigned char *p = buf;

	/* after a failure the message that says why is already set: keep it */
	if (w->failed)
		return -1;
	if (w->finished)
		return cb_error("codec: write after finish");
	w->bytes_in += len;
	cb_progress_update(w->progress, w->bytes_in);
	if (w->tap && w->tap(w->tap_ctx, buf, len) < 0)
		w->tap = NULL;
	if (!s)
		return cb_codec_out_write(&w->out, buf, len);
	while (len > 0) {
		size_t room = seg_room(w), k = len < room ? len : room;

		if (!seg_buf(w))
			return -1;
		/* bytes read in place (cb_codec_write_buffer) are already there */
		if (p != s->buf + s->len)
			memcpy(s->buf + s->len, p, k);
		s->left -= s->left < k ? s->left : k;
		s->len += k;
		p += k;
		len -= k;
		if (k < room)
			continue;
		if (s->grid && s->len < s->cap)
			s->grid_cut = 1;
		if (seg_end(w) < 0)
			return -1;
	}
	return 0;
}

void cb_codec_seg_stats(const struct cb_codec_writer *w, struct cb_codec_stats *st)
{
	const struct cb_seg_state *s = w->seg;

	if (!s)
		return;
	st->segs_reused = s->reused;
	st->segs_reused_bytes = s->reused_bytes;
	st->segs_reused_archive_bytes = s->reused_cbytes;
	st->segs_checked_crc = s->checked_by_crc;
	st->segs_compressed = s->compressed;
	st->segs_compressed_bytes = s->compressed_bytes;
	st->segs_trusted = s->trust.segs;
	st->trusted_unread_bytes = s->trust.unread;
}
