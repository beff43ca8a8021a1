/*
 * The decision rule of pass 2 (DESIGN §7): for an entry the index has,
 * what changed since it was staged (cb_stage_decide: nothing, metadata,
 * data, or the entry itself), and when a change in the same clock tick as
 * the index cannot be ruled out (cb_stage_decide_racy). See
 * include/cb_stage.h.
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

int stage_ts_eq(const struct timespec *a, const struct timespec *b)
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
	moved = old->size != (uint64_t)now->st_size || !stage_ts_eq(&old->mtime, &now->st_mtim) ||
		!stage_ts_eq(&old->ctime, &now->st_ctim);
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
int stage_racy(const struct timespec *ctime, const struct timespec *since)
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
	    !stage_racy(&old->ctime, since))
		return d;
	return S_ISREG(now->st_mode) ? CB_DELTA_DATA : CB_DELTA_REPLACE;
}
