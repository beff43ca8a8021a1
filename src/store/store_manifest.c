/*
 * cb_store: the names of a unit store's objects and the text of its
 * manifests (include/cb_store.h): what the store's reads and writes
 * (store.c) and its sealing (store_enc.c) both stand on.
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

void cb_store_sha256_hex(const void *p, size_t n, char *hex)
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
	cb_store_sha256_hex(b.data, b.len, hex);
	snprintf(tail, sizeof(tail), "end %s\n", hex);
	cb_s3_buf_add(&b, tail, strlen(tail));
	return (char *)b.data;
}

void cb_manifest_release(struct cb_manifest *m)
{
	free(m->name);
	free(m->units);
	free(m->objects);
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
	memset(r, 0, sizeof(*r));
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
int cb_manifest_check_end(const char *text, size_t len, size_t *body)
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
	cb_store_sha256_hex(text, *body, hex);
	return strncmp(hex, e + 5, 64) ? -1 : 0;
}

int cb_manifest_parse(struct cb_manifest *m, const char *name, const char *text, size_t len)
{
	size_t body, cap = 0, at = 0, bad_line = 0, line = 0;
	uint64_t sum = 0;

	memset(m, 0, sizeof(*m));
	if (len < sizeof(MANIFEST_MAGIC) || memcmp(text, MANIFEST_MAGIC "\n", sizeof(MANIFEST_MAGIC)) ||
	    cb_manifest_check_end(text, len, &body) < 0)
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
