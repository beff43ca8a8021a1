/*
 * libFuzzer target: the catalog loader (cb_idx_load) and the zstd seek
 * table parser (cb_zstd_seek_table) on arbitrary bytes. A catalog that
 * loads must be safe to use as cbackup uses it: every entry's strings lie
 * in the file, every lookup (ls PATH, the unit of an offset) stays inside
 * it, every member's data lies in the tar stream and in the units found
 * for it, the unit digests and the members named per unit are sound; a
 * seek table that parses gives ascending units inside the archive.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cb_codec.h"
#include "cb_index.h"

static void inside(const struct cb_idx *x, const char *p)
{
	const unsigned char *q = (const unsigned char *)p;

	if (q < x->map || q >= x->map + x->size || !memchr(q, '\0', (size_t)(x->map + x->size - q)))
		abort();
}

/* A member's data, read by the catalog's word alone (mount): it lies in
 * the tar stream, and the unit found for its last byte holds that byte
 * (else a reader's loop makes no progress: issue 25 item 7). */
static void data_bounded(const struct cb_idx *x, const struct cb_idx_entry *e)
{
	uint64_t last, u, uo, co;

	if (e->flags & CB_IDX_HARDLINK) {
		if (e->size != 0)
			abort();
		return;
	}
	if ((e->flags & CB_IDX_SPARSE) || e->size == 0)
		return;
	if (e->size > x->tar_size - e->data_off)
		abort();
	last = e->data_off + e->size - 1;
	u = cb_idx_unit_for(x, last, &uo, &co);
	if (x->n_units && (uo > last || cb_idx_unit_start(x, u + 1) <= last))
		abort();
}

/* The unit table with digests, and the members named for each unit. */
static void use_units(const struct cb_idx *x)
{
	struct cb_codec_units u;
	uint64_t n = cb_idx_units(x, &u), *v, k;

	if (n != (x->version > 1 ? x->n_units : 0))
		abort();
	for (uint64_t i = 0; i < n && i < 64; i++) {
		if (u.v[i].c_off >= x->archive_size)
			abort();
		k = cb_idx_members_in(x, cb_idx_unit_start(x, i), cb_idx_unit_start(x, i + 1), &v);
		for (uint64_t j = 0; j < k; j++)
			if (v[j] >= x->n_entries || (j && v[j] <= v[j - 1]))
				abort();
		free(v);
	}
	cb_codec_units_release(&u);
}

static void use_idx(const struct cb_idx *x)
{
	uint64_t *v, n, uo, co;
	struct cb_idx_entry e;

	use_units(x);
	for (uint64_t i = 0; i < x->n_entries; i++) {
		cb_idx_entry(x, i, &e);
		inside(x, e.path);
		inside(x, e.link);
		if (e.hdr_off > x->tar_size || e.data_off > x->tar_size)
			abort();
		data_bounded(x, &e);
		cb_idx_unit_for(x, e.hdr_off, &uo, &co);
		if (uo > e.hdr_off || (x->n_units && co >= x->archive_size))
			abort();
		if (i < 4) {
			n = cb_idx_select(x, e.path, &v);
			if (n == 0 || n > x->n_entries)
				abort();   /* an entry's own path selects at least itself */
			free(v);
		}
	}
	n = cb_idx_select(x, "./", &v);
	free(v);
	if (n > x->n_entries)
		abort();
}

static void seek_table(const uint8_t *data, size_t size)
{
	struct cb_codec_units u = { 0 };

	/* the input is the table; the archive is some bytes longer */
	if (cb_zstd_seek_table(data, size, (uint64_t)size + 4096, &u) == 0)
		for (size_t i = 0; i < u.n; i++)
			if (u.v[i].c_off >= 4096 || (i && (u.v[i].u_off <= u.v[i - 1].u_off ||
							   u.v[i].c_off <= u.v[i - 1].c_off)))
				abort();
	cb_codec_units_release(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cb_idx x;
	unsigned char *copy = malloc(size ? size : 1);

	memcpy(copy, data, size);
	if (cb_idx_load(&x, copy, size, 0) == 0) {   /* takes copy, also on error */
		use_idx(&x);
		cb_idx_close(&x);
	}
	seek_table(data, size);
	return 0;
}
