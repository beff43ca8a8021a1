/*
 * restore_int.h: between the parts of a restore, each using only those
 * below it: restore.c (the whole archive; restore_run) above
 * restore_paths.c (restore --path: only chosen entries, read from the units
 * that hold them), restore_dest.c (where the tree is made and how it takes
 * DESTDIR's place, the space check) and restore_entry.c (one entry: names
 * checked and moved below DESTDIR, metadata, ACLs, the root entry last),
 * which hands most entries to restore_fast.c (written relative to their
 * directory's fd, held by restore_dirs.c) and the others to libarchive.
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

/* restore_dirs.c: the directory fds of the current path (see there) */
struct rst_level {
	size_t end;                 /* the level's path is path[0..end) */
	int fd;                     /* -1 when not held */
};
struct rst_dirs {
	int root;                   /* the tree's top (not closed here) */
	char *path;                 /* the current directory, relative */
	size_t len, cap;
	struct rst_level *lv;       /* lv[i]: path's first i+1 components */
	size_t n, cap_lv, held;
	int no_openat2;             /* the kernel has none (or forbids it) */
};
void restore_dirs_init(struct rst_dirs *d, int root);
/* The fd of directory dir (relative to the root, normalized: no empty,
 * "." or ".." components, no trailing slash; dlen 0: the root), opened
 * without following any symlink; with create, missing directories on the
 * way are made (0755). Owned by d, valid until the next call; -1 with
 * errno on failure. */
int restore_dirs_get(struct rst_dirs *d, const char *dir, size_t dlen, int create);
/* Every held fd closed (a directory on the path was removed). */
void restore_dirs_flush(struct rst_dirs *d);
void restore_dirs_release(struct rst_dirs *d);

struct restore_fast_state;

struct cb_idmap;

struct restore_job {
	struct cb_tarread tr;       /* tar reader over the codec */
	const struct cb_idmap *idmap;  /* --map-ids: container IDs to the host's (restore_idmap.c) */
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
	/* restore_fast.c: files, directories and symlinks made by cbackup */
	struct restore_fast_state *fast;
};

/* Open DESTDIR's parent and DESTDIR (never through a symlink; a non-empty
 * one needs --force), make the private directory and enter it. */
int restore_dest_open(struct restore_job *r, const struct cb_restore_opts *o);
/* The complete tree in DESTDIR's place (with --path into a non-empty
 * DESTDIR: the chosen paths only), the root entry applied, the old tree
 * removed or kept. */
int restore_dest_finish(struct restore_job *r, const struct cb_restore_opts *o);
/* Back to the working directory; what is left of the private directory
 * (after a failure: the whole new tree) removed. */
void restore_dest_release(struct restore_job *r);
/* restore_entry.c: extract the entry just read from r->tr (names checked,
 * moved below DESTDIR). */
int restore_entry(struct restore_job *r, struct archive_entry *e);
/* The entry's data from the archive into fd, at the archive's offsets;
 * *end (0 before): where the last data block ended. */
typedef int (*restore_data_fn)(struct restore_job *r, const char *name, int fd, la_int64_t *end);
/* restore_fast.c: the entry written relative to its parent's fd (1), or
 * left to libarchive (0: a type or metadata only libarchive writes, or not
 * root), or -1 with the error set. name: the checked entry name; data
 * copies a regular file's data. */
int restore_fast_entry(struct restore_job *r, struct archive_entry *e, const char *name,
		      restore_data_fn data);
/* The directories' modes, ACLs and times, deepest first, through their
 * fds (whatever their path's length). */
int restore_fast_finish(struct restore_job *r);
void restore_fast_release(struct restore_job *r);
/* The root entry's metadata on directory dirfd, after every other entry. */
int restore_apply_root(struct restore_job *r, int dirfd);
/* Close the disk writer: directory modes and times, then their ACLs. */
int restore_close(struct restore_job *r);
/* The disk writer freed, the root entry and pending ACLs too. */
void restore_disk_release(struct restore_job *r);
void restore_release(struct restore_job *r);

/* restore --path, and restore --salvage (every member not lost, or of
 * the paths those not lost) */
int cb_restore_paths(struct restore_job *r, const struct cb_restore_opts *o);

struct cb_idx;
/* restore_salvage.c: check every unit of the archive against the catalog
 * x; *lost (malloc'ed, per entry) is 1 + the damaged unit for each member
 * with a byte in one (each said with restore_lost), else 0. */
int restore_salvage_plan(struct restore_job *r, const struct cb_idx *x, const char *archive,
			uint64_t **lost);
/* Member path is lost (why: "... unit N"): an ERROR line, kept in r->st. */
void restore_lost(struct restore_job *r, const char *path, uint64_t unit, const char *why);

/* DESTDIR's file system: the private directory's, or with --dry-run (none
 * made) DESTDIR's or the nearest directory above it. */
int restore_statvfs(struct restore_job *r, struct statvfs *v);

/* What a restore needs in DESTDIR's file system: bytes of blocks, inodes. */
struct restore_need {
	uint64_t bytes, entries;
	uint64_t tar;        /* the tar stream's bytes (the progress total) */
};
/* restore_paths.c: what the whole archive needs, from its catalog
 * (ARCHIVE.idx, when there and sound; size: the archive's, 0 its file's):
 * no decoding pass over the archive (a sparse file counts the data it has
 * in the tar). -1 (nothing said) when there is none. */
int restore_need_from_catalog(const char *archive, uint64_t size, uint64_t bs, struct restore_need *n);
/* restore_stream.c: a whole restore from o->stream_fd (cb_restore_opts):
 * the reader over it, with the catalog's units; the archive's name made
 * absolute (it names no file: realpath() cannot). */
int restore_stream_open(struct restore_job *r, const struct cb_restore_opts *o);
char *restore_stream_name(const char *archive);
/* statvfs(DESTDIR) against n: 0 if it fits; else -1 with the error naming
 * both, or with --force a WARN and 0 (files replaced in place free space). */
int restore_space_check(struct restore_job *r, const struct cb_restore_opts *o, const struct restore_need *n);

/* restore_idmap.c: the entry's owner, raw ACLs (acl[2], as fix_entry took
 * them) and file capability shifted to the host's IDs by r->idmap; -1 with
 * the error naming the entry when an ID has no place in the map. */
int restore_map_ids(struct restore_job *r, struct archive_entry *e, const char *name);

#endif
