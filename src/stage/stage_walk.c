/*
 * What both passes of the staging walk share: the directories they are in
 * (st->sp, st->dp: one fd per level, a bounded number open), opening a
 * source entry that a live guest may have removed, directories' metadata,
 * and the hardlink map (a second name of a staged inode is linked, not
 * copied again).
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

/* A live guest changes under pass 1: what vanished or changed type is
 * left to pass 2, which runs frozen and is authoritative. */
int stage_vanished(struct cb_stage *st)
{
	if (errno == ESTALE)
		cb_verbose(st->log, "'%s' changed type during copy: left to the final sync",
			   stage_relname(st));
	else
		cb_verbose(st->log, "file vanished during copy: '%s'", stage_relname(st));
	st->stats->skipped++;
	return 1;
}

int stage_gone_errno(int err)
{
	return err == ENOENT || err == ENOTDIR || err == ELOOP || err == ESTALE;
}

/* Open the source entry sb describes: 0 (*fd set), 1 vanished, -1. */
int stage_src_open(struct cb_stage *st, int sfd, const char *name, int flags,
		   const struct stat *sb, int *fd)
{
	*fd = stage_open_src(st, sfd, name, flags, sb);
	if (*fd >= 0)
		return 0;
	return stage_gone_errno(errno) ? stage_vanished(st) : stage_fail(st, "cannot open", "in source");
}

/*
 * The walks hold their directories in st->sp (source) and st->dp
 * (staging), level by level, with a bounded number of fds open
 * (cb_fdpath.h): a directory's fd is fetched again after anything that
 * can descend.
 */

/* The source directory at level lv: 0 (*fd set), 1 (it moved or
 * vanished since it was entered), -1. */
int stage_src_dir(struct cb_stage *st, size_t lv, int *fd)
{
	*fd = cb_fdpath_fd(&st->sp, lv);
	if (*fd >= 0)
		return 0;
	return stage_gone_errno(errno) ? stage_vanished(st) : stage_fail(st, "cannot open", "in source");
}

/* The staged directory at level lv (opened on first use in pass 2, where
 * most directories need nothing in staging): its fd, or -1 (reported). */
int stage_dst_dir(struct cb_stage *st, size_t lv)
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
int stage_descend(struct cb_stage *st, int sfd, int dfd, const char *name)
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

void stage_ascend(struct cb_stage *st)
{
	cb_fdpath_pop(&st->sp);
	cb_fdpath_pop(&st->dp);
}

/* A directory's metadata (level lv+1, named name at level lv), set after
 * its entries: 0, 1 (the source moved), -1. */
int stage_dir_meta(struct cb_stage *st, size_t lv, const char *name, const struct stat *sb,
		   int fresh)
{
	int csfd, cdfd, dfd, r;

	if ((r = stage_src_dir(st, lv + 1, &csfd)) != 0)
		return r;
	if ((cdfd = stage_dst_dir(st, lv + 1)) < 0 || (dfd = stage_dst_dir(st, lv)) < 0)
		return -1;
	return stage_meta(st, csfd, cdfd, -1, dfd, name, sb, fresh);
}

void stage_free_link(void *p)
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
int stage_link_existing(struct cb_stage *st, int dfd, const char *name, const struct stat *sb)
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

void stage_link_remember(struct cb_stage *st, const struct stat *sb, const struct stat *staged)
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

int stage_link_remember_at(struct cb_stage *st, int dfd, const char *name, const struct stat *sb)
{
	struct stat have;

	if (fstatat(dfd, name, &have, AT_SYMLINK_NOFOLLOW) < 0)
		return stage_fail(st, "cannot stat", "in staging");
	stage_link_remember(st, sb, &have);
	return 0;
}

/* The walk's paths start at this directory (both fds borrowed). */
void stage_paths_at(struct cb_stage *st, int sfd, int dfd)
{
	cb_fdpath_init(&st->sp, sfd, O_NOATIME);
	cb_fdpath_init(&st->dp, dfd, 0);
	st->dp.v[0].tag = st->rel_len;
}

void stage_paths_release(struct cb_stage *st)
{
	cb_fdpath_release(&st->sp);
	cb_fdpath_release(&st->dp);
}
