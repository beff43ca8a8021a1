/*
 * cb_store: names, manifests and units of a unit store. See
 * include/cb_store.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>

#include "cb_store.h"
#include "cb_util.h"

#define MANIFEST_MAGIC "cbackup-manifest 1"
/* a manifest of a night of several TiB is a few MB; more is no manifest */
#define MANIFEST_MAX (256u << 20)

void cb_store_hex(const unsigned char *dig, char *hex)
{
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", dig[i]);
}

int cb_store_unhex(const char *hex, unsigned char *dig)
{
	for (int i = 0; i < 64; i++) {
		char c = hex[i];
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

		if (v < 0)
			return -1;
		if (i % 2 == 0)
			dig[i / 2] = (unsigned char)(v << 4);
		else
			dig[i / 2] |= (unsigned char)v;
	}
	return hex[64] == 0 ? 0 : -1;
}

void cb_store_unit_name(const char *hex, char *out)
{
	snprintf(out, 74, CB_STORE_UNITS "%.2s/%s", hex, hex);
}

char *cb_store_night_name(const char *name)
{
	return cb_xasprintf(CB_STORE_NIGHTS "%s", name);
}

static void sha256_hex(const void *p, size_t n, char *hex)
{
	unsigned char d[32];

	EVP_Digest(p, n, d, NULL, EVP_sha256(), NULL);
	cb_store_hex(d, hex);
}

/* ---- manifests ---- */

static void add_ref_line(struct cb_s3_buf *b, const char *what, const struct cb_store_ref *r)
{
	char line[128];
	int n;

	if (!r->hex[0])
		return;
	n = snprintf(line, sizeof(line), "%s %s %" PRIu64 "\n", what, r->hex, r->len);
	cb_s3_buf_add(b, line, (size_t)n);
}

char *cb_manifest_format(const struct cb_manifest *m)
{
	struct cb_s3_buf b = { 0 };
	char *head = cb_xasprintf(MANIFEST_MAGIC "\nname %s\nsize %" PRIu64 "\nsha256 %s\ntime %lld\n"
				  "protected %d\n", m->name, m->size, m->sha256, (long long)m->when,
				  m->protected_);
	char hex[65], tail[80];

	cb_s3_buf_add(&b, head, strlen(head));
	free(head);
	add_ref_line(&b, "catalog", &m->catalog);
	add_ref_line(&b, "log", &m->log);
	add_ref_line(&b, "notes", &m->notes);
	for (size_t i = 0; i < m->n_units; i++)
		add_ref_line(&b, "unit", &m->units[i]);
	sha256_hex(b.data, b.len, hex);
	snprintf(tail, sizeof(tail), "end %s\n", hex);
	cb_s3_buf_add(&b, tail, strlen(tail));
	return (char *)b.data;
}

void cb_manifest_release(struct cb_manifest *m)
{
	free(m->name);
	free(m->units);
	memset(m, 0, sizeof(*m));
}

static int parse_ref(const char *v, struct cb_store_ref *r)
{
	char hex[65];
	unsigned char d[32];
	unsigned long long len;
	int used = 0;

	if (sscanf(v, "%64s %llu%n", hex, &len, &used) != 2 || v[used] != 0 || cb_store_unhex(hex, d) < 0)
		return -1;
	memcpy(r->hex, hex, sizeof(hex));
	r->len = len;
	return 0;
}

static int parse_num(const char *v, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(v, &end, 10);
	return errno || !*v || *end ? -1 : 0;
}

static int parse_unit(struct cb_manifest *m, const char *v, size_t *cap)
{
	if (m->n_units == *cap) {
		*cap = *cap ? 2 * *cap : 64;
		m->units = cb_xrealloc(m->units, *cap * sizeof(*m->units));
	}
	return parse_ref(v, &m->units[m->n_units++]);
}

