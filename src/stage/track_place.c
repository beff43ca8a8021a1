/*
 * Where an event's object is: the one placement rule of change tracking
 * (cb_track.h). Only a path verified to lead to the object places it
 * inside or outside the root; anything else is looked up by inode or
 * widens to the whole walk.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_fhandle.h"
#include "cb_util.h"
#include "track_int.h"

/* "a/b" of path under the root, "" for the root itself; NULL outside. */
const char *track_rel_of(const struct cb_track *t, const char *path)
{
	if (t->root_len == 1)
		return path[0] == '/' ? path + 1 : NULL;
	if (strncmp(path, t->root, t->root_len) || (path[t->root_len] && path[t->root_len] != '/'))
		return NULL;
	return path[t->root_len] ? path + t->root_len + 1 : "";
}

/* Note that something was widened (--verbose names the first ones). */
void track_widen(struct cb_track *t, const char *what, const char *why, const char *scope)
{
	if (t->n_widened < WIDEN_LOGGED)
		t->widened[t->n_widened++] = cb_xasprintf("'%s' %s: %s", what, why, scope);
}

/* Every place in the root of the object at path (as the kernel names
 * it): under the root, under each bind mount's source. Returns how many
 * were put in rels (each freed by the caller), at most n. */
size_t track_rels_of(const struct cb_track *t, const char *path, char **rels, size_t n)
{
	const char *r = track_rel_of(t, path);
	size_t k = 0;

	if (r && k < n)
		rels[k++] = cb_xstrdup(r);
	for (size_t i = 0; i < t->n_binds && k < n; i++) {
		const struct bind *b = &t->binds[i];
		const char *tail = path + b->src_len;
		if (!b->src || strncmp(path, b->src, b->src_len) || (*tail && *tail != '/'))
			continue;
		rels[k++] = *tail ? cb_xasprintf("%s%s", b->rel, tail) : cb_xstrdup(b->rel);
	}
	return k;
}

/* The path fd's /proc link names, if it leads back to the inode sb: 0,
 * else -1 (errno: ENAMETOOLONG for a path of 4096 bytes or more, ESTALE
 * for one that leads elsewhere: a disconnected dentry names "/", a name
 * that ends in " (deleted)" is what it says only if the inode has no
 * links left). */
static int verified_path(const char *link, const struct stat *sb, char *out, size_t len)
{
	ssize_t n = readlink(link, out, len - 1);
	struct stat now;

	if (n < 0)
		return -1;
	if ((size_t)n >= len - 1)
		return errno = ENAMETOOLONG, -1;
	out[n] = '\0';
	if (fstatat(AT_FDCWD, out, &now, AT_SYMLINK_NOFOLLOW) < 0 || now.st_dev != sb->st_dev || now.st_ino != sb->st_ino)
		return errno = ESTALE, -1;
	return 0;
}

/* The one rule: where the object at fd (the /proc link LINK
 * names its path) is. out: its verified path when INSIDE or OUTSIDE. */
enum place track_place_of(const struct cb_track *t, const char *link, const struct stat *sb,
			   char *out, size_t len, const char **why)
{
	char *rel = NULL;

	if (sb->st_nlink == 0)
		return P_GONE;
	if (verified_path(link, sb, out, len) < 0) {
		*why = errno == ENAMETOOLONG ? "has a path of 4096 bytes or more"
					     : "has a path that does not lead to it (disconnected)";
		return sb->st_dev == t->dev ? P_INODE : P_WHOLE;
	}
	if (track_rels_of(t, out, &rel, 1)) {
		free(rel);
		return P_INSIDE;
	}
	return P_OUTSIDE;
}

/* A handle of the root's file system: where its object is. */
enum place track_place_handle(const struct cb_track *t, struct file_handle *h, char *out,
			       size_t len, struct stat *sb, const char **why)
{
	int fd = open_by_handle_at(t->mount_fd, h, O_PATH | O_CLOEXEC);
	char link[64];
	enum place p;

	if (fd < 0) {
		uint64_t ino;
		int err = errno;

		*why = "has a handle that cannot be opened";
		/* a stale handle: its inode is freed, it is nowhere */
		if (err == ESTALE || err == ENOENT)
			return P_GONE;
		/* the inode exists, the kernel cannot open it now (ENOMEM on a
		 * busy host: an inode being freed or set up, a file it cannot
		 * connect to a path): looked up in the tree by the number its
		 * handle carries; its type is not known (st_mode 0) */
		memset(sb, 0, sizeof(*sb));
		if (cb_fhandle_ino(h, t->have_root_fh ? &t->root_fh.h : NULL, &ino) < 0)
			return P_WHOLE;
		if (err == ENOMEM)
			*why = "has a handle the kernel cannot open now (ENOMEM)";
		sb->st_dev = t->dev;
		sb->st_ino = (ino_t)ino;
		return P_INODE;
	}
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	if (fstat(fd, sb) < 0) {
		*why = "cannot be read (fstat)";
		p = P_WHOLE;
	} else {
		p = track_place_of(t, link, sb, out, len, why);
	}
	close(fd);
	return p;
}

