/*
 * cb_stage: the staging engine (DESIGN §7). Copies a source tree into a
 * local staging directory with full fidelity, in two passes:
 *
 *   pass 1 (guest running): walk the source, copy everything, build an
 *          in-memory index of what was copied (per entry: inode, dev, size,
 *          mtime, ctime, mode, uid, gid).
 *   pass 2 (guest frozen):  walk the source again and compare each entry
 *          with the index; copy only what changed, remove what vanished,
 *          fix metadata; cost tracks the change, not the tree's size.
 *
 * Fidelity: regular files (cloned with FICLONE where staging and source
 * share a file system that can, else holes kept via SEEK_DATA/SEEK_HOLE and
 * data copied with copy_file_range), directories, symlinks, hardlinks, block/char devices,
 * fifos; sockets skipped with a note; owner, mode, nanosecond mtime/atime,
 * xattrs (security.capability, user.*, trusted.*, and the POSIX ACLs as
 * system.posix_acl_*). Stays on the source's file system (like rsync -x:
 * mount points become empty directories). Files that vanish while being
 * walked are a note, not an error.
 *
 * If the staging directory already holds a previous copy (keep-staging),
 * pass 1 decides each entry by the pass-2 rule (cb_stage_decide, ctime
 * included) against the index the last run kept beside the staging
 * directory (<dst>.index, checksummed); what it cannot prove unchanged
 * (no index, a damaged one, an entry it lacks) is copied again, and
 * extraneous entries are deleted, so pass 1 itself is a delta.
 *
 * The struct cb_stage owns the index; cb_stage_free() releases it.
 */
#ifndef CB_STAGE_H
#define CB_STAGE_H

#include <stdint.h>
#include <sys/stat.h>
#include "cb_log.h"
#include "cb_progress.h"
#include "cb_stage_tree.h"

/* A directory the walks leave out wherever they meet it, found by device
 * and inode (so through a bind mount too), said once in the log: cbackup's
 * own directory in a tmpdir inside the guest (else the first sync copies
 * its own copy without end), a dump directory inside it (else the next
 * night archives the last one). The caller keeps them while the stage
 * lives. */
struct cb_stage_skip {
	dev_t dev;
	ino_t ino;
	const char *what;                 /* "cbackup's own directory in tmpdir '/x'" */
	int warn;                         /* WARN (guest files may be in it), else INFO */
};

struct cb_stage_opts {
	const char *src;                  /* source root (directory) */
	const char *dst;                  /* staging root (created if missing) */
	const struct cb_strvec *excludes; /* vzdump globs ('/'-anchored or any depth); may be NULL */
	long bwlimit;                     /* KiB/s on data copied, 0 = none */
	struct cb_progress *progress;     /* fed with bytes copied; may be NULL */
	int keep;                         /* keep-staging: save the index after each pass */
	int keep_auto;                    /* keep-staging auto: a new guest root is no WARN */
	int workers;                      /* pass 1 copy threads; 0 = online cores */
	const struct cb_stage_skip *skip; /* left out where met; may be NULL */
	size_t n_skip;                    /* at most CB_STAGE_MAX_SKIP */
};
#define CB_STAGE_MAX_SKIP 8

/* rsync-like counts, reported in the log after each pass. */
struct cb_stage_stats {
	uint64_t files;               /* entries seen ("Number of files") */
	uint64_t files_transferred;   /* regular files whose data was copied */
	uint64_t total_size;          /* sum of regular file sizes ("Total file size") */
	uint64_t transferred_size;    /* bytes of data copied */
	uint64_t deleted;             /* entries removed from staging */
	uint64_t skipped;             /* sockets, vanished files, excluded entries */
	uint64_t cloned_files;        /* of files_transferred: reflinked (FICLONE) */
	uint64_t cloned_size;         /* of transferred_size: reflinked, not copied */
	double seconds;
};

struct cb_stage;

int cb_stage_new(struct cb_stage **out, const struct cb_stage_opts *opts, struct cb_log *log);
void cb_stage_free(struct cb_stage *st);

