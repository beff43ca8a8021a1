/*
 * An entry's extended attributes and POSIX ACLs as the archive records
 * them (archive_int.h): one listxattr, then one getxattr per name listed.
 *
 * libarchive's reader listed the names and asked each value's size before
 * reading it, and the two ACL types were then probed by name whether the
 * entry had any or not: three system calls for an entry without xattrs (a
 * tenth of a night's calls on a Debian root), where the list says it all.
 * The names libarchive skipped are skipped here too (the ACLs are taken
 * apart, raw and as text for paxfix.c; SGI ACLs; xfsroot.*), and the list's
 * order is kept, so the archive's bytes are those libarchive's reader gave.
 * The staging engine's own names (CB_STAGE_OWN_XATTRS) are put back as what
 * they stand for: chattr flags, and big values kept in the side store.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <archive_entry.h>

#include "archive_int.h"
#include "cb_log.h"
#include "cb_stage_tree.h"
#include "cb_util.h"

#define ACL_ACCESS "system.posix_acl_access"
#define ACL_DEFAULT "system.posix_acl_default"

static int prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* 0 the access ACL, 1 the default ACL, -1 another name. */
static int acl_index(const char *name)
{
	return !strcmp(name, ACL_ACCESS) ? 0 : !strcmp(name, ACL_DEFAULT) ? 1 : -1;
}

/* Names libarchive's Linux reader never archived as xattrs. */
static int skipped(const char *name)
{
	return acl_index(name) >= 0 || !strcmp(name, "trusted.SGI_ACL_DEFAULT") ||
	       !strcmp(name, "trusted.SGI_ACL_FILE") ||
	       prefix(name, "xfsroot.");
}

/* The value of name into x->val: its length, or -1 (gone since listed,
 * or refused: skipped, as libarchive did). */
static ssize_t value(struct entry_xattrs *x, int fd, const char *path, const char *name)
{
	return fd >= 0 ? fgetxattr(fd, name, x->val, ENTRY_XATTR_MAX)
		       : lgetxattr(path, name, x->val, ENTRY_XATTR_MAX);
}

/* The entry's list of names into x->list: its length, 0 (none, or a file
 * system without xattrs), -1 (errno). */
static ssize_t list_names(struct entry_xattrs *x, int fd, const char *path)
{
	for (;;) {
		ssize_t n = fd >= 0 ? flistxattr(fd, x->list, x->list_cap)
				    : llistxattr(path, x->list, x->list_cap);
		if (n >= 0)
			return n;
		if (errno == ENOTSUP || errno == ENOSYS)
			return 0;
		if (errno != ERANGE)
			return -1;
		/* longer than the buffer: ask its length, and try again */
		n = fd >= 0 ? flistxattr(fd, NULL, 0) : llistxattr(path, NULL, 0);
		if (n < 0)
			return -1;
		x->list_cap = (size_t)n + 1024;
		free(x->list);
		x->list = cb_xmalloc(x->list_cap);
	}
}

/* One big xattr from the side store (see CB_STAGE_XATTR_MARK); a big ACL
 * is kept for the end, as one read from the file would be. */
static int side_xattr(struct entry_xattrs *x, struct archive_entry *e, const char *id,
		      const char *arcname)
{
	ssize_t n = -1;
	size_t nlen;
	int fd = -1, acl;

	if (id[strspn(id, "0123456789abcdef-")] == '\0' && x->side_fd >= 0)
		fd = openat(x->side_fd, id, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0)
		n = read(fd, x->val, ENTRY_XATTR_MAX + 256);
	if (fd >= 0)
		close(fd);
	if (n < 0 || !memchr(x->val, '\0', (size_t)n))
		return cb_error("cannot read the big xattr '%s' of '%s' kept beside staging", id,
				arcname);
	nlen = strlen((char *)x->val) + 1;
	acl = acl_index((char *)x->val);
	if (acl < 0) {
		archive_entry_xattr_add_entry(e, (char *)x->val, x->val + nlen, (size_t)n - nlen);
		return 0;
	}
	free(x->side_acl[acl]);
	x->side_acl_len[acl] = (size_t)n - nlen;
	x->side_acl[acl] = cb_xmalloc(x->side_acl_len[acl] + 1);
	memcpy(x->side_acl[acl], x->val + nlen, x->side_acl_len[acl]);
	return 0;
}

