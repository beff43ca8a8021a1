/*
 * cb_restore: extract an archive below DESTDIR. See include/cb_restore.h.
 *
 * Decompression is ours (cb_codec reader); libarchive only parses tar and
 * writes to disk. Every entry name is checked here (no absolute names, no
 * ".." components, same for hardlink targets) and then made absolute under
 * the canonical DESTDIR, so libarchive's NOABSOLUTEPATHS check cannot be
 * used, but its NODOTDOT and SYMLINKS checks still guard the full path.
 *
 * No ARCHIVE_EXTRACT_SPARSE: holes are made where the archive's sparse map
 * has them, and nowhere else (a dense file of zeros, a swap file, stays
 * dense, as GNU tar leaves it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <archive.h>
#include <archive_entry.h>

#include "cb_codec.h"
#include "cb_restore.h"
#include "cb_tarread.h"
#include "cb_cleanup.h"
#include "cb_util.h"
#include "restore_int.h"

static int dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int empty = 1;

	if (!d)
		return cb_error_errno("cannot open directory '%s'", path);
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			empty = 0;
			break;
		}
	closedir(d);
	return empty;
}

static int mkdir_p(const char *path)
{
	char *p = cb_xstrdup(path);
	int ret = 0;

	for (char *s = p + 1; ; s++) {
		if (*s && *s != '/')
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST) {
			ret = cb_error_errno("cannot create directory '%s'", p);
			break;
		}
		*s = c;
		if (!c)
			break;
	}
	free(p);
	return ret;
}

/* A dry run creates no DESTDIR: its space is that of the nearest
 * directory above it that exists. */
static int dry_dest(struct rst *r, const char *destdir)
{
	char *p = cb_xstrdup(destdir), *slash;

	cb_info(r->log, "dry run: would create '%s'", destdir);
	while ((slash = strrchr(p, '/')) && access(p, F_OK) < 0)
		slash == p ? (void)(p[1] = '\0') : (void)(*slash = '\0');
	r->dest = realpath(access(p, F_OK) == 0 ? p : ".", NULL);
	free(p);
	return r->dest ? 0 : cb_error_errno("cannot resolve '%s'", destdir);
}

/* Check or create DESTDIR and resolve it to a symlink-free absolute path. */
int cb_rst_prepare_dest(struct rst *r, const struct cb_restore_opts *o)
{
	struct stat st;
	int empty;

	if (stat(o->destdir, &st) < 0) {
		if (errno != ENOENT)
			return cb_error_errno("cannot stat '%s'", o->destdir);
		if (o->dry_run)
			return dry_dest(r, o->destdir);
		if (mkdir_p(o->destdir) < 0)
			return -1;
	} else if (!S_ISDIR(st.st_mode)) {
		return cb_error("destination '%s' is not a directory", o->destdir);
	} else {
		empty = dir_is_empty(o->destdir);
		if (empty < 0)
			return -1;
		if (!empty && !o->force)
			return cb_error("destination '%s' is not empty (use --force)", o->destdir);
	}
	r->dest = realpath(o->destdir, NULL);
	if (!r->dest)
		return cb_error_errno("cannot resolve '%s'", o->destdir);
	return 0;
}

/* Absolute names and ".." components could reach outside DESTDIR. */
static int name_is_safe(const char *name)
{
	const char *p = name;

	if (!name || !*name || *name == '/')
		return 0;
	while (*p) {
		size_t len = strcspn(p, "/");

		if (len == 2 && p[0] == '.' && p[1] == '.')
			return 0;
		p += len;
		p += strspn(p, "/");
	}
	return 1;
}

/* "./" and the like name the guest's root directory: DESTDIR itself. */
static int is_root_name(const char *name)
{
	const char *p = name + strspn(name, "/");

	while (*p) {
		size_t len = strcspn(p, "/");

		if (len != 1 || p[0] != '.')
			return 0;
		p += len;
		p += strspn(p, "/");
	}
	return 1;
}

