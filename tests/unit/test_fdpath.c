/* Unit tests: cb_fdpath (bounded directory fds along a walk) and
 * cb_remove_at, on a real tree 3000 levels deep in a temp dir. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "cb_fdpath.h"
#include "cb_rmtree.h"
#include "cb_util.h"

#define DEPTH 3000

static char base[64];

static int setup(void **state)
{
	int fd;

	(void)state;
	snprintf(base, sizeof(base), "/tmp/cb-fdpath.XXXXXX");
	if (!mkdtemp(base))
		return -1;
	fd = open(base, O_RDONLY | O_DIRECTORY);
	for (int i = 0; i < DEPTH; i++) {
		int next;
		char name[16];
		snprintf(name, sizeof(name), "d%d", i);
		mkdirat(fd, name, 0755);
		close(openat(fd, "f", O_CREAT | O_WRONLY, 0644));
		next = openat(fd, name, O_RDONLY | O_DIRECTORY);
		close(fd);
		fd = next;
	}
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return cb_remove_tree(base);
}

/* Descend to the bottom: never more than the bound open; every level
 * reachable again afterwards, and the same directory. */
static void test_bounded_and_reopened(void **state)
{
	struct cb_fdpath p;
	int root = open(base, O_RDONLY | O_DIRECTORY);
	struct stat a, b;

	(void)state;
	cb_fdpath_init(&p, root, 0);
	for (int i = 0; i < DEPTH; i++) {
		char name[16];
		int fd = cb_fdpath_fd(&p, cb_fdpath_top(&p));
		snprintf(name, sizeof(name), "d%d", i);
		assert_true(fd >= 0);
		assert_int_equal(cb_fdpath_push(&p, openat(fd, name, O_RDONLY | O_DIRECTORY), name, i), 0);
		assert_true(p.open <= 2 * CB_FDPATH_WINDOW + 8);
	}
	/* level 5 was closed; opened again it is d4 (level 5 = d4) */
	assert_int_equal(p.v[5].fd, -1);
	assert_int_equal(fstatat(cb_fdpath_fd(&p, 4), "d4", &a, 0), 0);
	assert_int_equal(fstat(cb_fdpath_fd(&p, 5), &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	assert_int_equal(cb_fdpath_tag(&p, 5), 4);
	cb_fdpath_release(&p);
	close(root);
}

/* A level renamed away and replaced by another directory is refused. */
static void test_replaced_level_is_stale(void **state)
{
	struct cb_fdpath p;
	int root = open(base, O_RDONLY | O_DIRECTORY), fd;
	char old[128], moved[128];

	(void)state;
	cb_fdpath_init(&p, root, 0);
	for (int i = 0; i < CB_FDPATH_WINDOW + 3; i++) {
		char name[16];
		fd = cb_fdpath_fd(&p, cb_fdpath_top(&p));
		snprintf(name, sizeof(name), "d%d", i);
		assert_int_equal(cb_fdpath_push(&p, openat(fd, name, O_RDONLY | O_DIRECTORY), name, 0), 0);
	}
	assert_int_equal(p.v[2].fd, -1);
	snprintf(old, sizeof(old), "%s/d0/d1", base);
	snprintf(moved, sizeof(moved), "%s/d0/moved", base);
	assert_int_equal(rename(old, moved), 0);
	assert_int_equal(mkdir(old, 0755), 0);
	assert_int_equal(cb_fdpath_fd(&p, 2), -1);
	assert_int_equal(errno, ESTALE);
	cb_fdpath_release(&p);
	rmdir(old);
	rename(moved, old);
	close(root);
}

/* Lazy levels (pushed without an fd) opened at the bottom: the chain is
 * opened on the way down but only the bound stays open. */
static void test_lazy_levels_bounded(void **state)
{
	struct cb_fdpath p;
	int root = open(base, O_RDONLY | O_DIRECTORY);

	(void)state;
	cb_fdpath_init(&p, root, 0);
	for (int i = 0; i < DEPTH; i++) {
		char name[16];
		snprintf(name, sizeof(name), "d%d", i);
		assert_int_equal(cb_fdpath_push(&p, -1, name, 0), 0);
	}
	assert_true(cb_fdpath_fd(&p, cb_fdpath_top(&p)) >= 0);
	assert_true(p.open <= 2 * CB_FDPATH_WINDOW + 8);
	assert_true(cb_fdpath_fd(&p, DEPTH / 2) >= 0);
	assert_true(p.open <= 2 * CB_FDPATH_WINDOW + 8);
	cb_fdpath_release(&p);
	close(root);
}

/* cb_remove_at: a tree 3000 deep under a 128-fd limit, everything counted. */
static void test_remove_deep(void **state)
{
	char path[128];
	struct rlimit old, low;
	uint64_t n = 0;
	int dfd, ret;

	(void)state;
	snprintf(path, sizeof(path), "%s", base);
	dfd = open(path, O_RDONLY | O_DIRECTORY);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = 128;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	ret = cb_remove_at(dfd, "d0", 0, &n);
	setrlimit(RLIMIT_NOFILE, &old);
	if (ret < 0)
		print_error("cb_remove_at: %s\n", strerror(errno));
	assert_int_equal(ret, 0);
	assert_int_equal(n, 2 * DEPTH - 1);  /* d0..d2999, and f in all but the last */
	assert_int_equal(faccessat(dfd, "d0", F_OK, AT_SYMLINK_NOFOLLOW), -1);
	close(dfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bounded_and_reopened),
		cmocka_unit_test(test_replaced_level_is_stale),
		cmocka_unit_test(test_lazy_levels_bounded),
		cmocka_unit_test(test_remove_deep),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
