/* Unit tests: cb_util (errors, strvec, formatting, tree removal, big
 * buffers) and the cleanup stack. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "cb_cleanup.h"
#include "cb_rmtree.h"
#include "cb_util.h"

static void test_errors(void **state)
{
	(void)state;
	assert_int_equal(cb_error("bad '%s'", "x"), -1);
	assert_string_equal(cb_last_error(), "bad 'x'");
	errno = ENOENT;
	cb_error_errno("cannot open '%s'", "/nope");
	assert_string_equal(cb_last_error(), "cannot open '/nope': No such file or directory");
	cb_error_prefix("first sync");
	assert_string_equal(cb_last_error(), "first sync: cannot open '/nope': No such file or directory");
}

/* A path of any length keeps the cause at the end of the message. */
static void test_long_errors(void **state)
{
	size_t n = 40000;
	char *path = malloc(n + 1), *want;
	const char *got;
	(void)state;

	memset(path, 'a', n);
	path[n] = '\0';
	errno = ENAMETOOLONG;
	cb_error_errno("cannot open '%s'", path);
	cb_error_prefix("first sync");
	got = cb_last_error();
	want = cb_xasprintf("': %s", strerror(ENAMETOOLONG));
	assert_true(strlen(got) > 8000);
	assert_int_equal(strncmp(got, "first sync: cannot open 'aaa", 28), 0);
	assert_string_equal(got + strlen(got) - strlen(want), want);
	assert_non_null(strstr(got, "..."));
	free(want);
	free(path);
}

static void test_fmt(void **state)
{
	char b[32];
	(void)state;
	cb_fmt_bytes(b, sizeof(b), 512);
	assert_string_equal(b, "512B");
	cb_fmt_bytes(b, sizeof(b), 2001203200ULL);
	assert_string_equal(b, "1.9GiB");
	cb_fmt_bytes(b, sizeof(b), 46ULL << 20);
	assert_string_equal(b, "46MiB");
	cb_fmt_hms(b, sizeof(b), 95.2);
	assert_string_equal(b, "00:01:35");
	cb_fmt_hms(b, sizeof(b), 3600 * 25 + 61);
	assert_string_equal(b, "25:01:01");
}

static void test_strvec(void **state)
{
	struct cb_strvec a = CB_STRVEC_INIT, b = CB_STRVEC_INIT;
	(void)state;
	for (int i = 0; i < 100; i++) {
		char s[16];
		snprintf(s, sizeof(s), "%d", i);
		cb_strvec_push(&a, s);
	}
	assert_int_equal(a.n, 100);
	assert_null(a.v[100]);
	cb_strvec_copy(&b, &a);
	cb_strvec_clear(&a);
	assert_string_equal(b.v[99], "99");
	cb_strvec_clear(&b);
	assert_int_equal(b.n, 0);
}

static void test_remove_tree(void **state)
{
	char dir[] = "/tmp/cbtest-util-XXXXXX", path[256];
	struct stat st;
	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	char *cmd = cb_xasprintf("mkdir -p %s && touch %s/f && ln -s /etc %s/a/etc && chmod 000 %s/a/b",
				 path, path, dir, dir);
	assert_int_equal(system(cmd), 0);
	free(cmd);
	assert_int_equal(cb_remove_tree(dir), 0);
	assert_int_equal(lstat(dir, &st), -1);
	assert_int_equal(lstat("/etc/passwd", &st), 0);  /* the symlink was not followed */
	assert_int_equal(cb_remove_tree(dir), 0);         /* absent: fine */
}

/* Sorted names, each with its own d_type (tmpfs says it), names moved in
 * after what the vector held. */
static void test_dir_names_types(void **state)
{
	char dir[] = "/tmp/cbtest-util-XXXXXX";
	struct cb_strvec names = CB_STRVEC_INIT;
	unsigned char *types;
	int fd;
	(void)state;
	assert_non_null(mkdtemp(dir));
	char *cmd = cb_xasprintf("cd %s && mkdir b && touch c a && ln -s a d && mkfifo e", dir);
	assert_int_equal(system(cmd), 0);
	free(cmd);
	fd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	cb_strvec_push(&names, "before");
	assert_int_equal(cb_dir_names_types(fd, &names, &types), 0);
	assert_int_equal(names.n, 6);
	assert_string_equal(names.v[0], "before");
	assert_string_equal(names.v[1], "a");
	assert_string_equal(names.v[2], "b");
	assert_string_equal(names.v[5], "e");
	assert_null(names.v[6]);
	if (types[0] != DT_UNKNOWN) {
		assert_int_equal(types[0], DT_REG);
		assert_int_equal(types[1], DT_DIR);
		assert_int_equal(types[2], DT_REG);
		assert_int_equal(types[3], DT_LNK);
		assert_int_equal(types[4], DT_FIFO);
	}
	free(types);
	cb_strvec_clear(&names);
	close(fd);
	assert_int_equal(cb_remove_tree(dir), 0);
}