static char *under_dest(const struct rst *r, const char *name)
{
	size_t dl = strlen(r->dest);

	if (is_root_name(name))
		return cb_xstrdup(r->dest);

	return cb_xasprintf("%s%s%s", r->dest, dl && r->dest[dl - 1] == '/' ? "" : "/", name);
}

/* Check the names of an entry and move them below DESTDIR. */
static int relocate(struct rst *r, struct archive_entry *e, const char *name)
{
	const char *link = archive_entry_hardlink(e);
	char *p;

	if (!name_is_safe(name))
		return cb_error("refusing unsafe path '%s' in archive", name ? name : "");
	if (link && !name_is_safe(link))
		return cb_error("refusing hardlink '%s' to unsafe target '%s'", name, link);
	if (link) {
		p = under_dest(r, link);
		archive_entry_copy_hardlink(e, p);
		free(p);
	}
	p = under_dest(r, name);
	archive_entry_copy_pathname(e, p);
	free(p);
	return 0;
}

/* The file and the cause: libarchive's message does not always carry
 * the errno text (a full disk says only "Write failed"). */
static int la_fail(struct rst *r, struct archive *a, const char *name)
{
	const char *msg = archive_error_string(a);
	int e = archive_errno(a);

	if (r->tr.codec_failed)
		return cb_error_prefix("cannot restore '%s'", name);
	if (e > 0 && (!msg || !strstr(msg, strerror(e))))
		return cb_error("cannot restore '%s': %s%s%s", name, msg ? msg : "", msg ? ": " : "",
				strerror(e));
	return cb_error("cannot restore '%s': %s", name, msg ? msg : "unknown error");
}

/* libarchive WARN: reported, extraction goes on (e.g. no ACL support). */
static int la_check(struct rst *r, struct archive *a, int rc, const char *name)
{
	if (rc < ARCHIVE_WARN)
		return la_fail(r, a, name);
	if (rc == ARCHIVE_WARN)
		cb_warn(r->log, "'%s': %s", name, archive_error_string(a));
	return 0;
}

static int copy_data(struct rst *r, const char *name)
{
	const void *buf;
	size_t size;
	la_int64_t off;
	int rc;

	for (;;) {
		if (cb_check_interrupt() < 0)
			return -1;
		rc = archive_read_data_block(r->tr.a, &buf, &size, &off);
		if (rc == ARCHIVE_EOF)
			return 0;
		if (la_check(r, r->tr.a, rc, name) < 0)
			return -1;
		/* the disk writer says ARCHIVE_WARN for a write(2) that failed
		 * ("Write failed": ENOSPC, EIO): for this call that is an error */
		if (archive_write_data_block(r->out, buf, size, off) < ARCHIVE_OK)
			return la_fail(r, r->out, name);
		r->st->bytes += size;
	}
}

/* libarchive sets an existing directory's times at once (not at close as
 * for the directories it creates), so later entries would bump DESTDIR's
 * mtime: keep the root entry and apply it after all the others. */
static int keep_root(struct rst *r, struct archive_entry *e)
{
	if (archive_entry_filetype(e) != AE_IFDIR)
		return cb_error("archive root entry '%s' is not a directory", archive_entry_pathname(e));
	archive_entry_free(r->root);
	r->root = archive_entry_clone(e);
	r->st->entries++;
	return 0;
}

