/*
 * cb_fhandle: what a file handle says without opening it.
 *
 * Change tracking gets a file handle with every event and opens it to
 * learn where the object is. On a busy host the kernel sometimes cannot
 * open a handle whose inode still exists (open_by_handle_at fails with
 * ENOMEM: an inode being freed or set up, or a non-directory it cannot
 * connect to a path). Such an event is not dropped and does not cost the
 * whole walk (the placement rule): the inode number the handle carries is
 * looked up in the tree instead. The layouts read here are the kernel's
 * (include/linux/exportfs.h, fs/btrfs/export.h), stable because NFS
 * clients keep handles across server reboots.
 */
#ifndef CB_FHANDLE_H
#define CB_FHANDLE_H

#include <stdint.h>

struct file_handle;

/* The inode number handle h carries, for the layouts known here:
 * FILEID_INO32_GEN[_PARENT] (ext2/3/4; xfs with 32-bit inode numbers),
 * xfs's 64-bit FILEID_INO32_GEN[_PARENT] | 0x80, and btrfs's (objectid,
 * subvolume) when the subvolume is root's, a handle of the guest root
 * (btrfs numbers inodes per subvolume; NULL: no btrfs handle is read).
 * Returns 0 and *ino, or -1: a layout not known here, a short handle, or
 * another btrfs subvolume. */
int cb_fhandle_ino(const struct file_handle *h, const struct file_handle *root, uint64_t *ino);

#endif
