/*
 * cb_stage: the staging engine (DESIGN §7). See include/cb_stage.h.
 *
 * Both passes walk the source one directory at a time with openat/fstatat
 * on directory fds, entries in sorted order. Pass 1 creates (or, over a
 * kept staging copy, quick-checks) every entry and builds the index; pass 2
 * merge-walks each source directory against its index records, so new,
 * vanished and changed entries are found in one pass without path lookups.
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

static int p1_dir(struct cb_stage *st, int fresh, struct stage_dir *kept, struct stage_dir **out);
static int p2_dir(struct cb_stage *st, struct stage_dir *old, struct stage_dir **out, int *dirty);

static int ts_eq(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

enum cb_delta cb_stage_decide(const struct cb_index_rec *old, const struct stat *now)
{
	int moved;

	if ((old->mode ^ now->st_mode) & S_IFMT)
		return CB_DELTA_REPLACE;
	if (old->dev != (uint64_t)now->st_dev || old->ino != (uint64_t)now->st_ino)
		return CB_DELTA_REPLACE;
	if ((S_ISCHR(now->st_mode) || S_ISBLK(now->st_mode)) && old->rdev != (uint64_t)now->st_rdev)
		return CB_DELTA_REPLACE;
	moved = old->size != (uint64_t)now->st_size || !ts_eq(&old->mtime, &now->st_mtim) ||
		!ts_eq(&old->ctime, &now->st_ctim);
	/* ctime too: a write with the mtime put back still moves it, and a
	 * chmod (which also moves it) cannot be told apart from that */
	if (S_ISREG(now->st_mode) && moved)
		return CB_DELTA_DATA;
	moved |= old->mode != now->st_mode || old->uid != now->st_uid || old->gid != now->st_gid;
	/* a symlink or device removed and made again may get the freed inode
	 * back (ext4 does): its target or rdev is only known by reading it, so
	 * whatever moved, it is made again (cheap: no data) */
	if (moved && !S_ISDIR(now->st_mode))
		return CB_DELTA_REPLACE;
	return moved ? CB_DELTA_META : CB_DELTA_SAME;
}

static int ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

/* A ctime in whole seconds is taken as from a file system that stamps
 * in seconds; any other is at most one clock tick behind. */
static int racy(const struct timespec *ctime, const struct timespec *since)
{
	struct timespec cut = *since;

	if (ctime->tv_nsec == 0)
		return ctime->tv_sec >= since->tv_sec - 1;
	cut.tv_nsec -= CB_STAGE_RACY_TICK_NS;
	if (cut.tv_nsec < 0) {
		cut.tv_nsec += 1000000000L;
		cut.tv_sec--;
	}
	return !ts_before(ctime, &cut);
}

enum cb_delta cb_stage_decide_racy(const struct cb_index_rec *old, const struct stat *now,
				   const struct timespec *since)
{
	enum cb_delta d = cb_stage_decide(old, now);

	if (d == CB_DELTA_REPLACE || d == CB_DELTA_DATA || S_ISDIR(now->st_mode) ||
	    !racy(&old->ctime, since))
		return d;
	return S_ISREG(now->st_mode) ? CB_DELTA_DATA : CB_DELTA_REPLACE;
}

/* A live guest changes under pass 1: what vanished or changed type is
 * left to pass 2, which runs frozen and is authoritative. */
static int vanished(struct cb_stage *st)
{
	if (errno == ESTALE)
		cb_verbose(st->log, "'%s' changed type during copy: left to the final sync",
			   stage_relname(st));
	else
		cb_verbose(st->log, "file vanished during copy: '%s'", stage_relname(st));
	st->stats->skipped++;
	return 1;
}

static int gone_errno(int err)
{
	return err == ENOENT || err == ENOTDIR || err == ELOOP || err == ESTALE;
}

/* Open the source entry sb describes: 0 (*fd set), 1 vanished, -1. */
static int src_open(struct cb_stage *st, int sfd, const char *name, int flags,
		    const struct stat *sb, int *fd)
{
	*fd = stage_open_src(st, sfd, name, flags, sb);
	if (*fd >= 0)
		return 0;
	return gone_errno(errno) ? vanished(st) : stage_fail(st, "cannot open", "in source");
}

/*
 * The walks hold their directories in st->sp (source) and st->dp
 * (staging), level by level, with a bounded number of fds open
 * (cb_fdpath.h): a directory's fd is fetched again after anything that
 * can descend.
 */