int cb_rst_apply_root(struct rst *r)
{
	if (!r->root)
		return 0;
	if (la_check(r, r->out, archive_write_header(r->out, r->root), "./") < 0 ||
	    la_check(r, r->out, archive_write_finish_entry(r->out), "./") < 0)
		return -1;
	return 0;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
	     : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* SCHILY.xattr names as GNU tar writes them ("%" and "=" as %25, %3D;
 * cbackup before 0.1 wrote every other byte that way too): decoded. */
static char *xattr_name(const char *n)
{
	char *out = cb_xmalloc(strlen(n) + 1), *o = out;

	for (; *n; n++) {
		if (n[0] == '%' && hexval(n[1]) >= 0 && hexval(n[2]) >= 0) {
			*o++ = (char)(hexval(n[1]) * 16 + hexval(n[2]));
			n += 2;
		} else {
			*o++ = *n;
		}
	}
	*o = '\0';
	return out;
}

/*
 * What libarchive 3.6's reader gets wrong, put right before the entry is
 * written: xattr names (above); ACL entries with ids >= 2^31 (its text
 * parser stops at INT_MAX): when the raw system.posix_acl_* xattrs are in
 * the archive (cbackup writes them) they are kept for set_acls() and the
 * parsed ACL is dropped; a time before 1970 with a fraction ("-1.25" read
 * as -1 + 0.25): made the decimal number the archive says.
 */
static void fix_entry(struct rst *r, struct archive_entry *e)
{
	size_t n = 0, i = 0, len;
	const char *name;
	const void *val;
	struct { char *name; void *val; size_t len; } *x;
	int raw_acl = 0;

	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &name, &val, &len) == ARCHIVE_OK)
		n++;
	x = cb_xcalloc(n ? n : 1, sizeof(*x));
	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &name, &val, &len) == ARCHIVE_OK) {
		x[i].name = xattr_name(name);
		raw_acl |= !strncmp(x[i].name, "system.posix_acl_", 17);
		x[i].val = cb_xmalloc(len + 1);
		memcpy(x[i].val, val, len);
		x[i++].len = len;
	}
	archive_entry_xattr_clear(e);
	for (i = 0; i < n; i++) {
		int k = !strcmp(x[i].name, "system.posix_acl_access") ? 0
		      : !strcmp(x[i].name, "system.posix_acl_default") ? 1 : -1;
		if (k < 0) {
			archive_entry_xattr_add_entry(e, x[i].name, x[i].val, x[i].len);
			free(x[i].val);
		} else {
			r->acl[k] = x[i].val;
			r->acl_len[k] = x[i].len;
		}
		free(x[i].name);
	}
	free(x);
	if (raw_acl)
		archive_entry_acl_clear(e);
	if (archive_entry_mtime(e) < 0 && archive_entry_mtime_nsec(e) > 0)
		archive_entry_set_mtime(e, archive_entry_mtime(e) - 1,
					1000000000L - archive_entry_mtime_nsec(e));
	if (archive_entry_atime_is_set(e) && archive_entry_atime(e) < 0 &&
	    archive_entry_atime_nsec(e) > 0)
		archive_entry_set_atime(e, archive_entry_atime(e) - 1,
					1000000000L - archive_entry_atime_nsec(e));
}

static int put_acls(const char *path, void *const acl[2], const size_t len[2])
{
	static const char *const names[2] = { "system.posix_acl_access",
					       "system.posix_acl_default" };

	for (int k = 0; k < 2; k++)
		if (acl[k] && lsetxattr(path, names[k], acl[k], len[k], 0) < 0)
			return cb_error_errno("cannot set the ACL of '%s'", path);
	return 0;
}

/* The raw ACLs fix_entry() kept, on the entry just written (directories:
 * once the disk writer is closed). */
static int set_acls(struct rst *r, struct archive_entry *e)
{
	struct dir_acl *d;
	int ret;

	if (!r->acl[0] && !r->acl[1])
		return 0;
	if (archive_entry_filetype(e) != AE_IFDIR) {
		ret = put_acls(archive_entry_pathname(e), r->acl, r->acl_len);
		for (int k = 0; k < 2; k++) {
			free(r->acl[k]);
			r->acl[k] = NULL;
		}
		return ret;
	}
	r->dir_acls = cb_xrealloc(r->dir_acls, (r->n_dir_acls + 1) * sizeof(*r->dir_acls));
	d = &r->dir_acls[r->n_dir_acls++];
	d->path = cb_xstrdup(archive_entry_pathname(e));
	for (int k = 0; k < 2; k++) {
		d->acl[k] = r->acl[k];
		d->acl_len[k] = r->acl_len[k];
		r->acl[k] = NULL;
	}
	return 0;
}

static int set_dir_acls(struct rst *r)
{
	int ret = 0;

	for (size_t i = 0; i < r->n_dir_acls; i++) {
		struct dir_acl *d = &r->dir_acls[i];
		if (ret == 0)
			ret = put_acls(d->path, d->acl, d->acl_len);
		free(d->path);
		free(d->acl[0]);
		free(d->acl[1]);
	}
	free(r->dir_acls);
	r->dir_acls = NULL;
	r->n_dir_acls = 0;
	return ret;
}

