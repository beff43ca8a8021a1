/*
 * cbackup mount ARCHIVE MOUNTPOINT: a read-only FUSE file system over an
 * archive. Names, types, owners, modes, times, sizes and link targets come
 * from the catalog (ARCHIVE.idx, or a scan when there is none); file data
 * from the units that hold it, decoded on demand and kept in a small LRU
 * of decoded units; xattrs from the member's own headers. Single-threaded
 * (-s): the cache and the one codec reader need no locks. `fusermount3 -u
 * MOUNTPOINT` ends it.
 */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <archive.h>
#include <archive_entry.h>

#include "cb_index.h"
#include "cb_mount.h"
#include "cb_tarread.h"
#include "cb_util.h"

#define CACHE_UNITS 8
#define UNIT_CACHE_MAX (64u * 1024 * 1024)   /* larger units are streamed, not kept */

struct cached_unit {
	uint64_t index;       /* unit number */
	unsigned char *data;
	size_t len;
	uint64_t used;        /* LRU clock */
	int valid;
};

struct mnt {
	const char *archive;
	struct cb_idx x;
	int fd;
	struct cb_codec_reader *reader;
	struct cb_codec_units units;   /* with the catalog's digests: each unit is
				        * checked before any of it is returned */
	struct cached_unit cache[CACHE_UNITS];
	uint64_t clock;
};

static struct mnt *M(void)
{
	return fuse_get_context()->private_data;
}

/* ---- names ---- */

/* The entry for a FUSE path ("/" is the archive's root "./"); -1 if the
 * name only exists as a parent of other entries (an implied directory),
 * -2 if it does not exist at all. */
static int64_t lookup(const struct mnt *m, const char *path)
{
	int64_t i = cb_idx_find(&m->x, path);
	uint64_t first;

	if (i >= 0)
		return i;
	if (path[1] == '\0' || cb_idx_range(&m->x, path, &first) > 0)
		return -1;
	return -2;
}

/* A hardlink's attributes and data are its target's. */
static void resolve(const struct mnt *m, struct cb_idx_entry *e)
{
	int64_t t;

	if (!(e->flags & CB_IDX_HARDLINK) || (t = cb_idx_find(&m->x, e->link)) < 0)
		return;
	cb_idx_entry(&m->x, (uint64_t)t, e);
}

static int mnt_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	struct mnt *m = M();
	int64_t i = lookup(m, path);
	struct cb_idx_entry e;

	(void)fi;
	memset(st, 0, sizeof(*st));
	if (i == -2)
		return -ENOENT;
	if (i == -1) {
		st->st_mode = S_IFDIR | 0755;
		st->st_nlink = 2;
		return 0;
	}
	cb_idx_entry(&m->x, (uint64_t)i, &e);
	resolve(m, &e);
	st->st_mode = e.mode;
	st->st_nlink = S_ISDIR(e.mode) ? 2 : 1;
	st->st_uid = e.uid;
	st->st_gid = e.gid;
	st->st_size = S_ISLNK(e.mode) ? (off_t)strlen(e.link) : (off_t)e.size;
	st->st_blocks = (st->st_size + 511) / 512;
	st->st_rdev = makedev(e.dev_major, e.dev_minor);
	st->st_mtim.tv_sec = st->st_atim.tv_sec = st->st_ctim.tv_sec = (time_t)e.mtime;
	st->st_mtim.tv_nsec = st->st_atim.tv_nsec = st->st_ctim.tv_nsec = e.mtime_nsec;
	return 0;
}

static int mnt_readlink(const char *path, char *buf, size_t size)
{
	struct mnt *m = M();
	int64_t i = lookup(m, path);
	struct cb_idx_entry e;

	if (i < 0)
		return i == -2 ? -ENOENT : -EINVAL;
	cb_idx_entry(&m->x, (uint64_t)i, &e);
	if (!S_ISLNK(e.mode) || size == 0)
		return -EINVAL;
	snprintf(buf, size, "%s", e.link);
	return 0;
}

/* Implied directories (a/b/c archived without a/b) are listed too: the
 * first component below dk of every descendant, once. */
