/*
 * cb_store: manifests and units of a unit store read and written (their
 * names and text: store_manifest.c). See include/cb_store.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>

#include "cb_store.h"
#include "cb_util.h"

/* a manifest of a night of several TiB is a few MB; more is no manifest */
#define MANIFEST_MAX (256u << 20)

int cb_store_get_manifest(struct cb_objstore *s, const char *name, struct cb_manifest *m)
{
	struct cb_s3_buf b = { 0 };
	char *obj = cb_store_night_name(name);
	uint64_t size = 0;
	int rc = s->ops->head(s, obj, &size);

	if (rc == 0 && size > MANIFEST_MAX)
		rc = cb_error("storage '%s': manifest '%s' is too large", s->label, obj);
	if (rc == 0)
		rc = s->ops->get(s, obj, 0, 0, &b);
	if (rc == 0 && (cb_manifest_is_sealed((const char *)b.data, b.len)
			? cb_manifest_unseal(m, name, (const char *)b.data, b.len, s->key)
			: cb_manifest_parse(m, name, (const char *)b.data, b.len)) < 0)
		rc = cb_error_prefix("storage '%s'", s->label);
	cb_s3_buf_release(&b);
	free(obj);
	return rc;
}

int cb_store_night_key_check(struct cb_objstore *s, const char *name)
{
	struct cb_manifest m;
	int rc = cb_store_get_manifest(s, name, &m);

	if (rc != 0)
		return 1;
	rc = cb_manifest_readable(&m, s->key, name);
	cb_manifest_release(&m);
	return rc;
}

/* ---- units ---- */

int cb_store_get_ref(struct cb_objstore *s, const struct cb_store_ref *ref, struct cb_s3_buf *out)
{
	char name[80], hex[65];
	size_t at = out->len;
	int rc;

	if (ref->key)
		return cb_store_get_sealed(s, ref, out, NULL);
	cb_store_unit_name(ref->hex, name);
	rc = s->ops->get(s, name, 0, 0, out);
	if (rc != 0)
		return rc;
	cb_store_sha256_hex(out->data + at, out->len - at, hex);
	/* a sealed object's clear record: its stored bytes' digest */
	if (out->len - at != ref->len || strcmp(hex, ref->sha[0] ? ref->sha : ref->hex))
		return cb_error("storage '%s': unit '%s' is damaged (%s: %zu bytes, SHA-256 %s)", s->label,
				name, out->len - at != ref->len ? "length differs" : "digest differs",
				out->len - at, hex);
	return 0;
}

void cb_store_ref_of(const void *data, size_t len, struct cb_store_ref *ref)
{
	cb_store_sha256_hex(data, len, ref->hex);
	ref->len = len;
}

int cb_store_put_ref(struct cb_objstore *s, const void *data, size_t len, int replace,
		     struct cb_store_ref *ref)
{
	char name[80];

	cb_store_ref_of(data, len, ref);
	cb_store_unit_name(ref->hex, name);
	return s->ops->put(s, name, data, len, replace ? 0 : CB_PUT_SAME_BYTES) < 0 ? -1 : 0;
}

static int dig_cmp(const void *a, const void *b)
{
	return memcmp(a, b, 32);
}

void cb_store_set_add(struct cb_store_set *set, const unsigned char *dig)
{
	if (set->n == set->cap) {
		set->cap = set->cap ? 2 * set->cap : 1024;
		set->v = cb_xrealloc(set->v, set->cap * sizeof(*set->v));
	}
	memcpy(set->v[set->n++], dig, 32);
	set->sorted = 0;
}

int cb_store_set_has(struct cb_store_set *set, const unsigned char *dig)
{
	if (!set->sorted && set->n)
		qsort(set->v, set->n, sizeof(*set->v), dig_cmp);
	set->sorted = 1;
	return set->n && bsearch(dig, set->v, set->n, sizeof(*set->v), dig_cmp) != NULL;
}

void cb_store_set_release(struct cb_store_set *set)
{
	free(set->v);
	memset(set, 0, sizeof(*set));
}

static int on_unit(void *arg, const char *name, uint64_t size)
{
	struct cb_store_set *set = arg;
	const char *hex = strrchr(name, '/');
	unsigned char d[32];

	if (hex && cb_store_unhex(hex + 1, d) == 0) {
		cb_store_set_add(set, d);
		set->bytes += size;
	}
	return 0;
}

int cb_store_list_units(struct cb_objstore *s, struct cb_store_set *set)
{
	return s->ops->list(s, CB_STORE_UNITS, on_unit, set);
}

/* ---- nights ---- */

/* A night's notes, at most 64 KiB of them (as beside an archive), or NULL. */
static char *get_notes(struct cb_objstore *s, const struct cb_manifest *m)
{
	struct cb_s3_buf b = { 0 };

	if (!m->notes.hex[0] || m->notes.len > 65536 || cb_store_get_ref(s, &m->notes, &b) != 0) {
		cb_s3_buf_release(&b);
		return NULL;
	}
	return b.data ? (char *)b.data : cb_xstrdup("");
}

struct night_scan {
	struct cb_objstore *s;
	const char *id;
	int want_manifests;
	struct cb_catalog *cat;
	size_t cap;
};

static int on_night(void *arg, const char *obj, uint64_t size)
{
	struct night_scan *ns = arg;
	const char *name = obj + strlen(CB_STORE_NIGHTS);
	struct cb_backup_file f = { 0 };
	struct cb_manifest m;

	(void)size;
	if (strchr(name, '/') || cb_catalog_parse_name(name, &f.type, &f.id, &f.when, &f.compress) < 0)
		return 0;
	if (ns->id && strcmp(ns->id, f.id)) {
		free(f.id);
		return 0;
	}
	f.name = cb_xstrdup(name);
	f.path = cb_xasprintf("%s:%s", ns->s->label, name);
	f.has_checksum = 1;
	if (ns->want_manifests && cb_store_get_manifest(ns->s, name, &m) == 0) {
		f.size = m.size;
		f.is_protected = m.protected_;
		f.notes = get_notes(ns->s, &m);
		cb_manifest_release(&m);
	}
	if (ns->cat->n == ns->cap) {
		ns->cap = ns->cap ? 2 * ns->cap : 32;
		ns->cat->files = cb_xrealloc(ns->cat->files, ns->cap * sizeof(*ns->cat->files));
	}
	ns->cat->files[ns->cat->n++] = f;
	return 0;
}

static int by_id_newest(const void *a, const void *b)
{
	const struct cb_backup_file *x = a, *y = b;
	int c = strcmp(x->id, y->id);

	if (c)
		return c;
	return x->when < y->when ? 1 : x->when > y->when ? -1 : strcmp(y->name, x->name);
}

int cb_store_catalog(struct cb_objstore *s, const char *id, int want_manifests, struct cb_catalog *cat)
{
	struct night_scan ns = { s, id, want_manifests, cat, 0 };
	int rc;

	memset(cat, 0, sizeof(*cat));
	rc = s->ops->list(s, CB_STORE_NIGHTS, on_night, &ns);
	if (cat->n)
		qsort(cat->files, cat->n, sizeof(*cat->files), by_id_newest);
	if (rc < 0)
		cb_catalog_release(cat);
	return rc < 0 ? -1 : 0;
}
