/*
 * Pass 2 of the staging engine (DESIGN §7), with the guest frozen: each
 * source directory merge-walked against its index records, so that new,
 * vanished and changed entries (the decision rule: stage_decide.c) are
 * found in one pass without path lookups; large vanished files parked in
 * case they were renamed. stage_p2track.c runs it over only what change
 * tracking saw (stage_p2_dir, stage_p2_names).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cb_cleanup.h"
#include "cb_rmtree.h"
#include "cb_track.h"
#include "stage_int.h"

/* Vanished files at least this big are parked, in case they were renamed. */
#define ORPHAN_MIN (64 << 10)

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

/* ---- pass 2 ---- */

static int hold_open(struct cb_stage *st)
{
	if (st->hold_fd >= 0)
		return 0;
	if (mkdirat(st->dst_fd, STAGE_HOLD_NAME, 0700) < 0 && errno != EEXIST)
		return -1;
	st->hold_fd = openat(st->dst_fd, STAGE_HOLD_NAME, DIR_FLAGS);
	return st->hold_fd < 0 ? -1 : 0;
}

/* Park a vanished staged file in the holding directory: if it was renamed
 * in the source, pass 2 moves it back instead of copying its data. */
static int park(struct cb_stage *st, int dfd, const struct stage_ent *o)
{
	struct orphan *p;

	if (!st->hold_ok || o->rec.size < ORPHAN_MIN || ino_map_get(&st->orphans, o->rec.dev, o->rec.ino))
		return -1;
	if (hold_open(st) < 0)
		return -1;
	p = cb_xcalloc(1, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%u", st->orphan_seq++);
	if (renameat(dfd, o->name, st->hold_fd, p->name) < 0) {
		free(p);
		return -1;
	}
	p->size = o->rec.size;
	p->mtime = o->rec.mtime;
	p->ctime = o->rec.ctime;
	ino_map_put(&st->orphans, o->rec.dev, o->rec.ino, p);
	st->stats->deleted++;
	return 0;
}

/* Same bytes in both files (of size bytes)? 1 yes, 0 no or unreadable. */
static int same_bytes(struct cb_stage *st, int a, int b, uint64_t size)
{
	char *x = st->buf, *y = st->buf + STAGE_BUF_SIZE / 2;
	uint64_t off = 0;

	while (off < size) {
		size_t k = size - off < STAGE_BUF_SIZE / 2 ? (size_t)(size - off) : STAGE_BUF_SIZE / 2;
		if (pread(a, x, k, (off_t)off) != (ssize_t)k || pread(b, y, k, (off_t)off) != (ssize_t)k ||
		    memcmp(x, y, k))
			return 0;
		off += k;
	}
	return 1;
}

/* A parked copy stands for the renamed file only if its identity is the
 * whole of it (dev, ino, size, mtime, ctime). A rename moves the ctime,
 * and so does a write with the mtime put back, or an inode recycled for
 * another file: then the bytes decide. */
static int parked_matches(struct cb_stage *st, int sfd, const char *name, const struct stat *sb,
			  const struct orphan *p)
{
	int in, held, ok;

	if (p->used || p->size != (uint64_t)sb->st_size || !stage_ts_eq(&p->mtime, &sb->st_mtim))
		return 0;
	if (stage_ts_eq(&p->ctime, &sb->st_ctim))
		return 1;
	in = stage_open_src(st, sfd, name, O_RDONLY | O_NONBLOCK, sb);
	held = openat(st->hold_fd, p->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ok = in >= 0 && held >= 0 && same_bytes(st, in, held, p->size);
	if (in >= 0)
		close(in);
	if (held >= 0)
		close(held);
	return ok;
}

/* Move a parked file back under its new name: 0, or 1 if there is none. */
static int unpark(struct cb_stage *st, int sfd, int dfd, const char *name, const struct stat *sb)
{
	struct orphan *p = ino_map_get(&st->orphans, sb->st_dev, sb->st_ino);

	if (!p || !parked_matches(st, sfd, name, sb, p))
		return 1;
	if (renameat(st->hold_fd, p->name, dfd, name) < 0)
		return 1;
	p->used = 1;
	cb_verbose(st->log, "'%s' was renamed: staged copy reused", stage_relname(st));
	return 0;
}

void stage_hold_release(struct cb_stage *st)
{
	uint64_t n = 0;

	if (st->hold_fd >= 0) {
		close(st->hold_fd);
		st->hold_fd = -1;
		stage_remove(st, st->dst_fd, STAGE_HOLD_NAME, &n);
	}
	ino_map_clear(&st->orphans, free);
}

/* An index entry the source no longer has. */
static int p2_gone(struct cb_stage *st, int dfd, struct stage_ent *o)
{
	size_t saved;
	int ret = 0;

	stage_rel_push(st, o->name, &saved);
	if (!S_ISREG(o->rec.mode) || park(st, dfd, o) < 0)
		ret = stage_remove(st, dfd, o->name, &st->stats->deleted);
	stage_dir_free(o->sub);
	o->sub = NULL;
	stage_rel_pop(st, saved);
	return ret;
}

/* Rewrite a changed file in place (O_TRUNC keeps staged hardlinks). */
static int rewrite_reg(struct cb_stage *st, int sfd, int dfd, const char *name,
		       const struct stat *sb)
{
	int in, out, ret;

	if ((ret = stage_src_open(st, sfd, name, O_RDONLY | O_NONBLOCK, sb, &in)) != 0)
		return ret;
	out = openat(dfd, name, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
	if (out < 0 && errno == ENOENT)
		out = stage_open_new(st, dfd, name);
	else if (out < 0)
		stage_fail(st, "cannot open", "in staging");
	ret = out < 0 ? -1 : stage_fill_reg(st, in, out, dfd, name, sb, 0);
	if (out >= 0)
		close(out);
	close(in);
	return ret;
}

/* A file with several links whose inode was already refreshed in this
 * pass under another name: only make sure the staged names share it.
 * 1 if handled that way, 0 if not, -1 on error. */
static int p2_linked(struct cb_stage *st, int sfd, int dfd, const char *name,
		     const struct stat *sb, struct stage_ent *e, int *dirty)
{
	struct link_ent *m = ino_map_get(&st->links, sb->st_dev, sb->st_ino);
	struct stat have;
	uint64_t n = 0;

	if (sb->st_nlink < 2 || !m || m->gen != st->gen)
		return 0;
	if (fstatat(dfd, name, &have, AT_SYMLINK_NOFOLLOW) == 0 &&
	    have.st_dev == (dev_t)m->sdev && have.st_ino == (ino_t)m->sino)
		return 1;
	*dirty = 1;
	if (stage_remove(st, dfd, name, &n) < 0)
		return -1;
	return stage_create_entry(st, sfd, dfd, name, sb, 0, e) < 0 ? -1 : 1;
}

static int p2_subdir(struct cb_stage *st, int sfd, size_t lv, const char *name,
		     const struct stat *sb, struct stage_ent *o, struct stage_ent *e, int meta)
{
	int csfd, dfd, ret, dirty = 0;

	/* a mount point stays empty; over tracked directories, an unchanged
	 * one is entered only if it is itself among them. Not one whose stat
	 * moved or is racily clean: it may have been removed and made again
	 * under its recycled inode, and the events of the old one (its
	 * entries removed) name a directory that no longer exists */
	if (sb->st_dev != st->root_dev ||
	    (st->shallow && o->sub && !meta && !stage_racy(&o->rec.ctime, &st->racy_since))) {
		e->sub = o->sub;
		o->sub = NULL;
		if (!meta)
			return 0;
		return (dfd = stage_dst_dir(st, lv)) < 0 ? -1 : stage_meta(st, -1, -1, sfd, dfd, name, sb, 0);
	}
	if ((ret = stage_src_open(st, sfd, name, O_RDONLY | O_DIRECTORY, sb, &csfd)) != 0)
		return ret;
	if (stage_descend(st, csfd, -1, name) < 0)
		return -1;
	ret = stage_p2_walk(st, o->sub, &e->sub, &dirty);
	o->sub = NULL;
	/* children made or removed bump the staged dir's times: set them again */
	if (ret == 0 && (meta || dirty))
		ret = stage_dir_meta(st, lv, name, sb, 0);
	stage_ascend(st);
	return ret;
}

static int p2_changed(struct cb_stage *st, int sfd, size_t lv, const char *name,
		      const struct stat *sb, struct stage_ent *o, struct stage_ent *e, int *dirty)
{
	enum cb_delta delta = cb_stage_decide_racy(&o->rec, sb, &st->racy_since);
	uint64_t n = 0;
	int dfd, r;

	e->sub = NULL;
	if (S_ISDIR(sb->st_mode) && delta != CB_DELTA_REPLACE)
		return p2_subdir(st, sfd, lv, name, sb, o, e, delta != CB_DELTA_SAME);
	/* unchanged: nothing to do in staging, but for an entry with several
	 * links, whose staged names must still share one inode */
	if (delta == CB_DELTA_SAME && sb->st_nlink < 2)
		return 0;
	if ((dfd = stage_dst_dir(st, lv)) < 0)
		return -1;
	if (delta != CB_DELTA_REPLACE && (r = p2_linked(st, sfd, dfd, name, sb, e, dirty)) != 0)
		return r < 0 ? -1 : 0;
	if (delta == CB_DELTA_REPLACE) {
		*dirty = 1;
		stage_dir_free(o->sub);
		o->sub = NULL;
		if (stage_remove(st, dfd, name, &n) < 0)
			return -1;
		return stage_create_entry(st, sfd, dfd, name, sb, 0, e);
	}
	/* not a directory: cb_stage_decide gives no META here (a file whose
	 * stat moved is copied again, any other entry made again) */
	if (delta == CB_DELTA_DATA)
		return rewrite_reg(st, sfd, dfd, name, sb);
	if (sb->st_nlink > 1)
		return stage_link_remember_at(st, dfd, name, sb);
	return 0;
}

static int p2_new(struct cb_stage *st, int sfd, int dfd, const char *name,
		  const struct stat *sb, struct stage_ent *e)
{
	e->sub = NULL;
	if (S_ISREG(sb->st_mode) && st->hold_fd >= 0 && unpark(st, sfd, dfd, name, sb) == 0) {
		if (stage_meta(st, -1, -1, sfd, dfd, name, sb, 0) < 0)
			return -1;
		return sb->st_nlink > 1 ? stage_link_remember_at(st, dfd, name, sb) : 0;
	}
	return stage_create_entry(st, sfd, dfd, name, sb, 0, e);
}

/* One source entry against its index record o (NULL: new). Entries the
 * index has were not excluded; the rule is only run again if a directory
 * became a file or the other way round ("dir/" patterns). */
static int p2_entry(struct cb_stage *st, int sfd, size_t lv, const char *name,
		    struct stage_ent *o, struct stage_dir *nd, int *dirty, const struct stat *pre,
		    int pre_err)
{
	struct stage_ent *e = &nd->ents[nd->n];
	struct stat sb;
	int dfd, r;

	/* the stat the pool took (stage_p2par.c), or one taken now */
	if (pre && !pre_err)
		sb = *pre;
	if (pre ? (errno = pre_err) != 0 : fstatat(sfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
		r = errno == ENOENT ? stage_vanished(st) : stage_fail(st, "cannot stat", "in source");
	else
		r = stage_source_count(st, &sb, !o || S_ISDIR(o->rec.mode) != S_ISDIR(sb.st_mode));
	if (r == 0 && o)
		r = p2_changed(st, sfd, lv, name, &sb, o, e, dirty);
	else if (r == 0)
		r = (dfd = stage_dst_dir(st, lv)) < 0 ? -1 : p2_new(st, sfd, dfd, name, &sb, e);
	if (r == 0) {
		e->name = name;
		stage_rec_fill(&e->rec, &sb);
		nd->n++;
		*dirty |= !o;
		return 0;
	}
	/* not counted: what a failed or vanished directory built */
	stage_dir_free(e->sub);
	e->sub = NULL;
	if (r == 1 && o) {
		*dirty = 1;
		r = (dfd = stage_dst_dir(st, lv)) < 0 ? -1 : p2_gone(st, dfd, o);
	}
	return r < 0 ? -1 : 0;
}

/* Sweep 1 removes (or parks) what vanished before sweep 2 adds anything,
 * so that a file renamed within a directory finds its parked copy. */
static int p2_sweep_gone(struct cb_stage *st, size_t lv, struct stage_dir *old,
			 const struct listing *l, int *dirty)
{
	size_t j = 0;
	int dfd;

	for (size_t i = 0; old && i < old->n; i++) {
		int c = 1;
		while (j < l->n && (c = strcmp(l->v[j], old->ents[i].name)) < 0)
			j++;
		if (j < l->n && c == 0)
			continue;
		*dirty = 1;
		if ((dfd = stage_dst_dir(st, lv)) < 0 || p2_gone(st, dfd, &old->ents[i]) < 0)
			return -1;
	}
	return 0;
}

int stage_p2_walk(struct cb_stage *st, struct stage_dir *old, struct stage_dir **out, int *dirty)
{
	size_t lv = cb_fdpath_top(&st->sp), j = 0;
	struct listing l;
	struct stage_dir *nd;
	struct stat *pre;
	int *pre_err;
	int sfd, ret;

	*out = NULL;
	if ((ret = stage_src_dir(st, lv, &sfd)) != 0 || (ret = stage_list_source(st, sfd, &l)) != 0) {
		stage_dir_free(old);
		return ret;
	}
	p2_pool_stat(st->p2pool, sfd, &l, &pre, &pre_err);
	nd = stage_dir_from_listing(&l);
	ret = p2_sweep_gone(st, lv, old, &l, dirty);
	for (size_t i = 0; i < l.n && ret == 0; i++) {
		struct stage_ent *o = NULL;
		size_t saved;
		while (old && j < old->n && strcmp(old->ents[j].name, l.v[i]) < 0)
			j++;
		if (old && j < old->n && !strcmp(old->ents[j].name, l.v[i]))
			o = &old->ents[j];
		stage_rel_push(st, l.v[i], &saved);
		/* the fd again for each entry: a subdirectory's walk may close it */
		if ((ret = stage_src_dir(st, lv, &sfd)) == 0)
			ret = p2_entry(st, sfd, lv, l.v[i], o, nd, dirty, pre ? &pre[i] : NULL,
				       pre ? pre_err[i] : 0);
		stage_rel_pop(st, saved);
	}
	free(pre);
	free(pre_err);
	stage_listing_release(&l);
	stage_dir_free(old);
	*out = nd;
	return ret;
}

int stage_p2_dir(struct cb_stage *st, int sfd, int dfd, struct stage_dir *old,
		 struct stage_dir **out, int *dirty)
{
	int ret;

	stage_paths_at(st, sfd, dfd);
	ret = stage_p2_walk(st, old, out, dirty);
	stage_paths_release(st);
	return ret;
}

/* Every name an index entry, not a directory either side, still in the
 * source: 1 if one is not (nothing counted), else 0 with their index
 * entries and stats. */
static int names_as_promised(struct cb_stage *st, int sfd, struct stage_dir *d,
			     char *const *names, size_t n, struct stage_ent **ents, struct stat *sb)
{
	for (size_t i = 0; i < n; i++) {
		if (!(ents[i] = stage_dir_find(d, names[i])) || S_ISDIR(ents[i]->rec.mode))
			return 1;
		if (fstatat(sfd, names[i], &sb[i], AT_SYMLINK_NOFOLLOW) < 0)
			return errno == ENOENT ? 1 : stage_fail(st, "cannot stat", "in source");
		if (S_ISDIR(sb[i].st_mode))
			return 1;
	}
	return 0;
}

int stage_p2_names(struct cb_stage *st, int sfd, int dfd, struct stage_dir *d,
		   char *const *names, size_t n, int *dirty)
{
	struct stat *sb = cb_xcalloc(n, sizeof(*sb));
	struct stage_ent **ents = cb_xcalloc(n, sizeof(*ents));
	int ret;

	if ((ret = names_as_promised(st, sfd, d, names, n, ents, sb)) != 0)
		goto out;
	stage_paths_at(st, sfd, dfd);
	for (size_t i = 0; i < n && ret == 0; i++) {
		struct stage_ent *e = ents[i], old = *e;
		size_t saved;
		stage_rel_push(st, names[i], &saved);
		/* a socket is in no index; the exclude rule gave the same answer
		 * when the entry was recorded (same name, not a directory) */
		stage_source_count(st, &sb[i], 0);
		if ((ret = p2_changed(st, sfd, 0, names[i], &sb[i], &old, e, dirty)) == 0)
			stage_rec_fill(&e->rec, &sb[i]);
		stage_rel_pop(st, saved);
	}
	stage_paths_release(st);
	/* 1: one vanished while copied: the caller lists the directory */
out:
	free(ents);
	free(sb);
	return ret;
}