/* A staging engine's name, taken for what it stands for: 0 or -1. */
static int own_name(struct entry_xattrs *x, struct archive_entry *e, const char *name, size_t len,
		    const char *arcname)
{
	if (!strcmp(name, CB_STAGE_FFLAGS_XATTR)) {
		x->val[len] = '\0';
		archive_entry_set_fflags(e, strtoul((char *)x->val, NULL, 10), 0);
		return 0;
	}
	if (prefix(name, CB_STAGE_XATTR_MARK))
		return side_xattr(x, e, name + strlen(CB_STAGE_XATTR_MARK), arcname);
	return 0;
}

/* An ACL's raw value kept as an xattr, and its text for paxfix.c (GNU
 * tar and bsdtar set ACLs from that text only); v is shifted in place. */
static int take_acl(struct entry_xattrs *x, struct archive_entry *e, int which,
		    unsigned char *v, ssize_t n, const char *arcname)
{
	const char *name = which ? ACL_DEFAULT : ACL_ACCESS;

	if (x->idmap && n > 0 && idshift_acl(x->idmap, v, (size_t)n, arcname) < 0)
		return -1;
	free(x->fix->acl[which]);
	x->fix->acl[which] = n > 0 ? paxfix_acl_text(v, (size_t)n) : NULL;
	if (x->fix->acl[which])
		archive_entry_xattr_add_entry(e, name, v, (size_t)n);
	return 0;
}

/* A value as the archive records it: a file capability shifted. */
static int add_value(struct entry_xattrs *x, struct archive_entry *e, const char *name, size_t len,
		     const char *arcname)
{
	if (x->idmap && !strcmp(name, "security.capability") &&
	    idshift_caps(x->idmap, x->val, &len, arcname) < 0)
		return -1;
	archive_entry_xattr_add_entry(e, name, x->val, len);
	return 0;
}

int entry_xattrs_read(struct entry_xattrs *x, struct archive_entry *e, int fd, const char *path,
		      const char *arcname)
{
	ssize_t n = list_names(x, fd, path);
	int acl[2] = { 0, 0 }, ret = 0;

	if (n < 0) {
		cb_warn(x->log, "'%s': cannot list its extended attributes: %s", arcname,
			strerror(errno));
		return 0;
	}
	for (const char *p = x->list; p < x->list + n; p += strlen(p) + 1) {
		int a = acl_index(p);
		ssize_t len;

		if (a >= 0)
			acl[a] = 1;
		if (skipped(p) || (len = value(x, fd, path, p)) < 0)
			continue;
		if (!prefix(p, CB_STAGE_OWN_XATTRS)) {
			if (add_value(x, e, p, (size_t)len, arcname) < 0)
				return -1;
		} else if (own_name(x, e, p, (size_t)len, arcname) < 0) {
			return -1;
		}
	}
	/* after the others, as they always came (the archive stays the same);
	 * one too big for the staging file system from the side store */
	for (int i = 0; i < 2; i++) {
		if (acl[i])
			ret = take_acl(x, e, i, x->val, value(x, fd, path, i ? ACL_DEFAULT : ACL_ACCESS),
				       arcname);
		else if (x->side_acl[i])
			ret = take_acl(x, e, i, x->side_acl[i], (ssize_t)x->side_acl_len[i], arcname);
		free(x->side_acl[i]);
		x->side_acl[i] = NULL;
		if (ret < 0)
			break;
	}
	return ret;
}

void entry_xattrs_init(struct entry_xattrs *x, struct paxfix *fix, struct cb_log *log)
{
	memset(x, 0, sizeof(*x));
	x->side_fd = -1;
	x->fix = fix;
	x->log = log;
	x->list_cap = 4096;
	x->list = cb_xmalloc(x->list_cap);
	x->val = cb_xmalloc(ENTRY_XATTR_MAX + 256);
}

void entry_xattrs_release(struct entry_xattrs *x)
{
	free(x->list);
	free(x->val);
	free(x->side_acl[0]);
	free(x->side_acl[1]);
	memset(x, 0, sizeof(*x));
	x->side_fd = -1;
}
