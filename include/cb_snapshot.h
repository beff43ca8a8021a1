/*
 * cb_snapshot: read-only file-system snapshots of a guest's volumes, for
 * snapshot mode (DESIGN §1): freeze, snapshot every volume, thaw, archive
 * from the snapshots, remove them.
 *
 * One small backend interface (detect, create, path, remove) so that ZFS
 * or LVM-thin can be added beside btrfs; only btrfs exists today.
 *
 * Where a snapshot lives: beside its volume, in a root-only (0700)
 * directory that cbackup creates and checks, VOLUME/../.cbackup-snap-ID
 * for the root and .cbackup-snap-ID-mpN for mount point N (1-based), the
 * snapshot inside it under the volume's base name. The directory keeps
 * other users out of the snapshot (whose own root keeps the guest's mode)
 * and says what it is; the next run removes one a killed run left.
 *
 * Lifetime: cb_snapshot_prepare() (before the freeze: stale removal, the
 * directory, a cleanup-stack action), cb_snapshot_create() (in the freeze:
 * only the ioctl), cb_snapshot_remove() (after the archive; also run by
 * the cleanup stack on SIGINT/SIGTERM/SIGHUP), cb_snapshot_release().
 */
#ifndef CB_SNAPSHOT_H
#define CB_SNAPSHOT_H

#include <signal.h>
#include <stddef.h>
#include "cb_log.h"

struct cb_snapshot;

struct cb_snap_backend {
	const char *name;   /* "btrfs" */
	/* 1: VOLUME can be snapshotted; 0: not, with the reason in why */
	int (*detect)(const char *volume, char *why, size_t len);
	/* take the snapshot s->name in s->dir_fd of the volume s->vol_fd */
	int (*create)(struct cb_snapshot *s);
	/* remove it; async-signal-safe (the cleanup stack calls it);
	 * 0, or -1 with errno set */
	int (*remove)(int dir_fd, const char *name);
	/* 1 if NAME in DIR_FD is a snapshot of this backend */
	int (*is_snapshot)(int dir_fd, const char *name);
};

struct cb_snapshot {
	const struct cb_snap_backend *be;
	char *volume;            /* the subvolume, as configured */
	char *dir;               /* VOLUME/../.cbackup-snap-ID[-mpN] */
	char *path;              /* dir/NAME: the snapshot */
	char dir_name[300];      /* in parent_fd; fixed-size for the signal path */
	char name[256];          /* in dir_fd */
	int parent_fd, dir_fd, vol_fd;
	int snap_fd;             /* the snapshot's root, opened in dir_fd */
	volatile sig_atomic_t exists;   /* the snapshot is there */
	volatile sig_atomic_t has_dir;  /* our directory is there */
	int cleanup_handle;
};

/* 1 and *be set when some backend can snapshot VOLUME; 0 with the reason
 * ("'/srv/ct' is on ext4: no snapshot backend") otherwise. */
int cb_snapshot_detect(const char *volume, const struct cb_snap_backend **be, char *why,
		       size_t len);

/* index 0 = the guest root, N = mount point N. Removes a stale snapshot
 * directory of this guest and volume (logged), creates a fresh one. */
int cb_snapshot_prepare(struct cb_snapshot *s, const struct cb_snap_backend *be,
			const char *volume, const char *id, unsigned index, struct cb_log *log);
int cb_snapshot_create(struct cb_snapshot *s);
const char *cb_snapshot_path(const struct cb_snapshot *s);
/* The snapshot's root directory, opened when it was taken (O_NOFOLLOW, in
 * the directory cbackup made): the archive walks from this fd and never
 * looks the path up again. */
int cb_snapshot_fd(const struct cb_snapshot *s);
/* 0 if the snapshot directory's name still leads to the directory
 * cbackup made; else -1 with an error naming it (someone who can write
 * the volume's parent renamed it aside, put something in its place). */
int cb_snapshot_check(const struct cb_snapshot *s);
/* Removes the snapshot and its directory (either may be gone already):
 * 1 if a snapshot was removed, 0 if there was none, -1 on error (it stays
 * for the next run to remove). */
int cb_snapshot_remove(struct cb_snapshot *s);
/* Closes and frees; removes first if still there. s may be zeroed. */
void cb_snapshot_release(struct cb_snapshot *s);

/* 1 if tmpdir and the tree at SRC share a file system that clones file
 * data (FICLONE): reflink staging. Probes with an unnamed file in TMPDIR. */
int cb_reflink_possible(const char *src, const char *tmpdir);

#endif