int cb_rst_entry(struct rst *r, struct archive_entry *e)
{
	char *name = cb_xstrdup(archive_entry_pathname(e) ? archive_entry_pathname(e) : "");
	int ret = -1;

	if (relocate(r, e, name) < 0)
		goto out;
	fix_entry(r, e);
	if (is_root_name(name)) {
		ret = keep_root(r, e);
		goto out;
	}
	if (la_check(r, r->out, archive_write_header(r->out, e), name) < 0)
		goto out;
	if (archive_entry_size(e) > 0 && copy_data(r, name) < 0)
		goto out;
	if (la_check(r, r->out, archive_write_finish_entry(r->out), name) < 0)
		goto out;
	if (set_acls(r, e) < 0)
		goto out;
	r->st->entries++;
	ret = 0;
out:
	for (int k = 0; k < 2; k++) {
		free(r->acl[k]);
		r->acl[k] = NULL;
	}
	free(name);
	return ret;
}

static int restore_all(struct rst *r)
{
	struct archive_entry *e;
	int rc;

	for (;;) {
		if (cb_check_interrupt() < 0)
			return -1;
		rc = archive_read_next_header(r->tr.a, &e);
		/* the stream's end, and the .sha256, checked before success */
		if (rc == ARCHIVE_EOF)
			return cb_tarread_end(&r->tr) < 0 ? -1 : cb_rst_apply_root(r);
		if (rc < ARCHIVE_WARN) {
			if (r->tr.codec_failed)
				return -1;
			return cb_error("cannot read archive: %s", archive_error_string(r->tr.a));
		}
		if (rc == ARCHIVE_WARN)
			cb_warn(r->log, "%s", archive_error_string(r->tr.a));
		if (cb_rst_entry(r, e) < 0)
			return -1;
	}
}

/* ---- free space: a counting pass over the tar headers ---- */


/* Data blocks an entry takes on disk: its data regions (holes take none),
 * rounded up to the file system's block; every entry at least a block
 * (directories, symlinks, inodes' own overhead, roughly). */
static uint64_t entry_blocks(struct archive_entry *e, uint64_t bsize)
{
	uint64_t data = 0;
	la_int64_t off, len;

	if (archive_entry_filetype(e) == AE_IFREG && !archive_entry_hardlink(e)) {
		if (archive_entry_sparse_reset(e) > 0) {
			while (archive_entry_sparse_next(e, &off, &len) == ARCHIVE_OK)
				data += (uint64_t)len;
		} else {
			data = (uint64_t)archive_entry_size(e);
		}
	}
	return data ? (data + bsize - 1) / bsize : 1;
}

static int count_archive(const char *archive, uint64_t bsize, struct cb_rst_need *n)
{
	struct cb_tarread t;
	struct archive_entry *e;
	int rc, ret = -1;

	if (cb_tarread_open(&t, archive, 0) < 0)
		goto out;
	while ((rc = archive_read_next_header(t.a, &e)) != ARCHIVE_EOF) {
		if (rc < ARCHIVE_WARN || cb_check_interrupt() < 0) {
			if (rc < ARCHIVE_WARN)
				cb_tarread_error(&t, "cannot read archive");
			goto out;
		}
		n->bytes += entry_blocks(e, bsize) * bsize;
		n->entries++;
	}
	ret = 0;
out:
	cb_tarread_close(&t);
	return ret;
}

/*
 * The archive has no size totals of its own: a first pass reads its tar
 * headers (decompressing it once without writing anything) and sums what
 * the entries take, then statvfs(DESTDIR) says whether it fits, in blocks
 * and in inodes. With --force files replaced in place may free space, so a
 * shortfall is only a warning there.
 */
