/*
 * cb_private: root-only directories, exclusive files. See include/cb_private.h.
 *
 * One idea in 630 lines: what cbackup creates where others can write (its
 * private staging directories, their markers, files created O_EXCL), each
 * part checking what the others made.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_private.h"
#include "cb_rmtree.h"
#include "cb_util.h"

#define PRIVATE_NAME "cbackup"
#define MARKER_SUFFIX ".owner"

static int check_private(int fd, const char *path)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return cb_error_errno("cannot stat '%s'", path);
	if (!S_ISDIR(st.st_mode))
		return cb_error("'%s' is not a directory", path);
	if (st.st_uid != geteuid())
		return cb_error("'%s' is owned by uid %u, not by uid %u (root): refusing to use it",
				path, (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & 077)
		return cb_error("'%s' is accessible by group or others (mode %04o, must be 0700): "
				"refusing to use it", path, (unsigned)(st.st_mode & 07777));
	return 0;
}

static int is_symlink(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

int cb_private_dir_open(const char *path)
{
	int created = 0, fd = -1;

	/* another guest of the job removing its copy in the background takes
	 * the private directory along once it is empty (trash_thread): one
	 * gone between the mkdir and the open is made again */
	for (int tries = 0; fd < 0 && tries < 5; tries++) {
		created = mkdir(path, 0700) == 0;
		if (!created && errno != EEXIST)
			return cb_error_errno("cannot create private directory '%s'", path);
		fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 && errno != ENOENT)
			break;
	}
	if (fd < 0 && (errno == ELOOP || errno == ENOTDIR) && is_symlink(path))
		return cb_error("'%s' is a symlink, not a directory: refusing to use it", path);
	if (fd < 0)
		return cb_error_errno("cannot open private directory '%s'", path);
	/* ours, just made: the umask may have taken bits 0700 needs */
	if (created && fchmod(fd, 0700) < 0) {
		cb_error_errno("cannot set mode 0700 on '%s'", path);
		close(fd);
		return -1;
	}
	if (check_private(fd, path) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int cb_create_excl_at(int dirfd, const char *name, mode_t mode)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);

	if (fd >= 0 && fchmod(fd, mode) < 0) {
		int e = errno;
		close(fd);
		unlinkat(dirfd, name, 0);
		errno = e;
		return -1;
	}
	return fd;
}

int cb_create_excl(const char *path, mode_t mode)
{
	return cb_create_excl_at(AT_FDCWD, path, mode);
}

int cb_create_file_at(int dirfd, const char *name, const void *data, size_t len)
{
	int fd = cb_create_excl_at(dirfd, name, 0644);
	int ret = 0;

	if (fd < 0)
		return cb_error_errno("cannot create '%s'", name);
	if (cb_write_all(fd, data, len) < 0 || fsync(fd) < 0)
		ret = cb_error_errno("cannot write '%s'", name);
	if (close(fd) < 0 && ret == 0)
		ret = cb_error_errno("cannot write '%s'", name);
	if (ret < 0)
		unlinkat(dirfd, name, 0);
	return ret;
}

int cb_write_file_replace(const char *path, const char *text, mode_t mode)
{
	return cb_write_file_replace_bytes(path, text, strlen(text), mode);
}

struct bytes {
	const void *data;
	size_t len;
};

static int fill_bytes(int fd, void *ctx)
{
	const struct bytes *b = ctx;

	return cb_write_all(fd, b->data, b->len);
}

int cb_write_file_replace_bytes(const char *path, const void *data, size_t len, mode_t mode)
{
	struct bytes b = { data, len };

	return cb_write_file_replace_with(path, mode, fill_bytes, &b);
}

