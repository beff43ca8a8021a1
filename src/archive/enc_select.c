/*
 * Which frames a view needs (enc_int.h): for restore --path only those
 * holding the members asked for, their parent directories, and the first
 * and last frame (archive header, zstd seek table): one file comes back
 * without the whole archive being decrypted. The others stay holes in the
 * view; the plain restore checks every unit it reads against the catalog,
 * so a hole it would need anyway is an error, never wrong bytes. A hard
 * link (its data is another member's) takes every frame.
 */
#include <stdlib.h>
#include <string.h>

#include "cb_index.h"
#include "enc_int.h"
#include "cb_util.h"

/* Mark the frames holding compressed bytes [from, to). */
static void mark(const struct enc_idx *x, unsigned char *want, uint64_t from, uint64_t to)
{
	for (uint64_t i = 0; i < x->n; i++)
		if (x->f[i].p_off < to && x->f[i].p_off + x->f[i].p_len > from)
			want[i] = 1;
}

/* The compressed range of the units holding tar bytes [u_from, u_to]. */
static void mark_tar(const struct cb_idx *ci, const struct enc_idx *x, unsigned char *want,
		     uint64_t u_from, uint64_t u_to)
{
	uint64_t uo, c_from, c_to = x->plain_size, last;
	struct cb_codec_unit u;

	cb_idx_seek_for(ci, u_from, &uo, &c_from);
	last = cb_idx_unit_for(ci, u_to, &uo, &c_to);
	c_to = x->plain_size;
	if (ci->n_units && last + 1 < ci->n_units) {
		cb_idx_unit(ci, last + 1, &u);
		c_to = u.c_off;
	}
	mark(x, want, c_from, c_to);
}

/* Entry i and every directory above it; -1 for a hard link. */
static int mark_entry(const struct cb_idx *ci, const struct enc_idx *x, unsigned char *want,
		      uint64_t i)
{
	struct cb_idx_entry e;
	char *dir;

	cb_idx_entry(ci, i, &e);
	if (e.flags & CB_IDX_HARDLINK)
		return -1;
	mark_tar(ci, x, want, e.hdr_off, e.data_off + e.size + 1024);
	dir = cb_xstrdup(e.path);
	for (char *s = strrchr(dir, '/'); s && s > dir; s = strrchr(dir, '/')) {
		int64_t d;
		*s = '\0';
		if ((d = cb_idx_find(ci, dir)) >= 0) {
			cb_idx_entry(ci, (uint64_t)d, &e);
			mark_tar(ci, x, want, e.hdr_off, e.data_off + 1024);
		}
	}
	free(dir);
	return 0;
}

unsigned char *enc_frames_for_paths(const struct enc_idx *x, const char *plain_idx,
				    char *const *paths, size_t n_paths)
{
	struct cb_idx ci;
	unsigned char *want;
	int all = 0;

	if (cb_idx_read(&ci, plain_idx, x->plain_size) < 0)
		return NULL;
	want = cb_xcalloc(x->n + 1, 1);
	if (x->n) {
		want[0] = 1;
		want[x->n - 1] = 1;
	}
	for (size_t p = 0; p < n_paths && !all; p++) {
		uint64_t *ents = NULL, m = cb_idx_select(&ci, paths[p], &ents);
		for (uint64_t j = 0; j < m && !all; j++)
			all = mark_entry(&ci, x, want, ents[j]) < 0;
		free(ents);
	}
	cb_idx_close(&ci);
	if (all) {
		free(want);
		return NULL;
	}
	return want;
}