/* The source directory at level lv: 0 (*fd set), 1 (it moved or
 * vanished since it was entered), -1. */
static int src_dir(struct cb_stage *st, size_t lv, int *fd)
{
	*fd = cb_fdpath_fd(&st->sp, lv);
	if (*fd >= 0)
		return 0;
	return gone_errno(errno) ? vanished(st) : stage_fail(st, "cannot open", "in source");
}

/* The staged directory at level lv (opened on first use in pass 2, where
 * most directories need nothing in staging): its fd, or -1 (reported). */
static int dst_dir(struct cb_stage *st, size_t lv)
{
	size_t dir_len, now = st->rel_len;
	int fd = cb_fdpath_fd(&st->dp, lv), err;
	char c;

	if (fd >= 0)
		return fd;
	/* name the directory that failed, not the entry being worked on */
	err = errno;
	dir_len = cb_fdpath_tag(&st->dp, st->dp.failed);
	c = st->rel[dir_len];
	st->rel[dir_len] = '\0';
	st->rel_len = dir_len;
	errno = err;
	stage_fail(st, "cannot open", "in staging");
	st->rel[dir_len] = c;
	st->rel_len = now;
	return -1;
}

/* Enter a directory on both sides (the fds are taken over; dfd may be -1:
 * opened when needed). 0 or -1. */
static int descend(struct cb_stage *st, int sfd, int dfd, const char *name)
{
	if (cb_fdpath_push(&st->sp, sfd, name, st->rel_len) < 0) {
		if (dfd >= 0)
			close(dfd);
		return stage_fail(st, "cannot stat", "in source");
	}
	if (cb_fdpath_push(&st->dp, dfd, name, st->rel_len) < 0) {
		cb_fdpath_pop(&st->sp);
		return stage_fail(st, "cannot stat", "in staging");
	}
	return 0;
}

static void ascend(struct cb_stage *st)
{
	cb_fdpath_pop(&st->sp);
	cb_fdpath_pop(&st->dp);
}

/* A directory's metadata (level lv+1, named name at level lv), set after
 * its entries: 0, 1 (the source moved), -1. */
static int dir_meta(struct cb_stage *st, size_t lv, const char *name, const struct stat *sb,
		    int fresh)
{
	int csfd, cdfd, dfd, r;

	if ((r = src_dir(st, lv + 1, &csfd)) != 0)
		return r;
	if ((cdfd = dst_dir(st, lv + 1)) < 0 || (dfd = dst_dir(st, lv)) < 0)
		return -1;
	return stage_meta(st, csfd, cdfd, -1, dfd, name, sb, fresh);
}

static void free_link(void *p)
{
	struct link_ent *l = p;
	free(l->rel);
	free(l);
}

/* ---- hardlinks ---- */

/* linkat() from a staged path longer than PATH_MAX: down to its directory
 * one component at a time (O_NOFOLLOW), then linkat() from there. */
static int link_deep(struct cb_stage *st, const char *rel, int dfd, const char *name)
{
	char *dir = cb_xstrdup(rel), *last = strrchr(dir, '/');
	int fd, ret = -1, err;

	if (last)
		*last++ = '\0';
	fd = stage_open_below(st->dst_fd, last ? dir : "");
	if (fd >= 0)
		ret = linkat(fd, last ? last : dir, dfd, name, 0);
	err = errno;
	if (fd >= 0)
		close(fd);
	free(dir);
	errno = err;
	return ret;
}

/* Link name to the inode already staged in this pass: 0 linked, 1 not
 * possible (copy instead), -1 error. */
static int link_existing(struct cb_stage *st, int dfd, const char *name, const struct stat *sb)
{
	struct link_ent *m = ino_map_get(&st->links, sb->st_dev, sb->st_ino);

	if (!m || m->gen != st->gen)
		return 1;
	if (linkat(st->dst_fd, m->rel + 1, dfd, name, 0) == 0 ||
	    (errno == ENAMETOOLONG && link_deep(st, m->rel + 1, dfd, name) == 0))
		return 0;
	if (errno == ENOENT || errno == EMLINK)
		return 1;
	return stage_fail(st, "cannot create hardlink", "in staging");
}

static void link_remember(struct cb_stage *st, const struct stat *sb, const struct stat *staged)
{
	struct link_ent *m = ino_map_get(&st->links, sb->st_dev, sb->st_ino);

	if (!m) {
		m = cb_xcalloc(1, sizeof(*m));
		ino_map_put(&st->links, sb->st_dev, sb->st_ino, m);
	}
	free(m->rel);
	m->rel = cb_xstrdup(st->rel);
	m->sdev = staged->st_dev;
	m->sino = staged->st_ino;
	m->gen = st->gen;
}

