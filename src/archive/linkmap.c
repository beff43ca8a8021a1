/*
 * The archive's hardlink map: (dev, ino) of a staged inode with several
 * names -> the archive name its data went under, until all its names are
 * written. libarchive's link resolver holds ~2.7 KB per pending inode (a
 * whole archive_entry) and never links devices; this holds a slot (32
 * bytes, half the table free) and the name, and links every type.
 * Open addressing with linear probing; removal shifts back (no tombstones).
 */
#include <stdlib.h>
#include <string.h>

#include "archive_int.h"
#include "cb_util.h"

static size_t lm_hash(uint64_t dev, uint64_t ino, size_t cap)
{
	uint64_t h = (ino * 0x9e3779b97f4a7c15ULL) ^ (dev * 0xc2b2ae3d27d4eb4fULL);

	return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

static struct lm_slot *lm_find(const struct linkmap *m, uint64_t dev, uint64_t ino)
{
	for (size_t i = m->cap ? lm_hash(dev, ino, m->cap) : 0; m->cap; i = (i + 1) & (m->cap - 1)) {
		struct lm_slot *s = &m->slots[i];
		if (!s->name)
			return NULL;
		if (s->dev == dev && s->ino == ino)
			return s;
	}
	return NULL;
}

static void lm_insert(struct linkmap *m, const struct lm_slot *v)
{
	size_t i = lm_hash(v->dev, v->ino, m->cap);

	while (m->slots[i].name)
		i = (i + 1) & (m->cap - 1);
	m->slots[i] = *v;
	m->n++;
}

static void lm_grow(struct linkmap *m)
{
	struct lm_slot *old = m->slots;
	size_t cap = m->cap;

	m->cap = cap ? cap * 2 : 1024;
	m->slots = cb_xcalloc(m->cap, sizeof(*m->slots));
	m->n = 0;
	for (size_t i = 0; i < cap; i++)
		if (old[i].name)
			lm_insert(m, &old[i]);
	free(old);
}

/* Backward-shift deletion keeps every probe chain unbroken. */
static void lm_remove(struct linkmap *m, struct lm_slot *s)
{
	size_t i = (size_t)(s - m->slots), j = i;

	m->slots[i].name = NULL;
	m->n--;
	for (;;) {
		j = (j + 1) & (m->cap - 1);
		if (!m->slots[j].name)
			return;
		size_t k = lm_hash(m->slots[j].dev, m->slots[j].ino, m->cap);
		/* slot j may move to i only if its home k is not in (i, j] */
		if ((j > i && (k <= i || k > j)) || (j < i && k <= i && k > j)) {
			m->slots[i] = m->slots[j];
			m->slots[j].name = NULL;
			i = j;
		}
	}
}

char *linkmap_link(struct linkmap *m, uint64_t dev, uint64_t ino, uint64_t nlink,
		   const char *name, int *last)
{
	struct lm_slot *s = lm_find(m, dev, ino), v;
	char *first;

	*last = 0;
	if (s) {
		first = s->name;
		if (--s->left == 0) {   /* every name seen: the caller frees it */
			lm_remove(m, s);
			*last = 1;
		}
		return first;
	}
	if ((m->n + 1) * 2 > m->cap)
		lm_grow(m);
	v = (struct lm_slot){ dev, ino, cb_xstrdup(name), nlink > 1 ? (uint32_t)(nlink - 1) : 1 };
	lm_insert(m, &v);
	return NULL;
}

void linkmap_release(struct linkmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->slots[i].name);
	free(m->slots);
	memset(m, 0, sizeof(*m));
}
