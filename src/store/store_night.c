/*
 * A night written to a unit store (include/cb_store.h): the codec writes
 * into a sink that hands every new byte here; where a segment ends, its
 * bytes become one unit (named by their SHA-256, the segment's digest),
 * written unless the store has it. A segment whose key the previous
 * night's catalog holds, and whose unit the store has, is copied: its
 * bytes are read from the store (checked by the codec as any copy) to
 * keep the archive's SHA-256 whole, never compressed nor written again.
 * Bytes outside every segment (the lzop header, the zstd seek table) are
 * units of their own. The manifest goes last.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "cb_cleanup.h"
#include "cb_objstore_upload.h"
#include "cb_reuse.h"
#include "cb_store.h"
#include "cb_unit_cache.h"
#include "cb_util.h"

/* a stream without segments (compress none) is cut every so many bytes */
#define PLAIN_UNIT (4u << 20)

struct cb_store_night {
	struct cb_objstore *s;
	char *name;
	char *mark;                      /* marks/night/NAME while it runs */
	struct cb_sink *sink;
	struct cb_store_set have;        /* in the store (one listing), and put since */
	struct cb_reuse **reuse;         /* catalogs of nights the store has */
	size_t n_reuse;
	int own;                         /* reuse[0] is the guest's previous night */
	char *prev;
	int segmented;
	struct cb_s3_buf unit;           /* the bytes of the unit handed to the codec */
	/* the units handed to the codec, and those the store lists that would
	 * not read: one the codec compresses after all was a bad copy, and the
	 * bytes it compressed are written over it. A set, not the last one
	 * asked: the codec asks ahead of the segments its pool still works on */
	struct cb_store_set asked;
	/* the codec calls on_bytes and on_segment on the thread that emits
	 * (gzip's worker) while lookup runs on its caller's */
	pthread_mutex_t mu;
	struct cb_s3_buf pend;           /* new bytes not yet in a unit */
	uint64_t pend_off;               /* the archive offset of pend's first */
	struct cb_store_ref *units;
	size_t n_units, cap_units;
	struct cb_store_night_stats st;
	struct cb_upload_pool *up;       /* the units' writers */
	const struct cb_enckey *key;     /* the store's: units and manifest sealed */
	struct cb_store_objmap objs;     /* with a key: each object's clear record */
	struct cb_unit_cache *cache;     /* the units on the local tmpdir, or NULL */
};

static void add_ref(struct cb_store_night *n, const struct cb_store_ref *r)
{
	if (n->n_units == n->cap_units) {
		n->cap_units = n->cap_units ? 2 * n->cap_units : 256;
		n->units = cb_xrealloc(n->units, n->cap_units * sizeof(*n->units));
	}
	n->units[n->n_units] = *r;
	n->units[n->n_units].sha[0] = 0;
	n->units[n->n_units++].key = n->key;
	n->st.units++;
}

/* The digest a unit's object is named by: its SHA-256 d, or with a key
 * its keyed id (a unit under another key, or plain, is another object). */
static int name_dig(const struct cb_store_night *n, const unsigned char *d, unsigned char *nd)
{
	if (!n->key) {
		memcpy(nd, d, 32);
		return 0;
	}
	return cb_enc_unit_id_sha(n->key, d, nd);
}

/* What goes into the store for len bytes p (SHA-256 d): a copy of them,
 * or with a key their sealed frame, its clear record kept; name: the
 * object's. 0 or -1. */
static int object_for(struct cb_store_night *n, const unsigned char *p, size_t len,
		      const unsigned char *d, unsigned char **obj, size_t *olen, char *name)
{
	struct cb_store_ref rec;
	char hex[65];

	if (!n->key) {
		*obj = cb_xmalloc(len);
		memcpy(*obj, p, len);
		*olen = len;
		cb_store_hex(d, hex);
		cb_store_unit_name(hex, name);
		return 0;
	}
	if (cb_store_seal_unit(n->key, p, len, d, obj, olen, &rec) < 0)
		return -1;
	cb_store_objmap_add(&n->objs, &rec);
	cb_store_unit_name(rec.hex, name);
	return 0;
}

