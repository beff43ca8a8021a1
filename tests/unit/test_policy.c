/* Unit tests: the compression policy end to end. A tree of text, random
 * data, real .gz/.zst files, a JPEG-looking file, a qcow2 made by
 * `qemu-img convert -c` and a sparse raw image is archived with each codec
 * in auto and always policy, then read back byte-exact by the stock tool +
 * GNU tar, by bsdtar and by cb_restore_run. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "cb_archive.h"
#include "cb_codec.h"
#include "cb_restore.h"
#include "cb_rmtree.h"
#include "cb_sink.h"
#include "cb_util.h"
#include "testlib.h"

#define MIB (1024 * 1024)

struct fixture {
	char dir[64];
	char *tree;
	struct cb_log log;
	int n;                    /* archives made, for unique names */
};

static int setup(void **state)
{
	struct fixture *f = cb_xcalloc(1, sizeof(*f));
	const char *t;

	strcpy(f->dir, "/tmp/cb-test-policy.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	cb_log_init(&f->log);
	f->log.quiet = 1;
	f->tree = cb_xasprintf("%s/tree", f->dir);
	t = f->tree;
	if (run("mkdir '%s' && cd '%s' && seq 1 400000 > text.txt && head -c 4M /dev/urandom > random.bin && "
		"head -c 1M /dev/urandom | gzip -1 > rnd.gz && head -c 1M /dev/urandom | zstd -q -1 > rnd.zst && "
		"(printf '\\377\\330\\377\\340'; head -c 1M /dev/urandom) > photo.jpg && "
		"(printf '\\377\\330\\377\\340'; head -c 20000 /dev/urandom) > small.jpg && "
		"qemu-img create -q -f raw ../raw.img 16M && "
		"(head -c 1M /dev/urandom; head -c 1500000 /dev/urandom | base64) | "
		"dd of=../raw.img conv=notrunc status=none && "
		"qemu-img convert -c -O qcow2 ../raw.img disk.qcow2 && "
		"truncate -s 32M sparse.img && seq 1 100000 | dd of=sparse.img bs=1M seek=3 conv=notrunc status=none && "
		"head -c 2M /dev/urandom | dd of=sparse.img bs=1M seek=20 conv=notrunc status=none",
		t, t) != 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	cb_remove_tree(f->dir);
	free(f->tree);
	free(f);
	return 0;
}

static const char *unpack_cmd(enum cb_compress type)
{
	switch (type) {
	case CB_COMPRESS_ZSTD: return "zstd -q -dc";
	case CB_COMPRESS_LZO:  return "lzop -dc";
	case CB_COMPRESS_GZIP: return "gzip -dc";
	case CB_COMPRESS_NONE: break;
	}
	return "cat";
}

static char *make_archive(struct fixture *f, const struct cb_codec_params *p, struct cb_codec_stats *cs)
{
	char *path = cb_xasprintf("%s/a%d", f->dir, f->n++);
	struct cb_archive_stats st;
	struct cb_codec_writer *w;
	struct cb_sink *s;

	assert_int_equal(cb_sink_open_file(&s, path), 0);
	assert_int_equal(cb_codec_writer_new(&w, p, s), 0);
	if (cb_archive_write(f->tree, NULL, 0, w, &f->log, &st) < 0)
		fail_msg("cb_archive_write: %s", cb_last_error());
	assert_int_equal(cb_codec_finish(w), 0);
	assert_int_equal(cb_sink_commit(s), 0);
	cb_codec_writer_stats(w, cs);
	assert_int_equal(cs->bytes_in, st.tar_bytes);
	assert_int_equal(st.tar_bytes % 10240, 0);
	cb_codec_writer_free(w);
	cb_sink_free(s);
	return path;
}

/* Stock tool + GNU tar, bsdtar, cb_restore_run: all byte-exact. */
static void read_back(struct fixture *f, const char *arch, enum cb_compress type)
{
	char *d = cb_xasprintf("%s/x", f->dir);
	struct cb_restore_opts ro = { .archive = arch, .destdir = d };
	struct cb_restore_stats rs;

	assert_int_equal(run("rm -rf '%s' && mkdir '%s' && %s '%s' | tar -xf - -C '%s' && diff -r '%s' '%s'",
			     d, d, unpack_cmd(type), arch, d, f->tree, d), 0);
	assert_int_equal(run("rm -rf '%s' && mkdir '%s' && bsdtar -xf '%s' -C '%s' && diff -r '%s' '%s'",
			     d, d, arch, d, f->tree, d), 0);
	assert_int_equal(run("rm -rf '%s'", d), 0);
	if (cb_restore_run(&ro, &f->log, &rs) < 0)
		fail_msg("restore: %s", cb_last_error());
	assert_int_equal(run("diff -r '%s' '%s'", f->tree, d), 0);
	assert_int_equal(run("rm -rf '%s'", d), 0);
	free(d);
}

static off_t file_size(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_size;
}

static void codec_case(void **state, enum cb_compress type, int threads)
{
	struct fixture *f = *state;
	struct cb_codec_params pa = { .type = type, .policy = CB_POLICY_AUTO, .threads = threads };
	struct cb_codec_params pw = { .type = type, .policy = CB_POLICY_ALWAYS, .threads = threads };
	struct cb_codec_stats sa, sw;
	char *auto_arch = make_archive(f, &pa, &sa), *always_arch = make_archive(f, &pw, &sw);

	read_back(f, auto_arch, type);
	read_back(f, always_arch, type);
	/* rnd.gz, rnd.zst, photo.jpg by magic (small.jpg only where short
	 * stored runs are taken: not zstd) */
	assert_true(sa.bytes_stored_magic >= 3 * MIB);
	assert_true(sa.files_stored_magic >= 3 && sa.files_stored_magic <= 4);
	assert_true(sa.bytes_stored_qcow2 > 100 * 1024);
	/* random.bin at least (the random parts of disk.qcow2 and sparse.img
	 * share chunks with other data) */
	if (sa.bytes_stored_trial < 4 * MIB)
		fail_msg("trial stored %llu bytes", (unsigned long long)sa.bytes_stored_trial);
	assert_true(sa.files_stored >= 6);
	assert_int_equal(sw.bytes_stored_magic + sw.bytes_stored_qcow2 + sw.bytes_stored_trial, 0);
	/* storing costs (almost) nothing in size */
	assert_true(file_size(auto_arch) <= file_size(always_arch) + file_size(always_arch) / 50);
	free(auto_arch);
	free(always_arch);
}

static void test_zstd(void **state) { codec_case(state, CB_COMPRESS_ZSTD, 0); }
static void test_lzo(void **state) { codec_case(state, CB_COMPRESS_LZO, 0); }
static void test_gzip_classic(void **state) { codec_case(state, CB_COMPRESS_GZIP, 0); }
static void test_gzip_parallel(void **state) { codec_case(state, CB_COMPRESS_GZIP, 2); }

static void test_none(void **state)
{
	struct fixture *f = *state;
	struct cb_codec_params p = { .type = CB_COMPRESS_NONE, .policy = CB_POLICY_AUTO };
	struct cb_codec_stats s;
	char *arch = make_archive(f, &p, &s);

	read_back(f, arch, CB_COMPRESS_NONE);
	assert_int_equal(s.bytes_stored, 0);
	free(arch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zstd),
		cmocka_unit_test(test_lzo),
		cmocka_unit_test(test_gzip_classic),
		cmocka_unit_test(test_gzip_parallel),
		cmocka_unit_test(test_none),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
