/*
 * The set of directories the events named, by file handle: an open
 * addressing table that keeps, for each, where it was when first seen and
 * the names changed in it.
 */
#include <stdlib.h>
#include <string.h>

#include "cb_changes.h"
#include "cb_util.h"
#include "track_int.h"

uint64_t handle_hash(const struct file_handle *h)
{
	uint64_t x = 1469598103934665603ULL ^ (uint64_t)h->handle_type;

	for (unsigned i = 0; i < h->handle_bytes; i++)
		x = (x ^ h->f_handle[i]) * 1099511628211ULL;
	return x;
}

static int handle_eq(const struct file_handle *a, const struct file_handle *b)
{
	return a->handle_type == b->handle_type && a->handle_bytes == b->handle_bytes &&
	       !memcmp(a->f_handle, b->f_handle, a->handle_bytes);
}

struct hent *hset_slot(struct hset *s, const struct file_handle *h, uint64_t hash)
{
	size_t i = hash & (s->cap - 1);

	while (s->v[i].h && !(s->v[i].hash == hash && handle_eq(s->v[i].h, h)))
		i = (i + 1) & (s->cap - 1);
	return &s->v[i];
}

static void hset_grow(struct hset *s)
{
	struct hset big = { cb_xcalloc(s->cap ? s->cap * 2 : 1024, sizeof(struct hent)),
			    s->cap ? s->cap * 2 : 1024, s->n, s->n_inside };

	for (size_t i = 0; i < s->cap; i++)
		if (s->v[i].h)
			*hset_slot(&big, s->v[i].h, s->v[i].hash) = s->v[i];
	free(s->v);
	*s = big;
}

/* counted as inside: kept, resolved at the end */
int place_kept(int place)
{
	return place == P_INSIDE || place == P_INODE;
}

struct hent *hset_add(struct hset *s, const struct file_handle *h, uint64_t hash,
			     int place)
{
	size_t size = sizeof(*h) + h->handle_bytes;
	struct hent *e;

	if ((s->n + 1) * 2 > s->cap)
		hset_grow(s);
	e = hset_slot(s, h, hash);
	if (e->h)  /* known already (its answer from when first seen stands) */
		return e;
	e->h = cb_xmalloc(size);
	memcpy(e->h, h, size);
	e->hash = hash;
	e->place = place;
	s->n++;
	s->n_inside += place_kept(place);
	return e;
}

void hent_free_names(struct hent *e)
{
	cb_changes_names_free(&e->names, &e->n_names);
}

/* Keep the directories inside the root, forget the others: whether a
 * directory is outside is only a cache, wrong once a directory moves. */
void hset_forget_outside(struct hset *s)
{
	struct hset in = { cb_xcalloc(s->cap, sizeof(struct hent)), s->cap, 0, 0 };

	for (size_t i = 0; i < s->cap; i++) {
		if (!s->v[i].h)
			continue;
		if (place_kept(s->v[i].place)) {
			*hset_slot(&in, s->v[i].h, s->v[i].hash) = s->v[i];
			in.n++;
			in.n_inside++;
		} else {
			free(s->v[i].h);
			hent_free_names(&s->v[i]);
		}
	}
	free(s->v);
	*s = in;
}

void hset_release(struct hset *s)
{
	for (size_t i = 0; i < s->cap; i++) {
		free(s->v[i].h);
		hent_free_names(&s->v[i]);
	}
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* An inode to look up in the tree (a link made outside the root, a file
 * held or backing a loop device that cannot be placed by name). */
void track_add_ino(struct cb_track *t, uint64_t ino)
{
	if (t->n_inos && t->inos[t->n_inos - 1] == ino)
		return;
	if (t->n_inos == t->cap_inos) {
		t->cap_inos = t->cap_inos ? t->cap_inos * 2 : 64;
		t->inos = cb_xrealloc(t->inos, t->cap_inos * sizeof(*t->inos));
	}
	t->inos[t->n_inos++] = ino;
}
