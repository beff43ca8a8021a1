/*
 * restore_entry: one archive entry extracted below DESTDIR (restore.c reads
 * the whole archive, restore_paths.c the chosen units; both hand each entry
 * here). Every entry name is checked (no absolute names, no ".."
 * components, same for hardlink targets) and then made absolute under the
 * canonical DESTDIR, so libarchive's NOABSOLUTEPATHS check cannot be used,
 * but its NODOTDOT and SYMLINKS checks still guard the full path. Then its
 * data, its xattrs and ACLs (directories' ACLs after their modes), and the
 * root entry's metadata last (restore_apply_root, from restore_dest.c).
 * Most entries are written by restore_fast.c instead, relative to their
 * directory's fd (libarchive would check every name from the top).
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

/* Check the names of an entry: they stay relative, resolved by libarchive
 * from the working directory, the private directory restore_dest.c made. */
static int check_names(struct archive_entry *e, const char *name)
{
	const char *link = archive_entry_hardlink(e);

	if (!name_is_safe(name))
		return cb_error("refusing unsafe path '%s' in archive", name ? name : "");
	if (link && !name_is_safe(link))
		return cb_error("refusing hardlink '%s' to unsafe target '%s'", name, link);
	return 0;
}

/* The file and the cause: libarchive's message does not always carry
 * the errno text (a full disk says only "Write failed"). */
static int la_fail(struct restore_job *r, struct archive *a, const char *name)
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
static int la_check(struct restore_job *r, struct archive *a, int rc, const char *name)
{
	if (rc < ARCHIVE_WARN)
		return la_fail(r, a, name);
	if (rc == ARCHIVE_WARN)
		cb_warn(r->log, "'%s': %s", name, archive_error_string(a));
	return 0;
}

/* Into the disk writer (fd < 0) or into fd, at the archive's offsets:
 * what they leave out stays a hole; *end: where the last block ended. */
static int copy_data(struct restore_job *r, const char *name, int fd, la_int64_t *end)
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
		if (fd >= 0 && ((off != *end && lseek(fd, off, SEEK_SET) < 0) ||
				cb_write_all(fd, buf, size) < 0))
			return cb_error_errno("cannot restore '%s'", name);
		*end = off + (la_int64_t)size;
		if (fd < 0 && archive_write_data_block(r->out, buf, size, off) < ARCHIVE_OK)
			return la_fail(r, r->out, name);
		r->st->bytes += size;
	}
}

/* libarchive sets an existing directory's times at once (not at close as
 * for the directories it creates), so later entries would bump DESTDIR's
 * mtime: keep the root entry and apply it after all the others. */
static int keep_root(struct restore_job *r, struct archive_entry *e)
{
	if (archive_entry_filetype(e) != AE_IFDIR)
		return cb_error("archive root entry '%s' is not a directory", archive_entry_pathname(e));
	archive_entry_free(r->root);
	r->root = archive_entry_clone(e);
	r->st->entries++;
	return 0;
}

/* The root entry on directory dirfd, through a disk writer of its own
 * (closed at once: nothing of it is left for later). */
int restore_apply_root(struct restore_job *r, int dirfd)
{
	struct archive *w;
	int ret = -1;

	if (!r->root)
		return 0;
	if (fchdir(dirfd) < 0)
		return cb_error_errno("cannot enter '%s'", r->dest);
	w = archive_write_disk_new();
	if (!w)
		return cb_error("cannot initialise libarchive");
	archive_write_disk_set_options(w, EXTRACT_FLAGS);
	archive_entry_copy_pathname(r->root, ".");
	if (la_check(r, w, archive_write_header(w, r->root), "./") == 0 &&
	    la_check(r, w, archive_write_finish_entry(w), "./") == 0 &&
	    la_check(r, w, archive_write_close(w), "./") == 0)
		ret = 0;
	archive_write_free(w);
	return ret;
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
static void fix_entry(struct restore_job *r, struct archive_entry *e)
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
static int set_acls(struct restore_job *r, struct archive_entry *e)
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

static int set_dir_acls(struct restore_job *r)
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

int restore_entry(struct restore_job *r, struct archive_entry *e)
{
	char *name = cb_xstrdup(archive_entry_pathname(e) ? archive_entry_pathname(e) : "");
	la_int64_t end = 0;
	int ret = -1;

	if (check_names(e, name) < 0)
		goto out;
	fix_entry(r, e);
	if (restore_map_ids(r, e, name) < 0)
		goto out;
	if (is_root_name(name)) {
		ret = keep_root(r, e);
		goto out;
	}
	ret = restore_fast_entry(r, e, name, copy_data);
	if (ret != 0) {
		if (ret > 0)
			r->st->entries++;
		ret = ret > 0 ? 0 : -1;
		goto out;
	}
	ret = -1;
	if (la_check(r, r->out, archive_write_header(r->out, e), name) < 0)
		goto out;
	if (archive_entry_size(e) > 0 && copy_data(r, name, -1, &end) < 0)
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

/* Directory modes and times are applied when the disk writer closes. */
int restore_close(struct restore_job *r)
{
	int rc = archive_write_close(r->out);

	if (rc < ARCHIVE_WARN)
		return cb_error("cannot finish restore: %s", archive_error_string(r->out));
	if (rc == ARCHIVE_WARN)
		cb_warn(r->log, "%s", archive_error_string(r->out));
	if (set_dir_acls(r) < 0)
		return -1;
	return restore_fast_finish(r);
}

void restore_disk_release(struct restore_job *r)
{
	if (r->out)
		archive_write_free(r->out);
	archive_entry_free(r->root);
	set_dir_acls(r);
	restore_fast_release(r);
}