int cb_rst_space_check(struct rst *r, const struct cb_restore_opts *o, const struct cb_rst_need *n)
{
	struct statvfs vfs;
	char need_s[32], avail_s[32];
	uint64_t avail;

	if (statvfs(r->dest, &vfs) < 0)
		return cb_error_errno("cannot stat file system of '%s'", r->dest);
	avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	cb_fmt_bytes(need_s, sizeof(need_s), n->bytes);
	cb_fmt_bytes(avail_s, sizeof(avail_s), avail);
	if (o->dry_run)
		cb_info(r->log, "dry run: would restore %llu entries, %s on disk into '%s' (%s "
			"available); nothing written", (unsigned long long)n->entries, need_s,
			o->destdir, avail_s);
	if (n->bytes <= avail && (!vfs.f_files || n->entries <= vfs.f_favail))
		return 0;
	if (n->bytes > avail)
		cb_error("not enough space in '%s': the archive needs %s, %s available", r->dest,
			 need_s, avail_s);
	else
		cb_error("not enough inodes in '%s': the archive has %llu entries, %llu inodes "
			 "available", r->dest, (unsigned long long)n->entries,
			 (unsigned long long)vfs.f_favail);
	if (!o->force)
		return -1;
	cb_warn(r->log, "%s (going on: --force may replace files in place)", cb_last_error());
	return 0;
}

static int check_space(struct rst *r, const struct cb_restore_opts *o)
{
	struct statvfs vfs;
	struct cb_rst_need n = { 0, 0 };

	if (statvfs(r->dest, &vfs) < 0)
		return cb_error_errno("cannot stat file system of '%s'", r->dest);
	if (count_archive(o->archive, vfs.f_frsize ? vfs.f_frsize : 4096, &n) < 0)
		return -1;
	return cb_rst_space_check(r, o, &n);
}

static int open_disk(struct rst *r)
{
	r->out = archive_write_disk_new();
	if (!r->out)
		return cb_error("cannot initialise libarchive");
	/* no archive_write_disk_set_standard_lookup(): owners by number */
	if (archive_write_disk_set_options(r->out, EXTRACT_FLAGS) != ARCHIVE_OK)
		return cb_error("cannot set up the restore: %s", archive_error_string(r->out));
	return 0;
}

/* Directory modes and times are applied when the disk writer closes. */
int cb_rst_close(struct rst *r)
{
	int rc = archive_write_close(r->out);

	if (rc < ARCHIVE_WARN)
		return cb_error("cannot finish restore: %s", archive_error_string(r->out));
	if (rc == ARCHIVE_WARN)
		cb_warn(r->log, "%s", archive_error_string(r->out));
	return set_dir_acls(r);
}

void cb_rst_release(struct rst *r)
{
	cb_tarread_close(&r->tr);
	if (r->out)
		archive_write_free(r->out);
	archive_entry_free(r->root);
	set_dir_acls(r);
	free(r->dest);
}

int cb_restore_run(const struct cb_restore_opts *o, struct cb_log *log, struct cb_restore_stats *st)
{
	struct rst r = { .log = log, .st = st, .tr = { .fd = -1, .file_fd = -1 } };
	char size[32];
	int ret = -1;

	memset(st, 0, sizeof(*st));
	if (open_disk(&r) < 0)
		goto out;
	if (o->dry_run) {
		/* the checks of a restore, then the counting pass: nothing else */
		ret = cb_rst_prepare_dest(&r, o) < 0 ? -1
		      : o->n_paths > 0 ? cb_restore_paths(&r, o) : check_space(&r, o);
		goto out;
	}
	if (o->n_paths > 0) {
		if (cb_rst_prepare_dest(&r, o) < 0 || cb_restore_paths(&r, o) < 0 || cb_rst_close(&r) < 0)
			goto out;
	} else if (cb_tarread_open_checked(&r.tr, o->archive, o->ignore_checksum) < 0 ||
		   cb_rst_prepare_dest(&r, o) < 0 ||
		   check_space(&r, o) < 0 || restore_all(&r) < 0 || cb_rst_close(&r) < 0) {
		goto out;
	}
	cb_fmt_bytes(size, sizeof(size), st->bytes);
	cb_info(log, "restored %llu entries, %s", (unsigned long long)st->entries, size);
	ret = 0;
out:
	cb_rst_release(&r);
	return ret;
}
