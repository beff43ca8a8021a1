/*
 * cb_changes: the list of what pass 2 re-checks (cb_changes.h), built by
 * change tracking and read by the final sync. Plain data: no file system,
 * no threads (tests/unit/test_changes.c).
 */
#include <stdlib.h>
#include <string.h>

#include "cb_changes.h"
#include "cb_util.h"

/* Free a list of changed names and empty it (cb_changed_dir, and the
 * tracker's directories). */
void cb_changes_names_free(char ***names, size_t *n)
{
	for (size_t i = 0; i < *n; i++)
		free((*names)[i]);
	free(*names);
	*names = NULL;
	*n = 0;
}

static void changed_dirs_free(struct cb_changed_dir *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].rel);
		cb_changes_names_free(&v[i].names, &v[i].n_names);
	}
	free(v);
}

void cb_changes_free(struct cb_changes *c)
{
	if (!c)
		return;
	changed_dirs_free(c->dirs, c->n_dirs);
	changed_dirs_free(c->by_ino, c->n_by_ino);
	free(c->inos);
	free(c);
}


static struct cb_changed_dir *dir_push(struct cb_changed_dir **v, size_t *n, size_t *cap,
				       char *const *names, size_t n_names)
{
	struct cb_changed_dir *d;

	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 64;
		*v = cb_xrealloc(*v, *cap * sizeof(**v));
	}
	d = &(*v)[(*n)++];
	memset(d, 0, sizeof(*d));
	/* names, even none (the directory's own inode only), or NULL: list it */
	if (names) {
		d->names = cb_xcalloc(n_names ? n_names : 1, sizeof(*d->names));
		d->n_names = n_names;
	}
	for (size_t i = 0; i < d->n_names; i++)
		d->names[i] = cb_xstrdup(names[i]);
	return d;
}

void cb_changes_add_names(struct cb_changes *c, const char *rel, char *const *names, size_t n)
{
	dir_push(&c->dirs, &c->n_dirs, &c->cap_dirs, names, n)->rel = cb_xstrdup(rel);
}

void cb_changes_add_dir(struct cb_changes *c, const char *rel)
{
	cb_changes_add_names(c, rel, NULL, 0);
}

struct cb_changed_dir *cb_changes_add_by_ino(struct cb_changes *c, uint64_t ino, char *const *names,
					     size_t n)
{
	struct cb_changed_dir *d = dir_push(&c->by_ino, &c->n_by_ino, &c->cap_by_ino, names, n);

	d->ino = ino;
	return d;
}

void cb_changes_add_path(struct cb_changes *c, char *rel)
{
	char *slash = strrchr(rel, '/'), *base = slash ? slash + 1 : rel;

	if (slash)
		*slash = '\0';
	cb_changes_add_names(c, slash ? rel : "", &base, 1);
}


static int cmp_rel(const void *a, const void *b)
{
	return strcmp(((const struct cb_changed_dir *)a)->rel, ((const struct cb_changed_dir *)b)->rel);
}

/* d is named again by o (freed here): listed if either says so. */
static void changed_dir_merge(struct cb_changed_dir *d, struct cb_changed_dir *o)
{
	d->deep |= o->deep;
	if (!d->names || !o->names) {
		cb_changes_names_free(&d->names, &d->n_names);
		cb_changes_names_free(&o->names, &o->n_names);
	} else if (o->n_names) {
		d->names = cb_xrealloc(d->names, (d->n_names + o->n_names) * sizeof(*d->names));
		memcpy(d->names + d->n_names, o->names, o->n_names * sizeof(*o->names));
		d->n_names += o->n_names;
		free(o->names);
	} else {
		free(o->names);
	}
	free(o->rel);
}

void cb_changes_sort(struct cb_changes *c)
{
	size_t k = 0;

	if (c->n_dirs)   /* qsort(NULL, 0, ...) is undefined (UBSan) */
		qsort(c->dirs, c->n_dirs, sizeof(*c->dirs), cmp_rel);
	for (size_t i = 0; i < c->n_dirs; i++) {
		if (k && !strcmp(c->dirs[k - 1].rel, c->dirs[i].rel))
			changed_dir_merge(&c->dirs[k - 1], &c->dirs[i]);
		else
			c->dirs[k++] = c->dirs[i];
	}
	c->n_dirs = k;
}