/* A unit the store has: its clear record for the manifest (a sealed unit
 * is the same frame every time: sealing it again gives it). */
static int note_present(struct cb_store_night *n, const unsigned char *p, size_t len,
			const unsigned char *d)
{
	unsigned char nd[32], *f;
	char hex[65], name[80];
	size_t fl;

	if (name_dig(n, d, nd) < 0)
		return -1;
	cb_store_hex(nd, hex);
	if (cb_store_objmap_find(&n->objs, hex))
		return 0;
	if (object_for(n, p, len, d, &f, &fl, name) < 0)
		return -1;
	free(f);
	return 0;
}

/* len bytes as the night's next unit; dig: their SHA-256 when known. */
static int put_unit(struct cb_store_night *n, const unsigned char *p, size_t len, const unsigned char *dig)
{
	struct cb_store_ref r;
	unsigned char d[32], nd[32], *copy;
	char name[80];
	size_t clen;
	int mend;

	if (len == 0)
		return 0;
	if (dig) {
		cb_store_hex(dig, r.hex);
		r.len = len;
		memcpy(d, dig, 32);
	} else {
		cb_store_ref_of(p, len, &r);
		cb_store_unhex(r.hex, d);
	}
	/* the codec compressed what the store's copy should have given: that
	 * copy is damaged, and these bytes mend it */
	mend = dig && cb_store_set_has(&n->asked, dig);
	if (name_dig(n, d, nd) < 0)
		return -1;
	if (n->cache)
		cb_unit_cache_put(n->cache, d, p, len, mend);
	if (mend || !cb_store_set_has(&n->have, nd)) {
		/* a new unit is put without a look-up before or a read-back
		 * after (its name says its bytes); a damaged one written over */
		if (object_for(n, p, len, d, &copy, &clen, name) < 0 ||
		    cb_upload_pool_put(n->up, name, copy, clen, mend ? 0 : CB_PUT_SAME_BYTES) < 0)
			return -1;
		n->st.written_units++;
		n->st.written_bytes += clen;
		cb_store_set_add(&n->have, nd);
	} else {
		if (n->key && note_present(n, p, len, d) < 0)
			return -1;
		n->st.present_units++;
		n->st.present_bytes += len;
	}
	add_ref(n, &r);
	return 0;
}

/* The pending bytes before archive offset upto: a unit of their own. */
static int put_pending_before(struct cb_store_night *n, uint64_t upto)
{
	size_t k = (size_t)(upto - n->pend_off);

	if (upto < n->pend_off || k > n->pend.len)
		return cb_error("unit store: a segment starts outside the bytes written");
	if (put_unit(n, n->pend.data, k, NULL) < 0)
		return -1;
	memmove(n->pend.data, n->pend.data + k, n->pend.len - k);
	n->pend.len -= k;
	n->pend_off = upto;
	return 0;
}

static int on_bytes(void *ctx, const void *buf, size_t len)
{
	struct cb_store_night *n = ctx;
	int rc = 0;

	pthread_mutex_lock(&n->mu);
	cb_s3_buf_add(&n->pend, buf, len);
	if (!n->segmented && n->pend.len >= PLAIN_UNIT)
		rc = put_pending_before(n, n->pend_off + PLAIN_UNIT);
	pthread_mutex_unlock(&n->mu);
	return rc;
}

static int segment_ends(struct cb_store_night *n, const struct cb_codec_seg *g, int copied)
{
	struct cb_store_ref r;

	if (put_pending_before(n, g->c_off) < 0)
		return -1;
	if (copied) {
		cb_store_hex(g->cdig, r.hex);
		r.len = g->c_len;
		add_ref(n, &r);
		n->st.copied_units++;
		n->st.present_units++;
		n->st.present_bytes += g->c_len;
		n->pend_off = g->c_off + g->c_len;
		return 0;
	}
	if (n->pend.len != g->c_len)
		return cb_error("unit store: segment of %llu bytes, %zu written",
				(unsigned long long)g->c_len, n->pend.len);
	if (put_unit(n, n->pend.data, n->pend.len, g->cdig) < 0)
		return -1;
	n->pend.len = 0;
	n->pend_off = g->c_off + g->c_len;
	return 0;
}

