/*
 * restore_int.h: between the parts of a restore, each using only those
 * below it: restore.c (the whole archive; restore_run) above
 * restore_paths.c (restore --path: only chosen entries, read from the units
 * that hold them), restore_dest.c (where the tree is made and how it takes
 * DESTDIR's place, the space check) and restore_entry.c (one entry: names
 * checked and moved below DESTDIR, metadata, ACLs, the root entry last).
 */
#ifndef CB_RESTORE_INT_H
#define CB_RESTORE_INT_H

#include <archive.h>
#include <sys/statvfs.h>
#include "cb_restore.h"
#include "cb_tarread.h"

#define EXTRACT_FLAGS (ARCHIVE_EXTRACT_OWNER | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME | \
		       ARCHIVE_EXTRACT_XATTR | ARCHIVE_EXTRACT_ACL | ARCHIVE_EXTRACT_FFLAGS | \
		       ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT | \
		       ARCHIVE_EXTRACT_UNLINK)

struct rst {
	struct cb_tarread tr;       /* tar reader over the codec */
	struct archive *out;        /* disk writer */
	struct cb_log *log;
	struct cb_restore_stats *st;
	char *dest;                 /* canonical destination directory (messages) */
	/* restore_dest.c: the tree is made in a fresh private directory,
	 * the working directory while libarchive writes, and takes DESTDIR's
	 * place when complete */
	int parent_fd;              /* DESTDIR's parent */
	char *dest_name;            /* DESTDIR's name in it */
	int dest_fd;                /* DESTDIR; -1 while it does not exist */
	int dest_empty;
	int in_dest;                /* DESTDIR is a mount point: stage inside */
	int stage_dir_fd;           /* where the stage is: parent_fd or dest_fd */
	int stage_fd;
	char stage_name[80];        /* "" once it took DESTDIR's place */
	int cwd_fd;                 /* cbackup's working directory */
	struct archive_entry *root; /* the "./" entry, applied last */
	/* the entry's raw system.posix_acl_access/default, set after it */
	void *acl[2];
	size_t acl_len[2];
	/* directories' ACLs wait until libarchive has set the directories'
	 * modes at close (a chmod after the ACL would reset its mask) */
	struct dir_acl {
		char *path;
		void *acl[2];
		size_t acl_len[2];
	} *dir_acls;
	size_t n_dir_acls;
	/* the tar bytes read, of every run before this one (restore_paths.c) */
	struct cb_progress progress;
	uint64_t read_before;
};

/* Open DESTDIR's parent and DESTDIR (never through a symlink; a non-empty
 * one needs --force), make the private directory and enter it. */
int cb_rst_dest_open(struct rst *r, const struct cb_restore_opts *o);
/* The complete tree in DESTDIR's place (with --path into a non-empty
 * DESTDIR: the chosen paths only), the root entry applied, the old tree
 * removed or kept. */
int cb_rst_dest_finish(struct rst *r, const struct cb_restore_opts *o);
/* Back to the working directory; what is left of the private directory
 * (after a failure: the whole new tree) removed. */
void cb_rst_dest_release(struct rst *r);
/* restore_entry.c: extract the entry just read from r->tr (names checked,
 * moved below DESTDIR). */
int cb_rst_entry(struct rst *r, struct archive_entry *e);
/* The root entry's metadata on directory dirfd, after every other entry. */
int cb_rst_apply_root(struct rst *r, int dirfd);
/* Close the disk writer: directory modes and times, then their ACLs. */
int cb_rst_close(struct rst *r);
/* The disk writer freed, the root entry and pending ACLs too. */
void cb_rst_disk_release(struct rst *r);
void cb_rst_release(struct rst *r);

/* restore --path, and restore --salvage (every member not lost, or of
 * the paths those not lost) */
int cb_restore_paths(struct rst *r, const struct cb_restore_opts *o);

struct cb_idx;
/* restore_salvage.c: check every unit of the archive against the catalog
 * x; *lost (malloc'ed, per entry) is 1 + the damaged unit for each member
 * with a byte in one (each said with cb_rst_lost), else 0. */
int cb_rst_salvage_plan(struct rst *r, const struct cb_idx *x, const char *archive,
			uint64_t **lost);
/* Member path is lost (why: "... unit N"): an ERROR line, kept in r->st. */
void cb_rst_lost(struct rst *r, const char *path, uint64_t unit, const char *why);

/* DESTDIR's file system: the private directory's, or with --dry-run (none
 * made) DESTDIR's or the nearest directory above it. */
int cb_rst_statvfs(struct rst *r, struct statvfs *v);

/* What a restore needs in DESTDIR's file system: bytes of blocks, inodes. */
struct cb_rst_need {
	uint64_t bytes, entries;
	uint64_t tar;        /* the tar stream's bytes (the progress total) */
};
/* statvfs(DESTDIR) against n: 0 if it fits; else -1 with the error naming
 * both, or with --force a WARN and 0 (files replaced in place free space). */
int cb_rst_space_check(struct rst *r, const struct cb_restore_opts *o, const struct cb_rst_need *n);

#endif
