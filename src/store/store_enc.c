/*
 * A sealed unit store (include/cb_store.h, docs/encryption.md): with a
 * key, each unit object is the unit sealed as one frame of an encrypted
 * archive (the same bytes: "CBUF", flags, length, keyed id as associated
 * data, ciphertext, tag, zeros to 4 KiB), named by the keyed id of the
 * unit (cb_enc_unit_id_sha: the same unit under the same key is the same
 * object, under another key another one, and no plain hash of a unit is
 * ever a name); a night's manifest is the plain manifest sealed under
 * K_cat behind a clear header. The clear header says what a store admin
 * without the key needs: the key's fingerprint (a wrong key is one
 * error), the archive's size, time and protection (list, prune), and the
 * objects the night holds, sorted, with their stored lengths and SHA-256
 * (the collection keeps them, verify checks them). The order of the units,
 * which one is the catalog, the names, the log and notes are sealed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "cb_store.h"
#include "cb_util.h"

#define SEALED_MAGIC "cbackup-manifest-sealed 1"
#define FRAME_MAGIC "CBUF"
#define FRAME_HDR 48
#define FRAME_ALIGN 4096

int cb_store_use_key(struct cb_objstore *s, const char *path)
{
	struct cb_enckey *k;

	if (!path || !strcmp(path, "none"))
		return 0;
	k = cb_xcalloc(1, sizeof(*k));
	if (cb_enckey_load(path, k) < 0) {
		free(k);
		return -1;
	}
	if (s->key)
		cb_enckey_wipe(s->key);
	free(s->key);
	s->key = k;
	return 0;
}

const struct cb_enckey *cb_store_key(const struct cb_objstore *s)
{
	return s->key;
}

/* ---- unit objects: frames ---- */

static uint64_t frame_size(uint64_t len)
{
	uint64_t n = FRAME_HDR + len + CB_ENC_TAG;

	return (n + FRAME_ALIGN - 1) / FRAME_ALIGN * FRAME_ALIGN;
}

static void put_le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void record_of(const unsigned char *id, const void *frame, size_t flen, struct cb_store_ref *obj)
{
	unsigned char d[32];

	memset(obj, 0, sizeof(*obj));
	cb_store_hex(id, obj->hex);
	obj->len = flen;
	EVP_Digest(frame, flen, d, NULL, EVP_sha256(), NULL);
	cb_store_hex(d, obj->sha);
}

int cb_store_seal_unit(const struct cb_enckey *k, const void *plain, size_t len,
		       const unsigned char dig[32], unsigned char **frame, size_t *flen,
		       struct cb_store_ref *obj)
{
	unsigned char id[CB_ENC_ID], key[32], *f;
	size_t n = (size_t)frame_size(len);
	int rc;

	if (cb_enc_unit_id_sha(k, dig, id) < 0 || cb_enc_unit_key(k, id, key) < 0)
		return -1;
	f = cb_xcalloc(1, n);
	memcpy(f, FRAME_MAGIC, 4);
	put_le64(f + 8, len);
	memcpy(f + 16, id, CB_ENC_ID);
	rc = cb_enc_seal(key, (const unsigned char[CB_ENC_NONCE]){ 0 }, f, FRAME_HDR, plain, len,
			 f + FRAME_HDR, f + FRAME_HDR + len);
	OPENSSL_cleanse(key, sizeof(key));
	if (rc < 0) {
		free(f);
		return -1;
	}
	record_of(id, f, n, obj);
	*frame = f;
	*flen = n;
	return 0;
}

void cb_store_ref_object(const struct cb_store_ref *r, char *out)
{
	unsigned char d[32], id[CB_ENC_ID];
	char hex[65];

	if (r->key && cb_store_unhex(r->hex, d) == 0 && cb_enc_unit_id_sha(r->key, d, id) == 0) {
		cb_store_hex(id, hex);
		cb_store_unit_name(hex, out);
	} else {
		cb_store_unit_name(r->hex, out);
	}
}