static int on_segment(void *ctx, const struct cb_codec_seg *g, int copied)
{
	struct cb_store_night *n = ctx;
	int rc;

	pthread_mutex_lock(&n->mu);
	rc = segment_ends(n, g, copied);
	pthread_mutex_unlock(&n->mu);
	return rc;
}

/* The unit of SHA-256 d (len bytes) into n->unit: 0, or -1 (then it is
 * compressed again). A sealed one opened, its clear record kept; one that
 * does not open is damaged: the bytes compressed again mend it. */
static int read_unit(struct cb_store_night *n, const unsigned char *d, uint64_t len)
{
	struct cb_store_ref ref = { .len = len, .key = n->key }, rec;
	char name[80];

	cb_store_hex(d, ref.hex);
	n->unit.len = 0;
	if (n->key) {
		unsigned char nd[32];
		int known = 0, rc;

		/* a loaded manifest's record spares hashing the object again */
		pthread_mutex_lock(&n->mu);
		if (name_dig(n, d, nd) == 0) {
			cb_store_hex(nd, name);
			known = cb_store_objmap_find(&n->objs, name) != NULL;
		}
		pthread_mutex_unlock(&n->mu);
		rc = cb_store_get_sealed(n->s, &ref, &n->unit, known ? NULL : &rec);
		pthread_mutex_lock(&n->mu);
		if (rc == 0 && !known)
			cb_store_objmap_add(&n->objs, &rec);
		pthread_mutex_unlock(&n->mu);
		return rc;
	}
	cb_store_unit_name(ref.hex, name);
	return n->s->ops->get(n->s, name, 0, 0, &n->unit) != 0 || n->unit.len != len ? -1 : 0;
}

/* A unit read from the store, for the next night to read locally: only
 * once its bytes are checked (it is kept beyond this night's checks). */
static void cache_fetched(struct cb_store_night *n, const unsigned char *d)
{
	unsigned char got[32];

	EVP_Digest(n->unit.data, n->unit.len, got, NULL, EVP_sha256(), NULL);
	if (!memcmp(got, d, 32))
		cb_unit_cache_put(n->cache, d, n->unit.data, n->unit.len, 1);
}

/* cb_codec_lookup_fn: a segment a catalog names (the guest's previous
 * night's first, then other guests'), if its unit is in the store, with
 * the unit's bytes read from there. */
static int lookup(void *ctx, const unsigned char *key, uint64_t u_len, struct cb_codec_reuse_src *src)
{
	struct cb_store_night *n = ctx;
	unsigned char d[32], nd[32];
	int cached = 0;
	size_t i;

	pthread_mutex_lock(&n->mu);
	for (i = 0; i < n->n_reuse; i++) {
		if (!cb_reuse_lookup(n->reuse[i], key, u_len, src))
			continue;
		memcpy(d, src->cdig, 32);
		if (name_dig(n, d, nd) == 0 && cb_store_set_has(&n->have, nd))
			break;
	}
	pthread_mutex_unlock(&n->mu);
	if (i == n->n_reuse)
		return 0;
	n->unit.len = 0;
	if (n->cache && cb_unit_cache_get(n->cache, d, src->c_len, &n->unit))
		cached = 1;
	else if (read_unit(n, d, src->c_len) < 0)
		cached = -1;
	else if (n->cache)
		cache_fetched(n, d);
	pthread_mutex_lock(&n->mu);
	n->st.cached_units += cached > 0;
	cb_store_set_add(&n->asked, d);
	pthread_mutex_unlock(&n->mu);
	if (cached < 0)
		return 0;
	src->bytes = n->unit.data;
	return 1;
}

