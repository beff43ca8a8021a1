/*
 * A unit store's objects in a plain directory (include/cb_objstore.h): an
 * object NAME is the file ROOT/NAME, its folders made as needed (0700).
 * A put writes ROOT/~tmp/HOST-PID-TID-N (a name no object can have: '~' is not in
 * a name's alphabet), fsyncs it and moves it into place: renameat2 with
 * RENAME_NOREPLACE for if_absent (link() where the file system has no
 * such rename: NFS), so a reader never sees half an object and a manifest
 * is never replaced. Every path is walked from the root's fd with
 * O_NOFOLLOW: a dump directory others can write to may hold symlinks.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cb_objstore.h"
#include "cb_util.h"

#define TMP_DIR "~tmp"
/* a temporary file this old was left by a writer that died (a put takes
 * seconds); removed when a handle is opened */
#define TMP_STALE_S (24 * 3600)
#define NAME_MAX_LEN 1024

struct dirstore {
	struct cb_objstore base;
	int rootfd;
	char *root;
	unsigned long seq;            /* temporary names: HOST-PID-TID-SEQ */
	char host[64];
};

static const struct cb_objstore_ops dir_ops;

static struct dirstore *D(struct cb_objstore *s)
{
	return (struct dirstore *)s;
}

static int name_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
	       c == '_' || c == '-';
}

/* [A-Za-z0-9._-] components joined by '/', none empty, "." or "..";
 * partial: a listing's prefix, whose last component may be empty or
 * unfinished ("units/", "nights/cbackup-ct-1", ""). */