static int parse_line(struct cb_manifest *m, const char *key, const char *v, size_t *cap)
{
	uint64_t n;

	if (!strcmp(key, "name")) {
		if (m->name || !*v)
			return -1;
		m->name = cb_xstrdup(v);
	} else if (!strcmp(key, "size")) {
		return parse_num(v, &m->size);
	} else if (!strcmp(key, "sha256")) {
		return snprintf(m->sha256, sizeof(m->sha256), "%s", v) == 64 ? 0 : -1;
	} else if (!strcmp(key, "time")) {
		if (parse_num(v, &n) < 0)
			return -1;
		m->when = (time_t)n;
	} else if (!strcmp(key, "protected")) {
		m->protected_ = !strcmp(v, "1");
	} else if (!strcmp(key, "catalog")) {
		return parse_ref(v, &m->catalog);
	} else if (!strcmp(key, "log")) {
		return parse_ref(v, &m->log);
	} else if (!strcmp(key, "notes")) {
		return parse_ref(v, &m->notes);
	} else if (!strcmp(key, "unit")) {
		return parse_unit(m, v, cap);
	}
	/* another record (a later version's): not needed to restore */
	return 0;
}

/* The text before "end HEX\n" hashes to HEX. */
static int check_end(const char *text, size_t len, size_t *body)
{
	const char *e;
	char hex[65];

	if (len < 70 || text[len - 1] != '\n')
		return -1;
	for (e = text + len - 2; e > text && *e != '\n'; e--)
		;
	if (e == text || strncmp(e + 1, "end ", 4) || text + len - (e + 5) != 65)
		return -1;
	*body = (size_t)(e + 1 - text);
	sha256_hex(text, *body, hex);
	return strncmp(hex, e + 5, 64) ? -1 : 0;
}

int cb_manifest_parse(struct cb_manifest *m, const char *name, const char *text, size_t len)
{
	size_t body, cap = 0, at = 0, bad_line = 0, line = 0;
	uint64_t sum = 0;

	memset(m, 0, sizeof(*m));
	if (len < sizeof(MANIFEST_MAGIC) || memcmp(text, MANIFEST_MAGIC "\n", sizeof(MANIFEST_MAGIC)) ||
	    check_end(text, len, &body) < 0)
		return cb_error("manifest of '%s' is damaged (its closing digest does not hold)", name);
	while (at < body && !bad_line) {
		const char *nl = memchr(text + at, '\n', body - at);
		size_t n = (size_t)(nl - (text + at));
		char *l = cb_xmalloc(n + 1), *sp;

		memcpy(l, text + at, n);
		l[n] = 0;
		line++;
		sp = strchr(l, ' ');
		if (line > 1 && (!sp || memchr(l, 0, n) || (*sp = 0, parse_line(m, l, sp + 1, &cap) < 0)))
			bad_line = line;
		free(l);
		at += n + 1;
	}
	for (size_t i = 0; i < m->n_units; i++)
		sum += m->units[i].len;
	if (bad_line || !m->name || !m->sha256[0] || sum != m->size || strcmp(m->name, name)) {
		cb_manifest_release(m);
		return bad_line ? cb_error("manifest of '%s': line %zu is malformed", name, bad_line)
				: cb_error("manifest of '%s' is incomplete or names another night", name);
	}
	return 0;
}

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
	if (rc == 0 && cb_manifest_parse(m, name, (const char *)b.data, b.len) < 0)
		rc = cb_error_prefix("storage '%s'", s->label);
	cb_s3_buf_release(&b);
	free(obj);
	return rc;
}

/* ---- units ---- */

int cb_store_get_ref(struct cb_objstore *s, const struct cb_store_ref *ref, struct cb_s3_buf *out)
{
	char name[80], hex[65];
	size_t at = out->len;
	int rc;

	cb_store_unit_name(ref->hex, name);
	rc = s->ops->get(s, name, 0, 0, out);
	if (rc != 0)
		return rc;
	sha256_hex(out->data + at, out->len - at, hex);
	if (out->len - at != ref->len || strcmp(hex, ref->hex))
		return cb_error("storage '%s': unit '%s' is damaged (%s: %zu bytes, SHA-256 %s)", s->label,
				name, out->len - at != ref->len ? "length differs" : "digest differs",
				out->len - at, hex);
	return 0;
}

void cb_store_ref_of(const void *data, size_t len, struct cb_store_ref *ref)
{
	sha256_hex(data, len, ref->hex);
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