static int ran;
static void mark(void *arg)
{
	ran = *(int *)arg;
}

static char order[8];
static void note(void *arg)
{
	strncat(order, arg, sizeof(order) - strlen(order) - 1);
}

/* Newest first, as cb_cleanup.h promises, even when a slot below was popped
 * and a later push could reuse it: thaw (pushed last) must run before the
 * removal of what the frozen guest was writing to. */
static void test_cleanup_newest_first(void **state)
{
	int a, c;
	(void)state;
	order[0] = '\0';
	a = cb_cleanup_push(note, "a");
	cb_cleanup_push(note, "b");
	cb_cleanup_pop(a, 0);
	c = cb_cleanup_push(note, "c");
	assert_true(c >= 0);
	cb_cleanup_run_all();
	assert_string_equal(order, "cb");
	order[0] = '\0';
	cb_cleanup_run_all();            /* each ran once, and is gone */
	assert_string_equal(order, "");
}

static void test_cleanup_stack(void **state)
{
	int one = 1, two = 2;
	int h1, h2;
	(void)state;
	cb_cleanup_install();
	h1 = cb_cleanup_push(mark, &one);
	h2 = cb_cleanup_push(mark, &two);
	assert_true(h1 >= 0 && h2 >= 0 && h1 != h2);
	cb_cleanup_pop(h2, 0);
	assert_int_equal(ran, 0);
	cb_cleanup_pop(h1, 1);
	assert_int_equal(ran, 1);
	ran = 0;
	cb_cleanup_push(mark, &two);
	raise(SIGTERM);                  /* the handler runs the action */
	assert_int_equal(ran, 2);
	assert_int_equal(cb_interrupted(), SIGTERM);
	assert_int_equal(cb_check_interrupt(), -1);
	assert_non_null(strstr(cb_last_error(), "TERM"));
}

/* Big buffers are 2 MiB-aligned (what lets huge pages back them), hold
 * every byte asked for, and free unmaps all of them. */
static void test_huge_buffers(void **state)
{
	static const size_t sizes[] = { 1, 1024 * 1024, 3 * 1024 * 1024 + 1 };
	unsigned char vec;

	(void)state;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		unsigned char *p = cb_xmalloc_huge(n);

		memset(p, 0xa5, n);
		assert_int_equal(p[0], 0xa5);
		assert_int_equal(p[n - 1], 0xa5);
#ifndef __SANITIZE_ADDRESS__   /* there they are plain heap blocks */
		assert_int_equal((uintptr_t)p % (2 * 1024 * 1024), 0);
		cb_free_huge(p, n);
		assert_int_equal(mincore(p, 1, &vec), -1);
		assert_int_equal(errno, ENOMEM);
		assert_int_equal(mincore(p + n - 1 - (n - 1) % 4096, 1, &vec), -1);
#else
		(void)vec;
		cb_free_huge(p, n);
#endif
	}
	cb_free_huge(NULL, 1);
}

/* cb_call_deep: the work runs on a deep stack (a recursion the 8 MiB
 * main stack could not hold), its error message comes back, and a signal
 * it sends itself is handled before kill() returns, as on the caller's
 * thread (the fault tests and the interrupt checks rely on that). */
static volatile sig_atomic_t usr1_seen;

static void on_usr1(int sig)
{
	(void)sig;
	usr1_seen++;
}

static int recurse(int n)
{
	volatile char pad[512];

	pad[0] = (char)n;
	return n == 0 ? 0 : recurse(n - 1) + (pad[0] & 0);
}

static int deep_work(void *arg)
{
	int *seen = arg;
	sigset_t cur;

	if (recurse(60000) != 0)  /* ~30 MiB of frames */
		return -1;
	/* the work takes signals itself (not only the waiting caller) */
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	kill(getpid(), SIGUSR1);
	*seen = usr1_seen * 10 + !sigismember(&cur, SIGUSR1);
	return cb_error("failed on purpose");
}

static void test_call_deep(void **state)
{
	struct sigaction sa = { .sa_handler = on_usr1 }, old;
	int seen = 0;

	(void)state;
	sigaction(SIGUSR1, &sa, &old);
	usr1_seen = 0;
	assert_int_equal(cb_call_deep(deep_work, &seen), -1);
	assert_string_equal(cb_last_error(), "failed on purpose");
	assert_int_equal(seen, 11);
	sigaction(SIGUSR1, &old, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_long_errors),
		cmocka_unit_test(test_fmt),
		cmocka_unit_test(test_strvec),
		cmocka_unit_test(test_remove_tree),
		cmocka_unit_test(test_dir_names_types),
		cmocka_unit_test(test_cleanup_newest_first),
		cmocka_unit_test(test_cleanup_stack),
		cmocka_unit_test(test_huge_buffers),
		cmocka_unit_test(test_call_deep),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