int cb_write_file_replace_with(const char *path, mode_t mode, int (*fill)(int fd, void *ctx),
			       void *ctx)
{
	char *tmp = cb_xasprintf("%s.tmp", path);
	int fd, ret = 0;

	if (unlink(tmp) < 0 && errno != ENOENT)
		ret = cb_error_errno("cannot remove '%s'", tmp);
	fd = ret < 0 ? -1 : cb_create_excl(tmp, mode);
	if (ret == 0 && fd < 0)
		ret = cb_error_errno("cannot create '%s'", tmp);
	if (ret == 0 && (fill(fd, ctx) < 0 || fsync(fd) < 0))
		ret = cb_error_errno("cannot write '%s'", tmp);
	if (fd >= 0 && close(fd) < 0 && ret == 0)
		ret = cb_error_errno("cannot write '%s'", tmp);
	if (ret == 0 && rename(tmp, path) < 0)
		ret = cb_error_errno("cannot rename '%s'", tmp);
	if (ret < 0 && fd >= 0)
		unlink(tmp);
	free(tmp);
	return ret;
}

/* ---- staging directories ---- */

/*
 * The marker beside NAME holds the device, inode and ctime of the directory
 * cbackup made, recorded again at the end of each run: a directory made
 * later at the same name (even on a recycled inode number) or changed
 * since has another ctime.
 */
static char *marker_text(const struct stat *st)
{
	return cb_xasprintf("%llu %llu %lld.%09ld\n", (unsigned long long)st->st_dev,
			    (unsigned long long)st->st_ino, (long long)st->st_ctim.tv_sec,
			    st->st_ctim.tv_nsec);
}

/* 1 if NAME below pfd is the directory its marker records. */
static int marker_matches(int pfd, const char *name)
{
	char *marker = cb_xasprintf("%s%s", name, MARKER_SUFFIX), buf[128], *want;
	int fd = openat(pfd, marker, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), same;
	struct stat st, dir;
	ssize_t n = -1;

	free(marker);
	if (fd < 0)
		return 0;
	if (fstatat(pfd, name, &dir, AT_SYMLINK_NOFOLLOW) == 0 && fstat(fd, &st) == 0 &&
	    S_ISREG(st.st_mode) && st.st_uid == geteuid())
		n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	want = marker_text(&dir);
	same = !strcmp(buf, want) && S_ISDIR(dir.st_mode) && dir.st_uid == geteuid();
	free(want);
	return same;
}

