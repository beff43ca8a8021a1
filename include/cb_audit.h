/*
 * cb_audit: the tracking audit. After a tracked final sync
 * (cb_track.h) and the thaw, with the guest running, a stat walk compares
 * the tree with the staging index, which holds what was archived: an
 * entry that differs from its record (type, inode, size, mtime, ctime,
 * mode, owner, device number), a name the index lacks, or one it has that
 * is gone, is a change the tracker missed when its ctime (for a name that
 * is gone: its directory's ctime) is settled before MARK, the moment
 * tracking's view ended (the freeze confirmed, the event queue not yet
 * drained). The guest's changes after the thaw have later ctimes.
 *
 * "Settled" is pass 2's racily-clean rule turned around
 * (cb_stage_decide_racy): a ctime within CB_STAGE_RACY_TICK_NS before MARK
 * (the same second or the one before, on a file system stamping whole
 * seconds) may have been given by the coarse clock after it, so it is not
 * counted. A change the tracker missed in those last milliseconds before
 * the freeze, or one that left every stat field as it was, is not seen.
 *
 * A stat is not atomic with a change it races (an open with O_TRUNC sets
 * the new size before the new times), so an entry found changed before
 * MARK is looked at again when the walk is done, after 20 ms and then at
 * doubling intervals up to 1.26 s: if it has a later ctime by then, or is
 * again as the index has it, or is gone, the change was in flight after
 * the thaw (counted in in_flight); if not, it is missed.
 *
 * A symlink's target and a file's xattrs, ACLs and flags are not in the
 * index, but none changes without a new inode or a new ctime. Excluded
 * entries and sockets (never staged) are not counted; a directory on
 * another file system (a mount point, kept empty) is compared, not
 * entered.
 */
#ifndef CB_AUDIT_H
#define CB_AUDIT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* The log names at most this many missed entries (then a count). */
#define CB_AUDIT_NAMES 20

struct cb_audit {
	uint64_t checked;     /* entries compared */
	uint64_t missed;      /* changes the tracker missed */
	uint64_t in_flight;   /* looked changed at first, settled on a second look */
	/* the first CB_AUDIT_NAMES of them: path ("etc/x", owned) and how it
	 * differs ("content", "mode or owner", "attributes", "replaced", "not
	 * archived", "gone"; static) */
	char **paths;
	const char **whats;
	size_t n_names;
	double seconds;
};

struct cb_stage;
/* Walk st's source against its index (after pass 2, before
 * cb_stage_release_index). 0, or -1 (error set: the walk could not be
 * done; what it found so far is in *a). *a is zeroed first. */
int cb_audit_run(struct cb_stage *st, const struct timespec *mark, struct cb_audit *a);
void cb_audit_release(struct cb_audit *a);

#endif