static int mnt_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		       struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	struct mnt *m = M();
	uint64_t first, n = cb_idx_range(&m->x, path, &first);
	size_t dl;
	char *last = NULL;

	cb_idx_key(path, &dl);

	(void)off; (void)fi; (void)flags;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	for (uint64_t p = first; p < first + n; p++) {
		struct cb_idx_entry e;
		size_t el, cl;
		const char *ek, *c;

		cb_idx_entry(&m->x, cb_idx_order_at(&m->x, p), &e);
		ek = cb_idx_key(e.path, &el);
		if (el <= dl)
			continue;
		c = dl ? ek + dl + 1 : ek;
		cl = strcspn(c, "/");
		if (cl > el - (size_t)(c - ek))
			cl = el - (size_t)(c - ek);
		if (last && strlen(last) == cl && !memcmp(last, c, cl))
			continue;
		free(last);
		last = cb_xasprintf("%.*s", (int)cl, c);
		fill(buf, last, NULL, 0, 0);
	}
	free(last);
	return 0;
}

/* ---- data ---- */

/* Decode len bytes of tar from offset off into dst, starting at the unit
 * that holds off. */
static int decode_at(struct mnt *m, uint64_t off, unsigned char *dst, size_t len)
{
	uint64_t uo, co, skip;
	ssize_t k;

	cb_idx_unit_for(&m->x, off, &uo, &co);
	if (cb_codec_reader_seek(m->reader, co, uo) < 0)
		return -1;
	for (skip = off - uo; skip > 0; skip -= (uint64_t)k) {
		unsigned char junk[65536];

		k = cb_codec_read(m->reader, junk, skip < sizeof(junk) ? (size_t)skip : sizeof(junk));
		if (k <= 0)
			return -1;
	}
	for (size_t got = 0; got < len; got += (size_t)k) {
		k = cb_codec_read(m->reader, dst + got, len - got);
		if (k <= 0)
			return -1;
	}
	return 0;
}

/* The decoded unit u from the cache, decoding it if it is not there. */
static struct cached_unit *unit_get(struct mnt *m, uint64_t u, uint64_t uo, uint64_t len)
{
	struct cached_unit *slot = &m->cache[0];

	for (int i = 0; i < CACHE_UNITS; i++) {
		if (m->cache[i].valid && m->cache[i].index == u) {
			m->cache[i].used = ++m->clock;
			return &m->cache[i];
		}
		if (!m->cache[i].valid || m->cache[i].used < slot->used)
			slot = &m->cache[i];
	}
	free(slot->data);
	slot->valid = 0;
	slot->data = cb_xmalloc(len ? len : 1);
	if (decode_at(m, uo, slot->data, len) < 0)
		return NULL;
	slot->index = u;
	slot->len = len;
	slot->used = ++m->clock;
	slot->valid = 1;
	return slot;
}

/* Bytes [off, off + len) of the tar stream: through cached units where
 * they are small enough, else decoded straight. */
static int tar_bytes(struct mnt *m, uint64_t off, unsigned char *dst, size_t len)
{
	/* the loader bounds every member by the stream; this keeps a read
	 * past it from looping on a unit that has none of it */
	if (off > m->x.tar_size || len > m->x.tar_size - off)
		return -1;
	while (len > 0) {
		uint64_t uo, co, next, ulen, u;
		struct cached_unit *c;
		size_t k;

		if (m->x.codec == CB_COMPRESS_NONE)
			return pread(m->fd, dst, len, (off_t)off) == (ssize_t)len ? 0 : -1;
		u = cb_idx_unit_for(&m->x, off, &uo, &co);
		next = cb_idx_unit_start(&m->x, u + 1);
		ulen = next - uo;
		if (ulen > UNIT_CACHE_MAX)
			return decode_at(m, off, dst, len);
		if (!(c = unit_get(m, u, uo, ulen)))
			return -1;
		if (off - uo >= ulen)
			return -1;
		k = off - uo + len <= ulen ? len : (size_t)(ulen - (off - uo));
		memcpy(dst, c->data + (off - uo), k);
		dst += k;
		off += k;
		len -= k;
	}
	return 0;
}

