/*
 * cb_store_ops: a store's nights read back and checked. See
 * include/cb_store_ops.h.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cb_index.h"
#include "cb_private.h"
#include "cb_store.h"
#include "cb_store_ops.h"
#include "cb_util.h"

/* A ref's bytes into fd, checked first. 0, or -1 naming the unit. */
static int fetch_ref(struct cb_objstore *s, const struct cb_store_ref *r, int fd, struct cb_s3_buf *b)
{
	char name[80];
	int rc;

	b->len = 0;
	rc = cb_store_get_ref(s, r, b);
	cb_store_ref_object(r, name);
	if (rc == 1)
		return cb_error("storage '%s': unit '%s' is missing", s->label, name);
	if (rc < 0)
		return -1;
	if (fd >= 0 && cb_write_all(fd, b->data, b->len) < 0)
		return cb_error_errno("cannot write the night's copy");
	return 0;
}

/* The units of m (need[i] set) into path at their offsets, the rest a
 * hole of the archive's size. */
static int write_units(struct cb_objstore *s, const struct cb_manifest *m, const char *path,
		       const unsigned char *need)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600), rc = 0;

	if (fd < 0)
		return cb_error_errno("cannot create '%s'", path);
	if (ftruncate(fd, (off_t)m->size) < 0)
		rc = cb_error_errno("cannot write '%s'", path);
	if (rc == 0)
		rc = cb_store_fetch_units(s, m, need, fd);
	if (close(fd) < 0 && rc == 0)
		rc = cb_error_errno("cannot write '%s'", path);
	return rc;
}

/* Compressed bytes [lo, hi) into need: the units they touch. */
static void need_range(const struct cb_manifest *m, uint64_t lo, uint64_t hi, unsigned char *need)
{
	uint64_t off = 0;

	for (size_t i = 0; i < m->n_units; off += m->units[i++].len)
		if (off < hi && off + m->units[i].len > lo)
			need[i] = 1;
}

/* The units a restore of entry i reads: from the catalog unit holding
 * its header to the one holding RESTORE_GAP bytes past its end (a
 * restore reads on across gaps that small rather than seek). */
#define RESTORE_GAP (2u << 20)

static void need_entry(const struct cb_idx *x, const struct cb_manifest *m, uint64_t i,
		       unsigned char *need)
{
	struct cb_idx_entry e;
	struct cb_codec_unit u;
	uint64_t end = cb_idx_member_end(x, i), lo, hi = m->size, uo, k;

	cb_idx_entry(x, i, &e);
	end = end + RESTORE_GAP < x->tar_size ? end + RESTORE_GAP : x->tar_size;
	cb_idx_seek_for(x, e.hdr_off, &uo, &lo);
	k = cb_idx_unit_for(x, end ? end - 1 : 0, &uo, &hi);
	if (k + 1 < x->n_units) {
		cb_idx_unit(x, k + 1, &u);
		hi = u.c_off;
	} else {
		hi = m->size;
	}
	need_range(m, lo, hi, need);
}

/* Which units a restore of paths reads, from the catalog at idx_path:
 * the first and the last (the codec's header, its trailer) always; each
 * path's entries, and the targets of those that are hard links. */
static int need_paths(const char *idx_path, const struct cb_manifest *m,
		      const struct cb_store_fetch *what, unsigned char *need)
{
	struct cb_idx x;

	if (cb_idx_read(&x, idx_path, m->size) < 0)
		return -1;
	need[0] = need[m->n_units - 1] = 1;
	for (size_t p = 0; p < what->n_paths; p++) {
		uint64_t *v, n = cb_idx_select(&x, what->paths[p], &v);

		for (uint64_t k = 0; k < n; k++) {
			struct cb_idx_entry e;
			int64_t t;

			need_entry(&x, m, v[k], need);
			cb_idx_entry(&x, v[k], &e);
			if ((e.flags & CB_IDX_HARDLINK) && (t = cb_idx_find(&x, e.link)) >= 0)
				need_entry(&x, m, (uint64_t)t, need);
		}
		free(v);
	}
	cb_idx_close(&x);
	return 0;
}

/* NAME.idx and NAME.sha256 beside the copy (restore --path and ls read
 * the catalog; restore and verify check the .sha256). */