static int write_marker(int pfd, const char *name, const char *path)
{
	char *marker = cb_xasprintf("%s%s", name, MARKER_SUFFIX), *text = NULL;
	struct stat st;
	int fd = -1, ret = 0;

	if (unlinkat(pfd, marker, 0) < 0 && errno != ENOENT)
		ret = cb_error_errno("cannot record staging directory '%s'", path);
	if (ret == 0 && fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		ret = cb_error_errno("cannot stat staging directory '%s'", path);
	if (ret == 0)
		fd = openat(pfd, marker, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (ret == 0 && fd < 0)
		ret = cb_error_errno("cannot record staging directory '%s'", path);
	if (ret == 0) {
		text = marker_text(&st);
		if (cb_write_all(fd, text, strlen(text)) < 0)
			ret = cb_error_errno("cannot record staging directory '%s'", path);
	}
	if (fd >= 0)
		close(fd);
	free(text);
	free(marker);
	return ret;
}

/* Whatever is at NAME (and its marker) goes: cbackup adopts nothing. */
static int clear_name(int pfd, const char *name, const char *path)
{
	char *marker = cb_xasprintf("%s%s", name, MARKER_SUFFIX);
	int ret = 0;

	if (unlinkat(pfd, marker, 0) < 0 && errno != ENOENT)
		ret = cb_error_errno("cannot remove '%s%s'", path, MARKER_SUFFIX);
	free(marker);
	return ret < 0 ? -1 : cb_remove_tree(path);
}

static void trash_leftovers(int pfd, const char *parent, const char *id);
static int stage_dir_id(const char *name, char *id, size_t len);

static int prepare_in(int pfd, const char *name, const char *path, int reuse, int *reused)
{
	*reused = reuse && marker_matches(pfd, name);
	if (*reused)
		return 0;
	if (clear_name(pfd, name, path) < 0)
		return -1;
	if (mkdirat(pfd, name, 0700) < 0) {
		if (errno == ENOENT)
			return -2;   /* the private dir was removed under us */
		return cb_error_errno("cannot create staging directory '%s'", path);
	}
	return write_marker(pfd, name, path);
}

int cb_stage_dir_kept(const char *tmpdir, const char *id)
{
	char *parent = cb_xasprintf("%s/%s", tmpdir, PRIVATE_NAME);
	char *name = cb_xasprintf("cbackup-%s.stage", id);
	int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int kept = pfd >= 0 && marker_matches(pfd, name);
	if (pfd >= 0)
		close(pfd);
	free(parent);
	free(name);
	return kept;
}

int cb_stage_dir_prepare(const char *tmpdir, const char *id, int reuse, char **path_out,
			 int *reused)
{
	char *parent = cb_xasprintf("%s/%s", tmpdir, PRIVATE_NAME);
	char *name = cb_xasprintf("cbackup-%s.stage", id);
	int pfd = -1, ret = -2;

	*path_out = cb_xasprintf("%s/%s", parent, name);
	*reused = 0;
	/* another guest's copy, removed in the background, takes the empty
	 * private directory with it when it is done (trash_thread): one
	 * removed between our open and our mkdirat is made and opened again */
	for (int tries = 0; ret == -2 && tries < 5; tries++) {
		pfd = cb_private_dir_open(parent);
		if (pfd < 0) {
			cb_error_prefix("staging");
			ret = -1;
			break;
		}
		trash_leftovers(pfd, parent, id);
		ret = prepare_in(pfd, name, *path_out, reuse, reused);
		close(pfd);
	}
	if (ret == -2)
		ret = cb_error("cannot create staging directory '%s': its directory keeps "
			       "being removed", *path_out);
	if (ret < 0 && pfd >= 0)
		rmdir(parent);   /* ours, checked: leave the tmpdir as found */
	free(parent);
	free(name);
	return ret;
}

int cb_stage_dir_record(const char *stage_path)
{
	char *parent = cb_xstrdup(stage_path), *slash = strrchr(parent, '/');
	int pfd = -1, ret = -1;

	if (slash) {
		*slash = '\0';
		pfd = cb_private_dir_open(parent);
	}
	if (pfd >= 0) {
		ret = write_marker(pfd, slash + 1, stage_path);
		close(pfd);
	}
	free(parent);
	return ret;
}

int cb_stage_dir_remove(const char *stage_path)
{
	char *marker = cb_xasprintf("%s%s", stage_path, MARKER_SUFFIX);
	char *parent = cb_xstrdup(stage_path), *slash = strrchr(parent, '/');
	int ret = cb_remove_tree(stage_path);

	unlink(marker);
	/* the tmpdir is left as it was found; a kept staging copy stays */
	if (ret == 0 && slash) {
		*slash = '\0';
		rmdir(parent);
	}
	free(parent);
	free(marker);
	return ret;
}

/* ---- kept staging copies (prune --staging, list) ---- */

/* What follows "cbackup-ID.stage" in the names of the staging directory
 * and its companions: marker, index, side store, trust map (reuse), and
 * the same for each
 * mount point's copy (".mpN..."). A whitelist: guest "a"'s names never
 * take in guest "a.stage"'s ("cbackup-a.stage.stage"). */
static int stage_tail_ok(const char *r)
{
	static const char *const tails[] = { "", MARKER_SUFFIX, ".index", ".index.new", ".xattrs",
					     ".trust", ".trust.tmp", ".enctrust", ".enctrust.tmp", ".units" };

	if (!strncmp(r, ".mp", 3) && r[3] >= '1' && r[3] <= '9')
		for (r += 4; *r >= '0' && *r <= '9'; r++)
			;
	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++)
		if (!strcmp(r, tails[i]))
			return 1;
	return 0;
}

/* NAME is guest ID's staging directory or one of its companions. */
static int stage_name_of(const char *name, const char *id)
{
	size_t n = strlen(id);

	return !strncmp(name, "cbackup-", 8) && !strncmp(name + 8, id, n) &&
	       !strncmp(name + 8 + n, ".stage", 6) && stage_tail_ok(name + 8 + n + 6);
}

/* The ID of a staging directory's name "cbackup-ID.stage", else -1. */
static int stage_dir_id(const char *name, char *id, size_t len)
{
	size_t n = strlen(name);

	if (n <= 14 || strncmp(name, "cbackup-", 8) || strcmp(name + n - 6, ".stage") ||
	    n - 14 >= len)
		return -1;
	memcpy(id, name + 8, n - 14);
	id[n - 14] = '\0';
	return 0;
}

/* Blocks below fd, a hardlinked inode counted once per name's share. */
static uint64_t tree_bytes(int fd)
{
	DIR *d = fdopendir(fd);
	struct dirent *de;
	uint64_t sum = 0;

	if (!d) {
		close(fd);
		return 0;
	}
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		sum += (uint64_t)st.st_blocks * 512 / (S_ISDIR(st.st_mode) || !st.st_nlink ? 1 : st.st_nlink);
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				sum += tree_bytes(sub);
		}
	}
	closedir(d);
	return sum;
}

