/*
 * One member of the archive: its tar header (names as bytes, pax fixes),
 * its data fed to the codec (in place from the staged file where it can,
 * sparse extents as extents), the trust token of its pieces, hardlinks to
 * the first name. The walk that finds the members is archive.c's.
 */
#include <dirent.h>
#include <errno.h>
#include <time.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <archive.h>
#include <archive_entry.h>
#include "archive_int.h"
#include "cb_archive.h"
#include "cb_fdpath.h"
#include "cb_cleanup.h"
#include "cb_magic.h"
#include "cb_stage_tree.h"
#include "cb_text.h"
#include "cb_util.h"

/* libarchive may write bytes of its own before the file data we gave it
 * (the sparse map of a GNU sparse 1.0 entry does): those land where bytes
 * read in place wait in the codec's chunk, so the waiting bytes are first
 * saved to buf and taken from there. */
static const void *in_place_source(struct arch *c, const unsigned char *p)
{
	int inside = p >= c->pend && p < c->pend + c->pend_len;

	if (!inside && !c->pend_saved) {
		memcpy(c->buf, c->pend, c->pend_len);
		c->pend_saved = 1;
	}
	return inside && c->pend_saved ? c->buf + (p - c->pend) : p;
}

la_ssize_t member_out_cb(struct archive *a, void *cd, const void *buf, size_t len)
{
	struct arch *c = cd;

	if (c->capture) {
		if (c->hdr_len + len > c->hdr_cap) {
			c->hdr_cap = (c->hdr_len + len) * 2;
			c->hdr = cb_xrealloc(c->hdr, c->hdr_cap);
		}
		memcpy(c->hdr + c->hdr_len, buf, len);
		c->hdr_len += len;
		return len;
	}
	if (c->pend)
		buf = in_place_source(c, buf);
	if (cb_codec_write(c->codec, buf, len) < 0) {
		c->codec_failed = 1;
		archive_set_error(a, EIO, "%s", cb_last_error());
		return -1;
	}
	c->st->tar_bytes += len;
	return len;
}

/* Turn a libarchive failure into our error, unless the codec/sink below
 * already said what went wrong. */
int member_la_fail(struct arch *c, struct archive *a, const char *name)
{
	if (c->codec_failed)
		return -1;
	return cb_error("cannot archive '%s': %s", name, archive_error_string(a));
}

static int feed(struct arch *c, const void *buf, size_t len, const char *name)
{
	la_ssize_t n = archive_write_data(c->a, buf, len);

	if (n < 0)
		return member_la_fail(c, c->a, name);
	return 0;
}

/* Holes are fed as zeros; the pax writer drops bytes that fall in a hole
 * of the entry's sparse map, so nothing of them reaches the tar. */
static int feed_zeros(struct arch *c, int64_t len, const char *name)
{
	while (len > 0) {
		size_t k = len > DATA_BUF ? DATA_BUF : (size_t)len;

		if (feed(c, c->zeros, k, name) < 0)
			return -1;
		len -= k;
	}
	return 0;
}

/* Smallest room in the codec's chunk worth reading into directly. */
#define IN_PLACE_MIN (64 * 1024)

