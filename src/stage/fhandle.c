/* cb_fhandle: the inode number in a file handle (see cb_fhandle.h). */
#include "cb_fhandle.h"

#include <fcntl.h>
#include <string.h>

/* enum fid_type of include/linux/exportfs.h, and btrfs's */
#define FILEID_INO32_GEN 1
#define FILEID_INO32_GEN_PARENT 2
#define XFS_FILEID_TYPE_64FLAG 0x80     /* xfs: 64-bit inode numbers */
#define FILEID_BTRFS_WITHOUT_PARENT 0x4d
#define FILEID_BTRFS_WITH_PARENT 0x4e
#define FILEID_BTRFS_WITH_PARENT_ROOT 0x4f

/* btrfs's struct btrfs_fid starts with u64 objectid, u64 root_objectid */
#define BTRFS_FID_MIN 16

static int is_btrfs(int type)
{
	return type == FILEID_BTRFS_WITHOUT_PARENT || type == FILEID_BTRFS_WITH_PARENT ||
	       type == FILEID_BTRFS_WITH_PARENT_ROOT;
}

int cb_fhandle_ino(const struct file_handle *h, const struct file_handle *root, uint64_t *ino)
{
	uint32_t i32;
	uint64_t i64, sub, root_sub;

	switch (h->handle_type) {
	case FILEID_INO32_GEN:
	case FILEID_INO32_GEN_PARENT:  /* u32 ino, u32 generation, ... */
		if (h->handle_bytes < 8)
			return -1;
		memcpy(&i32, h->f_handle, sizeof(i32));
		*ino = i32;
		return 0;
	case FILEID_INO32_GEN | XFS_FILEID_TYPE_64FLAG:
	case FILEID_INO32_GEN_PARENT | XFS_FILEID_TYPE_64FLAG:  /* u64 ino, u32 gen, ... */
		if (h->handle_bytes < 12)
			return -1;
		memcpy(&i64, h->f_handle, sizeof(i64));
		*ino = i64;
		return 0;
	}
	/* btrfs: the same objectid names an inode in every subvolume; only
	 * the root's subvolume is the tree's (another has its own st_dev) */
	if (!is_btrfs(h->handle_type) || !root || !is_btrfs(root->handle_type) ||
	    h->handle_bytes < BTRFS_FID_MIN || root->handle_bytes < BTRFS_FID_MIN)
		return -1;
	memcpy(&sub, h->f_handle + 8, sizeof(sub));
	memcpy(&root_sub, root->f_handle + 8, sizeof(root_sub));
	if (sub != root_sub)
		return -1;
	memcpy(&i64, h->f_handle, sizeof(i64));
	*ino = i64;
	return 0;
}
