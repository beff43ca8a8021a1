/*
 * restore --path: only the chosen entries (each PATH: that entry, and for a
 * directory its subtree), read from the units that hold them. The catalog
 * (ARCHIVE.idx, or a scan of the archive when there is none) gives each
 * member's header offset; selected members close to each other are read
 * in one run: decode from the unit holding the run's first header, drop
 * the bytes before it, and let libarchive read the members from there.
 * Every header read must be the member the catalog says is there: a
 * catalog that lies about offsets stops the restore, it is never followed.
 *
 * A hardlink in the selection whose target is not: the target's data is
 * restored under the first such link's name, and the other links of the
 * selection point to that.
 */
#include <stdlib.h>
#include <string.h>
#include <archive_entry.h>

#include "cb_cleanup.h"
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "cb_index.h"
#include "cb_util.h"
#include "restore_int.h"

/* Selected members this close (bytes of tar between them) share a run:
 * decoding through them is cheaper than seeking and restarting a unit. */
#define RUN_GAP (1024 * 1024)

struct relink {
	const char *target;      /* the hardlink target outside the selection */
	const char *as;          /* restored under this (selected) name */
};

struct pick {
	uint64_t *v, n, cap;     /* selected entries, archive order */
	struct relink *rl;
	size_t n_rl;
	const uint64_t *lost;     /* --salvage: per entry, 1 + the damaged unit that lost it, or 0 */
};