/* Night f's catalog as a reuse (appended), or *why not. */
static int load_catalog(struct cb_store_night *n, const struct cb_backup_file *f, const char **why)
{
	struct cb_manifest m = { 0 };
	struct cb_s3_buf idx = { 0 };
	struct cb_reuse *r = NULL;

	if (cb_store_get_manifest(n->s, f->name, &m) != 0)
		*why = "its manifest cannot be read";
	else if (m.sealed != (n->key != NULL) || (m.sealed && !m.key))
		*why = !m.sealed ? "it is not encrypted" : n->key ? "it was encrypted with another key"
								   : "it is encrypted";
	else if (!m.catalog.hex[0] || cb_store_get_ref(n->s, &m.catalog, &idx) != 0)
		*why = "its catalog is missing or damaged";
	else {
		/* the catalog's bytes are the reuse's now, freed by it */
		r = cb_reuse_from_idx(idx.data, idx.len, m.size, f->name, why);
		idx.data = NULL;
		/* the units it names: sealed, and their records known */
		for (size_t i = 0; r && i < m.n_objects; i++)
			cb_store_objmap_add(&n->objs, &m.objects[i]);
	}
	cb_s3_buf_release(&idx);
	cb_manifest_release(&m);
	if (!r)
		return -1;
	n->reuse = cb_xrealloc(n->reuse, (n->n_reuse + 1) * sizeof(*n->reuse));
	n->reuse[n->n_reuse++] = r;
	return 0;
}

/* The catalogs whose units the codec may copy: the newest night of the
 * guest with this codec, then the newest of up to OTHER_GUESTS other
 * guests (a guest's first night on a store that holds a similar one
 * compresses only what differs). */
#define OTHER_GUESTS 4

static void open_prev(struct cb_store_night *n, enum cb_guest_type type, const char *id,
		      enum cb_compress codec, const char **why)
{
	struct cb_catalog cat;
	const char *other_why;
	size_t others = 0;

	*why = "";
	if (codec == CB_COMPRESS_NONE || cb_store_catalog(n->s, NULL, 0, &cat) < 0)
		return;
	for (size_t i = 0; i < cat.n; i++) {
		const struct cb_backup_file *f = &cat.files[i];

		if (i > 0 && !strcmp(f->id, f[-1].id) && f->type == f[-1].type)
			continue;   /* a guest's newest night only */
		if (f->type == type && !strcmp(f->id, id)) {
			if (f->compress != codec)
				*why = "it was written with another codec";
			else if (load_catalog(n, f, why) == 0) {
				n->prev = cb_xstrdup(f->name);
				n->own = 1;
			}
		} else if (f->compress == codec && others < OTHER_GUESTS &&
			   load_catalog(n, f, &other_why) == 0) {
			others++;
		}
	}
	/* a first night copies from another guest's: say whose */
	if (!n->prev && n->n_reuse)
		n->prev = cb_xstrdup(cb_reuse_name(n->reuse[0]));
	/* the guest's own first: its units are the likeliest */
	for (size_t i = 1; n->prev && i < n->n_reuse; i++)
		if (!strcmp(cb_reuse_name(n->reuse[i]), n->prev)) {
			struct cb_reuse *t = n->reuse[0];

			n->reuse[0] = n->reuse[i];
			n->reuse[i] = t;
		}
	cb_catalog_release(&cat);
}

/* No collection may run while the units are listed and relied on: its
 * mark gone, or the night fails naming it. */
static int wait_for_gc(struct cb_store_night *n, double seconds)
{
	double until = cb_now() + seconds;
	char who[512];
	int live;

	while ((live = cb_store_marks_live(n->s, "gc", NULL, who, sizeof(who))) > 0) {
		/* a signal ends the wait as it ends the night */
		if (cb_check_interrupt() < 0)
			return -1;
		if (cb_now() >= until)
			return cb_error("storage '%s': a garbage collection is running (%s)", n->s->label, who);
		usleep(500 * 1000);
	}
	return live < 0 ? -1 : 0;
}

