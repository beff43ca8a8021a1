/*
 * restore --path from a store's night: only the units that hold the
 * chosen members are fetched into the night's stand-in (a sparse file of
 * the archive's size, its catalog beside it), each at its offset. A small
 * file back from a night of hundreds of units then costs the manifest,
 * the catalog and a unit or two, not the whole night. See cb_store_ops.h.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cb_index.h"
#include "cb_store.h"
#include "cb_store_ops.h"
#include "cb_util.h"

/* restore --path decodes through unselected members between selected
 * ones closer than this (restore_paths.c's RUN_GAP, 1 MiB): fetching
 * what lies in such gaps too keeps every run it reads whole. */
#define FILL_GAP (4 * 1024 * 1024)

struct span {
	uint64_t from, to;   /* uncompressed tar bytes [from, to) */
};

struct spans {
	struct span *v;
	size_t n, cap;
};

static void span_add(struct spans *s, uint64_t from, uint64_t to)
{
	if (s->n == s->cap)
		s->v = cb_xrealloc(s->v, (s->cap = s->cap ? 2 * s->cap : 64) * sizeof(*s->v));
	s->v[s->n++] = (struct span){ from, to };
}

static int span_cmp(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->from < y->from ? -1 : x->from > y->from;
}

/* Entry i's member: its first header to the next member's header. */
static void add_entry(const struct cb_idx *x, uint64_t i, struct spans *s)
{
	struct cb_idx_entry e, next;

	cb_idx_entry(x, i, &e);
	if (i + 1 < x->n_entries)
		cb_idx_entry(x, i + 1, &next);
	span_add(s, e.hdr_off, i + 1 < x->n_entries ? next.hdr_off : x->tar_size);
}

/* The members path selects, and for a hardlink among them every member
 * of its target's name (the data restore takes from one of them). */
static void add_path(const struct cb_idx *x, const char *path, struct spans *s)
{
	uint64_t *v, n = cb_idx_select(x, path, &v);

	for (uint64_t k = 0; k < n; k++) {
		struct cb_idx_entry e;

		add_entry(x, v[k], s);
		cb_idx_entry(x, v[k], &e);
		if (e.flags & CB_IDX_HARDLINK) {
			uint64_t *t, m = cb_idx_select(x, e.link, &t);

			for (uint64_t j = 0; j < m; j++)
				add_entry(x, t[j], s);
			free(t);
		}
	}
	free(v);
}

/* Sorted, spans closer than FILL_GAP joined. */
static void spans_merge(struct spans *s)
{
	size_t k = 0;

	if (!s->n)
		return;
	qsort(s->v, s->n, sizeof(*s->v), span_cmp);
	for (size_t i = 1; i < s->n; i++) {
		if (s->v[i].from <= s->v[k].to + FILL_GAP) {
			if (s->v[i].to > s->v[k].to)
				s->v[k].to = s->v[i].to;
		} else {
			s->v[++k] = s->v[i];
		}
	}
	s->n = k + 1;
}

/* Uncompressed span -> archive bytes: from the unit holding its start to
 * the end of the unit holding its last byte. No unit table (a night
 * without compression): the same offsets; a compressed one without: all. */
static void span_bytes(const struct cb_idx *x, const struct span *sp, uint64_t size, uint64_t *from,
		       uint64_t *to)
{
	uint64_t u_off, last;
	struct cb_codec_unit next;

	if (!x->n_units) {
		*from = x->codec == CB_COMPRESS_NONE ? sp->from : 0;
		*to = x->codec == CB_COMPRESS_NONE ? sp->to : size;
		return;
	}
	cb_idx_unit_for(x, sp->from, &u_off, from);
	last = cb_idx_unit_for(x, sp->to > sp->from ? sp->to - 1 : sp->from, &u_off, to);
	if (last + 1 < x->n_units) {
		cb_idx_unit(x, last + 1, &next);
		*to = next.c_off;
	} else {
		*to = size;
	}
}

/* Every unit of m that overlaps an archive range of the spans (and the
 * first), fetched into fd at its offset. */
static int write_needed(struct cb_objstore *s, const struct cb_manifest *m, const struct cb_idx *x,
			const struct spans *sp, int fd)
{
	unsigned char *want = cb_xcalloc(m->n_units + 1, 1);
	uint64_t off = 0;
	size_t k = 0;
	int rc;

	for (size_t i = 0; i < m->n_units; off += m->units[i++].len) {
		uint64_t from = 0, to = 0;

		while (k < sp->n) {
			span_bytes(x, &sp->v[k], m->size, &from, &to);
			if (to > off)
				break;
			k++;   /* spans ascend, and so do their archive ranges */
		}
		/* the first unit always: the reader knows the codec by the
		 * archive's first bytes */
		want[i] = i == 0 || (k < sp->n && from < off + m->units[i].len);
	}
	rc = cb_store_fetch_units(s, m, want, fd);
	free(want);
	return rc;
}

int cb_store_fill_paths(struct cb_objstore *s, const char *name, const char *path, char *const *paths,
			size_t n_paths)
{
	struct cb_manifest m;
	struct spans sp = { 0 };
	struct cb_idx x;
	char *idx = cb_xasprintf("%s.idx", path);
	int fd = -1, rc = cb_store_get_manifest(s, name, &m);

	if (rc == 1)
		rc = cb_error("storage '%s': no night '%s'", s->label, name);
	if (rc != 0) {
		free(idx);
		return -1;
	}
	rc = cb_idx_open(&x, idx, m.size);
	if (rc == 0) {
		for (size_t i = 0; i < n_paths; i++)
			add_path(&x, paths[i], &sp);
		spans_merge(&sp);
		fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
		rc = fd < 0 ? cb_error_errno("cannot open '%s'", path) : write_needed(s, &m, &x, &sp, fd);
		if (fd >= 0 && close(fd) < 0 && rc == 0)
			rc = cb_error_errno("cannot write '%s'", path);
		cb_idx_close(&x);
	}
	free(sp.v);
	free(idx);
	cb_manifest_release(&m);
	return rc;
}