static void pick_add(struct pick *p, uint64_t i)
{
	if (p->n == p->cap)
		p->v = cb_xrealloc(p->v, (p->cap = p->cap ? 2 * p->cap : 64) * sizeof(*p->v));
	p->v[p->n++] = i;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Sorted, each entry once. */
static void pick_sort(struct pick *p)
{
	uint64_t k = 0;

	qsort(p->v, p->n, sizeof(*p->v), u64_cmp);
	for (uint64_t i = 0; i < p->n; i++)
		if (k == 0 || p->v[k - 1] != p->v[i])
			p->v[k++] = p->v[i];
	p->n = k;
}

static int picked(const struct pick *p, uint64_t i)
{
	return bsearch(&i, p->v, p->n, sizeof(*p->v), u64_cmp) != NULL;
}

static int same_key(const char *a, const char *b)
{
	size_t al, bl;
	const char *ka = cb_idx_key(a, &al), *kb = cb_idx_key(b, &bl);

	return al == bl && memcmp(ka, kb, al) == 0;
}

/* The member a hardlink entry (number i) points to: the last non-link
 * entry of that name before it. */
static int link_target(const struct cb_idx *x, uint64_t i, const char *target, uint64_t *t)
{
	uint64_t *v, n = cb_idx_select(x, target, &v);
	int found = 0;

	for (uint64_t k = 0; k < n; k++) {
		struct cb_idx_entry e;

		cb_idx_entry(x, v[k], &e);
		if (v[k] < i && same_key(e.path, target) && !(e.flags & CB_IDX_HARDLINK)) {
			*t = v[k];
			found = 1;
		}
	}
	free(v);
	return found ? 0 : cb_error("its target '%s' is not in the archive before it", target);
}

static int add_relinks(const struct cb_idx *x, struct pick *p)
{
	uint64_t n = p->n;

	for (uint64_t k = 0; k < n; k++) {
		struct cb_idx_entry e;
		uint64_t t = 0;
		size_t j;

		cb_idx_entry(x, p->v[k], &e);
		if (!(e.flags & CB_IDX_HARDLINK))
			continue;
		if (link_target(x, p->v[k], e.link, &t) < 0)
			return cb_error_prefix("'%s'", e.path);
		if (picked(p, t))
			continue;
		for (j = 0; j < p->n_rl && !same_key(p->rl[j].target, e.link); j++)
			;
		if (j < p->n_rl)
			continue;
		p->rl = cb_xrealloc(p->rl, (p->n_rl + 1) * sizeof(*p->rl));
		p->rl[p->n_rl++] = (struct relink){ e.link, e.path };
		pick_add(p, t);
	}
	pick_sort(p);
	return 0;
}

/* Hardlinks to a lost member have no data to link to: lost too. */
static void lose_links(struct restore_job *r, const struct cb_idx *x, uint64_t *lost)
{
	for (uint64_t i = 0; i < x->n_entries; i++) {
		struct cb_idx_entry e;
		uint64_t t;

		cb_idx_entry(x, i, &e);
		if (lost[i] || !(e.flags & CB_IDX_HARDLINK))
			continue;
		if (link_target(x, i, e.link, &t) == 0 && lost[t]) {
			lost[i] = lost[t];
			restore_lost(r, e.path, lost[i] - 1, "a hardlink to a member in damaged");
		}
	}
}

/* --salvage: the lost members are not restored. */
static void drop_lost(struct pick *p)
{
	uint64_t k = 0;

	for (uint64_t i = 0; i < p->n; i++)
		if (!p->lost[p->v[i]])
			p->v[k++] = p->v[i];
	p->n = k;
}

static int select_paths(const struct cb_idx *x, const struct cb_restore_opts *o, struct pick *p)
{
	for (uint64_t i = 0; o->n_paths == 0 && i < x->n_entries; i++)
		pick_add(p, i);
	for (size_t i = 0; i < o->n_paths; i++) {
		uint64_t *v, n = cb_idx_select(x, o->paths[i], &v);

		for (uint64_t k = 0; k < n; k++)
			pick_add(p, v[k]);
		free(v);
		if (n == 0)
			return cb_error("'%s': not in the archive", o->paths[i]);
	}
	pick_sort(p);
	if (p->lost)
		drop_lost(p);
	return add_relinks(x, p);
}

/* Names moved for hardlinks whose target is outside the selection; 1 if
 * the entry is to be skipped (the link whose name the target took). */
static int relink(const struct pick *p, struct archive_entry *e)
{
	const char *path = archive_entry_pathname(e), *link = archive_entry_hardlink(e);

	for (size_t j = 0; j < p->n_rl; j++) {
		if (!link && same_key(path, p->rl[j].target)) {
			archive_entry_copy_pathname(e, p->rl[j].as);
			return 0;
		}
		if (link && same_key(link, p->rl[j].target)) {
			if (same_key(path, p->rl[j].as))
				return 1;
			archive_entry_copy_hardlink(e, p->rl[j].as);
			return 0;
		}
	}
	return 0;
}

/* Decode from the unit holding entry first's header, up to that header,
 * and no further than entry last's end (a damaged unit after it is never
 * read); every unit decoded is checked against the catalog's digest first. */
static int run_open(struct restore_job *r, const struct cb_idx *x, const char *archive, uint64_t first,
		    uint64_t last)
{
	struct cb_idx_entry e;
	struct cb_tarread_at at = { 0 };
	struct cb_codec_units units;
	int rc;

	cb_idx_entry(x, first, &e);
	cb_idx_seek_for(x, e.hdr_off, &at.u_off, &at.c_off);
	at.skip = e.hdr_off - at.u_off;
	at.limit = cb_idx_member_end(x, last) - e.hdr_off;
	cb_idx_units(x, &units);
	at.units = &units;
	r->read_before += r->tr.total;
	cb_tarread_close(&r->tr);
	rc = cb_tarread_open_at(&r->tr, archive, &at);
	r->tr.progress = &r->progress;
	r->tr.progress_base = r->read_before;
	cb_codec_units_release(&units);
	if (rc < 0)
		return cb_error_prefix("no member where the catalog puts '%s' (offset %llu; run cbackup "
				       "index if the catalog is damaged)", e.path,
				       (unsigned long long)e.hdr_off);
	return 0;
}

static int run_entry(struct restore_job *r, const struct cb_idx *x, const struct pick *p, uint64_t i)
{
	struct archive_entry *ae;
	struct cb_idx_entry e;
	int rc = archive_read_next_header(r->tr.a, &ae);

	cb_idx_entry(x, i, &e);
	if (rc < ARCHIVE_WARN)
		return cb_tarread_error(&r->tr, "cannot read archive");
	if (rc == ARCHIVE_WARN)
		cb_warn(r->log, "%s", archive_error_string(r->tr.a));
	if (!same_key(archive_entry_pathname(ae), e.path))
		return cb_error("the catalog does not match the archive: '%s' is where it says '%s' "
				"is (run cbackup index)", archive_entry_pathname(ae), e.path);
	if (!picked(p, i) || relink(p, ae))
		return 0;
	return restore_entry(r, ae);
}

static int lost_between(const struct pick *p, uint64_t from, uint64_t to)
{
	for (uint64_t i = from; p->lost && i < to; i++)
		if (p->lost[i])
			return 1;
	return 0;
}

/* Runs of selected entries with little between them (and no lost one). */
static uint64_t run_end(const struct cb_idx *x, const struct pick *p, uint64_t k)
{
	while (k + 1 < p->n) {
		struct cb_idx_entry next, after;

		cb_idx_entry(x, p->v[k + 1], &next);
		cb_idx_entry(x, p->v[k] + 1, &after);
		if (next.hdr_off - after.hdr_off > RUN_GAP || lost_between(p, p->v[k] + 1, p->v[k + 1]))
			break;
		k++;
	}
	return k;
}

/* The tar bytes the runs read: the progress total. */
static uint64_t runs_bytes(const struct cb_idx *x, const struct pick *p)
{
	uint64_t sum = 0;

	for (uint64_t k = 0; k < p->n;) {
		uint64_t last = run_end(x, p, k);
		struct cb_idx_entry first;

		cb_idx_entry(x, p->v[k], &first);
		sum += cb_idx_member_end(x, p->v[last]) - first.hdr_off;
		k = last + 1;
	}
	return sum;
}

static int restore_picked(struct restore_job *r, const struct cb_idx *x, const struct pick *p,
			  const char *archive, int progress)
{
	cb_progress_start(&r->progress, progress, "restore", runs_bytes(x, p));
	for (uint64_t k = 0; k < p->n;) {
		uint64_t last = run_end(x, p, k);

		if (cb_check_interrupt() < 0 || run_open(r, x, archive, p->v[k], p->v[last]) < 0)
			return -1;
		for (uint64_t i = p->v[k]; i <= p->v[last]; i++)
			if (run_entry(r, x, p, i) < 0)
				return -1;
		k = last + 1;
	}
	return 0;
}

/* What entry i takes, from the catalog: a file's size rounded up to the
 * block; a sparse file at most its data in the tar (the regions it holds,
 * and its map), up to the next member's header: the catalog does not keep
 * the map, but a decoding pass over the whole archive to read it cost as
 * much as the restore; a hardlink nothing; a block an entry. */
static uint64_t entry_bytes(const struct cb_idx *x, uint64_t i, uint64_t bs)
{
	struct cb_idx_entry e;
	uint64_t data = 0, end;

	cb_idx_entry(x, i, &e);
	if (S_ISREG(e.mode) && !(e.flags & CB_IDX_HARDLINK))
		data = e.size;
	if (data && (e.flags & CB_IDX_SPARSE)) {
		end = cb_idx_member_end(x, i);
		data = end > e.data_off && end - e.data_off < data ? end - e.data_off : data;
	}
	return (data ? (data + bs - 1) / bs : 1) * bs;
}

int restore_need_from_catalog(const char *archive, uint64_t size, uint64_t bs, struct restore_need *n)
{
	char *path = cb_xasprintf("%s.idx", archive);
	struct stat st = { .st_size = (off_t)size };
	struct cb_idx x;
	int ret = -1;

	if ((size || stat(archive, &st) == 0) && cb_idx_open(&x, path, (uint64_t)st.st_size) == 0) {
		for (uint64_t i = 0; i < x.n_entries; i++)
			n->bytes += entry_bytes(&x, i, bs);
		n->entries = x.n_entries;
		n->tar = x.tar_size;
		cb_idx_close(&x);
		ret = 0;
	}
	free(path);
	return ret;
}

/* What the selection takes, from the catalog (entry_bytes). */
static int check_space(struct restore_job *r, const struct cb_restore_opts *o, const struct cb_idx *x,
		       const struct pick *p)
{
	struct restore_need n = { 0, p->n, 0 };
	struct statvfs vfs;
	uint64_t bs;

	if (restore_statvfs(r, &vfs) < 0)
		return cb_error_errno("cannot stat file system of '%s'", r->dest);
	bs = vfs.f_frsize ? vfs.f_frsize : 4096;
	for (uint64_t k = 0; k < p->n; k++)
		n.bytes += entry_bytes(x, p->v[k], bs);
	for (size_t k = 0; k < p->n_rl; k++) {   /* hardlinks that get the data */
		uint64_t t;
		struct cb_idx_entry e;
		if (link_target(x, UINT64_MAX, p->rl[k].target, &t) == 0) {
			cb_idx_entry(x, t, &e);
			n.bytes += (e.size + bs - 1) / bs * bs;
		}
	}
	return restore_space_check(r, o, &n);
}

int cb_restore_paths(struct restore_job *r, const struct cb_restore_opts *o)
{
	struct cb_idx x;
	struct pick p = { 0 };
	uint64_t *lost = NULL;
	int ret;

	if (cb_idx_open_for(&x, o->archive, r->log) < 0)
		return o->salvage ? cb_error_prefix("restore --salvage places the damage by the "
						    "catalog '%s.idx'", o->archive) : -1;
	ret = o->salvage ? restore_salvage_plan(r, &x, o->archive, &lost) : 0;
	if (lost && r->st->n_lost)
		lose_links(r, &x, lost);
	p.lost = lost;
	if (ret == 0)
		ret = select_paths(&x, o, &p);
	if (ret == 0) {
		cb_info(r->log, "restoring %llu of %llu entries", (unsigned long long)p.n,
			(unsigned long long)x.n_entries);
		ret = check_space(r, o, &x, &p);
	}
	if (ret == 0 && !o->dry_run) {
		ret = restore_picked(r, &x, &p, o->archive, o->progress);
	}
	free(p.v);
	free(p.rl);
	free(lost);
	cb_idx_close(&x);
	return ret;
}
