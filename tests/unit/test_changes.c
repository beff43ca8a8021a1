/* Unit tests: the change list (cb_changes.h), a pure module, and the
 * placement rule of change tracking (src/stage/track_place.c) on real
 * files: inside, outside, through a bind mount's source, gone, and a path
 * too long to verify. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "cb_changes.h"
#include "cb_rmtree.h"
#include "cb_util.h"
#include "../../src/stage/track_int.h"

static void test_add_and_free(void **state)
{
	struct cb_changes *c = cb_xcalloc(1, sizeof(*c));
	char *const two[] = { "x", "y" };
	char path[] = "a/b/c", top[] = "top";

	(void)state;
	cb_changes_add_names(c, "d", two, 2);
	cb_changes_add_dir(c, "e");
	cb_changes_add_path(c, path);
	cb_changes_add_path(c, top);
	assert_int_equal(c->n_dirs, 4);
	assert_string_equal(c->dirs[0].rel, "d");
	assert_int_equal(c->dirs[0].n_names, 2);
	assert_string_equal(c->dirs[0].names[1], "y");
	assert_null(c->dirs[1].names);             /* listed whole */
	assert_string_equal(c->dirs[2].rel, "a/b");
	assert_string_equal(c->dirs[2].names[0], "c");
	assert_string_equal(c->dirs[3].rel, "");   /* a name of the root */
	assert_string_equal(c->dirs[3].names[0], "top");
	assert_int_equal(cb_changes_add_by_ino(c, 42, two, 1)->ino, 42);
	assert_int_equal(c->n_by_ino, 1);
	assert_null(c->by_ino[0].rel);
	cb_changes_free(c);
	cb_changes_free(NULL);
}

/* A directory named twice: names joined; listed if either lists it; the
 * directory's own inode only (no names) joins without listing. */
static void test_sort_merges(void **state)
{
	struct cb_changes *c = cb_xcalloc(1, sizeof(*c));
	char *const x[] = { "x" }, *const y[] = { "y" };

	(void)state;
	cb_changes_add_names(c, "b", x, 1);
	cb_changes_add_names(c, "a", x, 1);
	cb_changes_add_names(c, "b", y, 1);
	cb_changes_add_names(c, "c", x, 1);
	cb_changes_add_dir(c, "c");
	cb_changes_add_names(c, "d", x, 0);       /* its own inode only */
	cb_changes_add_names(c, "d", y, 1);
	cb_changes_sort(c);
	assert_int_equal(c->n_dirs, 4);
	assert_string_equal(c->dirs[0].rel, "a");
	assert_string_equal(c->dirs[1].rel, "b");
	assert_int_equal(c->dirs[1].n_names, 2);
	assert_string_equal(c->dirs[1].names[0], "x");
	assert_string_equal(c->dirs[1].names[1], "y");
	assert_string_equal(c->dirs[2].rel, "c");
	assert_null(c->dirs[2].names);
	assert_int_equal(c->dirs[2].n_names, 0);
	assert_string_equal(c->dirs[3].rel, "d");
	assert_non_null(c->dirs[3].names);
	assert_int_equal(c->dirs[3].n_names, 1);
	cb_changes_free(c);
}

static void test_sort_empty(void **state)
{
	struct cb_changes *c = cb_xcalloc(1, sizeof(*c));

	(void)state;
	cb_changes_sort(c);
	assert_int_equal(c->n_dirs, 0);
	cb_changes_free(c);
}

/* ---- the placement rule ---- */

struct place_fixture {
	char dir[64];         /* scratch: dir/root (the guest), dir/out, dir/srv */
	char root[PATH_MAX];
	struct cb_track t;
	struct bind bind;
};

