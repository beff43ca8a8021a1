/* Unit tests: the directory backend of a unit store (cb_objstore.h), on a
 * real temporary directory: put and get back (ranges too), if_absent never
 * replaces, names outside the alphabet refused, a listing in byte order
 * under a prefix, head and delete of what is not there, symlinks planted
 * in the tree not followed, check on a directory that cannot be written. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "cb_objstore.h"
#include "cb_opts.h"
#include "cb_util.h"
#include "testlib.h"

struct fx {
	char dir[64];
	struct cb_objstore *s;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	strcpy(f->dir, "/tmp/cb-objstore-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->s = cb_objstore_open_dir("st", f->dir);
	assert_non_null(f->s);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	cb_objstore_close(f->s);
	run("chmod -R u+w %s; rm -rf %s", f->dir, f->dir);
	free(f);
	return 0;
}

static void put(struct cb_objstore *s, const char *name, const char *data, int if_absent, int want)
{
	assert_int_equal(s->ops->put(s, name, data, strlen(data), if_absent), want);
}

static void get_is(struct cb_objstore *s, const char *name, uint64_t off, uint64_t len, const char *want)
{
	struct cb_s3_buf b = { 0 };

	assert_int_equal(s->ops->get(s, name, off, len, &b), 0);
	assert_int_equal(b.len, strlen(want));
	assert_memory_equal(b.data, want, b.len);
	cb_s3_buf_release(&b);
}

static void test_put_get(void **state)
{
	struct fx *f = *state;
	struct cb_s3_buf b = { 0 };
	uint64_t size = 0;

	put(f->s, "units/ab/abcdef", "hello world", 0, 0);
	get_is(f->s, "units/ab/abcdef", 0, 0, "hello world");
	get_is(f->s, "units/ab/abcdef", 6, 5, "world");
	get_is(f->s, "units/ab/abcdef", 6, 0, "world");
	assert_int_equal(f->s->ops->head(f->s, "units/ab/abcdef", &size), 0);
	assert_int_equal(size, 11);
	/* past the end: an error, not a short answer */
	assert_int_equal(f->s->ops->get(f->s, "units/ab/abcdef", 6, 9, &b), -1);
	assert_non_null(strstr(cb_last_error(), "units/ab/abcdef"));
	assert_int_equal(f->s->ops->get(f->s, "units/ab/none", 0, 0, &b), 1);
	assert_int_equal(f->s->ops->head(f->s, "nothing/here", &size), 1);
	cb_s3_buf_release(&b);
	/* the file holds the bytes, nothing left in the temporary folder */
	assert_int_equal(run("test \"$(cat %s/units/ab/abcdef)\" = 'hello world'", f->dir), 0);
	assert_int_equal(run("test -z \"$(ls -A %s/~tmp)\"", f->dir), 0);
}

static void test_if_absent(void **state)
{
	struct fx *f = *state;

	put(f->s, "nights/a", "first", 1, 0);
	put(f->s, "nights/a", "second", 1, 1);
	get_is(f->s, "nights/a", 0, 0, "first");
	assert_int_equal(run("test -z \"$(ls -A %s/~tmp)\"", f->dir), 0);
}

static void test_bad_names(void **state)
{
	struct fx *f = *state;
	struct cb_s3_buf b = { 0 };
	uint64_t size;
	const char *bad[] = { "", "/abs", "a//b", "a/", "../x", "a/../b", "a/./b", ".", "..",
			      "a b", "a\nb", "~tmp/x", "a/~b" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		assert_int_equal(f->s->ops->put(f->s, bad[i], "x", 1, 0), -1);
		assert_non_null(strstr(cb_last_error(), "invalid object name"));
		assert_int_equal(f->s->ops->get(f->s, bad[i], 0, 0, &b), -1);
		assert_int_equal(f->s->ops->head(f->s, bad[i], &size), -1);
		assert_int_equal(f->s->ops->del(f->s, bad[i]), -1);
	}
	assert_int_equal(run("test -z \"$(ls -A %s | grep -vx '~tmp')\"", f->dir), 0);
	put(f->s, ".hidden-ok_1.x", "y", 0, 0);
}

struct seen {
	char names[16][64];
	uint64_t sizes[16];
	int n;
};

static int collect(void *arg, const char *name, uint64_t size)
{
	struct seen *s = arg;

	snprintf(s->names[s->n], sizeof(s->names[0]), "%s", name);
	s->sizes[s->n++] = size;
	return s->n == 16 ? 7 : 0;
}