static int write_side(struct cb_objstore *s, const struct cb_manifest *m, const char *path)
{
	struct cb_s3_buf b = { 0 };
	char *idx = cb_xasprintf("%s.idx", path), *sum = cb_xasprintf("%s.sha256", path), *text;
	int rc = 0;

	if (m->catalog.hex[0]) {
		rc = fetch_ref(s, &m->catalog, -1, &b);
		if (rc == 0)
			rc = cb_write_file_replace_bytes(idx, b.data, b.len, 0600);
	}
	text = m->catalog.hex[0] && rc == 0
		       ? cb_xasprintf("%s  %s\n%s  %s.idx\n", m->sha256, m->name, m->catalog.hex, m->name)
		       : cb_xasprintf("%s  %s\n", m->sha256, m->name);
	if (rc == 0)
		rc = cb_write_file_replace(sum, text, 0600);
	free(text);
	free(idx);
	free(sum);
	cb_s3_buf_release(&b);
	return rc;
}

void cb_store_drop_night(const char *path)
{
	static const char *const sides[] = { "", ".idx", ".sha256", ".verified" };

	for (size_t i = 0; path && i < sizeof(sides) / sizeof(*sides); i++) {
		char *p = cb_xasprintf("%s%s", path, sides[i]);

		unlink(p);
		free(p);
	}
}

/* What to fetch of m, as need[i] a unit. */
static unsigned char *what_to_fetch(const struct cb_manifest *m, const char *path,
				    const struct cb_store_fetch *what)
{
	unsigned char *need = cb_xcalloc(m->n_units + 1, 1);
	char *idx = cb_xasprintf("%s.idx", path);
	int all = !what->catalog_only && !what->n_paths;

	/* a night without a catalog: every unit (restore scans the archive) */
	if (!all && m->n_units && !what->catalog_only && need_paths(idx, m, what, need) < 0)
		all = 1;
	if (all)
		memset(need, 1, m->n_units);
	free(idx);
	return need;
}

char *cb_store_fetch_night(struct cb_objstore *s, const char *name, const char *dir,
			   const struct cb_store_fetch *what)
{
	unsigned char *need = NULL;
	struct cb_manifest m;
	char *path = NULL;
	int fd = cb_private_dir_open(dir), rc;

	if (fd < 0)
		return NULL;
	close(fd);
	rc = cb_store_get_manifest(s, name, &m);
	if (rc == 1)
		cb_error("storage '%s': no night '%s'", s->label, name);
	if (rc != 0)
		return NULL;
	if (cb_manifest_readable(&m, cb_store_key(s), name) < 0) {
		cb_manifest_release(&m);
		return NULL;
	}
	path = cb_xasprintf("%s/%s", dir, name);
	cb_store_drop_night(path);
	/* the catalog first: it says which units a restore of paths reads */
	if (write_side(s, &m, path) < 0)
		rc = -1;
	else if (what->stream && !what->n_paths && cb_store_streamable(&m, path))
		rc = cb_store_stream_start(what->stream, s, &m);
	else
		rc = !(need = what_to_fetch(&m, path, what)) || write_units(s, &m, path, need) < 0 ? -1 : 0;
	if (rc < 0) {
		cb_store_drop_night(path);
		free(path);
		path = NULL;
	}
	free(need);
	cb_manifest_release(&m);
	return path;
}

/* ---- verify ---- */

/* Each unit once, with the nights it is in. */
struct use {
	struct cb_store_ref ref;
	size_t night;
};

struct uses {
	struct use *v;
	size_t n, cap;
	struct cb_strvec nights;
	size_t sealed;               /* nights sealed under a key not given */
};

static void add_use(struct uses *u, const struct cb_store_ref *r, size_t night)
{
	if (!r->hex[0])
		return;
	if (u->n == u->cap) {
		u->cap = u->cap ? 2 * u->cap : 1024;
		u->v = cb_xrealloc(u->v, u->cap * sizeof(*u->v));
	}
	u->v[u->n++] = (struct use){ *r, night };
}

/* The same object: a plain unit and the same unit sealed are two. */
static int same_obj(const struct cb_store_ref *x, const struct cb_store_ref *y)
{
	return !strcmp(x->hex, y->hex) && !x->key == !y->key;
}

static int use_cmp(const void *a, const void *b)
{
	const struct use *x = a, *y = b;
	int c = strcmp(x->ref.hex, y->ref.hex);

	if (!c && !x->ref.key != !y->ref.key)
		c = x->ref.key ? 1 : -1;
	return c ? c : x->night < y->night ? -1 : x->night > y->night;
}

