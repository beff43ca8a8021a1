/*
 * Pass 2 over what change tracking saw (include/cb_track.h). Each changed
 * directory is merged against its index records by the same code and rule
 * as the full walk, but an unchanged subdirectory (same inode) is not
 * entered (st->shallow): it is done only if it is itself among the changed.
 * A directory in which the events only changed some entries (no entry
 * made, removed or renamed) is not listed: those names alone are checked
 * (stage_p2_names), so the frozen pass costs what changed, not the size of
 * the directories it changed in.
 * Directories go parents first (sorted paths), so that one its parent made
 * anew (a new or replaced directory is copied whole) is already done.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cb_cleanup.h"
#include "cb_track.h"
#include "stage_int.h"

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

/* The index entry of rel ("a/b", not the root), NULL if it has none. */
static struct stage_ent *index_ent(struct cb_stage *st, const char *rel)
{
	char *path = cb_xstrdup(rel), *p = path, *slash;
	struct stage_dir *d = st->root;
	struct stage_ent *e;

	for (;;) {
		if ((slash = strchr(p, '/')))
			*slash = '\0';
		e = d ? stage_dir_find(d, p) : NULL;
		if (!e || !slash)
			break;
		d = S_ISDIR(e->rec.mode) ? e->sub : NULL;
		p = slash + 1;
	}
	free(path);
	return e;
}

static void rel_set(struct cb_stage *st, const char *rel)
{
	size_t saved;

	st->rel_len = 0;
	st->rel[0] = '\0';
	if (*rel)
		stage_rel_push(st, rel, &saved);
}

/* The directory at sfd/dfd whose index is *d: only its changed names if
 * tracking has them and they are what it promises, else all of it. */
static int do_dir(struct cb_stage *st, int sfd, int dfd, const struct cb_changed_dir *cd,
		  struct stage_dir **d, int *dirty)
{
	int ret;

	if (cd->names) {
		if ((ret = stage_p2_names(st, sfd, dfd, *d, cd->names, cd->n_names, dirty)) != 1)
			return ret;
		cb_verbose(st->log, "change tracking: '/%s' has changed more than its events said: "
			   "listed", cd->rel);
	}
	return stage_p2_dir(st, sfd, dfd, *d, d, dirty);
}

/* One changed directory below the root: 0, 1 if it is not what the index
 * says (then tracking missed something: the caller walks it all), -1. */