/* The member's headers as libarchive reads them (xattr names decoded). */
static int member_entry(struct mnt *m, const struct cb_idx_entry *e, struct cb_tarread *t,
			struct archive_entry **ae)
{
	struct cb_tarread_at at = { 0 };

	cb_idx_seek_for(&m->x, e->hdr_off, &at.u_off, &at.c_off);
	at.skip = e->hdr_off - at.u_off;
	at.units = &m->units;
	if (cb_tarread_open_at(t, m->archive, &at) < 0 || archive_read_next_header(t->a, ae) < ARCHIVE_WARN)
		return -1;
	return 0;
}

/* A sparse member's data is laid out by its map: libarchive reads it. */
static int sparse_read(struct mnt *m, const struct cb_idx_entry *e, char *buf, size_t size,
		       off_t off)
{
	struct cb_tarread t = { .fd = -1, .file_fd = -1 };
	struct archive_entry *ae;
	const void *blk;
	size_t bl;
	la_int64_t bo;
	int ret = -EIO, rc;
	uint64_t lo, hi, from = (uint64_t)off, to = (uint64_t)off + size;

	memset(buf, 0, size);
	if (member_entry(m, e, &t, &ae) < 0)
		goto out;
	/* ARCHIVE_WARN still hands a block; EOF ends; worse is EIO */
	while ((rc = archive_read_data_block(t.a, &blk, &bl, &bo)) >= ARCHIVE_WARN &&
	       rc != ARCHIVE_EOF && (uint64_t)bo < to) {
		lo = (uint64_t)bo > from ? (uint64_t)bo : from;
		hi = (uint64_t)bo + bl < to ? (uint64_t)bo + bl : to;
		if (lo < hi)
			memcpy(buf + (lo - from), (const char *)blk + (lo - (uint64_t)bo), hi - lo);
	}
	ret = rc < ARCHIVE_WARN ? -EIO : 0;
out:
	cb_tarread_close(&t);
	return ret;
}

static int mnt_open(const char *path, struct fuse_file_info *fi)
{
	int64_t i = lookup(M(), path);

	if (i == -2)
		return -ENOENT;
	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		return -EROFS;
	fi->keep_cache = 1;
	return 0;
}

static int mnt_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct mnt *m = M();
	int64_t i = lookup(m, path);
	struct cb_idx_entry e;

	(void)fi;
	if (i < 0)
		return i == -2 ? -ENOENT : -EISDIR;
	cb_idx_entry(&m->x, (uint64_t)i, &e);
	resolve(m, &e);
	if (!S_ISREG(e.mode))
		return -EINVAL;
	if ((uint64_t)off >= e.size)
		return 0;
	if ((uint64_t)off + size > e.size)
		size = (size_t)(e.size - (uint64_t)off);
	if (e.flags & CB_IDX_SPARSE)
		return sparse_read(m, &e, buf, size, off) < 0 ? -EIO : (int)size;
	if (tar_bytes(m, e.data_off + (uint64_t)off, (unsigned char *)buf, size) < 0)
		return -EIO;
	return (int)size;
}

/* ---- xattrs: from the member's own headers ---- */

/* list (name NULL) or get one xattr; the size, or -errno */
static int xattrs(const char *path, const char *name, char *buf, size_t size)
{
	struct mnt *m = M();
	int64_t i = lookup(m, path);
	struct cb_idx_entry e;
	struct cb_tarread t = { .fd = -1, .file_fd = -1 };
	struct archive_entry *ae;
	const char *xn;
	const void *v;
	size_t vl, total = 0;
	int ret = name ? -ENODATA : 0;

	if (i < 0)
		return i == -2 ? -ENOENT : (name ? -ENODATA : 0);
	cb_idx_entry(&m->x, (uint64_t)i, &e);
	if (member_entry(m, &e, &t, &ae) < 0) {
		cb_tarread_close(&t);
		return -EIO;
	}
	archive_entry_xattr_reset(ae);
	while (archive_entry_xattr_next(ae, &xn, &v, &vl) == ARCHIVE_OK) {
		if (!name) {
			size_t k = strlen(xn) + 1;

			if (size && total + k <= size)
				memcpy(buf + total, xn, k);
			total += k;
			ret = size && total > size ? -ERANGE : (int)total;
		} else if (!strcmp(xn, name)) {
			ret = !size ? (int)vl : vl > size ? -ERANGE : (memcpy(buf, v, vl), (int)vl);
			break;
		}
	}
	cb_tarread_close(&t);
	return ret;
}

