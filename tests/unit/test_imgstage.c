/* Unit tests: VM image staging (cb_imgstage) on real sparse files. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "cb_imgstage.h"
#include "cb_util.h"

struct fx {
	char dir[64];
	char *img, *stage, *staged;
	struct cb_strvec images;
	struct cb_log log;
};

static void write_at(const char *path, off_t off, int byte, size_t len)
{
	unsigned char *buf = cb_xmalloc(len);
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	memset(buf, byte, len);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, buf, len, off), (ssize_t)len);
	close(fd);
	free(buf);
}

static int same_content(const char *a, const char *b)
{
	char *cmd = cb_xasprintf("cmp -s '%s' '%s'", a, b);
	int r = system(cmd);
	free(cmd);
	return r == 0;
}

static int setup(void **state)
{
	struct fx *f = cb_xcalloc(1, sizeof(*f));
	strcpy(f->dir, "/tmp/cbtest-img-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->img = cb_xasprintf("%s/disk.raw", f->dir);
	f->stage = cb_xasprintf("%s/stage", f->dir);
	f->staged = cb_xasprintf("%s/stage/disk.raw", f->dir);
	cb_strvec_push(&f->images, f->img);
	cb_log_init(&f->log);
	f->log.quiet = 1;
	/* 16 MiB: data at 1 MiB and 8 MiB, a block of zeros written at 4 MiB */
	assert_int_equal(truncate(f->img, 0), -1);
	write_at(f->img, 1 << 20, 0xab, 256 << 10);
	write_at(f->img, 4 << 20, 0x00, 256 << 10);
	write_at(f->img, 8 << 20, 0xcd, 1 << 20);
	assert_int_equal(truncate(f->img, 16 << 20), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char *cmd = cb_xasprintf("rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(cmd);
	free(f->img);
	free(f->stage);
	free(f->staged);
	cb_strvec_clear(&f->images);
	free(f);
	return 0;
}

static void test_pass1_sparse_copy(void **state)
{
	struct fx *f = *state;
	struct cb_imgstage *st;
	struct cb_stage_stats stats;
	struct stat sb;

	assert_int_equal(cb_imgstage_new(&st, &f->images, f->stage, 0, NULL, &f->log), 0);
	assert_int_equal(cb_imgstage_pass1(st, &stats), 0);
	assert_true(same_content(f->img, f->staged));
	assert_int_equal(stat(f->staged, &sb), 0);
	assert_int_equal(sb.st_size, 16 << 20);
	/* only the 1.25 MiB of non-zero data is allocated: zeros became holes */
	assert_true(sb.st_blocks * 512 <= (off_t)(2 << 20));
	assert_int_equal(stats.transferred_size, (256 << 10) + (1 << 20));
	cb_imgstage_free(st);
}

static void test_pass2_writes_only_changed_blocks(void **state)
{
	struct fx *f = *state;
	struct cb_imgstage *st;
	struct cb_stage_stats stats;
	struct stat sb;

	assert_int_equal(cb_imgstage_new(&st, &f->images, f->stage, 0, NULL, &f->log), 0);
	assert_int_equal(cb_imgstage_pass1(st, &stats), 0);
	assert_int_equal(cb_imgstage_pass2(st, &stats), 0);
	assert_int_equal(stats.files_transferred, 0);     /* unchanged: not even read */
	write_at(f->img, (8 << 20) + 5000, 0x11, 4096);   /* within one 64 KiB block */
	write_at(f->img, 1 << 20, 0x00, 256 << 10);        /* data became zeros */
	write_at(f->img, 12 << 20, 0x77, 100);             /* new data in a hole */
	assert_int_equal(truncate(f->img, 20 << 20), 0);   /* grown */
	assert_int_equal(cb_imgstage_pass2(st, &stats), 0);
	assert_int_equal(stats.files_transferred, 1);
	/* one 64 KiB block at 8 MiB, plus the new data's extent (a file system
	 * block) at 12 MiB; the zeroed range is punched, not written */
	assert_in_range(stats.transferred_size, (64 << 10) + 100, 2 * (64 << 10));
	assert_true(same_content(f->img, f->staged));
	assert_int_equal(stat(f->staged, &sb), 0);
	assert_int_equal(sb.st_size, 20 << 20);
	assert_true(sb.st_blocks * 512 <= (off_t)(1200 << 10));  /* the zeroed data was punched */
	cb_imgstage_free(st);
}

static void test_same_base_name_refused(void **state)
{
	struct fx *f = *state;
	struct cb_imgstage *st;
	struct cb_strvec two = CB_STRVEC_INIT;

	cb_strvec_push(&two, "/a/disk.raw");
	cb_strvec_push(&two, "/b/disk.raw");
	assert_int_equal(cb_imgstage_new(&st, &two, f->stage, 0, NULL, &f->log), -1);
	assert_non_null(strstr(cb_last_error(), "same base name"));
	cb_imgstage_free(st);
	cb_strvec_clear(&two);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pass1_sparse_copy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pass2_writes_only_changed_blocks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_base_name_refused, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