/* The frame in raw is the unit ref names: its plain bytes into out
 * (room for ref->len bytes), checked. 0 or -1. */
static int open_frame(const struct cb_store_ref *ref, const unsigned char *id, const struct cb_s3_buf *raw,
		      unsigned char *out)
{
	unsigned char key[32], d[32];
	char hex[65];
	int rc = -1;

	if (raw->len != frame_size(ref->len) || memcmp(raw->data, FRAME_MAGIC, 4) ||
	    get_le64(raw->data + 8) != ref->len || memcmp(raw->data + 16, id, CB_ENC_ID))
		return -1;
	if (cb_enc_unit_key(ref->key, id, key) == 0 &&
	    cb_enc_open(key, (const unsigned char[CB_ENC_NONCE]){ 0 }, raw->data, FRAME_HDR,
			raw->data + FRAME_HDR, ref->len, out, raw->data + FRAME_HDR + ref->len) == 0) {
		EVP_Digest(out, ref->len, d, NULL, EVP_sha256(), NULL);
		cb_store_hex(d, hex);
		rc = strcmp(hex, ref->hex) ? -1 : 0;
	}
	OPENSSL_cleanse(key, sizeof(key));
	return rc;
}

int cb_store_get_sealed(struct cb_objstore *s, const struct cb_store_ref *ref, struct cb_s3_buf *out,
			struct cb_store_ref *obj)
{
	struct cb_s3_buf raw = { 0 };
	unsigned char d[32], id[CB_ENC_ID];
	char name[80];
	size_t at = out->len;
	int rc;

	if (cb_store_unhex(ref->hex, d) < 0 || cb_enc_unit_id_sha(ref->key, d, id) < 0)
		return cb_error("storage '%s': a unit's digest is malformed", s->label);
	cb_store_ref_object(ref, name);
	rc = s->ops->get(s, name, 0, 0, &raw);
	if (rc == 1)   /* named here: the caller knows the unit, not its object */
		rc = cb_error("storage '%s': unit '%s' is missing", s->label, name);
	if (rc == 0) {
		/* room for the plain bytes, then the frame opened into it */
		cb_s3_buf_add(out, raw.data, raw.len < ref->len ? raw.len : (size_t)ref->len);
		if (out->len - at != ref->len || open_frame(ref, id, &raw, out->data + at) < 0) {
			out->len = at;
			rc = cb_error("storage '%s': unit '%s' is damaged (%zu bytes: it does not "
				      "authenticate as the unit the manifest names)", s->label, name, raw.len);
		} else if (obj) {
			record_of(id, raw.data, raw.len, obj);
		}
	}
	cb_s3_buf_release(&raw);
	return rc;
}

/* ---- clear records by name ---- */

static int ref_cmp(const void *a, const void *b)
{
	return strcmp(((const struct cb_store_ref *)a)->hex, ((const struct cb_store_ref *)b)->hex);
}

void cb_store_objmap_add(struct cb_store_objmap *map, const struct cb_store_ref *obj)
{
	if (map->n == map->cap) {
		map->cap = map->cap ? 2 * map->cap : 256;
		map->v = cb_xrealloc(map->v, map->cap * sizeof(*map->v));
	}
	map->v[map->n++] = *obj;
	map->sorted = 0;
}

const struct cb_store_ref *cb_store_objmap_find(struct cb_store_objmap *map, const char *hex)
{
	struct cb_store_ref k;

	if (!map->sorted && map->n)
		qsort(map->v, map->n, sizeof(*map->v), ref_cmp);
	map->sorted = 1;
	snprintf(k.hex, sizeof(k.hex), "%s", hex);
	return map->n ? bsearch(&k, map->v, map->n, sizeof(*map->v), ref_cmp) : NULL;
}

void cb_store_objmap_release(struct cb_store_objmap *map)
{
	free(map->v);
	memset(map, 0, sizeof(*map));
}

/* ---- manifests ---- */