static int gather(struct cb_objstore *s, const char *name, struct uses *u, struct cb_log *log)
{
	struct cb_manifest m;
	size_t k = u->nights.n;
	int rc = cb_store_get_manifest(s, name, &m);

	if (rc == 1)
		return cb_error("storage '%s': no night '%s'", s->label, name);
	if (rc < 0) {
		cb_err(log, "%s", cb_last_error());
		return -1;
	}
	cb_strvec_push(&u->nights, name);
	u->sealed += m.sealed && !m.key;
	add_use(u, &m.catalog, k);
	add_use(u, &m.log, k);
	add_use(u, &m.notes, k);
	for (size_t i = 0; i < m.n_units; i++)
		add_use(u, &m.units[i], k);
	cb_manifest_release(&m);
	return 0;
}

/* "a, b" of the nights unit run [i, j) is in. */
static char *nights_of(const struct uses *u, size_t i, size_t j)
{
	struct cb_s3_buf b = { 0 };

	for (size_t k = i; k < j; k++) {
		const char *n = u->nights.v[u->v[k].night];

		if (k > i && u->v[k].night == u->v[k - 1].night)
			continue;
		if (b.len)
			cb_s3_buf_add(&b, ", ", 2);
		cb_s3_buf_add(&b, n, strlen(n));
	}
	return (char *)b.data;
}

/* Group [i, j) holds a use by night k (SIZE_MAX: any). */
static int used_by(const struct uses *u, size_t i, size_t j, size_t k)
{
	for (; i < j; i++)
		if (k == SIZE_MAX || u->v[i].night == k)
			return 1;
	return 0;
}

/* Each distinct unit of night k (SIZE_MAX: of all) read once; the
 * number of bad ones. */
static size_t check_uses(struct cb_objstore *s, struct uses *u, size_t k, struct cb_log *log)
{
	struct cb_s3_buf b = { 0 };
	size_t bad = 0;

	if (u->n)
		qsort(u->v, u->n, sizeof(*u->v), use_cmp);
	for (size_t i = 0, j; i < u->n; i = j) {
		for (j = i + 1; j < u->n && same_obj(&u->v[j].ref, &u->v[i].ref); j++)
			;
		if (used_by(u, i, j, k) && fetch_ref(s, &u->v[i].ref, -1, &b) < 0) {
			char *n = nights_of(u, i, j);

			cb_err(log, "%s: breaks %s", cb_last_error(), n);
			free(n);
			bad++;
		}
	}
	cb_s3_buf_release(&b);
	return bad;
}

/* Every manifest read: a bad unit is named with every night it breaks. */
static int gather_all(struct cb_objstore *s, struct uses *u, struct cb_log *log)
{
	struct cb_catalog cat;
	int bad = 0;

	if (cb_store_catalog(s, NULL, 0, &cat) < 0)
		return -1;
	for (size_t i = 0; i < cat.n; i++)
		bad |= gather(s, cat.files[i].name, u, log) < 0;
	cb_catalog_release(&cat);
	return bad ? -1 : 0;
}

int cb_store_verify_units(struct cb_objstore *s, const char *name, struct cb_log *log)
{
	struct uses u = { 0 };
	size_t bad = 0, k = SIZE_MAX;
	/* a manifest that cannot be read is said, the others still checked */
	int mbad = gather_all(s, &u, log) < 0, rc = 0;

	for (size_t i = 0; name && i < u.nights.n; i++)
		if (!strcmp(u.nights.v[i], name))
			k = i;
	if (name && k == SIZE_MAX)
		rc = cb_error("storage '%s': no night '%s' (or its manifest is damaged)", s->label, name);
	if (rc == 0 && (bad = check_uses(s, &u, k, log)) > 0)
		rc = cb_error("storage '%s': %zu unit(s) missing or damaged", s->label, bad);
	if (rc == 0 && mbad && !name)
		rc = cb_error("storage '%s': a manifest cannot be read", s->label);
	if (rc == 0)
		cb_info(log, "storage '%s': %s: every unit is there and matches its digest", s->label,
			name ? name : "every night");
	if (rc == 0 && !name && u.sealed)
		cb_info(log, "storage '%s': %zu encrypted night(s) without their key: their objects' "
			"stored digests were checked, their contents were not checked", s->label, u.sealed);
	free(u.v);
	cb_strvec_clear(&u.nights);
	return rc;
}