int cb_store_night_open(struct cb_store_night **out, struct cb_objstore *s, const char *name,
			enum cb_guest_type type, const char *id, enum cb_compress codec,
			double gc_wait, unsigned writers, const char **prev_why)
{
	struct cb_store_night *n = cb_xcalloc(1, sizeof(*n));
	double t0 = cb_now();

	n->s = s;
	n->key = cb_store_key(s);
	n->name = cb_xstrdup(name);
	pthread_mutex_init(&n->mu, NULL);
	n->segmented = codec != CB_COMPRESS_NONE;
	n->mark = cb_store_mark_put(s, "night", name);
	/* a killed night's mark (this host's, its process gone) goes now: it
	 * would hold every collection off for a day */
	if (!n->mark || cb_store_marks_live(s, "night", n->mark, NULL, 0) < 0 || wait_for_gc(n, gc_wait) < 0 ||
	    cb_store_list_units(s, &n->have) < 0) {
		cb_store_night_free(n);
		return -1;
	}
	open_prev(n, type, id, codec, prev_why);
	/* a queue of two units a writer: the codec goes on while the writers
	 * wait for answers (memory: 3 units a writer at most) */
	n->up = cb_upload_pool_start(s, writers, 2 * writers);
	if (!n->up) {
		cb_store_night_free(n);
		return -1;
	}
	cb_sink_open_split(&n->sink, name, on_bytes, n);
	n->st.open_s = cb_now() - t0;
	*out = n;
	return 0;
}

struct cb_sink *cb_store_night_sink(struct cb_store_night *n)
{
	return n->sink;
}

int cb_store_night_cache(struct cb_store_night *n, const char *dir)
{
	n->cache = cb_unit_cache_open(dir);
	return n->cache ? 0 : -1;
}

const char *cb_store_night_prev(const struct cb_store_night *n)
{
	return n->prev;
}

const struct cb_reuse *cb_store_night_own_prev(const struct cb_store_night *n)
{
	return n->own ? n->reuse[0] : NULL;
}

void cb_store_night_attach(struct cb_store_night *n, struct cb_codec_writer *w)
{
	if (n->n_reuse)
		cb_codec_set_reuse(w, -1, lookup, n);
	cb_codec_set_seg_fn(w, on_segment, n);
}

/* Bytes as an object of their own (catalog, log, notes), sealed with a
 * key: 0 (ref set), -1. */
static int put_blob(struct cb_store_night *n, const void *data, size_t len, struct cb_store_ref *ref)
{
	unsigned char d[32], *f;
	char name[80];
	size_t fl;
	int rc;

	memset(ref, 0, sizeof(*ref));
	if (!n->key)
		return cb_store_put_ref(n->s, data, len, 0, ref);
	cb_store_ref_of(data, len, ref);
	ref->key = n->key;
	if (cb_store_unhex(ref->hex, d) < 0 || object_for(n, data, len, d, &f, &fl, name) < 0)
		return -1;
	rc = n->s->ops->put(n->s, name, f, fl, CB_PUT_SAME_BYTES);
	free(f);
	return rc < 0 ? -1 : 0;
}

/* A file (catalog, log) as a unit: 0 (ref set, hex "" when there is no
 * such file), -1. */
static int put_file(struct cb_store_night *n, const char *path, struct cb_store_ref *ref)
{
	struct stat st;
	unsigned char *buf;
	int fd, rc;

	ref->hex[0] = 0;
	if (!path)
		return 0;
	fd = cb_open_regular(path, 0, "", &st);
	if (fd < 0)
		return -1;
	buf = cb_xmalloc((size_t)st.st_size + 1);
	rc = cb_read_all(fd, buf, (size_t)st.st_size);
	if (rc < 0)
		cb_error_errno("cannot read '%s'", path);
	close(fd);
	if (rc == 0)
		rc = put_blob(n, buf, (size_t)st.st_size, ref);
	free(buf);
	return rc;
}

/* With a key: the clear record of each object ref names in m->objects
 * (one the night neither wrote nor read is read now). 0 or -1. */
static int add_record(struct cb_store_night *n, struct cb_manifest *m, const struct cb_store_ref *ref)
{
	struct cb_s3_buf b = { 0 };
	const struct cb_store_ref *rec;
	struct cb_store_ref got;
	char name[80];
	int rc = 0;

	if (!ref->hex[0])
		return 0;
	cb_store_ref_object(ref, name);
	rec = cb_store_objmap_find(&n->objs, strrchr(name, '/') + 1);
	if (!rec) {
		rc = cb_store_get_sealed(n->s, ref, &b, &got);
		cb_s3_buf_release(&b);
		rec = &got;
	}
	if (rc == 0)
		m->objects[m->n_objects++] = *rec;
	return rc;
}

