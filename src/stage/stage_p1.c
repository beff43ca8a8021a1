/*
 * Pass 1 of the staging engine (DESIGN §7), while the guest runs: every
 * source entry created in the staging copy (files' data cloned or copied,
 * by the pool's workers with stage-workers), or over a kept staging copy
 * quick-checked and brought up to date; the index built as it goes.
 * Creating an entry is also what pass 2 does for a new one.
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

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

/* ---- creating entries ---- */

int stage_open_new(struct cb_stage *st, int dfd, const char *name)
{
	int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
	uint64_t n = 0;
	int fd = openat(dfd, name, flags, 0600);

	/* a stray staged entry (not in the index) is in the way */
	if (fd < 0 && errno == EEXIST && stage_remove(st, dfd, name, &n) == 0)
		fd = openat(dfd, name, flags, 0600);
	if (fd < 0)
		stage_fail(st, "cannot create", "in staging");
	return fd;
}

/* Copy a file's data and metadata into an open staged fd. */
int stage_fill_reg(struct cb_stage *st, int in, int out, int dfd, const char *name,
		   const struct stat *sb, int fresh)
{
	struct stat staged;

	if (stage_copy_data(st, in, out, sb) < 0 || stage_meta(st, in, out, -1, dfd, name, sb, fresh) < 0)
		return -1;
	if (sb->st_nlink > 1) {
		if (fstat(out, &staged) < 0)
			return stage_fail(st, "cannot stat", "in staging");
		stage_link_remember(st, sb, &staged);
	}
	return 0;
}

/* Pass 1 with workers: the staged inode exists (a hardlink to it can be
 * made at once); its data and metadata are a worker's job. The file is
 * new (O_EXCL): its metadata is set as on a fresh copy. */
static int hand_over(struct cb_stage *st, int in, int out, const struct stat *sb)
{
	struct stat staged;

	if (sb->st_nlink > 1) {
		if (fstat(out, &staged) < 0) {
			stage_fail(st, "cannot stat", "in staging");
			close(in);
			close(out);
			return -1;
		}
		stage_link_remember(st, sb, &staged);
	}
	return stage_pool_push(st, in, out, sb, 1);
}

static int create_reg(struct cb_stage *st, int sfd, int dfd, const char *name,
		      const struct stat *sb, int fresh)
{
	int in, out, ret;

	if (sb->st_nlink > 1 && (ret = stage_link_existing(st, dfd, name, sb)) != 1)
		return ret;
	if ((ret = stage_src_open(st, sfd, name, O_RDONLY | O_NONBLOCK, sb, &in)) != 0)
		return ret;
	out = stage_open_new(st, dfd, name);
	if (out >= 0 && st->pool)
		return hand_over(st, in, out, sb);
	ret = out < 0 ? -1 : stage_fill_reg(st, in, out, dfd, name, sb, fresh);
	if (out >= 0)
		close(out);
	close(in);
	return ret;
}

static int make_dir(struct cb_stage *st, int dfd, const char *name)
{
	uint64_t n = 0;
	int fd;

	if (mkdirat(dfd, name, 0700) < 0 && (errno != EEXIST || stage_remove(st, dfd, name, &n) < 0 ||
					     mkdirat(dfd, name, 0700) < 0))
		return stage_fail(st, "cannot create directory", "in staging");
	fd = openat(dfd, name, DIR_FLAGS);
	if (fd < 0)
		stage_fail(st, "cannot open directory", "in staging");
	else if (st->dir_hook)
		st->dir_hook(st->dir_hook_arg, fd);
	return fd;
}

/* A new staged directory, filled; its metadata after its children, so
 * that creating them does not bump its times. */
static int create_dir(struct cb_stage *st, int sfd, int dfd, const char *name,
		      const struct stat *sb, int fresh, struct stage_dir **sub)
{
	size_t lv = cb_fdpath_top(&st->sp);
	int csfd, cdfd, ret;

	if ((ret = stage_src_open(st, sfd, name, O_RDONLY | O_DIRECTORY, sb, &csfd)) != 0)
		return ret;
	if ((cdfd = make_dir(st, dfd, name)) < 0) {
		close(csfd);
		return -1;
	}
	/* another file system (a mount point): an empty directory, as rsync -x */
	if (sb->st_dev != st->root_dev) {
		*sub = cb_xcalloc(1, sizeof(**sub));
		ret = stage_meta(st, csfd, cdfd, -1, dfd, name, sb, fresh);
		close(cdfd);
		close(csfd);
		return ret;
	}
	if (stage_descend(st, csfd, cdfd, name) < 0)
		return -1;
	ret = stage_p1_walk(st, 1, NULL, sub);
	if (ret == 0)
		ret = stage_dir_meta(st, lv, name, sb, fresh);
	stage_ascend(st);
	/* removed while listed: the index will not have it, nor may staging */
	if (ret == 1 && ((dfd = stage_dst_dir(st, lv)) < 0 ||
			 stage_remove(st, dfd, name, &(uint64_t){ 0 }) < 0))
		return -1;
	return ret;
}