static int copy_piece(struct arch *c, int fd, int64_t off, int64_t len, const char *src)
{
	while (len > 0) {
		size_t k = len > DATA_BUF ? DATA_BUF : (size_t)len, room = 0;
		/* read straight into the codec's chunk when it has room: the
		 * bytes then pass libarchive and the codec without a copy */
		unsigned char *dst = cb_codec_write_buffer(c->codec, &room);
		double t0 = cb_now();
		int unread = 0, ret;
		ssize_t n;

		if (dst && c->has_tok) {
			/* a tokened piece lies in one segment, in place */
			k = k > room ? room : k;
			unread = cb_codec_piece(c->codec, c->tok, fd, (uint64_t)off, k);
		} else if (!dst || room < IN_PLACE_MIN) {
			dst = c->buf;
		} else if (k > room) {
			k = room;
		}
		n = unread ? (ssize_t)k : pread(fd, dst, k, off);

		c->st->read_seconds += cb_now() - t0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return cb_error_errno("cannot read '%s'", src);
		if (cb_check_interrupt() < 0)
			return -1;
		if (n == 0) {
			/* shrank under us: keep the tar consistent with its header */
			cb_warn(c->log, "'%s' shrank while being archived; padding with zeros", src);
			return feed_zeros(c, len, src);
		}
		c->pend = dst == c->buf ? NULL : dst;
		c->pend_len = n;
		c->pend_saved = 0;
		ret = feed(c, dst, n, src);
		c->pend = NULL;
		if (ret < 0)
			return -1;
		off += n;
		len -= n;
	}
	return 0;
}

/* Copy a data range in runs of one kind, each announced to the codec
 * (holes fed as zeros never reach it, so they need no hint). */
static int copy_range(struct arch *c, int fd, int64_t off, int64_t len, const char *src,
		      const struct cb_data_plan *plan)
{
	while (len > 0) {
		uint64_t run;
		enum cb_data_kind kind = cb_magic_plan_at(plan, off, &run);
		int64_t k = run < (uint64_t)len ? (int64_t)run : len;

		if (cb_codec_hint(c->codec, kind, k) < 0) {
			c->codec_failed = 1;
			return -1;
		}
		if (copy_piece(c, fd, off, k, src) < 0)
			return -1;
		off += k;
		len -= k;
	}
	return 0;
}

static int write_extents(struct arch *c, struct archive_entry *e, int fd, const char *src,
			 const struct cb_data_plan *plan)
{
	int64_t size = archive_entry_size(e), pos = 0, off, len;

	if (archive_entry_sparse_reset(e) == 0)
		return copy_range(c, fd, 0, size, src, plan);
	while (archive_entry_sparse_next(e, &off, &len) == ARCHIVE_OK) {
		if (off < pos || off + len > size)
			return cb_error("bad sparse map for '%s'", src);
		if (feed_zeros(c, off - pos, src) < 0 || copy_range(c, fd, off, len, src, plan) < 0)
			return -1;
		pos = off + len;
	}
	return feed_zeros(c, size - pos, src);
}

/* The file's bytes are planned (known compressed formats, qcow2 compressed
 * clusters) before they are copied, so the codec can store them as is. */
static int write_data(struct arch *c, struct archive_entry *e, int fd, const char *src)
{
	struct cb_data_plan plan;
	int ret;

	cb_magic_plan(fd, archive_entry_size(e), &plan);
	if (plan.note[0])
		cb_verbose(c->log, "'%s': %s", src, plan.note);
	else if (plan.format)
		cb_verbose(c->log, "'%s': %s data", src, plan.format);
	cb_codec_begin_file(c->codec);
	ret = write_extents(c, e, fd, src, &plan);
	cb_magic_plan_release(&plan);
	return ret;
}

/* The entry's header as libarchive formats it, then rewritten for GNU
 * tar: -1 (error set), else libarchive's ARCHIVE_OK or ARCHIVE_WARN. */
static int write_header(struct arch *c, struct archive_entry *e, const char *src)
{
	unsigned char *out;
	size_t n;
	int r;

	c->capture = 1;
	c->hdr_len = 0;
	r = archive_write_header(c->a, e);
	c->capture = 0;
	if (r < ARCHIVE_WARN)
		return member_la_fail(c, c->a, src);
	if (paxfix_header(c->hdr, c->hdr_len, &c->fix, &out, &n) < 0)
		return cb_error("cannot rewrite the tar header of '%s'", src);
	/* a member starts: where the codec's segments may be cut */
	if (cb_codec_member(c->codec, archive_entry_pathname(e)) < 0 ||
	    cb_codec_write(c->codec, out, n) < 0) {
		c->codec_failed = 1;
		r = -1;
	}
	c->st->tar_bytes += n;
	free(out);
	return r;
}