static int place_setup(void **state)
{
	struct place_fixture *f = cb_xcalloc(1, sizeof(*f));
	char p[PATH_MAX + 64];
	struct stat sb;

	strcpy(f->dir, "/tmp/cb-test-changes.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	assert_non_null(realpath(f->dir, f->root));
	strcpy(f->dir, f->root);
	snprintf(f->root, sizeof(f->root), "%s/root", f->dir);
	assert_int_equal(mkdir(f->root, 0700), 0);
	snprintf(p, sizeof(p), "%s/out", f->dir);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/srv", f->dir);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(stat(f->root, &sb), 0);
	f->t.root = f->root;
	f->t.root_len = strlen(f->root);
	f->t.dev = sb.st_dev;
	f->t.root_ino = sb.st_ino;
	f->t.mount_fd = -1;
	/* a bind mount's source: dir/srv shows as mnt/data in the root */
	f->bind.src = cb_xasprintf("%s/srv", f->dir);
	f->bind.src_len = strlen(f->bind.src);
	f->bind.rel = "mnt/data";
	f->t.binds = &f->bind;
	f->t.n_binds = 1;
	*state = f;
	return 0;
}

static int place_teardown(void **state)
{
	struct place_fixture *f = *state;

	cb_remove_tree(f->dir);
	free(f->bind.src);
	for (size_t i = 0; i < f->t.n_widened; i++)
		free(f->t.widened[i]);
	free(f);
	return 0;
}

/* Where the file rel (under the scratch dir) is, by the rule. */
static enum place place_file(struct place_fixture *f, const char *rel, int unlink_it,
			     char *out, size_t len)
{
	char path[PATH_MAX + 64], link[64];
	const char *why = "";
	struct stat sb;
	enum place p;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", f->dir, rel);
	fd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	if (unlink_it)
		assert_int_equal(unlink(path), 0);
	assert_int_equal(fstat(fd, &sb), 0);
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	p = track_place_of(&f->t, link, &sb, out, len, &why);
	close(fd);
	return p;
}

static void test_rel_of(void **state)
{
	struct place_fixture *f = *state;
	char p[PATH_MAX + 64], *rels[3] = { 0 };
	struct cb_track slash = { 0 };

	snprintf(p, sizeof(p), "%s", f->root);
	assert_string_equal(track_rel_of(&f->t, p), "");
	snprintf(p, sizeof(p), "%s/a/b", f->root);
	assert_string_equal(track_rel_of(&f->t, p), "a/b");
	snprintf(p, sizeof(p), "%sx/a", f->root);       /* a sibling, not under it */
	assert_null(track_rel_of(&f->t, p));
	slash.root = "/";
	slash.root_len = 1;
	assert_string_equal(track_rel_of(&slash, "/etc/passwd"), "etc/passwd");
	/* through the bind mount's source: its place in the root */
	snprintf(p, sizeof(p), "%s/srv/db/x", f->dir);
	assert_int_equal(track_rels_of(&f->t, p, rels, 3), 1);
	assert_string_equal(rels[0], "mnt/data/db/x");
	free(rels[0]);
	snprintf(p, sizeof(p), "%s/srvx", f->dir);      /* not the source */
	assert_int_equal(track_rels_of(&f->t, p, rels, 3), 0);
}

static void test_place_inside_outside_gone(void **state)
{
	struct place_fixture *f = *state;
	char out[4096];

	assert_int_equal(place_file(f, "root/in", 0, out, sizeof(out)), P_INSIDE);
	assert_true(strstr(out, "/root/in") != NULL);
	assert_int_equal(place_file(f, "out/x", 0, out, sizeof(out)), P_OUTSIDE);
	assert_int_equal(place_file(f, "srv/y", 0, out, sizeof(out)), P_INSIDE);
	/* unlinked while open: nothing left to check */
	assert_int_equal(place_file(f, "root/gone", 1, out, sizeof(out)), P_GONE);
}

/* A path that cannot be verified (here: longer than the buffer) is never
 * taken for outside: by inode on the root's file system, else the whole
 * walk. */
static void test_place_unverifiable(void **state)
{
	struct place_fixture *f = *state;
	char out[64];

	assert_int_equal(place_file(f, "root/a-name-longer-than-sixty-four-bytes-"
				       "with-the-scratch-directory-before-it", 0, out, sizeof(out)),
			 P_INODE);
	f->t.dev += 1;   /* the object is on another file system than the root */
	assert_int_equal(place_file(f, "out/another-name-longer-than-sixty-four-bytes-"
				       "with-the-scratch-directory", 0, out, sizeof(out)),
			 P_WHOLE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add_and_free),
		cmocka_unit_test(test_sort_merges),
		cmocka_unit_test(test_sort_empty),
		cmocka_unit_test_setup_teardown(test_rel_of, place_setup, place_teardown),
		cmocka_unit_test_setup_teardown(test_place_inside_outside_gone, place_setup,
						place_teardown),
		cmocka_unit_test_setup_teardown(test_place_unverifiable, place_setup, place_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