/* Create the staged copy of one source entry: 0, 1 (vanished), -1. */
int stage_create_entry(struct cb_stage *st, int sfd, int dfd, const char *name,
		       const struct stat *sb, int fresh, struct stage_ent *e)
{
	int r;

	e->sub = NULL;
	if (S_ISREG(sb->st_mode))
		return create_reg(st, sfd, dfd, name, sb, fresh);
	if (S_ISDIR(sb->st_mode))
		return create_dir(st, sfd, dfd, name, sb, fresh, &e->sub);
	/* symlinks, fifos and devices can have several names too */
	if (sb->st_nlink > 1 && (r = stage_link_existing(st, dfd, name, sb)) != 1)
		return r;
	r = stage_make_special(st, sfd, dfd, name, sb);
	if (r == 1)
		return stage_vanished(st);
	if (r < 0 || stage_meta(st, -1, -1, sfd, dfd, name, sb, fresh) < 0)
		return -1;
	return sb->st_nlink > 1 ? stage_link_remember_at(st, dfd, name, sb) : 0;
}

/* ---- pass 1 ---- */

/* Count one source entry. 0 to copy it, 1 if it is skipped (excluded,
 * socket). check_excl: run the exclude rule. */
int stage_source_count(struct cb_stage *st, const struct stat *sb, int check_excl)
{
	struct cb_stage_stats *s = st->stats;

	if (check_excl && ((st->excludes.n &&
			    stage_excluded_slash(&st->excludes, st->rel, S_ISDIR(sb->st_mode))) ||
			   stage_left_out(st, sb))) {
		s->skipped++;
		return 1;
	}
	s->files++;
	if (S_ISREG(sb->st_mode))
		s->total_size += (uint64_t)sb->st_size;
	if (!S_ISSOCK(sb->st_mode))
		return 0;
	cb_verbose(st->log, "skipping socket '%s'", stage_relname(st));
	s->skipped++;
	return 1;
}

