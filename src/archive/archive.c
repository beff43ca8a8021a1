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


/* libarchive writes through unbuffered (bytes_per_block 0) so that the codec
 * gets each byte right after we said what it is (cb_codec_hint); we pad the
 * end to 10240 bytes ourselves, the record size every tar expects. */
#define TAR_RECORD 10240


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
	ret = member_add_tree_entry(c, -1, NULL, g->name, fd, &st);
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
	else if (member_add_tree_entry(c, dfd, name, arcname, fd, &st) < 0)
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
	ret = member_add_tree_entry(c, -1, NULL, "./", fd, &st);
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
	return member_read_meta(c, c->disk_plain, e, *fd, &st, x->source_path);
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
	ret = member_put_entry(c, e, fd, x->data ? x->archive_name : x->source_path);
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
	if (archive_write_open(c->a, c, NULL, member_out_cb, NULL) != ARCHIVE_OK)
		return member_la_fail(c, c->a, "(archive start)");
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
		member_la_fail(&c, c.a, "(archive end)");
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