/* Every kept copy (a staging directory with its marker) in TMPDIR. */
static int each_kept(const char *tmpdir, const char *only_id,
		     int (*fn)(int pfd, const char *id, const char *parent, void *arg), void *arg)
{
	char *parent = cb_xasprintf("%s/%s", tmpdir, PRIVATE_NAME), id[256];
	int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), ret = -1;
	struct dirent *de;
	DIR *d = NULL;

	if (pfd < 0) {
		ret = errno == ENOENT ? 0 : cb_error_errno("cannot open '%s'", parent);
		goto out;
	}
	if (check_private(pfd, parent) < 0 || !(d = fdopendir(dup(pfd))))
		goto out;
	ret = 0;
	while (ret == 0 && (de = readdir(d)) != NULL) {
		if (stage_dir_id(de->d_name, id, sizeof(id)) < 0 || (only_id && strcmp(id, only_id)))
			continue;
		if (marker_matches(pfd, de->d_name))
			ret = fn(pfd, id, parent, arg);
	}
out:
	if (d)
		closedir(d);
	if (pfd >= 0)
		close(pfd);
	free(parent);
	return ret;
}

struct kept_list {
	struct cb_kept_copy *v;
	size_t n;
};

/* The copy's size: the directory and its companions. */
static int add_kept(int pfd, const char *id, const char *parent, void *arg)
{
	struct kept_list *l = arg;
	struct cb_kept_copy *k;
	/* a new open file: a dup() would share the caller's readdir offset */
	int dfd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	struct dirent *de;

	l->v = cb_xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
	k = &l->v[l->n++];
	snprintf(k->id, sizeof(k->id), "%s", id);
	k->path = cb_xasprintf("%s/cbackup-%s.stage", parent, id);
	k->bytes = 0;
	while (d && (de = readdir(d)) != NULL) {
		struct stat st;
		int fd;
		if (!stage_name_of(de->d_name, id) || fstatat(pfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		k->bytes += (uint64_t)st.st_blocks * 512;
		fd = S_ISDIR(st.st_mode) ? openat(pfd, de->d_name, O_RDONLY | O_DIRECTORY |
							     O_NOFOLLOW | O_CLOEXEC) : -1;
		if (fd >= 0)
			k->bytes += tree_bytes(fd);
	}
	if (d)
		closedir(d);
	return 0;
}

int cb_kept_copies(const char *tmpdir, const char *id, struct cb_kept_copy **out, size_t *n)
{
	struct kept_list l = { NULL, 0 };
	int ret = each_kept(tmpdir, id, add_kept, &l);

	*out = l.v;
	*n = l.n;
	return ret;
}

void cb_kept_copies_free(struct cb_kept_copy *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].path);
	free(v);
}

/* Everything named for guest ID's staging in the private directory. */
int cb_stage_dir_purge(const char *tmpdir, const char *id)
{
	char *parent = cb_xasprintf("%s/%s", tmpdir, PRIVATE_NAME);
	int pfd = cb_private_dir_open(parent), ret = 0;
	struct dirent *de;
	DIR *d;

	if (pfd < 0 || !(d = fdopendir(dup(pfd)))) {
		if (pfd >= 0)
			close(pfd);
		free(parent);
		return -1;
	}
	while (ret == 0 && (de = readdir(d)) != NULL) {
		char *path;
		if (!stage_name_of(de->d_name, id))
			continue;
		path = cb_xasprintf("%s/%s", parent, de->d_name);
		ret = cb_remove_tree(path);
		free(path);
	}
	closedir(d);
	close(pfd);
	rmdir(parent);   /* empty now: the tmpdir as it was before any run */
	free(parent);
	return ret;
}