static int mnt_getxattr(const char *path, const char *name, char *buf, size_t size)
{
	return xattrs(path, name, buf, size);
}

static int mnt_listxattr(const char *path, char *buf, size_t size)
{
	return xattrs(path, NULL, buf, size);
}

static void mnt_destroy(void *data)
{
	struct mnt *m = data;

	for (int i = 0; i < CACHE_UNITS; i++)
		free(m->cache[i].data);
	cb_codec_reader_free(m->reader);
	cb_codec_units_release(&m->units);
	close(m->fd);
	cb_idx_close(&m->x);
}

static const struct fuse_operations mnt_ops = {
	.getattr = mnt_getattr,
	.readlink = mnt_readlink,
	.open = mnt_open,
	.read = mnt_read,
	.readdir = mnt_readdir,
	.getxattr = mnt_getxattr,
	.listxattr = mnt_listxattr,
	.destroy = mnt_destroy,
};

static int mnt_prepare(struct mnt *m, const char *archive, struct cb_log *log)
{
	m->archive = archive;
	if (cb_idx_open_for(&m->x, archive, log) < 0)
		return -1;
	m->fd = cb_open_regular_given(archive, "", NULL);
	if (m->fd < 0)
		return -1;
	if (m->x.codec != CB_COMPRESS_NONE && cb_codec_reader_new(&m->reader, m->fd) < 0)
		return cb_error_prefix("'%s'", archive);
	cb_idx_units(&m->x, &m->units);
	if (m->reader)
		cb_codec_reader_check_units(m->reader, &m->units, m->x.archive_size);
	return 0;
}

/* A second mount stacked on a mounted directory hides the first one and
 * unmounting it shows the old again: refuse, naming what is there. */
static int check_mountpoint(const char *mountpoint)
{
	struct statx stx;

	if (statx(AT_FDCWD, mountpoint, AT_SYMLINK_NOFOLLOW, STATX_TYPE, &stx) < 0)
		return cb_error_errno("mount point '%s'", mountpoint);
	if (!S_ISDIR(stx.stx_mode))
		return cb_error("mount point '%s' is not a directory", mountpoint);
	if ((stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
	    (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
		return cb_error("'%s' is already a mount point: unmount it first (fusermount3 -u or "
				"umount), or give an empty directory", mountpoint);
	return 0;
}

int cb_mount_run(const char *archive, const char *mountpoint, struct cb_log *log)
{
	struct mnt *m = cb_xcalloc(1, sizeof(*m));
	char *abs = realpath(archive, NULL), *fsname;
	int ret = -1;

	m->fd = -1;
	if (!abs || check_mountpoint(mountpoint) < 0) {
		if (!abs)
			cb_error_errno("cannot resolve '%s'", archive);
		free(abs);
		free(m);
		return -1;
	}
	fsname = cb_xasprintf("ro,default_permissions,fsname=cbackup,subtype=cbackup");
	if (mnt_prepare(m, abs, log) == 0) {
		/* -s: one thread (the cache and the reader are unlocked); the
		 * daemon keeps the catalog mapping and the archive fd */
		char *argv[] = { "cbackup", "-s", "-o", fsname, (char *)mountpoint, NULL };

		cb_info(log, "mounting '%s' on '%s' (read-only; fusermount3 -u to end)", abs, mountpoint);
		ret = fuse_main(5, argv, &mnt_ops, m) == 0 ? 0 : cb_error("cannot mount '%s' on '%s'",
									  abs, mountpoint);
	}
	free(fsname);
	free(abs);
	free(m);
	return ret;
}