static int do_subdir(struct cb_stage *st, int sroot, const struct cb_changed_dir *cd)
{
	const char *rel = cd->rel;
	struct stage_ent *e = index_ent(st, rel);
	const char *slash = strrchr(rel, '/'), *name = slash ? slash + 1 : rel;
	char *prel = slash ? strndup(rel, (size_t)(slash - rel)) : cb_xstrdup("");
	int psfd = -1, pdfd = -1, csfd = -1, cdfd = -1, ret = 1, dirty = 0;
	struct stat sb;

	/* made whole or removed by its parent, excluded, another file system */
	if (!e || !S_ISDIR(e->rec.mode) || !e->sub || e->rec.dev != (uint64_t)st->root_dev) {
		ret = 0;
		goto out;
	}
	if ((psfd = stage_open_below(sroot, prel)) < 0 || (pdfd = stage_open_below(st->dst_fd, prel)) < 0 ||
	    (csfd = openat(psfd, name, DIR_FLAGS)) < 0 || fstat(csfd, &sb) < 0 ||
	    sb.st_ino != (ino_t)e->rec.ino || sb.st_dev != (dev_t)e->rec.dev)
		goto out;
	rel_set(st, rel);
	if ((cdfd = openat(pdfd, name, DIR_FLAGS)) < 0) {
		ret = stage_fail(st, "cannot open", "in staging");
		goto out;
	}
	ret = do_dir(st, csfd, cdfd, cd, &e->sub, &dirty);
	/* its children made or removed bump the staged times: set them again */
	if (ret == 0 && (dirty || cb_stage_decide(&e->rec, &sb) != CB_DELTA_SAME))
		ret = stage_meta(st, csfd, cdfd, -1, pdfd, name, &sb, 0);
	stage_rec_fill(&e->rec, &sb);
out:
	for (int *fd = (int[]){ psfd, pdfd, csfd, cdfd }, i = 0; i < 4; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	free(prel);
	rel_set(st, "");
	return ret;
}

static void add_ino(struct cb_changes *c, uint64_t ino)
{
	c->inos = cb_xrealloc(c->inos, (c->n_inos + 1) * sizeof(*c->inos));
	c->inos[c->n_inos++] = ino;
}

/* Inodes pass 1 saw with several names: a change made through a name
 * outside the root raises no event inside it. Those whose stat moved are
 * looked up under all their names. */
static void links_moved(struct cb_stage *st, int sroot, struct cb_changes *c)
{
	for (size_t i = 0; i < st->links.cap; i++) {
		struct link_ent *m = st->links.slots[i].val;
		struct stage_ent *e;
		struct stat sb;

		if (!m)
			continue;
		e = index_ent(st, m->rel + 1);
		if (!e || fstatat(sroot, m->rel + 1, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
		    cb_stage_decide(&e->rec, &sb) != CB_DELTA_SAME)
			add_ino(c, st->links.slots[i].ino);
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* ---- the tree's inode numbers, noted before the freeze ---- */

/* Any cap, not only powers of two: the hash's high bits scaled to it. */
static size_t ino_slot(const uint64_t *v, size_t cap, uint64_t ino)
{
	size_t i = (size_t)(((unsigned __int128)(ino * 0x9e3779b97f4a7c15ULL) * cap) >> 64);

	while (v[i] && v[i] != ino)
		i = i + 1 < cap ? i + 1 : 0;
	return i;
}

static size_t count_entries(const struct stage_dir *d)
{
	size_t n = d ? d->n : 0;

	for (size_t i = 0; d && i < d->n; i++)
		n += count_entries(d->ents[i].sub);
	return n;
}

static void note_inos(struct cb_stage *st, const struct stage_dir *d)
{
	for (size_t i = 0; d && i < d->n; i++) {
		const struct cb_index_rec *r = &d->ents[i].rec;
		if (r->dev == (uint64_t)st->root_dev && r->ino)
			st->tree_inos[ino_slot(st->tree_inos, st->tree_inos_cap, r->ino)] = r->ino;
		note_inos(st, d->ents[i].sub);
	}
}

void cb_stage_note_inodes(struct cb_stage *st)
{
	/* at most 4/5 full: held with the whole staging index until pass 2,
	 * so its slots count per entry at the backup's peak (a power of two
	 * at most half full took 16 to 32 bytes an entry, this 10) */
	size_t n = count_entries(st->root), cap = n + n / 4 + 64;

	free(st->tree_inos);
	st->tree_inos = cb_xcalloc(cap, sizeof(*st->tree_inos));
	st->tree_inos_cap = cap;
	note_inos(st, st->root);
}

/* Keep of c->inos those pass 1 saw in the tree (all, if they were not
 * noted); an inode made since is in a directory with events of its own. */
static void inos_in_tree(struct cb_stage *st, struct cb_changes *c)
{
	size_t k = 0;

	for (size_t i = 0; st->tree_inos && i < c->n_inos; i++)
		if (st->tree_inos[ino_slot(st->tree_inos, st->tree_inos_cap, c->inos[i])])
			c->inos[k++] = c->inos[i];
	if (st->tree_inos)
		c->n_inos = k;
}

static int cmp_dir_ino(const void *a, const void *b)
{
	return cmp_u64(&((const struct cb_changed_dir *)a)->ino,
		       &((const struct cb_changed_dir *)b)->ino);
}

/* A directory tracking could not place by a path is the index's
 * directory with its inode: it is checked as its events said. */
static void dir_by_ino(struct cb_stage *st, const struct stage_ent *e, const char *rel,
		       struct cb_changes *c)
{
	struct cb_changed_dir key = { .ino = e->rec.ino }, *d;

	if (e->rec.dev != (uint64_t)st->root_dev ||
	    !(d = bsearch(&key, c->by_ino, c->n_by_ino, sizeof(key), cmp_dir_ino)))
		return;
	cb_changes_add_names(c, rel, d->names, d->n_names);
	c->dirs[c->n_dirs - 1].deep = d->deep;
	cb_verbose(st->log, "change tracking: directory inode %llu is '/%s'",
		   (unsigned long long)e->rec.ino, rel);
}

/* Every index entry whose inode is in c->inos, by its name; every
 * directory whose inode is in c->by_ino. */
static void find_inos(struct cb_stage *st, struct stage_dir *d, const char *rel,
		      struct cb_changes *c)
{
	for (size_t i = 0; d && i < d->n; i++) {
		struct stage_ent *e = &d->ents[i];
		if (S_ISDIR(e->rec.mode) && e->sub) {
			char *sub = *rel ? cb_xasprintf("%s/%s", rel, e->name) : cb_xstrdup(e->name);
			if (c->n_by_ino)
				dir_by_ino(st, e, sub, c);
			find_inos(st, e->sub, sub, c);
			free(sub);
		} else if (e->rec.dev == (uint64_t)st->root_dev &&
			   bsearch(&e->rec.ino, c->inos, c->n_inos, sizeof(*c->inos), cmp_u64)) {
			cb_changes_add_names(c, rel, (char *const[]){ (char *)e->name }, 1);
		}
	}
}

int stage_p2_tracked(struct cb_stage *st, int sfd, int *dirty)
{
	struct cb_changes *c = st->changes;
	size_t i, listed = 0;
	int ret = 0;

	double start = cb_now();

	inos_in_tree(st, c);
	links_moved(st, sfd, c);
	if (c->n_inos || c->n_by_ino) {
		qsort(c->inos, c->n_inos, sizeof(*c->inos), cmp_u64);
		qsort(c->by_ino, c->n_by_ino, sizeof(*c->by_ino), cmp_dir_ino);
		find_inos(st, st->root, "", c);
	}
	cb_verbose(st->log, "change tracking: %zu inodes and %zu directories of the tree looked up "
		   "(%.3f s)", c->n_inos, c->n_by_ino, cb_now() - start);
	cb_changes_sort(c);
	for (i = 0; i < c->n_dirs; i++)
		listed += !c->dirs[i].names;
	cb_info(st->log, "pass 2: tracked %zu directories, %zu to list, the others by name "
		"(%llu events)", c->n_dirs, listed, (unsigned long long)c->events);
	for (i = 0; i < c->n_dirs && ret == 0; i++) {
		/* a directory moved in is walked whole: an unchanged
		 * subdirectory of it may have changed while it was outside */
		st->shallow = !c->dirs[i].deep;
		ret = c->dirs[i].rel[0] ? do_subdir(st, sfd, &c->dirs[i])
					: do_dir(st, sfd, st->dst_fd, &c->dirs[i], &st->root, dirty);
	}
	st->shallow = 0;
	/* a signal during the last directory's copies ends the pass, as it
	 * would at the next directory of the whole walk */
	if (ret == 0)
		ret = cb_check_interrupt();
	if (ret == 1)
		cb_warn(st->log, "change tracking missed a change at '/%s': the final sync walks "
			"the whole tree", c->dirs[i - 1].rel);
	return ret;
}