static int link_remember_at(struct cb_stage *st, int dfd, const char *name, const struct stat *sb)
{
	struct stat have;

	if (fstatat(dfd, name, &have, AT_SYMLINK_NOFOLLOW) < 0)
		return stage_fail(st, "cannot stat", "in staging");
	link_remember(st, sb, &have);
	return 0;
}

/* ---- creating entries ---- */

static int open_new(struct cb_stage *st, int dfd, const char *name)
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
static int fill_reg(struct cb_stage *st, int in, int out, int dfd, const char *name,
		    const struct stat *sb, int fresh)
{
	struct stat staged;

	if (stage_copy_data(st, in, out, sb) < 0 || stage_meta(st, in, out, -1, dfd, name, sb, fresh) < 0)
		return -1;
	if (sb->st_nlink > 1) {
		if (fstat(out, &staged) < 0)
			return stage_fail(st, "cannot stat", "in staging");
		link_remember(st, sb, &staged);
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
		link_remember(st, sb, &staged);
	}
	return stage_pool_push(st, in, out, sb, 1);
}

static int create_reg(struct cb_stage *st, int sfd, int dfd, const char *name,
		      const struct stat *sb, int fresh)
{
	int in, out, ret;

	if (sb->st_nlink > 1 && (ret = link_existing(st, dfd, name, sb)) != 1)
		return ret;
	if ((ret = src_open(st, sfd, name, O_RDONLY | O_NONBLOCK, sb, &in)) != 0)
		return ret;
	out = open_new(st, dfd, name);
	if (out >= 0 && st->pool)
		return hand_over(st, in, out, sb);
	ret = out < 0 ? -1 : fill_reg(st, in, out, dfd, name, sb, fresh);
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

	if ((ret = src_open(st, sfd, name, O_RDONLY | O_DIRECTORY, sb, &csfd)) != 0)
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
	if (descend(st, csfd, cdfd, name) < 0)
		return -1;
	ret = p1_dir(st, 1, NULL, sub);
	if (ret == 0)
		ret = dir_meta(st, lv, name, sb, fresh);
	ascend(st);
	/* removed while listed: the index will not have it, nor may staging */
	if (ret == 1 && ((dfd = dst_dir(st, lv)) < 0 ||
			 stage_remove(st, dfd, name, &(uint64_t){ 0 }) < 0))
		return -1;
	return ret;
}

/* Create the staged copy of one source entry: 0, 1 (vanished), -1. */
static int create_entry(struct cb_stage *st, int sfd, int dfd, const char *name,
			const struct stat *sb, int fresh, struct stage_ent *e)
{
	int r;

	e->sub = NULL;
	if (S_ISREG(sb->st_mode))
		return create_reg(st, sfd, dfd, name, sb, fresh);
	if (S_ISDIR(sb->st_mode))
		return create_dir(st, sfd, dfd, name, sb, fresh, &e->sub);
	/* symlinks, fifos and devices can have several names too */
	if (sb->st_nlink > 1 && (r = link_existing(st, dfd, name, sb)) != 1)
		return r;
	r = stage_make_special(st, sfd, dfd, name, sb);
	if (r == 1)
		return vanished(st);
	if (r < 0 || stage_meta(st, -1, -1, sfd, dfd, name, sb, fresh) < 0)
		return -1;
	return sb->st_nlink > 1 ? link_remember_at(st, dfd, name, sb) : 0;
}

/* ---- pass 1 ---- */

/* Count one source entry. 0 to copy it, 1 if it is skipped (excluded,
 * socket). check_excl: run the exclude rule. */
