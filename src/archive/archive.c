/*
 * cb_archive: pax tar of the staged tree through our codec stage.
 * See include/cb_archive.h.
 *
 * libarchive formats the entries (pax headers for xattrs, ACLs, GNU sparse
 * 1.0 maps) but never filters: its output callback hands the tar bytes to
 * cb_codec_write(). We walk the tree ourselves so the order is sorted and
 * stable (reproducible archives, cheap diffs between two backups), and read
 * metadata with archive_read_disk_entry_from_file() without a name lookup
 * so owners stay numeric.
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

#define DATA_BUF (1024 * 1024)
/* libarchive writes through unbuffered (bytes_per_block 0) so that the codec
 * gets each byte right after we said what it is (cb_codec_hint); we pad the
 * end to 10240 bytes ourselves, the record size every tar expects. */
#define TAR_RECORD 10240

struct arch {
	struct archive *a;            /* pax writer */
	struct archive *disk;         /* metadata reader for the tree */
	struct archive *disk_dense;   /* the same for files without holes */
	struct archive *disk_plain;   /* for extras: no xattrs/ACLs of the host */
	struct linkmap links;         /* staged inodes with names still to come */
	struct cb_codec_writer *codec;
	struct cb_log *log;
	struct cb_archive_stats *st;
	unsigned char *buf, *zeros;
	dev_t root_dev;
	struct entry_xattrs xa;       /* its side_fd: the staging engine's big-xattr store */
	const struct cb_archive_graft *grafts;
	size_t n_grafts;
	unsigned char *grafted;       /* per graft: archived already */
	int codec_failed;             /* the message is in cb_last_error() */
	/* bytes read in place into the codec's chunk, on their way through
	 * libarchive (see out_cb) */
	const unsigned char *pend;
	size_t pend_len;
	int pend_saved;               /* copied to buf: foreign bytes came first */
	/* an entry's header, held back to be rewritten (paxfix.c) */
	int capture;
	unsigned char *hdr;
	size_t hdr_len, hdr_cap;
	struct paxfix fix;
	struct cb_fdpath fp;          /* the walk's directories, bounded fds */
	/* tokens (cb_codec_piece): the tree walked is a staging copy; the
	 * archive's start by the clock file times come from; the regular
	 * file being written has a token */
	int staged;
	struct timespec start;
	int has_tok;
	unsigned char tok[CB_TOKEN_LEN];
};

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

static la_ssize_t out_cb(struct archive *a, void *cd, const void *buf, size_t len)
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
static int la_fail(struct arch *c, struct archive *a, const char *name)
{
	if (c->codec_failed)
		return -1;
	return cb_error("cannot archive '%s': %s", name, archive_error_string(a));
}

static int feed(struct arch *c, const void *buf, size_t len, const char *name)
{
	la_ssize_t n = archive_write_data(c->a, buf, len);

	if (n < 0)
		return la_fail(c, c->a, name);
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
		return la_fail(c, c->a, src);
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
static int put_entry(struct arch *c, struct archive_entry *e, int fd, const char *src)
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
		return la_fail(c, c->a, src);
	if (r == ARCHIVE_WARN)
		cb_warn(c->log, "'%s': %s", src, archive_error_string(c->a));
	return 0;
}