static int add_records(struct cb_store_night *n, struct cb_manifest *m)
{
	int rc;

	m->objects = cb_xmalloc((m->n_units + 3) * sizeof(*m->objects));
	rc = add_record(n, m, &m->catalog) | add_record(n, m, &m->log) | add_record(n, m, &m->notes);
	for (size_t i = 0; rc == 0 && i < m->n_units; i++)
		rc = add_record(n, m, &m->units[i]);
	return rc;
}

static int put_manifest(struct cb_store_night *n, struct cb_manifest *m)
{
	size_t len = 0;
	char *text = n->key ? cb_manifest_seal(m, n->key, &len) : cb_manifest_format(m);
	char *obj = cb_store_night_name(n->name);
	int rc = !text ? -1 : n->s->ops->put(n->s, obj, text, n->key ? len : strlen(text), 1);

	if (rc == 1)
		rc = cb_error("storage '%s': a night named '%s' exists already", n->s->label, n->name);
	free(text);
	free(obj);
	return rc;
}

int cb_store_night_commit(struct cb_store_night *n, const char *idx_path, const char *log_path,
			  const char *notes, int protected_)
{
	struct cb_manifest m = { 0 };
	struct cb_upload_stats up;
	uint64_t sum = 0;
	int rc = -1;
	double t0;

	/* the bytes after the last segment (seek table, end marker), then
	 * every unit written before anything names them */
	if (put_pending_before(n, n->pend_off + n->pend.len) < 0)
		return -1;
	rc = cb_upload_pool_finish(n->up, &up);
	n->up = NULL;
	n->st.wait_s = up.wait_s;
	n->st.drain_s = up.drain_s;
	if (rc < 0)
		return -1;
	t0 = cb_now();
	for (size_t i = 0; i < n->n_units; i++)
		sum += n->units[i].len;
	if (sum != cb_sink_bytes(n->sink))
		return cb_error("unit store: units of %llu bytes for an archive of %llu",
				(unsigned long long)sum, (unsigned long long)cb_sink_bytes(n->sink));
	m.name = n->name;
	m.size = sum;
	snprintf(m.sha256, sizeof(m.sha256), "%s", cb_sink_sha256(n->sink));
	m.when = time(NULL);
	m.protected_ = protected_;
	m.units = n->units;
	m.n_units = n->n_units;
	if (put_file(n, idx_path, &m.catalog) < 0 || put_file(n, log_path, &m.log) < 0)
		return -1;
	if (notes && put_blob(n, notes, strlen(notes), &m.notes) < 0)
		return -1;
	rc = n->key && add_records(n, &m) < 0 ? -1 : put_manifest(n, &m);
	free(m.objects);
	if (rc == 0 && n->cache)
		cb_unit_cache_keep(n->cache, n->units, n->n_units);
	n->st.commit_s = cb_now() - t0;
	return rc;
}

void cb_store_night_stats(const struct cb_store_night *n, struct cb_store_night_stats *st)
{
	*st = n->st;
}

void cb_store_night_free(struct cb_store_night *n)
{
	if (!n)
		return;
	/* done or failed alike: what a failed night wrote is for the next
	 * night to use or a collection to remove */
	if (n->up)   /* a night that failed: what is queued ends first */
		cb_upload_pool_finish(n->up, NULL);
	cb_store_mark_drop(n->s, n->mark);
	cb_unit_cache_free(n->cache);
	cb_sink_free(n->sink);
	for (size_t i = 0; i < n->n_reuse; i++)
		cb_reuse_free(n->reuse[i]);
	free(n->reuse);
	cb_store_set_release(&n->have);
	cb_store_set_release(&n->asked);
	cb_store_objmap_release(&n->objs);
	cb_s3_buf_release(&n->unit);
	cb_s3_buf_release(&n->pend);
	free(n->units);
	free(n->prev);
	free(n->name);
	pthread_mutex_destroy(&n->mu);
	free(n);
}