static int source_count(struct cb_stage *st, const struct stat *sb, int check_excl)
{
	struct cb_stage_stats *s = st->stats;

	if (check_excl && st->excludes.n &&
	    stage_excluded_slash(&st->excludes, st->rel, S_ISDIR(sb->st_mode))) {
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
		return errno == ENOENT ? vanished(st) : stage_fail(st, "cannot stat", "in source");
	return source_count(st, sb, 1);
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
			link_remember(st, sb, have);
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

	if ((ret = src_open(st, sfd, name, O_RDONLY | O_DIRECTORY, sb, &csfd)) != 0)
		return ret;
	cdfd = openat(dfd, name, DIR_FLAGS);
	if (cdfd < 0) {
		close(csfd);
		return stage_fail(st, "cannot open", "in staging");
	}
	if (descend(st, csfd, cdfd, name) < 0)
		return -1;
	ret = p1_dir(st, 0, kept, &e->sub);
	if (ret == 0)
		ret = dir_meta(st, lv, name, sb, 0);
	ascend(st);
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
		return create_entry(st, sfd, dfd, name, sb, 0, e);
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
	return create_entry(st, sfd, dfd, name, sb, 0, e);
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
		r = create_entry(st, sfd, dfd, name, &sb, 1, e);
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
static int list_source(struct cb_stage *st, int sfd, struct listing *l)
{
	if (cb_check_interrupt() < 0)
		return -1;
	/* a worker failed: stop walking (stage_pool_finish reports it) */
	if (stage_pool_failed(st))
		return cb_error("a staging worker failed");
	stage_pool_kick(st);
	if (stage_list(sfd, l) == 0)
		return 0;
	return errno == ENOENT ? vanished(st) : stage_fail(st, "cannot list", "in source");
}

/* The new index node takes over the listing's names block. */
static struct stage_dir *dir_from_listing(struct listing *l)
{
	struct stage_dir *d = cb_xcalloc(1, sizeof(*d));

	d->names = l->names;
	d->ents = cb_xcalloc(l->n, sizeof(*d->ents));
	l->names = NULL;
	return d;
}

static int p1_dir(struct cb_stage *st, int fresh, struct stage_dir *kept, struct stage_dir **out)
{
	size_t lv = cb_fdpath_top(&st->sp);
	struct listing l;
	struct stage_dir *d;
	int sfd, dfd, ret;

	*out = NULL;
	if ((ret = src_dir(st, lv, &sfd)) != 0 || (ret = list_source(st, sfd, &l)) != 0)
		return ret;
	d = dir_from_listing(&l);
	/* the fds again for each entry: a subdirectory's walk may close them */
	for (size_t i = 0; i < l.n && ret == 0; i++)
		if ((ret = src_dir(st, lv, &sfd)) == 0)
			ret = (dfd = dst_dir(st, lv)) < 0 ? -1
			      : p1_entry(st, sfd, dfd, l.v[i], fresh, kept, d);
	if (ret == 0 && !fresh)
		ret = (dfd = dst_dir(st, lv)) < 0 ? -1 : prune_extra(st, dfd, d);
	stage_listing_release(&l);
	if (ret != 0) {
		stage_dir_free(d);
		return ret < 0 ? -1 : 1;
	}
	*out = d;
	return 0;
}

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

	if (p->used || p->size != (uint64_t)sb->st_size || !ts_eq(&p->mtime, &sb->st_mtim))
		return 0;
	if (ts_eq(&p->ctime, &sb->st_ctim))
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

static void hold_release(struct cb_stage *st)
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

	if ((ret = src_open(st, sfd, name, O_RDONLY | O_NONBLOCK, sb, &in)) != 0)
		return ret;
	out = openat(dfd, name, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
	if (out < 0 && errno == ENOENT)
		out = open_new(st, dfd, name);
	else if (out < 0)
		stage_fail(st, "cannot open", "in staging");
	ret = out < 0 ? -1 : fill_reg(st, in, out, dfd, name, sb, 0);
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
	return create_entry(st, sfd, dfd, name, sb, 0, e) < 0 ? -1 : 1;
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
	    (st->shallow && o->sub && !meta && !racy(&o->rec.ctime, &st->racy_since))) {
		e->sub = o->sub;
		o->sub = NULL;
		if (!meta)
			return 0;
		return (dfd = dst_dir(st, lv)) < 0 ? -1 : stage_meta(st, -1, -1, sfd, dfd, name, sb, 0);
	}
	if ((ret = src_open(st, sfd, name, O_RDONLY | O_DIRECTORY, sb, &csfd)) != 0)
		return ret;
	if (descend(st, csfd, -1, name) < 0)
		return -1;
	ret = p2_dir(st, o->sub, &e->sub, &dirty);
	o->sub = NULL;
	/* children made or removed bump the staged dir's times: set them again */
	if (ret == 0 && (meta || dirty))
		ret = dir_meta(st, lv, name, sb, 0);
	ascend(st);
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
	if ((dfd = dst_dir(st, lv)) < 0)
		return -1;
	if (delta != CB_DELTA_REPLACE && (r = p2_linked(st, sfd, dfd, name, sb, e, dirty)) != 0)
		return r < 0 ? -1 : 0;
	if (delta == CB_DELTA_REPLACE) {
		*dirty = 1;
		stage_dir_free(o->sub);
		o->sub = NULL;
		if (stage_remove(st, dfd, name, &n) < 0)
			return -1;
		return create_entry(st, sfd, dfd, name, sb, 0, e);
	}
	/* not a directory: cb_stage_decide gives no META here (a file whose
	 * stat moved is copied again, any other entry made again) */
	if (delta == CB_DELTA_DATA)
		return rewrite_reg(st, sfd, dfd, name, sb);
	if (sb->st_nlink > 1)
		return link_remember_at(st, dfd, name, sb);
	return 0;
}

static int p2_new(struct cb_stage *st, int sfd, int dfd, const char *name,
		  const struct stat *sb, struct stage_ent *e)
{
	e->sub = NULL;
	if (S_ISREG(sb->st_mode) && st->hold_fd >= 0 && unpark(st, sfd, dfd, name, sb) == 0) {
		if (stage_meta(st, -1, -1, sfd, dfd, name, sb, 0) < 0)
			return -1;
		return sb->st_nlink > 1 ? link_remember_at(st, dfd, name, sb) : 0;
	}
	return create_entry(st, sfd, dfd, name, sb, 0, e);
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
		r = errno == ENOENT ? vanished(st) : stage_fail(st, "cannot stat", "in source");
	else
		r = source_count(st, &sb, !o || S_ISDIR(o->rec.mode) != S_ISDIR(sb.st_mode));
	if (r == 0 && o)
		r = p2_changed(st, sfd, lv, name, &sb, o, e, dirty);
	else if (r == 0)
		r = (dfd = dst_dir(st, lv)) < 0 ? -1 : p2_new(st, sfd, dfd, name, &sb, e);
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
		r = (dfd = dst_dir(st, lv)) < 0 ? -1 : p2_gone(st, dfd, o);
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
		if ((dfd = dst_dir(st, lv)) < 0 || p2_gone(st, dfd, &old->ents[i]) < 0)
			return -1;
	}
	return 0;
}

