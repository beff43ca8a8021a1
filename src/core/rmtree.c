/*
 * cb_rmtree: removal of a directory tree, fd-relative, never through a
 * symlink, with a bounded number of fds at any depth (cb_fdpath); also
 * with several threads. See include/cb_rmtree.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_fdpath.h"
#include "cb_rmtree.h"
#include "cb_util.h"

/* One entry below the top of p: unlinked, or (a directory) emptied and
 * removed. *err keeps the first errno. */
static void remove_level(struct cb_fdpath *p, dev_t dev, uint64_t *count, int *err);

static void remove_one(struct cb_fdpath *p, const char *name, dev_t dev, uint64_t *count, int *err)
{
	size_t lv = cb_fdpath_top(p);
	int fd = cb_fdpath_fd(p, lv), sub;
	struct stat st;

	if (fd < 0 || fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT && !*err)
			*err = errno;
		return;
	}
	if (S_ISDIR(st.st_mode)) {
		if (dev && st.st_dev != dev) {  /* a mount inside: never cross it */
			*err = *err ? *err : EXDEV;
			return;
		}
		sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0 || cb_fdpath_push(p, sub, name, 0) < 0) {
			*err = *err ? *err : errno;
			return;
		}
		remove_level(p, dev, count, err);
		cb_fdpath_pop(p);
		if ((fd = cb_fdpath_fd(p, lv)) < 0 || unlinkat(fd, name, AT_REMOVEDIR) < 0) {
			*err = *err ? *err : errno;
			return;
		}
	} else if (unlinkat(fd, name, 0) < 0) {
		if (errno != ENOENT && !*err)
			*err = errno;
		return;
	}
	(*count)++;
}

static void remove_level(struct cb_fdpath *p, dev_t dev, uint64_t *count, int *err)
{
	struct cb_strvec names = CB_STRVEC_INIT;
	int fd = cb_fdpath_fd(p, cb_fdpath_top(p));

	if (fd < 0 || cb_dir_names(fd, &names) < 0) {
		*err = *err ? *err : errno;
		return;
	}
	for (size_t i = 0; i < names.n; i++)
		remove_one(p, names.v[i], dev, count, err);
	cb_strvec_clear(&names);
}

int cb_remove_at(int dfd, const char *name, dev_t dev, uint64_t *count)
{
	struct cb_fdpath p;
	uint64_t n = 0;
	int err = 0;

	cb_fdpath_init(&p, dfd, 0);
	remove_one(&p, name, dev, count ? count : &n, &err);
	cb_fdpath_release(&p);
	errno = err;
	return err ? -1 : 0;
}

static int remove_tree(const char *path)
{
	char *parent = cb_xstrdup(path), *name;
	struct stat st;
	int pfd, ret = 0;

	if (lstat(path, &st) < 0) {
		free(parent);
		return errno == ENOENT ? 0 : cb_error_errno("cannot stat '%s'", path);
	}
	/* below an fd of its parent: the path is looked up once */
	while (strlen(parent) > 1 && parent[strlen(parent) - 1] == '/')
		parent[strlen(parent) - 1] = '\0';
	name = strrchr(parent, '/');
	if (name) {
		*name++ = '\0';
		pfd = open(*parent ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	} else {
		name = parent;
		pfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (pfd < 0 || cb_remove_at(pfd, name, st.st_dev, NULL) < 0)
		ret = cb_error_errno("cannot remove '%s' completely", path);
	if (pfd >= 0)
		close(pfd);
	free(parent);
	return ret;
}

static int remove_tree_call(void *arg)
{
	return remove_tree(arg);
}

/* The removal recurses once per directory level: on a deep stack. */
int cb_remove_tree(const char *path)
{
	return cb_call_deep(remove_tree_call, (void *)path);
}

/* ---- parallel removal ---- */

/* The units several threads remove: entries of the top directory, or of
 * its subdirectories when the top has too few to share out. */
struct rm_unit {
	char *dir;                  /* "" or a top subdirectory's name */
	char *name;
};

struct rm_job {
	int root;
	dev_t dev;
	struct rm_unit *u;
	size_t n, next;
	int failed;
	int expanded;               /* units below the top directories too */
	pthread_mutex_t mu;
};

/* The entries of directory fd (closed here) become units. */
static void rm_add_dir(struct rm_job *j, size_t *cap, int fd, const char *dir)
{
	struct cb_strvec names = CB_STRVEC_INIT;

	if (fd < 0)
		return;
	if (cb_dir_names(fd, &names) == 0)
		for (size_t i = 0; i < names.n; i++) {
			if (j->n == *cap)
				j->u = cb_xrealloc(j->u, (*cap = *cap ? *cap * 2 : 256) * sizeof(*j->u));
			j->u[j->n].dir = cb_xstrdup(dir);
			j->u[j->n++].name = cb_xstrdup(names.v[i]);
		}
	cb_strvec_clear(&names);
	close(fd);
}

/* Top entries, then (few of them) each top directory's entries instead. */
static void rm_units(struct rm_job *j, int workers)
{
	size_t cap = 0, top;

	rm_add_dir(j, &cap, openat(j->root, ".", O_RDONLY | O_DIRECTORY), "");
	if (j->n >= (size_t)workers * 4)
		return;
	top = j->n;
	j->expanded = 1;
	for (size_t i = 0; i < top; i++) {
		int fd = openat(j->root, j->u[i].name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
		if (fd >= 0)
			rm_add_dir(j, &cap, fd, j->u[i].name);
	}
}

/* A top directory whose entries are units itself is left for the sweep
 * that follows (by then it is empty); a mount inside is never crossed
 * (cb_remove_at). */
static int rm_one(struct rm_job *j, const struct rm_unit *u)
{
	int dfd = u->dir[0] ? openat(j->root, u->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
			    : dup(j->root);
	struct stat st;
	int ret = 0;

	if (dfd < 0)
		return -1;
	if (u->dir[0] || !j->expanded || fstatat(dfd, u->name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISDIR(st.st_mode))
		ret = cb_remove_at(dfd, u->name, j->dev, NULL);
	close(dfd);
	return ret;
}

static void *rm_worker(void *arg)
{
	struct rm_job *j = arg;

	for (;;) {
		size_t i;
		pthread_mutex_lock(&j->mu);
		i = j->next++;
		pthread_mutex_unlock(&j->mu);
		if (i >= j->n)
			return NULL;
		if (rm_one(j, &j->u[i]) < 0) {
			pthread_mutex_lock(&j->mu);
			j->failed = 1;
			pthread_mutex_unlock(&j->mu);
		}
	}
}

int cb_remove_tree_parallel(const char *path, int workers)
{
	struct rm_job j = { .root = -1, .mu = PTHREAD_MUTEX_INITIALIZER };
	pthread_t th[64];
	struct stat st;
	int n = 0;

	if (workers > 64)
		workers = 64;
	if (workers < 2 || lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
		return cb_remove_tree(path);
	j.root = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (j.root < 0)
		return cb_remove_tree(path);
	j.dev = st.st_dev;
	rm_units(&j, workers);
	/* deep stacks: each removes whole subtrees, recursing per level */
	while (n < workers && cb_thread_start_deep(&th[n], rm_worker, &j) == 0)
		n++;
	if (n == 0)      /* no thread: this one, on its own stack */
		rm_worker(&j);
	while (n > 0)
		pthread_join(th[--n], NULL);
	for (size_t i = 0; i < j.n; i++) {
		free(j.u[i].dir);
		free(j.u[i].name);
	}
	free(j.u);
	close(j.root);
	/* what is left (emptied top directories, or all after a failure) */
	return cb_remove_tree(path);
}