static void test_list_order(void **state)
{
	struct fx *f = *state;
	struct seen s = { 0 };

	/* '-' (0x2d) sorts before '/' (0x2f): "a-b" before "a/..." */
	put(f->s, "a/z", "1", 0, 0);
	put(f->s, "a-b", "22", 0, 0);
	put(f->s, "a/b/c", "333", 0, 0);
	put(f->s, "b", "4", 0, 0);
	put(f->s, "a0", "5", 0, 0);
	assert_int_equal(run("ln -s /etc %s/a/link && mkfifo %s/a/fifo", f->dir, f->dir), 0);
	assert_int_equal(f->s->ops->list(f->s, "", collect, &s), 0);
	assert_int_equal(s.n, 5);
	assert_string_equal(s.names[0], "a-b");
	assert_int_equal(s.sizes[0], 2);
	assert_string_equal(s.names[1], "a/b/c");
	assert_string_equal(s.names[2], "a/z");
	assert_string_equal(s.names[3], "a0");
	assert_string_equal(s.names[4], "b");
	memset(&s, 0, sizeof(s));
	assert_int_equal(f->s->ops->list(f->s, "a/", collect, &s), 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.names[0], "a/b/c");
	memset(&s, 0, sizeof(s));
	assert_int_equal(f->s->ops->list(f->s, "a", collect, &s), 0);
	assert_int_equal(s.n, 4);
	memset(&s, 0, sizeof(s));
	assert_int_equal(f->s->ops->list(f->s, "a/b/", collect, &s), 0);
	assert_int_equal(s.n, 1);
	memset(&s, 0, sizeof(s));
	assert_int_equal(f->s->ops->list(f->s, "nothere/", collect, &s), 0);
	assert_int_equal(s.n, 0);
	/* the callback's value stops the listing */
	s.n = 15;
	assert_int_equal(f->s->ops->list(f->s, "", collect, &s), 7);
}

static void test_symlinks_not_followed(void **state)
{
	struct fx *f = *state;
	struct cb_s3_buf b = { 0 };
	uint64_t size;

	assert_int_equal(run("mkdir -p %s.out && echo secret > %s.out/obj && ln -s %s.out %s/units && "
			     "ln -s %s.out/obj %s/direct", f->dir, f->dir, f->dir, f->dir, f->dir, f->dir), 0);
	/* a planted folder link is no folder of the store: nothing behind it */
	assert_int_not_equal(f->s->ops->get(f->s, "units/obj", 0, 0, &b), 0);
	assert_int_equal(b.len, 0);
	assert_int_equal(f->s->ops->get(f->s, "direct", 0, 0, &b), -1);
	assert_int_equal(f->s->ops->head(f->s, "direct", &size), -1);
	assert_int_equal(f->s->ops->put(f->s, "units/new", "x", 1, 0), -1);
	assert_int_equal(f->s->ops->del(f->s, "direct"), 0);
	assert_int_equal(run("test ! -e %s.out/new && test -e %s.out/obj", f->dir, f->dir), 0);
	run("rm -rf %s.out", f->dir);
	cb_s3_buf_release(&b);
}

static void test_del_clone_check(void **state)
{
	struct fx *f = *state;
	struct cb_objstore *c;
	uint64_t size;

	put(f->s, "x/y", "abc", 0, 0);
	c = f->s->ops->clone(f->s);
	assert_non_null(c);
	assert_string_equal(c->label, "st");
	assert_int_equal(c->ops->head(c, "x/y", &size), 0);
	assert_int_equal(c->ops->del(c, "x/y"), 0);
	assert_int_equal(c->ops->del(c, "x/y"), 0);
	assert_int_equal(c->ops->del(c, "no/such/dir"), 0);
	assert_int_equal(f->s->ops->head(f->s, "x/y", &size), 1);
	cb_objstore_close(c);
	assert_int_equal(f->s->ops->check(f->s), 0);
	/* root may write anywhere but a read-only mount; an unprivileged run
	 * sees the mode */
	if (geteuid() != 0) {
		assert_int_equal(run("chmod a-w %s", f->dir), 0);
		assert_int_equal(f->s->ops->check(f->s), -1);
		assert_non_null(strstr(cb_last_error(), "storage 'st'"));
	}
}

static void test_open_for(void **state)
{
	struct fx *f = *state;
	struct cb_opts o;
	struct cb_objstore *s = (void *)1;

	(void)f;
	cb_opts_init(&o);
	assert_int_equal(cb_objstore_open_for(&o, &s), 0);
	assert_null(s);
	assert_int_equal(cb_opts_set(&o, "layout", "store", NULL), 0);
	assert_int_equal(cb_opts_set(&o, "dumpdir", f->dir, NULL), 0);
	assert_int_equal(cb_objstore_open_for(&o, &s), 0);
	assert_non_null(s);
	assert_string_equal(s->ops->kind, "dir");
	cb_objstore_close(s);
	assert_int_equal(cb_opts_set(&o, "layout", "chunks", NULL), -1);
	cb_opts_release(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_put_get, setup, teardown),
		cmocka_unit_test_setup_teardown(test_if_absent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlinks_not_followed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_del_clone_check, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_for, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