/* lstat one source entry and count it: 0, 1 (skipped or vanished), -1. */
static int source_stat(struct cb_stage *st, int sfd, const char *name, struct stat *sb)
{
	if (fstatat(sfd, name, sb, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? stage_vanished(st) : stage_fail(st, "cannot stat", "in source");
	return stage_source_count(st, sb, 1);
}

/* keep-staging: a regular file already staged, k its record in the kept
 * index (NULL: none). Only the full pass-2 rule proves it unchanged. */
static int sync_reg(struct cb_stage *st, int sfd, int dfd, const char *name,
		    const struct stat *sb, const struct stat *have, const struct stage_ent *k)
{
	struct link_ent *m = ino_map_get(&st->links, sb->st_dev, sb->st_ino);
	int linked = sb->st_nlink > 1 && m && m->gen == st->gen;
	uint64_t n = 0;

	if (linked && have->st_ino == m->sino)
		return 0;  /* the inode was brought up to date under another name */
	if (!linked && k && cb_stage_decide_racy(&k->rec, sb, &st->kept_since) == CB_DELTA_SAME &&
	    have->st_size == sb->st_size) {
		if (sb->st_nlink > 1)
			stage_link_remember(st, sb, have);
		return 0;
	}
	if (stage_remove(st, dfd, name, &n) < 0)
		return -1;
	return create_reg(st, sfd, dfd, name, sb, 0);
}

static int sync_dir(struct cb_stage *st, int sfd, int dfd, const char *name,
		    const struct stat *sb, struct stage_ent *e, struct stage_dir *kept)
{
	size_t lv = cb_fdpath_top(&st->sp);
	int csfd, cdfd, ret;

	if ((ret = stage_src_open(st, sfd, name, O_RDONLY | O_DIRECTORY, sb, &csfd)) != 0)
		return ret;
	cdfd = openat(dfd, name, DIR_FLAGS);
	if (cdfd < 0) {
		close(csfd);
		return stage_fail(st, "cannot open", "in staging");
	}
	if (stage_descend(st, csfd, cdfd, name) < 0)
		return -1;
	ret = stage_p1_walk(st, 0, kept, &e->sub);
	if (ret == 0)
		ret = stage_dir_meta(st, lv, name, sb, 0);
	stage_ascend(st);
	return ret;
}

/* keep-staging: bring an entry of a non-empty staged directory up to date,
 * deciding by the kept index (kept: this directory's part of it). Special
 * files the index cannot prove unchanged are simply made again. */
static int sync_entry(struct cb_stage *st, int sfd, int dfd, const char *name,
		      const struct stat *sb, struct stage_ent *e, struct stage_dir *kept)
{
	struct stage_ent *k = stage_dir_find(kept, name);
	struct stat have;
	uint64_t n = 0;

	e->sub = NULL;
	if (fstatat(dfd, name, &have, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT)
			return stage_fail(st, "cannot stat", "in staging");
		return stage_create_entry(st, sfd, dfd, name, sb, 0, e);
	}
	if (S_ISREG(sb->st_mode) && S_ISREG(have.st_mode))
		return sync_reg(st, sfd, dfd, name, sb, &have, k);
	if (S_ISDIR(sb->st_mode) && S_ISDIR(have.st_mode) && sb->st_dev == st->root_dev)
		return sync_dir(st, sfd, dfd, name, sb, e, k && S_ISDIR(k->rec.mode) ? k->sub : NULL);
	if (k && !S_ISDIR(sb->st_mode) && ((sb->st_mode ^ have.st_mode) & S_IFMT) == 0 &&
	    cb_stage_decide_racy(&k->rec, sb, &st->kept_since) == CB_DELTA_SAME)
		return 0;
	if (stage_remove(st, dfd, name, &n) < 0)
		return -1;
	return stage_create_entry(st, sfd, dfd, name, sb, 0, e);
}

static int p1_entry(struct cb_stage *st, int sfd, int dfd, const char *name, int fresh,
		    struct stage_dir *kept, struct stage_dir *d)
{
	struct stage_ent *e = &d->ents[d->n];
	struct stat sb;
	size_t saved;
	int r;

	stage_rel_push(st, name, &saved);
	r = source_stat(st, sfd, name, &sb);
	if (r == 0 && fresh)
		r = stage_create_entry(st, sfd, dfd, name, &sb, 1, e);
	else if (r == 0)
		r = sync_entry(st, sfd, dfd, name, &sb, e, kept);
	if (r == 0) {
		e->name = name;
		stage_rec_fill(&e->rec, &sb);
		d->n++;
	} else {   /* not counted: what a failed or vanished directory built */
		stage_dir_free(e->sub);
		e->sub = NULL;
	}
	stage_rel_pop(st, saved);
	return r < 0 ? -1 : 0;
}

/* keep-staging: staged entries the index does not have are removed. */
static int prune_extra(struct cb_stage *st, int dfd, struct stage_dir *d)
{
	struct listing l;
	int ret = 0;

	if (stage_list(dfd, &l) < 0)
		return stage_fail(st, "cannot list", "in staging");
	for (size_t i = 0; i < l.n && ret == 0; i++) {
		size_t saved;
		if (stage_dir_find(d, l.v[i]))
			continue;
		stage_rel_push(st, l.v[i], &saved);
		ret = stage_remove(st, dfd, l.v[i], &st->stats->deleted);
		stage_rel_pop(st, saved);
	}
	stage_listing_release(&l);
	return ret;
}

/* 0, 1 if the directory was removed after it was opened, -1. */
int stage_list_source(struct cb_stage *st, int sfd, struct listing *l)
{
	if (cb_check_interrupt() < 0)
		return -1;
	/* a worker failed: stop walking (stage_pool_finish reports it) */
	if (stage_pool_failed(st))
		return cb_error("a staging worker failed");
	stage_pool_kick(st);
	if (stage_list(sfd, l) == 0)
		return 0;
	return errno == ENOENT ? stage_vanished(st) : stage_fail(st, "cannot list", "in source");
}

/* The new index node takes over the listing's names block. */
struct stage_dir *stage_dir_from_listing(struct listing *l)
{
	struct stage_dir *d = cb_xcalloc(1, sizeof(*d));

	d->names = l->names;
	d->ents = cb_xcalloc(l->n, sizeof(*d->ents));
	l->names = NULL;
	return d;
}

int stage_p1_walk(struct cb_stage *st, int fresh, struct stage_dir *kept, struct stage_dir **out)
{
	size_t lv = cb_fdpath_top(&st->sp);
	struct listing l;
	struct stage_dir *d;
	int sfd, dfd, ret;

	*out = NULL;
	if ((ret = stage_src_dir(st, lv, &sfd)) != 0 || (ret = stage_list_source(st, sfd, &l)) != 0)
		return ret;
	d = stage_dir_from_listing(&l);
	/* the fds again for each entry: a subdirectory's walk may close them */
	for (size_t i = 0; i < l.n && ret == 0; i++)
		if ((ret = stage_src_dir(st, lv, &sfd)) == 0)
			ret = (dfd = stage_dst_dir(st, lv)) < 0 ? -1
			      : p1_entry(st, sfd, dfd, l.v[i], fresh, kept, d);
	if (ret == 0 && !fresh)
		ret = (dfd = stage_dst_dir(st, lv)) < 0 ? -1 : prune_extra(st, dfd, d);
	stage_listing_release(&l);
	if (ret != 0) {
		stage_dir_free(d);
		return ret < 0 ? -1 : 1;
	}
	*out = d;
	return 0;
}