/* A name that is not UTF-8 makes libarchive's pax writer warn ("can't
 * translate pathname") and write that entry's names as raw bytes under
 * hdrcharset=BINARY, as POSIX says: that is how we want them archived
 * (GNU tar and bsdtar extract them byte for byte), not a warning. */
static int names_binary(struct archive_entry *e)
{
	const char *n[3] = { archive_entry_pathname(e), archive_entry_symlink(e),
			     archive_entry_hardlink(e) };

	for (int i = 0; i < 3; i++)
		if (n[i] && !cb_utf8_valid(n[i]))
			return 1;
	return 0;
}

/* Write one entry (header, then data if it carries any). */
int member_put_entry(struct arch *c, struct archive_entry *e, int fd, const char *src)
{
	int r = write_header(c, e, src);

	if (r < ARCHIVE_WARN || r == -1)
		return -1;
	if (r == ARCHIVE_WARN && names_binary(e))
		cb_verbose(c->log, "'%s': name or link target not UTF-8: archived as raw bytes "
			   "(pax hdrcharset=BINARY)", src);
	else if (r == ARCHIVE_WARN)
		cb_warn(c->log, "'%s': %s", src, archive_error_string(c->a));
	c->st->entries++;
	if (fd >= 0 && archive_entry_hardlink(e) == NULL && archive_entry_size(e) > 0 &&
	    write_data(c, e, fd, src) < 0)
		return -1;
	/* the data's padding now, not at the start of the next header, which
	 * write_header holds back and rewrites */
	r = archive_write_finish_entry(c->a);
	if (r < ARCHIVE_WARN)
		return member_la_fail(c, c->a, src);
	if (r == ARCHIVE_WARN)
		cb_warn(c->log, "'%s': %s", src, archive_error_string(c->a));
	return 0;
}

/* Fill an entry from disk; fd is the open regular file or -1. */
int member_read_meta(struct arch *c, struct archive *disk, struct archive_entry *e, int fd,
		     const struct stat *st, const char *src)
{
	int r = archive_read_disk_entry_from_file(disk, e, fd, st);

	if (r < ARCHIVE_WARN)
		return cb_error("cannot read metadata of '%s': %s", src, archive_error_string(disk));
	/* no ctime: a staged copy's is the time cbackup wrote it, which no
	 * restore can set; it would make every night's archive differ in every
	 * directory (and no unit could be copied from the last one). No atime
	 * either (GNU tar's gnu format has none): a guest that reads a file
	 * moves it (relatime: once a day), which changed its unit every night */
	archive_entry_unset_ctime(e);
	archive_entry_unset_atime(e);
	if (r == ARCHIVE_WARN)
		cb_warn(c->log, "'%s': %s", src, archive_error_string(disk));
	return 0;
}

/* The path libarchive reads a name-only entry (symlink, device, fifo) by:
 * through the open directory, so no component of it is looked up again
 * (a directory swapped for a symlink cannot redirect it), and short
 * whatever the depth. */
static char *fd_path(int dfd, const char *name)
{
	return cb_xasprintf("/proc/self/fd/%d/%s", dfd, name);
}

/* tar strategy: the first name of an inode keeps the data, later ones
 * become hardlink entries of size 0 pointing at it; every type but
 * directories (symlinks, fifos and devices too). */
static void link_to_first(struct arch *c, struct archive_entry *e, const struct stat *st,
			  const char *arcname)
{
	char *first;
	int last;

	if (S_ISDIR(st->st_mode) || st->st_nlink < 2)
		return;
	first = linkmap_link(&c->links, st->st_dev, st->st_ino, st->st_nlink, arcname, &last);
	if (!first)
		return;
	archive_entry_set_symlink(e, NULL);
	archive_entry_set_hardlink(e, first);
	archive_entry_set_size(e, 0);
	if (last)
		free(first);
}