int cb_manifest_is_sealed(const char *text, size_t len)
{
	return len > sizeof(SEALED_MAGIC) && !memcmp(text, SEALED_MAGIC "\n", sizeof(SEALED_MAGIC));
}

/* The clear header and the objects, each once, sorted. */
static void clear_part(const struct cb_manifest *m, const struct cb_enckey *key, struct cb_s3_buf *b)
{
	struct cb_store_ref *v = cb_xmalloc((m->n_objects + 1) * sizeof(*v));
	char fp[65], *head;

	cb_store_hex(key->fp, fp);
	head = cb_xasprintf(SEALED_MAGIC "\nfingerprint %s\nsize %llu\ntime %lld\nprotected %d\n", fp,
			    (unsigned long long)m->size, (long long)m->when, m->protected_);
	cb_s3_buf_add(b, head, strlen(head));
	free(head);
	memcpy(v, m->objects, m->n_objects * sizeof(*v));
	if (m->n_objects)
		qsort(v, m->n_objects, sizeof(*v), ref_cmp);
	for (size_t i = 0; i < m->n_objects; i++) {
		char *l;

		if (i && !strcmp(v[i].hex, v[i - 1].hex))
			continue;
		l = cb_xasprintf("object %s %llu %s\n", v[i].hex, (unsigned long long)v[i].len, v[i].sha);
		cb_s3_buf_add(b, l, strlen(l));
		free(l);
	}
	free(v);
}

char *cb_manifest_seal(const struct cb_manifest *m, const struct cb_enckey *key, size_t *len)
{
	struct cb_s3_buf b = { 0 };
	char *inner = cb_manifest_format(m), *b64, *line, hex[65];
	unsigned char *blob, d[32];
	size_t blen;

	clear_part(m, key, &b);
	if (cb_enc_blob_seal(key, b.data, b.len, inner, strlen(inner), &blob, &blen) < 0) {
		free(inner);
		cb_s3_buf_release(&b);
		return NULL;
	}
	free(inner);
	b64 = cb_xmalloc(4 * ((blen + 2) / 3) + 1);
	EVP_EncodeBlock((unsigned char *)b64, blob, (int)blen);
	free(blob);
	line = cb_xasprintf("sealed %zu %s\n", blen, b64);
	free(b64);
	cb_s3_buf_add(&b, line, strlen(line));
	free(line);
	EVP_Digest(b.data, b.len, d, NULL, EVP_sha256(), NULL);
	cb_store_hex(d, hex);
	line = cb_xasprintf("end %s\n", hex);
	cb_s3_buf_add(&b, line, strlen(line));
	free(line);
	*len = b.len;
	return (char *)b.data;
}

/* One line of the clear part (nul-terminated, without its newline). */
static int clear_line(struct cb_manifest *m, const char *l, size_t *cap)
{
	struct cb_store_ref r = { 0 };
	unsigned long long n;
	char fp[65];
	int used = 0, p;

	if (sscanf(l, "fingerprint %64s%n", fp, &used) == 1 && !l[used])
		return cb_store_unhex(fp, m->fp);
	if (sscanf(l, "size %llu%n", &n, &used) == 1 && !l[used])
		m->size = n;
	else if (sscanf(l, "time %llu%n", &n, &used) == 1 && !l[used])
		m->when = (time_t)n;
	else if (sscanf(l, "protected %d%n", &p, &used) == 1 && !l[used])
		m->protected_ = p == 1;
	else if (sscanf(l, "object %64s %llu %64s%n", r.hex, &n, r.sha, &used) == 3 && !l[used]) {
		r.len = n;
		if (m->n_objects == *cap) {
			*cap = *cap ? 2 * *cap : 64;
			m->objects = cb_xrealloc(m->objects, *cap * sizeof(*m->objects));
		}
		m->objects[m->n_objects++] = r;
	}
	/* another record (a later version's): not needed */
	return 0;
}