/* ---- removal after the result (keep-staging 0) ---- */

#define TRASH_PREFIX ".trash-"

struct cb_trash {
	pthread_t th;
	char *path, *parent;
	int workers, ret;
	char err[1024];
};

static void *trash_thread(void *arg)
{
	struct cb_trash *t = arg;

	t->ret = cb_remove_tree_parallel(t->path, t->workers);
	if (t->ret < 0)
		snprintf(t->err, sizeof(t->err), "%s", cb_last_error());
	rmdir(t->parent);   /* the tmpdir as it was, unless another guest's copy is there */
	return NULL;
}

/* Move guest ID's staging directory and companions (not the marker) into
 * the new directory TRASH. */
static int trash_move(int pfd, const char *id, const char *trash)
{
	char *marker = cb_xasprintf("cbackup-%s.stage%s", id, MARKER_SUFFIX);
	int dfd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = 0;
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	struct dirent *de;

	while (d && ret == 0 && (de = readdir(d))) {
		if (!stage_name_of(de->d_name, id) || !strcmp(de->d_name, marker))
			continue;
		char *to = cb_xasprintf("%s/%s", trash, de->d_name);
		ret = renameat(pfd, de->d_name, pfd, to);
		free(to);
	}
	if (d)
		closedir(d);
	if (!d || ret < 0)
		ret = -1;
	else
		unlinkat(pfd, marker, 0);
	free(marker);
	return ret;
}

/* Dead runs' trash of guest ID (a killed run never got to remove it). */
static void trash_leftovers(int pfd, const char *parent, const char *id)
{
	char *prefix = cb_xasprintf(TRASH_PREFIX "cbackup-%s.stage.", id);
	int dfd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	size_t n = strlen(prefix);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char *end, *path;
		long pid;
		if (strncmp(de->d_name, prefix, n))
			continue;
		pid = strtol(de->d_name + n, &end, 10);
		if (*end || pid <= 0 || (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
			continue;   /* not a trash name, or its run still removes it */
		path = cb_xasprintf("%s/%s", parent, de->d_name);
		cb_remove_tree(path);
		free(path);
	}
	if (d)
		closedir(d);
	free(prefix);
}

int cb_stage_dir_trash(const char *stage_path, int workers, struct cb_trash **out)
{
	const char *base = strrchr(stage_path, '/');
	char id[256], *trash = NULL;
	struct cb_trash *t = NULL;
	int pfd = -1, ret = -1;

	*out = NULL;
	if (!base || stage_dir_id(base + 1, id, sizeof(id)) < 0)
		return cb_error("'%s' is not a staging directory", stage_path);
	t = cb_xcalloc(1, sizeof(*t));
	t->parent = cb_xasprintf("%.*s", (int)(base - stage_path), stage_path);
	t->workers = workers;
	pfd = cb_private_dir_open(t->parent);
	trash = cb_xasprintf(TRASH_PREFIX "%s.%ld", base + 1, (long)getpid());
	if (pfd < 0 || mkdirat(pfd, trash, 0700) < 0 || trash_move(pfd, id, trash) < 0) {
		if (pfd >= 0)
			cb_error_errno("cannot move '%s' aside for removal", stage_path);
		goto out;
	}
	t->path = cb_xasprintf("%s/%s", t->parent, trash);
	if (cb_thread_start(&t->th, trash_thread, t) < 0) {
		trash_thread(t);   /* no thread: now, then */
		ret = t->ret < 0 ? cb_error("%s", t->err) : 0;
		goto out;
	}
	*out = t;
	t = NULL;
	ret = 0;
out:
	if (pfd >= 0)
		close(pfd);
	free(trash);
	if (t) {
		free(t->path);
		free(t->parent);
		free(t);
	}
	return ret;
}

int cb_trash_wait(struct cb_trash *t)
{
	int ret;

	if (!t)
		return 0;
	pthread_join(t->th, NULL);
	ret = t->ret < 0 ? cb_error("cannot remove the staging copy '%s': %s", t->path, t->err) : 0;
	free(t->path);
	free(t->parent);
	free(t);
	return ret;
}