static int p2_dir(struct cb_stage *st, struct stage_dir *old, struct stage_dir **out, int *dirty)
{
	size_t lv = cb_fdpath_top(&st->sp), j = 0;
	struct listing l;
	struct stage_dir *nd;
	struct stat *pre;
	int *pre_err;
	int sfd, ret;

	*out = NULL;
	if ((ret = src_dir(st, lv, &sfd)) != 0 || (ret = list_source(st, sfd, &l)) != 0) {
		stage_dir_free(old);
		return ret;
	}
	p2_pool_stat(st->p2pool, sfd, &l, &pre, &pre_err);
	nd = dir_from_listing(&l);
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
		if ((ret = src_dir(st, lv, &sfd)) == 0)
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

/* The walk's paths start at this directory (both fds borrowed). */
static void paths_at(struct cb_stage *st, int sfd, int dfd)
{
	cb_fdpath_init(&st->sp, sfd, O_NOATIME);
	cb_fdpath_init(&st->dp, dfd, 0);
	st->dp.v[0].tag = st->rel_len;
}

static void paths_release(struct cb_stage *st)
{
	cb_fdpath_release(&st->sp);
	cb_fdpath_release(&st->dp);
}

int stage_p2_dir(struct cb_stage *st, int sfd, int dfd, struct stage_dir *old,
		 struct stage_dir **out, int *dirty)
{
	int ret;

	paths_at(st, sfd, dfd);
	ret = p2_dir(st, old, out, dirty);
	paths_release(st);
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
	paths_at(st, sfd, dfd);
	for (size_t i = 0; i < n && ret == 0; i++) {
		struct stage_ent *e = ents[i], old = *e;
		size_t saved;
		stage_rel_push(st, names[i], &saved);
		/* a socket is in no index; the exclude rule gave the same answer
		 * when the entry was recorded (same name, not a directory) */
		source_count(st, &sb[i], 0);
		if ((ret = p2_changed(st, sfd, 0, names[i], &sb[i], &old, e, dirty)) == 0)
			stage_rec_fill(&e->rec, &sb[i]);
		stage_rel_pop(st, saved);
	}
	paths_release(st);
	/* 1: one vanished while copied: the caller lists the directory */
out:
	free(ents);
	free(sb);
	return ret;
}

/* ---- the public passes ---- */

/* The side store goes with the staging copy: kept with it, else removed. */
static void side_release(struct cb_stage *st)
{
	char *dir = cb_xasprintf("%s%s", st->dst, CB_STAGE_XATTR_DIR);

	if (st->side_fd >= 0)
		close(st->side_fd);
	if (!st->keep && st->dst[0])
		cb_remove_tree(dir);
	free(dir);
}

int cb_stage_new(struct cb_stage **out, const struct cb_stage_opts *opts, struct cb_log *log)
{
	struct cb_stage *st = cb_xcalloc(1, sizeof(*st));
	size_t n;

	st->src = cb_xstrdup(opts->src);
	st->dst = cb_xstrdup(opts->dst);
	/* trailing '/' off: paths are built as root + "/rel" ("/" becomes "") */
	for (n = strlen(st->src); n > 0 && st->src[n - 1] == '/'; n--)
		st->src[n - 1] = '\0';
	for (n = strlen(st->dst); n > 1 && st->dst[n - 1] == '/'; n--)
		st->dst[n - 1] = '\0';
	if (opts->excludes)
		cb_strvec_copy(&st->excludes, opts->excludes);
	st->log = log;
	cb_throttle_init(&st->throttle, opts->bwlimit);
	st->progress = opts->progress;
	st->keep = opts->keep;
	st->workers = opts->workers > 0 ? opts->workers : (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (st->workers < 1)
		st->workers = 1;
	st->dst_fd = st->hold_fd = st->side_fd = -1;
	st->side_stamp = (uint64_t)(cb_now() * 1e9);
	st->is_root = geteuid() == 0;
	st->buf = cb_xmalloc(STAGE_BUF_SIZE);
	st->xbuf = cb_xmalloc(STAGE_XATTR_MAX);
	st->rel = cb_xcalloc(1, st->rel_cap = 256);
	*out = st;
	return 0;
}

void cb_stage_release_index(struct cb_stage *st)
{
	if (!st)
		return;
	stage_dir_free(st->root);
	st->root = NULL;
	stage_dir_free(st->kept);
	st->kept = NULL;
	cb_changes_free(st->changes);
	st->changes = NULL;
	free(st->tree_inos);
	st->tree_inos = NULL;
	st->tree_inos_cap = 0;
	ino_map_clear(&st->links, free_link);
}

void cb_stage_free(struct cb_stage *st)
{
	if (!st)
		return;
	stage_pool_finish(st);
	hold_release(st);
	if (st->dst_fd >= 0)
		close(st->dst_fd);
	stage_dir_free(st->root);
	stage_dir_free(st->kept);
	cb_changes_free(st->changes);
	free(st->tree_inos);
	ino_map_clear(&st->links, free_link);
	cb_strvec_clear(&st->excludes);
	side_release(st);   /* before dst: the side store is named from it */
	free(st->src);
	free(st->dst);
	free(st->buf);
	free(st->xbuf);
	free(st->rel);
	free(st);
}

static int open_src_root(struct cb_stage *st, struct stat *sb)
{
	int fd = open(st->src[0] ? st->src : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return cb_error_errno("cannot open source '%s'", st->src[0] ? st->src : "/");
	if (fstat(fd, sb) < 0) {
		close(fd);
		return cb_error_errno("cannot stat source '%s'", st->src);
	}
	return fd;
}

/* Staging root: created 0700 (the source's mode comes at the end, so a
 * half-made copy is never readable). *fresh: it was empty. */
static int open_dst_root(struct cb_stage *st, int *fresh)
{
	struct listing l;

	if (mkdir(st->dst, 0700) < 0 && errno != EEXIST)
		return cb_error_errno("cannot create staging directory '%s'", st->dst);
	if (st->dst_fd < 0)
		st->dst_fd = open(st->dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->dst_fd < 0 || fchmod(st->dst_fd, 0700) < 0)
		return cb_error_errno("cannot open staging directory '%s'", st->dst);
	if (stage_list(st->dst_fd, &l) < 0)
		return cb_error_errno("cannot list staging directory '%s'", st->dst);
	*fresh = l.n == 0;
	stage_listing_release(&l);
	return 0;
}

/* The source root itself cannot vanish: that is an error. */
static int root_ret(struct cb_stage *st, int ret)
{
	return ret == 1 ? cb_error("source '%s' vanished", st->src) : ret;
}

static void begin_pass(struct cb_stage *st, struct cb_stage_stats *stats)
{
	memset(stats, 0, sizeof(*stats));
	st->stats = stats;
	st->gen++;
	st->rel_len = 0;
	st->rel[0] = '\0';
	st->since_check = 0;
	stats->seconds = cb_now();
	/* what the last pass recorded with a ctime from its start on may have
	 * changed again in the same timestamp tick (cb_stage_decide_racy) */
	st->racy_since = st->pass_start;
	clock_gettime(CLOCK_REALTIME, &st->pass_start);
}

static int pass1(struct cb_stage *st, struct cb_stage_stats *stats)
{
	struct stat sb;
	int sfd, fresh = 0, ret;

	begin_pass(st, stats);
	stage_dir_free(st->root);
	st->root = NULL;
	sfd = open_src_root(st, &sb);
	if (sfd < 0)
		return -1;
	st->root_dev = sb.st_dev;
	stage_root_id_get(sfd, &sb, &st->root_id);
	ret = open_dst_root(st, &fresh);
	if (ret == 0 && st->dir_hook)
		st->dir_hook(st->dir_hook_arg, st->dst_fd);
	stats->files++;
	/* the kept index is read, then removed before anything changes: an
	 * interrupted run leaves a copy that no index vouches for */
	if (ret == 0 && st->keep && !fresh)
		st->kept = stage_keep_load(st);
	stage_keep_drop(st, 0);
	if (ret == 0 && st->workers > 1)
		ret = stage_pool_start(st, st->workers);
	paths_at(st, sfd, st->dst_fd);
	if (ret == 0)
		ret = root_ret(st, p1_dir(st, fresh, st->kept, &st->root));
	paths_release(st);
	/* every file's copy done before the root's times and the index; a
	 * signal that came while the last files were copied stops here */
	if (stage_pool_finish(st) < 0 || (ret == 0 && st->workers > 1 && cb_check_interrupt() < 0))
		ret = -1;
	stage_dir_free(st->kept);
	st->kept = NULL;
	if (ret == 0)
		ret = stage_meta(st, sfd, st->dst_fd, -1, -1, ".", &sb, fresh);
	stage_rec_fill(&st->root_rec, &sb);
	if (ret == 0 && st->keep)
		ret = stage_keep_save(st);
	close(sfd);
	stats->seconds = cb_now() - stats->seconds;
	return ret;
}

static int pass2(struct cb_stage *st, struct cb_stage_stats *stats)
{
	struct stat sb;
	enum cb_delta delta;
	int sfd, ret, dirty = 0;

	if (!st->root)
		return cb_error("final sync of '%s' without a complete first sync", st->src);
	/* the guest is frozen now: a bandwidth limit would only lengthen that,
	 * and the pass is too short for a progress line */
	cb_throttle_init(&st->throttle, 0);
	st->progress = NULL;
	begin_pass(st, stats);
	sfd = open_src_root(st, &sb);
	if (sfd < 0)
		return -1;
	st->root_dev = sb.st_dev;
	stats->files++;
	delta = cb_stage_decide(&st->root_rec, &sb);
	/* what pass 1 kept no longer vouches for the copy pass 2 changes;
	 * cb_stage_save_index() writes the new one once the guest runs again */
	if (st->keep)
		stage_keep_drop(st, 1);
	st->hold_ok = !stage_dir_find(st->root, STAGE_HOLD_NAME);
	st->p2pool = p2_pool_new();
	ret = st->changes ? stage_p2_tracked(st, sfd, &dirty) : 1;
	st->final_tracked = ret == 0;
	if (ret == 1) {
		cb_info(st->log, "pass 2: full walk");
		paths_at(st, sfd, st->dst_fd);
		ret = root_ret(st, p2_dir(st, st->root, &st->root, &dirty));
		paths_release(st);
	}
	cb_changes_free(st->changes);
	st->changes = NULL;
	p2_pool_free(st->p2pool);
	st->p2pool = NULL;
	dirty |= st->hold_fd >= 0;
	hold_release(st);
	/* the root's own metadata last: its children are done */
	if (ret == 0 && (dirty || delta != CB_DELTA_SAME))
		ret = stage_meta(st, sfd, st->dst_fd, -1, -1, ".", &sb, 0);
	stage_rec_fill(&st->root_rec, &sb);
	if (ret < 0) {  /* a half-updated index would lie to a later pass */
		stage_dir_free(st->root);
		st->root = NULL;
	}
	close(sfd);
	stats->seconds = cb_now() - stats->seconds;
	return ret;
}

void cb_stage_set_dir_hook(struct cb_stage *st, void (*fn)(void *arg, int fd), void *arg)
{
	st->dir_hook = fn;
	st->dir_hook_arg = arg;
}

int cb_stage_final_tracked(const struct cb_stage *st)
{
	return st->final_tracked;
}

void cb_stage_set_changes(struct cb_stage *st, struct cb_changes *c)
{
	cb_changes_free(st->changes);
	st->changes = c;
}

/* The walks recurse once per directory level: they run on a thread with
 * a deep stack (cb_call_deep), so a guest's depth is not bounded by the
 * main thread's 8 MiB. */
struct pass_call {
	struct cb_stage *st;
	struct cb_stage_stats *stats;
	int pass;
};

static int pass_call(void *arg)
{
	struct pass_call *c = arg;

	return c->pass == 1 ? pass1(c->st, c->stats) : pass2(c->st, c->stats);
}

int cb_stage_pass1(struct cb_stage *st, struct cb_stage_stats *stats)
{
	return cb_call_deep(pass_call, &(struct pass_call){ st, stats, 1 });
}

int cb_stage_pass2(struct cb_stage *st, struct cb_stage_stats *stats)
{
	return cb_call_deep(pass_call, &(struct pass_call){ st, stats, 2 });
}

static int save_index_call(void *arg)
{
	return stage_keep_save(arg);
}

int cb_stage_save_index(struct cb_stage *st)
{
	if (!st->keep || !st->root)
		return 0;
	return cb_call_deep(save_index_call, st);
}

/* ---- estimate ---- */

static int est_dir(struct cb_stage *st, uint64_t *bytes, uint64_t *entries)
{
	size_t lv = cb_fdpath_top(&st->sp);
	struct listing l;
	int fd = cb_fdpath_fd(&st->sp, lv), ret = 0;

	/* removed (or moved) since it was entered: nothing */
	if (fd < 0 || stage_list(fd, &l) < 0)
		return gone_errno(errno) && lv ? 0 : stage_fail(st, "cannot list", "in source");
	for (size_t i = 0; i < l.n && ret == 0; i++) {
		struct stat sb;
		size_t saved;
		stage_rel_push(st, l.v[i], &saved);
		if ((fd = cb_fdpath_fd(&st->sp, lv)) >= 0 &&
		    fstatat(fd, l.v[i], &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
		    !stage_excluded_slash(&st->excludes, st->rel, S_ISDIR(sb.st_mode))) {
			(*entries)++;
			*bytes += S_ISREG(sb.st_mode) ? (uint64_t)sb.st_blocks * 512 : 4096;
			if (S_ISDIR(sb.st_mode) && sb.st_dev == st->root_dev) {
				int sub = stage_open_src(st, fd, l.v[i], O_RDONLY | O_DIRECTORY, &sb);
				if (sub >= 0 && cb_fdpath_push(&st->sp, sub, l.v[i], st->rel_len) == 0) {
					ret = est_dir(st, bytes, entries);
					cb_fdpath_pop(&st->sp);
				}
			}
		}
		stage_rel_pop(st, saved);
	}
	stage_listing_release(&l);
	return ret;
}

static int estimate(const char *src, const struct cb_strvec *excludes, uint64_t *bytes,
		    uint64_t *entries)
{
	struct cb_stage *st;
	struct cb_stage_opts o = { .src = src, .dst = "", .excludes = excludes };
	struct stat sb;
	int fd, ret;

	*bytes = 4096;
	*entries = 1;
	cb_stage_new(&st, &o, NULL);
	fd = open_src_root(st, &sb);
	ret = fd < 0 ? -1 : 0;
	if (ret == 0) {
		st->root_dev = sb.st_dev;
		cb_fdpath_init(&st->sp, fd, O_NOATIME);
		ret = est_dir(st, bytes, entries);
		cb_fdpath_release(&st->sp);
		close(fd);
	}
	cb_stage_free(st);
	return ret;
}

struct est_call {
	const char *src;
	const struct cb_strvec *excludes;
	uint64_t *bytes, *entries;
};

static int est_call(void *arg)
{
	struct est_call *c = arg;

	return estimate(c->src, c->excludes, c->bytes, c->entries);
}

int cb_stage_estimate(const char *src, const struct cb_strvec *excludes, uint64_t *bytes,
		      uint64_t *entries)
{
	return cb_call_deep(est_call, &(struct est_call){ src, excludes, bytes, entries });
}