static void put_tok(unsigned char **p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		*(*p)++ = (unsigned char)(v >> (8 * i));
}

/*
 * The token of a staged regular file (cb_codec.h): its device, inode,
 * size, mtime and ctime. Only cbackup writes the staging copy, and any
 * write to a file (data, mode, owner, xattrs, a rename into it) sets its
 * ctime to the clock's time then; a ctime older than this archive's
 * start (the coarse clock the file system stamps with) is therefore one
 * no later write can give it again, and the same token tomorrow means the
 * same bytes. Sparse files (libarchive writes their map into the data)
 * and files stamped during this run's last tick get none: read.
 */
static int make_tok(struct arch *c, struct archive_entry *e, const struct stat *st)
{
	unsigned char *p = c->tok;

	if (!c->staged || !S_ISREG(st->st_mode) || archive_entry_sparse_count(e) > 0 ||
	    st->st_ctim.tv_sec > c->start.tv_sec ||
	    (st->st_ctim.tv_sec == c->start.tv_sec && st->st_ctim.tv_nsec >= c->start.tv_nsec))
		return 0;
	put_tok(&p, (uint64_t)st->st_dev, 8);
	put_tok(&p, (uint64_t)st->st_ino, 8);
	put_tok(&p, (uint64_t)st->st_size, 8);
	put_tok(&p, (uint64_t)st->st_mtim.tv_sec, 8);
	put_tok(&p, (uint64_t)st->st_mtim.tv_nsec, 4);
	put_tok(&p, (uint64_t)st->st_ctim.tv_sec, 8);
	put_tok(&p, (uint64_t)st->st_ctim.tv_nsec, 4);
	return 1;
}

/* libarchive looks for holes in every regular file (about five lseeks
 * each: a fifth of the archive walk's system calls on a night that copies
 * most units). A file whose blocks cover its size is taken as one without
 * holes, as GNU tar takes it (its ST_IS_SPARSE); else one SEEK_HOLE at
 * offset 0 that lands on the end tells a file without any. Such files are
 * read by a reader that does not look. Data is read with pread: the
 * offset this moves is not used. */
static struct archive *meta_reader(struct arch *c, int fd, const struct stat *st)
{
	if (fd < 0 || !S_ISREG(st->st_mode) || st->st_size == 0)
		return c->disk;
	if ((uint64_t)st->st_blocks * 512 >= (uint64_t)st->st_size ||
	    lseek(fd, 0, SEEK_HOLE) == st->st_size)
		return c->disk_dense;
	return c->disk;
}

/* fd: the open regular file or directory, or -1; st is fstat of it. */
int member_add_tree_entry(struct arch *c, int dfd, const char *name, const char *arcname, int fd,
			  const struct stat *st)
{
	struct archive_entry *e = archive_entry_new();
	char *src = fd_path(fd >= 0 ? fd : dfd, fd >= 0 ? "" : name);
	int ret = -1;

	if (fd >= 0)  /* "/proc/self/fd/N/": the entry itself */
		src[strlen(src) - 1] = '\0';
	archive_entry_copy_sourcepath(e, src);
	archive_entry_copy_pathname(e, arcname);
	if (member_read_meta(c, meta_reader(c, fd, st), e, fd, st, arcname) < 0 ||
	    entry_xattrs_read(&c->xa, e, fd, src, arcname) < 0 ||
	    (c->xa.idmap && idshift_owner(c->xa.idmap, e, arcname) < 0))
		goto out;
	link_to_first(c, e, st, arcname);
	c->has_tok = make_tok(c, e, st);
	ret = member_put_entry(c, e, S_ISREG(st->st_mode) ? fd : -1, arcname);
	c->has_tok = 0;
	for (int i = 0; i < 2; i++) {
		free(c->fix.acl[i]);
		c->fix.acl[i] = NULL;
	}
out:
	free(src);
	archive_entry_free(e);
	return ret;
}