/* The sealed line's blob, decoded (malloc'd), or NULL. */
static unsigned char *blob_of(const char *l, size_t *blen)
{
	size_t n, k;
	int used = 0;
	unsigned char *b;

	if (sscanf(l, "sealed %zu %n", &n, &used) != 1 || !used || n > (256u << 20))
		return NULL;
	k = strlen(l + used);
	if (k != 4 * ((n + 2) / 3))
		return NULL;
	b = cb_xmalloc(k / 4 * 3 + 1);
	if (EVP_DecodeBlock(b, (const unsigned char *)l + used, (int)k) < 0) {
		free(b);
		return NULL;
	}
	*blen = n;
	return b;
}

/* The sealed plain manifest opened and parsed into m's units. */
static int open_inner(struct cb_manifest *m, const char *name, const char *text, size_t aad,
		      const unsigned char *blob, size_t blen, const struct cb_enckey *key)
{
	struct cb_manifest in;
	unsigned char *plain;
	size_t plen;

	if (cb_enc_blob_open(key, text, aad, blob, blen, &plain, &plen) < 0)
		return cb_error("manifest of '%s' is damaged (its sealed part does not authenticate)",
				name);
	if (cb_manifest_parse(&in, name, (const char *)plain, plen) < 0) {
		free(plain);
		return -1;
	}
	free(plain);
	if (in.size != m->size) {
		cb_manifest_release(&in);
		return cb_error("manifest of '%s' is damaged (sizes differ)", name);
	}
	free(m->units);
	m->units = in.units;
	m->n_units = in.n_units;
	m->catalog = in.catalog;
	m->log = in.log;
	m->notes = in.notes;
	memcpy(m->sha256, in.sha256, sizeof(m->sha256));
	free(in.name);
	m->key = key;
	m->catalog.key = m->log.key = m->notes.key = key;
	for (size_t i = 0; i < m->n_units; i++)
		m->units[i].key = key;
	return 0;
}

int cb_manifest_unseal(struct cb_manifest *m, const char *name, const char *text, size_t len,
		       const struct cb_enckey *key)
{
	size_t body, at = 0, cap = 0, blen = 0, aad = 0;
	unsigned char *blob = NULL;
	int rc = 0;

	memset(m, 0, sizeof(*m));
	if (cb_manifest_check_end(text, len, &body) < 0)
		return cb_error("manifest of '%s' is damaged (its closing digest does not hold)", name);
	m->sealed = 1;
	m->name = cb_xstrdup(name);
	while (at < body && rc == 0 && !blob) {
		const char *nl = memchr(text + at, '\n', body - at);
		char *l = cb_xasprintf("%.*s", (int)(nl - (text + at)), text + at);

		if (!strncmp(l, "sealed ", 7) && !(blob = blob_of(l, &blen)))
			rc = cb_error("manifest of '%s' is damaged (its sealed part is malformed)", name);
		else if (!blob && at && clear_line(m, l, &cap) < 0)
			rc = cb_error("manifest of '%s' is damaged (a malformed line)", name);
		aad = blob ? at : aad;
		at = (size_t)(nl - text) + 1;
		free(l);
	}
	if (rc == 0 && !blob)
		rc = cb_error("manifest of '%s' is incomplete", name);
	/* without the key (or with another) the clear records stand for the units */
	if (rc == 0 && key && !CRYPTO_memcmp(key->fp, m->fp, sizeof(m->fp)))
		rc = open_inner(m, name, text, aad, blob, blen, key);
	else if (rc == 0 && m->n_objects) {
		m->units = cb_xmalloc(m->n_objects * sizeof(*m->units));
		memcpy(m->units, m->objects, m->n_objects * sizeof(*m->units));
		m->n_units = m->n_objects;
	}
	free(blob);
	if (rc < 0)
		cb_manifest_release(m);
	return rc;
}

int cb_manifest_readable(const struct cb_manifest *m, const struct cb_enckey *key, const char *name)
{
	if (!m->sealed || m->key)
		return 0;
	if (!key)
		return cb_error("'%s' is encrypted: give its key with --encryption-key FILE", name);
	return cb_enckey_check_fp(m->fp, key);
}