static int name_ok(const char *name, int partial)
{
	size_t n = strlen(name), start = 0;

	if (n > NAME_MAX_LEN || (n == 0 && !partial))
		return 0;
	for (size_t i = 0; i <= n; i++) {
		const char *c = name + start;
		size_t len = i - start;

		if (i < n && name[i] != '/') {
			if (!name_char(name[i]))
				return 0;
			continue;
		}
		if ((len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.')) &&
		    !(partial && i == n))
			return 0;
		start = i + 1;
	}
	return 1;
}

static int bad_name(struct cb_objstore *s, const char *op, const char *name)
{
	return cb_error("storage '%s': %s: invalid object name '%s'", s->label, op, name);
}

/* The folder of name (every component but the last), opened from the
 * root without following symlinks; created (0700) when create. The fd, or
 * -1 with errno (ENOENT: a folder missing and not created). */
static int open_parent(struct dirstore *d, const char *name, int create, const char **base)
{
	char part[NAME_MAX_LEN + 1];
	const char *c = name, *slash;
	int fd = dup(d->rootfd);

	while (fd >= 0 && (slash = strchr(c, '/'))) {
		int next;

		memcpy(part, c, (size_t)(slash - c));
		part[slash - c] = 0;
		if (create && mkdirat(fd, part, 0700) < 0 && errno != EEXIST) {
			close(fd);
			return -1;
		}
		next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(fd);
		fd = next;
		c = slash + 1;
	}
	*base = c;
	return fd;
}

static int sync_fd_close(int fd)
{
	int rc = fsync(fd);

	if (close(fd) < 0)
		rc = -1;
	return rc;
}

/* A temporary file in ROOT/~tmp holding data, fsynced; its name in tmp. */
static int write_tmp(struct dirstore *d, const void *data, size_t len, char *tmp, size_t tmpsz)
{
	int fd;

	if (mkdirat(d->rootfd, TMP_DIR, 0700) < 0 && errno != EEXIST)
		return -1;
	/* handles (clones) write from several threads: the thread's id too */
	snprintf(tmp, tmpsz, TMP_DIR "/%s-%ld-%ld-%lu", d->host, (long)getpid(), (long)gettid(), ++d->seq);
	fd = openat(d->rootfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (fd < 0)
		return -1;
	if (cb_write_all(fd, data, len) < 0 || sync_fd_close(fd) < 0) {
		int e = errno;

		close(fd);
		unlinkat(d->rootfd, tmp, 0);
		errno = e;
		return -1;
	}
	return 0;
}

/* tmp into place as base in pfd: 0, 1 (if_absent, the name exists), -1. */
static int move_into_place(struct dirstore *d, const char *tmp, int pfd, const char *base, int if_absent)
{
	if (!if_absent)
		return renameat(d->rootfd, tmp, pfd, base);
	if (renameat2(d->rootfd, tmp, pfd, base, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno == EEXIST)
		return 1;
	if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
		return -1;
	if (linkat(d->rootfd, tmp, pfd, base, 0) < 0)
		return errno == EEXIST ? 1 : -1;
	unlinkat(d->rootfd, tmp, 0);
	return 0;
}

static int dir_put(struct cb_objstore *s, const char *name, const void *data, size_t len, int if_absent)
{
	struct dirstore *d = D(s);
	char tmp[128];
	const char *base;
	int pfd = -1, rc = -1;

	if (!name_ok(name, 0))
		return bad_name(s, "put", name);
	tmp[0] = 0;
	if (write_tmp(d, data, len, tmp, sizeof(tmp)) < 0)
		goto out;
	pfd = open_parent(d, name, 1, &base);
	if (pfd < 0)
		goto out;
	rc = move_into_place(d, tmp, pfd, base, if_absent);
	/* the name lasts once the folder holding it is on disk */
	if (rc == 0 && fsync(pfd) < 0)
		rc = -1;
out:
	if (rc < 0)
		cb_error_errno("storage '%s': cannot put '%s'", s->label, name);
	if (rc != 0 && tmp[0])
		unlinkat(d->rootfd, tmp, 0);
	if (pfd >= 0)
		close(pfd);
	return rc;
}

/* name opened for reading: the fd, -2 no such object, -1 error set. */
static int open_object(struct cb_objstore *s, const char *op, const char *name, struct stat *st)
{
	const char *base;
	int pfd, fd;

	if (!name_ok(name, 0))
		return bad_name(s, op, name);
	pfd = open_parent(D(s), name, 0, &base);
	fd = pfd < 0 ? -1 : openat(pfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (pfd >= 0)
		close(pfd);
	if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
		return -2;
	if (fd >= 0 && fstat(fd, st) == 0 && S_ISREG(st->st_mode))
		return fd;
	if (fd >= 0) {
		close(fd);
		return cb_error("storage '%s': %s '%s': not a regular file", s->label, op, name);
	}
	return cb_error_errno("storage '%s': cannot %s '%s'", s->label, op, name);
}

static int dir_get(struct cb_objstore *s, const char *name, uint64_t off, uint64_t len,
		   struct cb_s3_buf *out)
{
	struct stat st;
	int fd = open_object(s, "get", name, &st), rc = -1;
	size_t at;

	if (fd < 0)
		return fd == -2 ? 1 : -1;
	if (off > (uint64_t)st.st_size || (len && off + len > (uint64_t)st.st_size)) {
		cb_error("storage '%s': get '%s': bytes %llu+%llu beyond its %llu", s->label, name,
			 (unsigned long long)off, (unsigned long long)len, (unsigned long long)st.st_size);
		goto out;
	}
	if (!len)
		len = (uint64_t)st.st_size - off;
	at = out->len;
	if (out->cap < at + len + 1) {
		out->cap = at + len + 1;
		out->data = cb_xrealloc(out->data, out->cap);
	}
	if (cb_pread_all(fd, out->data + at, (size_t)len, off) < 0) {
		cb_error_errno("storage '%s': cannot read '%s'", s->label, name);
		goto out;
	}
	out->len = at + len;
	out->data[out->len] = 0;
	rc = 0;
out:
	close(fd);
	return rc;
}

static int dir_head(struct cb_objstore *s, const char *name, uint64_t *size)
{
	struct stat st;
	int fd = open_object(s, "head", name, &st);

	if (fd < 0)
		return fd == -2 ? 1 : -1;
	*size = (uint64_t)st.st_size;
	close(fd);
	return 0;
}

static int dir_del(struct cb_objstore *s, const char *name)
{
	const char *base;
	int pfd, rc;

	if (!name_ok(name, 0))
		return bad_name(s, "delete", name);
	pfd = open_parent(D(s), name, 0, &base);
	if (pfd < 0)
		return errno == ENOENT || errno == ENOTDIR
			       ? 0
			       : cb_error_errno("storage '%s': cannot delete '%s'", s->label, name);
	rc = unlinkat(pfd, base, 0);
	if (rc < 0 && errno != ENOENT)
		cb_error_errno("storage '%s': cannot delete '%s'", s->label, name);
	else
		rc = 0;
	close(pfd);
	return rc;
}

struct walk {
	struct cb_objstore *s;
	const char *prefix;
	cb_objstore_list_fn *fn;
	void *arg;
};

/* Entries of dfd sorted as their paths sort: a folder as "NAME/", so that
 * a walk in this order gives every name in byte order (as S3 lists). */
static int entry_cmp(const void *a, const void *b)
{
	const char *x = *(char *const *)a, *y = *(char *const *)b;

	return strcmp(x + 1, y + 1);
}

static int walk_dir(struct walk *w, int dfd, char *path, size_t plen);

/* One entry (kind 'd' or 'f' in key[0]) of the folder at path. */
static int walk_entry(struct walk *w, int dfd, const char *key, char *path, size_t plen)
{
	const char *nm = key + 1;
	size_t n = strlen(nm) - (key[0] == 'd'), pl = strlen(w->prefix);
	struct stat st;
	int rc = 0, fd;

	if (plen + n + 2 > NAME_MAX_LEN)
		return 0;
	memcpy(path + plen, nm, n);
	path[plen + n] = 0;
	/* the prefix still to match, or a name already past it */
	if (strncmp(path, w->prefix, plen + n < pl ? plen + n : pl) != 0)
		return 0;
	if (key[0] == 'f') {
		if (plen + n < pl || fstatat(dfd, path + plen, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			return 0;
		return w->fn(w->arg, path, (uint64_t)st.st_size);
	}
	fd = openat(dfd, path + plen, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : cb_error_errno("storage '%s': cannot list '%s'", w->s->label, path);
	path[plen + n] = '/';
	path[plen + n + 1] = 0;
	rc = walk_dir(w, fd, path, plen + n + 1);
	close(fd);
	return rc;
}

static int walk_dir(struct walk *w, int dfd, char *path, size_t plen)
{
	struct cb_strvec names = CB_STRVEC_INIT, keys = CB_STRVEC_INIT;
	unsigned char *types = NULL;
	int rc = 0;

	if (cb_dir_names_types(dfd, &names, &types) < 0)
		return cb_error_errno("storage '%s': cannot list '%s'", w->s->label, path);
	for (size_t i = 0; i < names.n; i++) {
		struct stat st;
		int isdir = types[i] == DT_DIR;
		char *k;

		if (!name_ok(names.v[i], 0))
			continue;
		if (types[i] == DT_UNKNOWN && fstatat(dfd, names.v[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
			isdir = S_ISDIR(st.st_mode);
		k = cb_xasprintf("%c%s%s", isdir ? 'd' : 'f', names.v[i], isdir ? "/" : "");
		cb_strvec_push(&keys, k);
		free(k);
	}
	if (keys.n)
		qsort(keys.v, keys.n, sizeof(*keys.v), entry_cmp);
	for (size_t i = 0; rc == 0 && i < keys.n; i++)
		rc = walk_entry(w, dfd, keys.v[i], path, plen);
	path[plen] = 0;
	cb_strvec_clear(&names);
	cb_strvec_clear(&keys);
	free(types);
	return rc;
}

static int dir_list(struct cb_objstore *s, const char *prefix, cb_objstore_list_fn *fn, void *arg)
{
	struct walk w = { s, prefix, fn, arg };
	char path[NAME_MAX_LEN + 2];
	const char *slash = strrchr(prefix, '/'), *base;
	size_t plen = slash ? (size_t)(slash - prefix + 1) : 0;
	int fd, rc;

	if (!name_ok(prefix, 1))
		return bad_name(s, "list", prefix);
	memcpy(path, prefix, plen);
	path[plen] = 0;
	/* start in the deepest folder the prefix names whole */
	fd = open_parent(D(s), path, 0, &base);
	if (fd < 0)
		return errno == ENOENT || errno == ENOTDIR
			       ? 0
			       : cb_error_errno("storage '%s': cannot list '%s'", s->label, prefix);
	rc = walk_dir(&w, fd, path, plen);
	close(fd);
	return rc;
}

static int dir_check(struct cb_objstore *s)
{
	struct dirstore *d = D(s);
	char tmp[128];

	if (write_tmp(d, "", 0, tmp, sizeof(tmp)) < 0)
		return cb_error_errno("storage '%s': cannot write in '%s'", s->label, d->root);
	unlinkat(d->rootfd, tmp, 0);
	return 0;
}

/* A temporary file's writer is gone: a process of this host that no
 * longer runs, or any writer a day ago. */
static int tmp_stale(const char *name, const struct stat *st, const char *host, time_t now)
{
	size_t hl = strlen(host);
	long pid;

	if (!strncmp(name, host, hl) && name[hl] == '-' && sscanf(name + hl + 1, "%ld-", &pid) == 1 &&
	    pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH)
		return 1;
	return st->st_mtime + TMP_STALE_S < now;
}

/* Temporary files of writers that were killed. */
static void sweep_tmp(int rootfd, const char *host)
{
	struct cb_strvec names = CB_STRVEC_INIT;
	int fd = openat(rootfd, TMP_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	time_t now = time(NULL);

	if (fd < 0)
		return;
	if (cb_dir_names(fd, &names) == 0) {
		for (size_t i = 0; i < names.n; i++) {
			struct stat st;

			if (fstatat(fd, names.v[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
			    tmp_stale(names.v[i], &st, host, now))
				unlinkat(fd, names.v[i], 0);
		}
	}
	cb_strvec_clear(&names);
	close(fd);
}

static struct cb_objstore *dir_new(const char *label, const char *root, int rootfd)
{
	struct dirstore *d = cb_xcalloc(1, sizeof(*d));

	d->base.ops = &dir_ops;
	d->base.label = cb_xstrdup(label);
	d->root = cb_xstrdup(root);
	d->rootfd = rootfd;
	cb_node_name(d->host, sizeof(d->host));
	return &d->base;
}

struct cb_objstore *cb_objstore_open_dir(const char *label, const char *dir)
{
	struct cb_objstore *s;
	int fd;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		cb_error_errno("storage '%s': cannot create '%s'", label, dir);
		return NULL;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		cb_error_errno("storage '%s': cannot open '%s'", label, dir);
		return NULL;
	}
	s = dir_new(label, dir, fd);
	sweep_tmp(fd, ((struct dirstore *)s)->host);
	return s;
}

static struct cb_objstore *dir_clone(struct cb_objstore *s)
{
	int fd = fcntl(D(s)->rootfd, F_DUPFD_CLOEXEC, 0);

	if (fd < 0) {
		cb_error_errno("storage '%s': cannot open '%s' again", s->label, D(s)->root);
		return NULL;
	}
	return dir_new(s->label, D(s)->root, fd);
}

static void dir_close(struct cb_objstore *s)
{
	struct dirstore *d = D(s);

	close(d->rootfd);
	free(d->root);
	free(d->base.label);
	free(d);
}

static const struct cb_objstore_ops dir_ops = {
	"dir", dir_put, dir_get, dir_head, dir_del, dir_list, dir_check, dir_clone, dir_close,
};
