/*
 * cb_stage_tree.h: the conventions of a staged tree that its writer (the
 * staging engine) and its reader (the archive writer) share. Names only:
 * a header without code, so that src/archive/ needs nothing of
 * src/stage/, the folder above it.
 */
#ifndef CB_STAGE_TREE_H
#define CB_STAGE_TREE_H

/* Big xattrs (more than the staging file system holds): the value is kept
 * in <dst>CB_STAGE_XATTR_DIR/ID as "name\0value" and the staged entry gets
 * the empty xattr CB_STAGE_XATTR_MARK ID. cb_archive_write puts them back. */
#define CB_STAGE_XATTR_DIR ".xattrs"
#define CB_STAGE_XATTR_MARK "trusted.cbackup.bigxattr."
/* chattr flags of a file or directory (FS_IOC_GETFLAGS, the ones a user
 * sets): not set on the staged copy (an immutable copy could not be
 * updated or removed) but kept as this xattr, decimal; the archive writes
 * them as SCHILY.fflags. Source xattrs named trusted.cbackup.* are never
 * copied. */
#define CB_STAGE_FFLAGS_XATTR "trusted.cbackup.fflags"
#define CB_STAGE_OWN_XATTRS "trusted.cbackup."

#endif