/* What a walk of the source finds, for the space check and the progress
 * totals. bytes: what the staging copy will need (allocated blocks of the
 * source; what an existing staging copy already holds is NOT subtracted).
 * data: the file bytes pass 1 copies (a file's once for all its links,
 * only its allocated bytes if sparse). tar: what the archive's tar stream
 * takes at least (a header an entry, data padded to 512 bytes; pax
 * headers and tar's end not counted): a progress total that the archive
 * pass reaches. */
struct cb_stage_est {
	uint64_t bytes, entries, data, tar;
};
int cb_stage_estimate(const char *src, const struct cb_strvec *excludes, struct cb_stage_est *e);

int cb_stage_pass1(struct cb_stage *st, struct cb_stage_stats *stats);
int cb_stage_pass2(struct cb_stage *st, struct cb_stage_stats *stats);
/* Change tracking (cb_track.h): the next pass 2 re-checks only what c
 * names, and walks the whole tree if c is NULL. Takes c. */
struct cb_changes;
void cb_stage_set_changes(struct cb_stage *st, struct cb_changes *c);
/* The last pass 2 looked only at what tracking saw (no full walk). */
int cb_stage_final_tracked(const struct cb_stage *st);
/* After pass 1, before the freeze: note the tree's inode numbers (8 to 16
 * bytes an entry), so that the tracked pass 2 tells at once whether an
 * inode reported outside the root (another name of it) is in the tree,
 * instead of searching the index while the guest is frozen. */
void cb_stage_note_inodes(struct cb_stage *st);
/* fn(arg, fd) for every staging directory pass 1 makes (fd: the new
 * directory), from the staging root on; NULL to stop. Change tracking
 * ignores the events of the copy's own writes with it. */
void cb_stage_set_dir_hook(struct cb_stage *st, void (*fn)(void *arg, int fd), void *arg);
/* keep-staging: write the index of the copy the last pass left (pass 1
 * writes it itself; after pass 2 the caller does, once the guest runs
 * again, so that the freeze does not wait for it). 0 without keep. */
int cb_stage_save_index(struct cb_stage *st);
/* Free the index and the hardlink map (memory by entries) once the passes
 * are done and the index saved: the archive phase, which keeps a catalog
 * of its own, does not need them. No pass may follow. */
void cb_stage_release_index(struct cb_stage *st);

/*
 * The pass-2 decision for one entry, exposed for unit tests.
 * old: what the index recorded in pass 1; now: lstat() of the source now.
 */
struct cb_index_rec {
	uint64_t dev, ino, size;
	struct timespec mtime, ctime;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	uint64_t rdev;      /* devices: a device made again under a recycled inode */
};

enum cb_delta {
	CB_DELTA_SAME,      /* nothing to do */
	CB_DELTA_META,      /* owner/mode/times/xattrs only (ctime moved, data same) */
	CB_DELTA_DATA,      /* same file, contents changed: recopy data + metadata */
	CB_DELTA_REPLACE,   /* another inode or another type, or a symlink or device
			     * whose stat moved at all: remove and recreate */
};

enum cb_delta cb_stage_decide(const struct cb_index_rec *old, const struct stat *now);

/*
 * Pass 2's rule: cb_stage_decide, and an entry recorded with a ctime at or
 * after `since` is "racily clean" (git's term): it may have been written,
 * or removed and made again under its recycled inode, within the same
 * timestamp tick (kernels before 6.13 stamp with a coarse clock of 1-10
 * ms), so that nothing in its stat moved. Such a file is copied again and
 * such a symlink or device made again; a directory is listed anyway.
 * `since` is pass 1's start. A ctime less than CB_STAGE_RACY_TICK_NS
 * before it cannot be given again to a change made after the entry was
 * recorded; a ctime in whole seconds (a file system stamping in seconds)
 * is racy from the second before. So only what changed around and during
 * pass 1 pays.
 */
#define CB_STAGE_RACY_TICK_NS 20000000L
enum cb_delta cb_stage_decide_racy(const struct cb_index_rec *old, const struct stat *now,
				   const struct timespec *since);

/* vzdump exclude rule: a pattern starting with '/' is anchored at the guest
 * root, others match at any depth. relpath is "etc/passwd" (no leading '/').
 * is_dir lets "dir/" patterns match directories only. */
int cb_stage_excluded(const struct cb_strvec *excludes, const char *relpath, int is_dir);

#endif
