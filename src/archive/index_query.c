/*
 * Questions to a loaded catalog (cb_index.h): the entries under a path
 * (sorted order, binary search), the unit that holds an offset, the units
 * and members of a range. Loading and checking the catalog, and building
 * it, are index.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <openssl/evp.h>
#include "cb_index.h"
#include "cb_private.h"
#include "cb_util.h"
#include "index_int.h"

/* Where key k would go in the path order: the first position not below it. */
static uint64_t lower_bound(const struct cb_idx *x, const char *k, size_t kl)
{
	uint64_t lo = 0, hi = x->n_entries;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		struct cb_idx_entry e;
		size_t el;
		const char *ek;

		cb_idx_entry(x, idx_get32(x->order + 4 * mid), &e);
		ek = cb_idx_key(e.path, &el);
		if (idx_key_cmp(ek, el, k, kl) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* k itself or below it ("a" covers "a/b", not "ab"); "" covers all */
static int covers(const char *k, size_t kl, const char *ek, size_t el)
{
	if (kl == 0)
		return 1;
	return el >= kl && memcmp(ek, k, kl) == 0 && (el == kl || ek[kl] == '/');
}

uint64_t cb_idx_order_at(const struct cb_idx *x, uint64_t pos)
{
	return idx_get32(x->order + 4 * pos);
}

uint64_t cb_idx_range(const struct cb_idx *x, const char *path, uint64_t *first)
{
	size_t kl;
	const char *k = cb_idx_key(path, &kl);
	uint64_t i = lower_bound(x, k, kl);

	*first = i;
	for (; i < x->n_entries; i++) {
		struct cb_idx_entry e;
		size_t el;
		const char *ek;

		cb_idx_entry(x, cb_idx_order_at(x, i), &e);
		ek = cb_idx_key(e.path, &el);
		if (!covers(k, kl, ek, el))
			break;
	}
	return i - *first;
}

int64_t cb_idx_find(const struct cb_idx *x, const char *path)
{
	size_t kl;
	const char *k = cb_idx_key(path, &kl);
	int64_t found = -1;

	for (uint64_t i = lower_bound(x, k, kl); i < x->n_entries; i++) {
		struct cb_idx_entry e;
		size_t el;
		const char *ek;

		cb_idx_entry(x, cb_idx_order_at(x, i), &e);
		ek = cb_idx_key(e.path, &el);
		if (el != kl || memcmp(ek, k, kl))
			break;
		found = (int64_t)cb_idx_order_at(x, i);
	}
	return found;
}

uint64_t cb_idx_select(const struct cb_idx *x, const char *path, uint64_t **out)
{
	uint64_t first, n = cb_idx_range(x, path, &first);
	uint64_t *v = cb_xmalloc((n ? n : 1) * sizeof(*v));

	for (uint64_t i = 0; i < n; i++)
		v[i] = cb_idx_order_at(x, first + i);
	qsort(v, n, sizeof(*v), u64_cmp);
	*out = v;
	return n;
}

uint64_t cb_idx_unit_for(const struct cb_idx *x, uint64_t off, uint64_t *u_off, uint64_t *c_off)
{
	uint64_t lo = 0, hi = x->n_units;

	*u_off = *c_off = 0;
	if (x->n_units == 0)
		return 0;
	/* the last unit starting at or before off */
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (idx_get64(x->units + mid * x->unit_len) <= off)
			lo = mid;
		else
			hi = mid;
	}
	*u_off = idx_get64(x->units + lo * x->unit_len);
	*c_off = idx_get64(x->units + lo * x->unit_len + 8);
	return lo;
}

void cb_idx_unit(const struct cb_idx *x, uint64_t u, struct cb_codec_unit *out)
{
	const unsigned char *p = x->units + u * x->unit_len;

	out->u_off = idx_get64(p);
	out->c_off = idx_get64(p + 8);
	out->crc = x->version > 1 ? idx_get32(p + 16) : 0;
	out->len = 0;
}

uint64_t cb_idx_units(const struct cb_idx *x, struct cb_codec_units *u)
{
	uint64_t n = x->version > 1 ? x->n_units : 0;

	memset(u, 0, sizeof(*u));
	u->v = cb_xcalloc(n ? n : 1, sizeof(*u->v));
	for (uint64_t i = 0; i < n; i++)
		cb_idx_unit(x, i, &u->v[i]);
	u->n = u->cap = n;
	return n;
}

uint64_t cb_idx_member_end(const struct cb_idx *x, uint64_t i)
{
	return i + 1 < x->n_entries ? idx_get64(x->entries + (i + 1) * ENT + ENT_HDR) : x->tar_size;
}

/* A member takes the tar bytes from its first header to the next one's. */
uint64_t cb_idx_members_in(const struct cb_idx *x, uint64_t from, uint64_t to, uint64_t **out)
{
	uint64_t lo = 0, hi = x->n_entries, n = 0;
	uint64_t *v = NULL;

	/* the first member whose successor starts after from */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (cb_idx_member_end(x, mid) <= from)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint64_t i = lo; i < x->n_entries && idx_get64(x->entries + i * ENT + ENT_HDR) < to; i++) {
		v = cb_xrealloc(v, (n + 1) * sizeof(*v));
		v[n++] = i;
	}
	*out = v;
	return n;
}

uint64_t cb_idx_unit_start(const struct cb_idx *x, uint64_t u)
{
	return u < x->n_units ? idx_get64(x->units + u * x->unit_len) : x->tar_size;
}

void cb_idx_seek_for(const struct cb_idx *x, uint64_t off, uint64_t *u_off, uint64_t *c_off)
{
	cb_idx_unit_for(x, off, u_off, c_off);
	if (x->codec == CB_COMPRESS_NONE)
		*u_off = *c_off = off;
}