/* Fill an entry from disk; fd is the open regular file or -1. */
static int read_meta(struct arch *c, struct archive *disk, struct archive_entry *e, int fd,
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
static int add_tree_entry(struct arch *c, int dfd, const char *name, const char *arcname, int fd,
			  const struct stat *st)
{
	struct archive_entry *e = archive_entry_new();
	char *src = fd_path(fd >= 0 ? fd : dfd, fd >= 0 ? "" : name);
	int ret = -1;

	if (fd >= 0)  /* "/proc/self/fd/N/": the entry itself */
		src[strlen(src) - 1] = '\0';
	archive_entry_copy_sourcepath(e, src);
	archive_entry_copy_pathname(e, arcname);
	if (read_meta(c, meta_reader(c, fd, st), e, fd, st, arcname) < 0 ||
	    entry_xattrs_read(&c->xa, e, fd, src, arcname) < 0 ||
	    (c->xa.idmap && idshift_owner(c->xa.idmap, e, arcname) < 0))
		goto out;
	link_to_first(c, e, st, arcname);
	c->has_tok = make_tok(c, e, st);
	ret = put_entry(c, e, S_ISREG(st->st_mode) ? fd : -1, arcname);
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

/* Open a regular file or directory below dfd for reading, never through a
 * symlink. Reading must not change what the next archive records (the
 * staged copy's atime): O_NOATIME where we own the file or are root. */
static int open_read(int dfd, const char *name, int dir)
{
	int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (dir ? O_DIRECTORY : 0);
	int fd = openat(dfd, name, flags | O_NOATIME);

	return fd < 0 && errno == EPERM ? openat(dfd, name, flags) : fd;
}

/*
 * A staging copy's regular file or directory, as its directory listing
 * typed it, opened without the stat before: only cbackup writes that tree,
 * so the name cannot turn into a device or fifo in between (open_entry's
 * stat first is for trees others write). 0 opened and stat'ed, 1 vanished,
 * 2 not that type after all (take it by open_entry), -1.
 */
static int open_typed(int dfd, const char *name, const char *arcname, unsigned char type, int *fd,
		      struct stat *st)
{
	*fd = open_read(dfd, name, type == DT_DIR);
	if (*fd < 0)
		return errno == ENOENT ? 1 : 2;
	if (fstat(*fd, st) < 0) {
		close(*fd);
		*fd = -1;
		return cb_error_errno("cannot stat '%s'", arcname);
	}
	if ((type == DT_REG && S_ISREG(st->st_mode)) || (type == DT_DIR && S_ISDIR(st->st_mode)))
		return 0;
	close(*fd);
	*fd = -1;
	return 2;
}

/*
 * Open one entry of the staged tree below dfd and stat what was opened:
 * the metadata and data archived are those of one inode, and a symlink
 * is never followed (O_NOFOLLOW on the last component, every component
 * before it an fd already open). Regular files and directories get an fd;
 * others (*fd -1) are read by name below dfd. A name that changes type
 * between the stat and the open is taken again. 0, 1 (vanished), -1.
 */
static int open_entry(int dfd, const char *name, const char *arcname, int *fd, struct stat *st)
{
	for (int tries = 0; tries < 8; tries++) {
		*fd = -1;
		if (fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
			return errno == ENOENT ? 1 : cb_error_errno("cannot stat '%s'", arcname);
		if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))
			return 0;
		*fd = open_read(dfd, name, S_ISDIR(st->st_mode));
		if (*fd < 0 && errno == ENOENT)
			return 1;
		if (*fd < 0 && errno != ELOOP && errno != ENOTDIR)
			return cb_error_errno("cannot open '%s'", arcname);
		if (*fd >= 0 && fstat(*fd, st) == 0)
			return 0;
		if (*fd >= 0)
			close(*fd);
	}
	return cb_error("'%s' keeps changing while being archived", arcname);
}

static int walk(struct arch *c, const char *arcname);
static int open_tree_root(struct arch *c, const struct cb_archive_graft *g, struct stat *st);

static const struct cb_archive_graft *graft_at(const struct arch *c, const char *name)
{
	for (size_t i = 0; i < c->n_grafts; i++)
		if (!c->grafted[i] && !strcmp(c->grafts[i].name, name))
			return &c->grafts[i];
	return NULL;
}

/* A mount point's tree in place of NAME: its own root entry and walk, on
 * its own file system, with its own side store. */
static int add_graft(struct arch *c, const struct cb_archive_graft *g)
{
	dev_t outer_dev = c->root_dev;
	int outer_side = c->xa.side_fd, outer_staged = c->staged, fd, ret;
	struct stat st;

	c->grafted[g - c->grafts] = 1;
	fd = open_tree_root(c, g, &st);
	if (fd < 0)
		return -1;
	ret = add_tree_entry(c, -1, NULL, g->name, fd, &st);
	if (ret == 0) {
		struct cb_fdpath outer = c->fp;
		cb_fdpath_init(&c->fp, fd, 0);
		ret = walk(c, g->name);
		cb_fdpath_release(&c->fp);
		c->fp = outer;
	}
	close(fd);
	if (c->xa.side_fd >= 0)
		close(c->xa.side_fd);
	c->root_dev = outer_dev;
	c->xa.side_fd = outer_side;
	c->staged = outer_staged;
	return ret;
}

/* One child of a directory: archive it, descend into directories that
 * stay on the tree's file system. */
static int walk_child(struct arch *c, int dfd, const char *name, const char *arcname,
		      unsigned char type)
{
	const struct cb_archive_graft *g = graft_at(c, arcname);
	struct stat st;
	int fd, ret = 2;

	if (cb_check_interrupt() < 0)
		return -1;
	if (g)
		return add_graft(c, g);
	if (c->staged && (type == DT_REG || type == DT_DIR))
		ret = open_typed(dfd, name, arcname, type, &fd, &st);
	if (ret == 2)
		ret = open_entry(dfd, name, arcname, &fd, &st);
	if (ret == 1)
		cb_warn(c->log, "'%s' vanished while archiving", arcname);
	if (ret != 0)
		return ret < 0 ? -1 : 0;
	if (S_ISSOCK(st.st_mode))
		cb_verbose(c->log, "skipping socket '%s'", arcname);
	else if (add_tree_entry(c, dfd, name, arcname, fd, &st) < 0)
		ret = -1;
	else if (S_ISDIR(st.st_mode) && st.st_dev != c->root_dev)
		cb_warn(c->log, "not descending into '%s': another file system", arcname);
	else if (S_ISDIR(st.st_mode) && cb_fdpath_push(&c->fp, fd, name, 0) < 0)
		ret = cb_error_errno("cannot stat '%s'", arcname);
	else if (S_ISDIR(st.st_mode)) {
		ret = walk(c, arcname);   /* the path took the fd over */
		cb_fdpath_pop(&c->fp);
		fd = -1;
	}
	/* the codec may keep a file it defers pieces of (cb_codec_piece) */
	if (fd >= 0 && !(S_ISREG(st.st_mode) && cb_codec_keep_fd(c->codec, fd)))
		close(fd);
	return ret;
}

static int walk(struct arch *c, const char *arcname)
{
	struct cb_strvec names = CB_STRVEC_INIT;
	const char *sep = arcname[strlen(arcname) - 1] == '/' ? "" : "/";
	size_t lv = cb_fdpath_top(&c->fp);
	int dfd = cb_fdpath_fd(&c->fp, lv), ret = 0;
	unsigned char *types = NULL;

	if (dfd < 0 || cb_dir_names_types(dfd, &names, &types) < 0)
		return cb_error_errno("cannot read directory '%s'", arcname);
	for (size_t i = 0; i < names.n && ret == 0; i++) {
		char *cname = cb_xasprintf("%s%s%s", arcname, sep, names.v[i]);

		/* again for each entry: a subdirectory's walk may close it */
		if ((dfd = cb_fdpath_fd(&c->fp, lv)) < 0)
			ret = cb_error_errno("cannot open directory '%s'", arcname);
		else
			ret = walk_child(c, dfd, names.v[i], cname, types[i]);
		free(cname);
	}
	free(types);
	cb_strvec_clear(&names);
	return ret;
}

/* A tree the caller opened (a snapshot): that very directory, whatever
 * its name leads to now; a snapshot has no side store. */
static int dup_tree_root(struct arch *c, const struct cb_archive_graft *g, struct stat *st)
{
	int fd = fcntl(g->fd, F_DUPFD_CLOEXEC, 0);

	if (fd < 0 || fstat(fd, st) < 0 || !S_ISDIR(st->st_mode)) {
		if (fd >= 0)
			close(fd);
		return cb_error_errno("cannot use the directory of '%s'", g->tree);
	}
	c->root_dev = st->st_dev;
	c->xa.side_fd = -1;
	return fd;
}

/* The staging root itself is opened without following a symlink too. */
/* Open a tree's root (never through a symlink) and its side store of big
 * xattrs; the tree's device becomes the walk's. The fd or -1. */
static int open_tree_root(struct arch *c, const struct cb_archive_graft *g, struct stat *st)
{
	const char *tree = g->tree;
	int fd;
	char *side;

	c->staged = g->staged && !g->by_fd;
	if (g->by_fd)
		return dup_tree_root(c, g, st);
	fd = open(tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR) && lstat(tree, st) == 0 &&
	    S_ISLNK(st->st_mode))
		return cb_error("'%s' is a symlink, not the staging directory", tree);
	if (fd < 0)
		return cb_error_errno("cannot open '%s'", tree);
	if (fstat(fd, st) < 0) {
		close(fd);
		return cb_error_errno("cannot stat '%s'", tree);
	}
	c->root_dev = st->st_dev;
	side = cb_xasprintf("%s%s", tree, CB_STAGE_XATTR_DIR);
	c->xa.side_fd = open(side, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	free(side);
	return fd;
}

static int add_tree(struct arch *c, const struct cb_archive_graft *root)
{
	struct stat st;
	int fd = open_tree_root(c, root, &st), ret;

	if (fd < 0)
		return -1;
	ret = add_tree_entry(c, -1, NULL, "./", fd, &st);
	if (ret == 0) {
		cb_fdpath_init(&c->fp, fd, 0);
		ret = walk(c, "./");
		cb_fdpath_release(&c->fp);
	}
	close(fd);
	return ret;
}

/* An extra from a file: its mode, size and times, no xattrs. */
static int extra_file(struct arch *c, const struct cb_archive_extra *x, struct archive_entry *e,
		      int *fd)
{
	struct stat st;

	*fd = open(x->source_path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0 || fstat(*fd, &st) < 0)
		return cb_error_errno("cannot open '%s'", x->source_path);
	if (!S_ISREG(st.st_mode))
		return cb_error("'%s' is not a regular file", x->source_path);
	archive_entry_copy_sourcepath(e, x->source_path);
	return read_meta(c, c->disk_plain, e, *fd, &st, x->source_path);
}

/* An extra given as its content, a 0644 file: through a memfd, so that it
 * takes the same way into the archive as a file's data. */
static int extra_data(const struct cb_archive_extra *x, struct archive_entry *e, int *fd)
{
	*fd = memfd_create("cbackup-extra", MFD_CLOEXEC);
	if (*fd < 0 || cb_write_all(*fd, x->data, x->len) < 0 || lseek(*fd, 0, SEEK_SET) < 0)
		return cb_error_errno("cannot stage '%s'", x->archive_name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, (la_int64_t)x->len);
	archive_entry_set_mtime(e, x->mtime, 0);
	return 0;
}

/* Extras are root's, one link each. */
static int add_extra(struct arch *c, const struct cb_archive_extra *x)
{
	struct archive_entry *e = archive_entry_new();
	int ret = -1, fd = -1;

	if ((x->data ? extra_data(x, e, &fd) : extra_file(c, x, e, &fd)) < 0)
		goto out;
	archive_entry_copy_pathname(e, x->archive_name);
	archive_entry_set_uid(e, 0);
	archive_entry_set_gid(e, 0);
	archive_entry_set_nlink(e, 1);
	ret = put_entry(c, e, fd, x->data ? x->archive_name : x->source_path);
out:
	if (fd >= 0)
		close(fd);
	archive_entry_free(e);
	return ret;
}

/* The extras that go before the tree (first) or after it. */
static int add_extras(struct arch *c, const struct cb_archive_extra *extras, size_t n, int first)
{
	for (size_t i = 0; i < n; i++) {
		if (!extras[i].first != !first)
			continue;
		if (add_extra(c, &extras[i]) < 0)
			return -1;
	}
	return 0;
}

static int pad_record(struct arch *c)
{
	size_t pad = (TAR_RECORD - c->st->tar_bytes % TAR_RECORD) % TAR_RECORD;

	if (pad && cb_codec_write(c->codec, c->zeros, pad) < 0)
		return -1;
	c->st->tar_bytes += pad;
	return 0;
}

static struct archive *disk_reader(int flags)
{
	struct archive *d = archive_read_disk_new();

	if (!d) {
		cb_error("cannot create libarchive disk reader");
		return NULL;
	}
	/* no archive_read_disk_set_standard_lookup(): numeric owners only;
	 * a flag not taken (no mount-point stop, host ACLs) is no reader */
	if (archive_read_disk_set_symlink_physical(d) != ARCHIVE_OK ||
	    archive_read_disk_set_behavior(d, flags) != ARCHIVE_OK) {
		cb_error("cannot set up libarchive disk reader: %s", archive_error_string(d));
		archive_read_free(d);
		return NULL;
	}
	return d;
}

static int arch_open(struct arch *c)
{
	/* xattrs and ACLs: entry_xattr.c */
	c->disk = disk_reader(ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS | ARCHIVE_READDISK_NO_FFLAGS |
			      ARCHIVE_READDISK_NO_ACL | ARCHIVE_READDISK_NO_XATTR);
	c->disk_dense = disk_reader(ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS | ARCHIVE_READDISK_NO_FFLAGS |
				    ARCHIVE_READDISK_NO_ACL | ARCHIVE_READDISK_NO_XATTR |
				    ARCHIVE_READDISK_NO_SPARSE);
	c->disk_plain = disk_reader(ARCHIVE_READDISK_NO_XATTR | ARCHIVE_READDISK_NO_ACL |
				    ARCHIVE_READDISK_NO_FFLAGS);
	c->a = archive_write_new();
	if (!c->disk || !c->disk_dense || !c->disk_plain || !c->a)
		return cb_error("cannot initialise libarchive");
	/* SCHILY.xattr only: the form GNU tar reads (and libarchive too);
	 * LIBARCHIVE.xattr copies would make GNU tar warn on every file */
	if (archive_write_set_format_pax(c->a) != ARCHIVE_OK ||
	    archive_write_set_format_option(c->a, "pax", "xattrheader", "SCHILY") != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(c->a, 0) != ARCHIVE_OK)
		return cb_error("cannot set up tar writer: %s", archive_error_string(c->a));
	if (archive_write_open(c->a, c, NULL, out_cb, NULL) != ARCHIVE_OK)
		return la_fail(c, c->a, "(archive start)");
	return 0;
}

static void arch_release(struct arch *c)
{
	if (c->a)
		archive_write_free(c->a);   /* also closes it if still open */
	if (c->disk)
		archive_read_free(c->disk);
	if (c->disk_dense)
		archive_read_free(c->disk_dense);
	if (c->disk_plain)
		archive_read_free(c->disk_plain);
	linkmap_release(&c->links);
	free(c->hdr);
	free(c->fix.acl[0]);
	free(c->fix.acl[1]);
	if (c->xa.side_fd >= 0)
		close(c->xa.side_fd);
	entry_xattrs_release(&c->xa);
	cb_free_huge(c->buf, DATA_BUF);
	free(c->zeros);
	free(c->grafted);
}

/* Mount points whose target the main tree does not have. */
static int add_left_grafts(struct arch *c)
{
	for (size_t i = 0; i < c->n_grafts; i++)
		if (!c->grafted[i] && add_graft(c, &c->grafts[i]) < 0)
			return -1;
	return 0;
}

int cb_archive_write(const char *tree, const struct cb_archive_extra *extras, size_t n_extras,
		     struct cb_codec_writer *codec, struct cb_log *log, struct cb_archive_stats *stats)
{
	struct cb_archive_graft root = { "./", tree, 0, -1, 0, NULL };

	return cb_archive_write_grafted(tree ? &root : NULL, NULL, 0, extras, n_extras, codec, log,
					stats);
}

static int write_grafted(const struct cb_archive_graft *tree, const struct cb_archive_graft *grafts,
			 size_t n_grafts, const struct cb_archive_extra *extras, size_t n_extras,
			 struct cb_codec_writer *codec, struct cb_log *log,
			 struct cb_archive_stats *stats)
{
	struct arch c = { .codec = codec, .log = log, .st = stats, .grafts = grafts,
			  .n_grafts = n_grafts };
	double t0 = cb_now();
	int ret = -1, r;

	memset(stats, 0, sizeof(*stats));
	clock_gettime(CLOCK_REALTIME_COARSE, &c.start);
	c.buf = cb_xmalloc_huge(DATA_BUF);
	c.zeros = cb_xcalloc(1, DATA_BUF);
	c.grafted = cb_xcalloc(n_grafts + 1, 1);
	entry_xattrs_init(&c.xa, &c.fix, log);
	c.xa.idmap = tree ? tree->idmap : NULL;
	if (arch_open(&c) < 0)
		goto out;
	if (add_extras(&c, extras, n_extras, 1) < 0)
		goto out;
	if (tree && (add_tree(&c, tree) < 0 || add_left_grafts(&c) < 0))
		goto out;
	if (add_extras(&c, extras, n_extras, 0) < 0)
		goto out;
	/* writes the end-of-archive blocks; the record padding is ours */
	if (cb_codec_member(codec, NULL) < 0) {
		c.codec_failed = 1;
		goto out;
	}
	r = archive_write_close(c.a);
	if (r < ARCHIVE_WARN) {
		la_fail(&c, c.a, "(archive end)");
		goto out;
	}
	if (r == ARCHIVE_WARN)
		cb_warn(log, "archive end: %s", archive_error_string(c.a));
	ret = pad_record(&c);
out:
	if (ret < 0 && c.a)
		archive_write_fail(c.a);   /* no trailer after a failure */
	arch_release(&c);
	stats->seconds = cb_now() - t0;
	return ret;
}

/* The walk recurses once per directory level: on a deep stack
 * (cb_call_deep), as the staging engine's. */
struct write_call {
	const struct cb_archive_graft *tree;
	const struct cb_archive_graft *grafts;
	size_t n_grafts;
	const struct cb_archive_extra *extras;
	size_t n_extras;
	struct cb_codec_writer *codec;
	struct cb_log *log;
	struct cb_archive_stats *stats;
};

static int write_call(void *arg)
{
	struct write_call *c = arg;

	return write_grafted(c->tree, c->grafts, c->n_grafts, c->extras, c->n_extras, c->codec,
			     c->log, c->stats);
}

int cb_archive_write_grafted(const struct cb_archive_graft *tree,
			     const struct cb_archive_graft *grafts,
			     size_t n_grafts, const struct cb_archive_extra *extras, size_t n_extras,
			     struct cb_codec_writer *codec, struct cb_log *log,
			     struct cb_archive_stats *stats)
{
	struct write_call c = { tree, grafts, n_grafts, extras, n_extras, codec, log, stats };

	return cb_call_deep(write_call, &c);
}
