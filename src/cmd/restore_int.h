/*
 * restore_int.h: between restore.c (the extraction: names checked and
 * moved below DESTDIR, metadata, ACLs, the root entry last) and
 * restore_paths.c (restore --path: only chosen entries, read from the units
 * that hold them).
 */
#ifndef CB_RESTORE_INT_H
#define CB_RESTORE_INT_H

#include <archive.h>
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
	char *dest;                 /* canonical destination directory */
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
};

/* Check or create DESTDIR and resolve it to a symlink-free absolute path. */
int cb_rst_prepare_dest(struct rst *r, const struct cb_restore_opts *o);
/* Extract the entry just read from r->tr (names checked, moved below DESTDIR). */
int cb_rst_entry(struct rst *r, struct archive_entry *e);
/* The root entry's metadata, after every other entry. */
int cb_rst_apply_root(struct rst *r);
int cb_rst_close(struct rst *r);
void cb_rst_release(struct rst *r);

int cb_restore_paths(struct rst *r, const struct cb_restore_opts *o);

/* What a restore needs in DESTDIR's file system: bytes of blocks, inodes. */
struct cb_rst_need {
	uint64_t bytes, entries;
};
/* statvfs(DESTDIR) against n: 0 if it fits; else -1 with the error naming
 * both, or with --force a WARN and 0 (files replaced in place free space). */
int cb_rst_space_check(struct rst *r, const struct cb_restore_opts *o, const struct cb_rst_need *n);

#endif
