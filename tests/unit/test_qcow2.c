/* Unit tests: cb_qcow2 (real images from qemu-img, hostile headers) and
 * cb_magic (formats by magic number, .deb, plans). */
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

#include "cb_magic.h"
#include "cb_qcow2.h"
#include "cb_rmtree.h"
#include "cb_util.h"
#include "testlib.h"

#define CLUSTER 65536

struct fixture {
	char dir[64];
};

static unsigned xorshift(unsigned *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static char *fx_path(struct fixture *f, const char *name)
{
	return cb_xasprintf("%s/%s", f->dir, name);
}

static int setup(void **state)
{
	struct fixture *f = cb_xcalloc(1, sizeof(*f));

	strcpy(f->dir, "/tmp/cb-test-qcow2.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	cb_remove_tree(f->dir);
	free(f);
	return 0;
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = v >> (24 - 8 * i);
}

static void put64(unsigned char *p, uint64_t v)
{
	put32(p, v >> 32);
	put32(p + 4, v);
}

/* Probe a buffer written to a file; returns cb_qcow2_probe's result and
 * checks that whatever it found lies inside the file. */
static int probe_buf(struct fixture *f, const unsigned char *buf, size_t len, struct cb_qcow2_info *qi)
{
	char *path = fx_path(f, "img");
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644), r;

	assert_true(fd >= 0);
	assert_int_equal(cb_write_all(fd, buf, len), 0);
	r = cb_qcow2_probe(fd, len, qi);
	if (r == 0)
		for (size_t i = 0; i < qi->n_ranges; i++)
			assert_true(qi->ranges[i].off + qi->ranges[i].len <= len);
	close(fd);
	free(path);
	return r;
}

/* A minimal valid v3 image: header, L1 at cluster 1, L2 at cluster 2, one
 * compressed cluster described at cluster 3 (+100 bytes, 2 more sectors). */
static unsigned char *valid_image(size_t *len)
{
	unsigned char *b = cb_xcalloc(1, 4 * CLUSTER);
	unsigned x = 62 - (16 - 8);

	memcpy(b, "QFI\xfb", 4);
	put32(b + 4, 3);
	put32(b + 20, 16);
	put64(b + 24, 1ull << 30);
	put32(b + 36, 1);
	put64(b + 40, CLUSTER);
	put32(b + 100, 104);
	put64(b + CLUSTER, 2 * CLUSTER);
	put64(b + 2 * CLUSTER, 1ull << 62 | 2ull << x | (3 * CLUSTER + 100));
	*len = 4 * CLUSTER;
	return b;
}

static void test_valid_minimal(void **state)
{
	struct cb_qcow2_info qi;
	size_t len;
	unsigned char *b = valid_image(&len);

	assert_int_equal(probe_buf(*state, b, len, &qi), 0);
	assert_int_equal(qi.compressed_clusters, 1);
	assert_int_equal(qi.n_ranges, 1);
	assert_int_equal(qi.ranges[0].off, 3 * CLUSTER + 100);
	assert_int_equal(qi.ranges[0].off + qi.ranges[0].len, 3 * CLUSTER + 3 * 512);
	cb_qcow2_release(&qi);
	free(b);
}

/* A change to a valid image: `width` bytes at `off` set to v; `why` is a
 * word the refusal must contain. */
struct patch {
	size_t off;
	int width;
	uint64_t v;
	const char *why;
};

/* Each patched variant of the image at b must be refused, saying why. */
static void expect_refused(void **state, const unsigned char *b, size_t len, const struct patch *cases,
			   size_t n)
{
	unsigned char *h = cb_xmalloc(len);
	struct cb_qcow2_info qi;

	for (size_t i = 0; i < n; i++) {
		memcpy(h, b, len);
		if (cases[i].width == 4)
			put32(h + cases[i].off, cases[i].v);
		else
			put64(h + cases[i].off, cases[i].v);
		assert_int_equal(probe_buf(*state, h, len, &qi), -1);
		if (!strstr(cb_last_error(), cases[i].why))
			fail_msg("case %zu: '%s' does not mention %s", i, cb_last_error(), cases[i].why);
	}
	free(h);
}

/* Each hostile variant of the valid image must be refused, not trusted. */
static void test_hostile_headers(void **state)
{
	struct cb_qcow2_info qi;
	size_t len;
	unsigned char *b = valid_image(&len), *h = cb_xmalloc(len);
	unsigned x = 62 - (16 - 8);
	static const struct patch cases[] = {
		{ 4, 4, 1, "version" },                         /* version 1 */
		{ 4, 4, 4, "version" },
		{ 20, 4, 8, "cluster_bits" },
		{ 20, 4, 22, "cluster_bits" },
		{ 20, 4, 0xffffffff, "cluster_bits" },
		{ 36, 4, 0x7fffffff, "L1" },                    /* huge l1_size */
		{ 36, 4, 0x00100000, "L1" },                    /* past the end */
		{ 40, 8, 1ull << 40, "L1" },                    /* l1 offset past EOF */
		{ 40, 8, CLUSTER + 8, "L1" },                   /* misaligned */
		{ 72, 8, 1ull << 40, "incompatible" },
		{ CLUSTER, 8, 1ull << 40, "L2" },               /* L2 past EOF */
		{ CLUSTER, 8, 2 * CLUSTER + 512, "L2" },        /* misaligned L2 */
		{ 2 * CLUSTER, 8, 1ull << 62 | 1ull << 45, "past the end" },
	};

	(void)x;
	expect_refused(state, b, len, cases, sizeof(cases) / sizeof(cases[0]));
	/* truncated: shorter than a header, and header without its tables */
	assert_int_equal(probe_buf(*state, b, 50, &qi), -1);
	assert_int_equal(probe_buf(*state, b, 2 * CLUSTER, &qi), -1);
	/* an L1 whose 8192 entries all name the same L2 table: that table is
	 * read once, its one compressed cluster counted once */
	memcpy(h, b, len);
	put32(h + 36, 8192);
	for (size_t i = 0; i < 8192; i++)
		put64(h + CLUSTER + 8 * i, 2 * CLUSTER);
	assert_int_equal(probe_buf(*state, h, len, &qi), 0);
	assert_int_equal(qi.compressed_clusters, 1);
	cb_qcow2_release(&qi);
	/* 8192 distinct L2 tables named in a file of 4 clusters */
	for (size_t i = 0; i < 8192; i++)
		put64(h + CLUSTER + 8 * i, (uint64_t)(i + 1) * CLUSTER);
	assert_int_equal(probe_buf(*state, h, len, &qi), -1);
	assert_non_null(strstr(cb_last_error(), "more L2 tables"));
	free(b);
	free(h);
}

/* The valid image with one internal snapshot whose table sits at cluster 3
 * and whose L1 is the active one (shared, as right after a snapshot). */
static void add_snapshot(unsigned char *b)
{
	put32(b + 60, 1);                   /* nb_snapshots */
	put64(b + 64, 3 * CLUSTER);         /* snapshots_offset */
	put64(b + 3 * CLUSTER, CLUSTER);    /* its L1 */
	put32(b + 3 * CLUSTER + 8, 1);
	b[3 * CLUSTER + 13] = 1;            /* id "1" */
	b[3 * CLUSTER + 15] = 1;            /* name "s" */
	b[3 * CLUSTER + 40] = '1';
	b[3 * CLUSTER + 41] = 's';
}

/* Hostile snapshot tables are refused like hostile headers. */
static void test_hostile_snapshots(void **state)
{
	struct cb_qcow2_info qi;
	size_t len;
	unsigned char *b = valid_image(&len);
	static const struct patch cases[] = {
		{ 60, 4, 70000, "snapshots" },                          /* more than qemu allows */
		{ 60, 4, 3000, "snapshot table past the end" },         /* entries run off the file */
		{ 64, 8, 1ull << 40, "snapshot table past the end" },
		{ 64, 8, 3 * CLUSTER + 8, "misaligned" },
		{ 3 * CLUSTER + 36, 4, 0xffffffff, "snapshot table past the end" },  /* extra data */
		{ 3 * CLUSTER, 8, 1ull << 40, "L1" },                   /* its L1 past EOF */
		{ 3 * CLUSTER + 8, 4, 0x7fffffff, "L1" },               /* its L1 too big */
	};

	add_snapshot(b);
	assert_int_equal(probe_buf(*state, b, len, &qi), 0);  /* the sane one */
	assert_int_equal(qi.compressed_clusters, 1);           /* shared L2: once */
	cb_qcow2_release(&qi);
	expect_refused(state, b, len, cases, sizeof(cases) / sizeof(cases[0]));
	free(b);
}


/* Random bytes after the magic (and random tables behind a sane header):
 * never a crash, never a range outside the file. */
static void test_random_headers(void **state)
{
	size_t len;
	unsigned char *b = valid_image(&len), *h = cb_xmalloc(len);
	unsigned seed = 4242;

	for (int round = 0; round < 400; round++) {
		struct cb_qcow2_info qi;
		size_t n = round % 2 ? 512 : len;

		memcpy(h, b, len);
		for (size_t i = round % 4 < 2 ? 4 : 112; i < n; i++)
			if (round % 4 < 2 || xorshift(&seed) % 64 == 0)
				h[i] = xorshift(&seed);
		if (probe_buf(*state, h, n, &qi) == 0)
			cb_qcow2_release(&qi);
	}
	free(b);
	free(h);
}

static void make_raw(const char *path)
{
	/* 2 MiB random, 1 MiB text, the rest of 8 MiB zeros */
	assert_int_equal(run("qemu-img create -q -f raw '%s' 8M && "
			     "(head -c 2M /dev/urandom; seq 1 200000) | dd of='%s' conv=notrunc status=none",
			     path, path), 0);
}

static void test_real_images(void **state)
{
	struct fixture *f = *state;
	char *raw = fx_path(f, "raw.img"), *cq = fx_path(f, "c.qcow2"), *pq = fx_path(f, "p.qcow2");
	struct cb_qcow2_info qi;
	struct cb_data_plan plan;
	uint64_t in_ranges = 0, run_len;
	struct stat st;
	int fd;

	make_raw(raw);
	assert_int_equal(run("qemu-img convert -c -O qcow2 '%s' '%s' && qemu-img convert -O qcow2 '%s' '%s'",
			     raw, cq, raw, pq), 0);
	fd = open(cq, O_RDONLY);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(cb_qcow2_probe(fd, st.st_size, &qi), 0);
	assert_int_equal(qi.encrypted, 0);
	/* qemu compresses the 20 text clusters; the 32 random ones do not
	 * shrink and are written plain; zero clusters are not written */
	assert_true(qi.compressed_clusters >= 15 && qi.compressed_clusters <= 25);
	for (size_t i = 0; i < qi.n_ranges; i++)
		in_ranges += qi.ranges[i].len;
	assert_true(in_ranges >= 100 * 1024);
	assert_true(in_ranges < 1300000);
	cb_qcow2_release(&qi);
	cb_magic_plan(fd, st.st_size, &plan);
	assert_string_equal(plan.format, "qcow2");
	assert_int_equal(cb_magic_plan_at(&plan, 0, &run_len), CB_DATA_UNKNOWN);   /* header */
	assert_true(plan.n_ranges > 0);
	assert_int_equal(cb_magic_plan_at(&plan, plan.ranges[0].off, &run_len), CB_DATA_QCOW2);
	assert_int_equal(run_len, plan.ranges[0].len);
	cb_magic_plan_release(&plan);
	close(fd);

	fd = open(pq, O_RDONLY);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(cb_qcow2_probe(fd, st.st_size, &qi), 0);
	assert_int_equal(qi.compressed_clusters, 0);
	assert_int_equal(qi.n_ranges, 0);
	close(fd);
	free(raw);
	free(cq);
	free(pq);
}

/* Clusters compressed before `qemu-img snapshot -c` and overwritten since
 * are reachable only from the snapshot's L1 table: still found. */
static void test_snapshot_only_clusters(void **state)
{
	struct fixture *f = *state;
	char *raw = fx_path(f, "raw.img"), *cq = fx_path(f, "snap.qcow2");
	struct cb_qcow2_info qi;
	uint64_t in_ranges = 0;
	struct stat st;
	int fd;

	make_raw(raw);
	assert_int_equal(run("qemu-img convert -c -O qcow2 '%s' '%s' && qemu-img snapshot -c before '%s' && "
			     "qemu-io -f qcow2 -c 'write -P 0x55 0 8M' '%s' >/dev/null",
			     raw, cq, cq, cq), 0);
	fd = open(cq, O_RDONLY);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(cb_qcow2_probe(fd, st.st_size, &qi), 0);
	assert_true(qi.compressed_clusters >= 15 && qi.compressed_clusters <= 25);
	for (size_t i = 0; i < qi.n_ranges; i++)
		in_ranges += qi.ranges[i].len;
	assert_true(in_ranges >= 100 * 1024);
	cb_qcow2_release(&qi);
	close(fd);
	free(raw);
	free(cq);
}

static void test_encrypted(void **state)
{
	struct fixture *f = *state;
	char *eq = fx_path(f, "e.qcow2");
	struct cb_data_plan plan;
	uint64_t run_len;
	struct stat st;
	int fd;

	/* qemu-img times PBKDF2 to pick its iterations and gives up now and
	 * then with "Unable to get accurate CPU usage" (a coarse thread CPU
	 * clock): try again rather than fail on qemu-img's benchmark */
	assert_int_equal(run("for i in 1 2 3 4 5; do qemu-img create -q --object secret,id=s0,data=pw "
			     "-f qcow2 -o encrypt.format=luks,encrypt.key-secret=s0 '%s' 16M && exit 0; "
			     "done; exit 1", eq), 0);
	fd = open(eq, O_RDONLY);
	assert_int_equal(fstat(fd, &st), 0);
	cb_magic_plan(fd, st.st_size, &plan);
	assert_int_equal(cb_magic_plan_at(&plan, 12345, &run_len), CB_DATA_QCOW2);
	assert_non_null(strstr(plan.note, "encrypted"));
	cb_magic_plan_release(&plan);
	close(fd);
	free(eq);
}

static void test_magic_formats(void **state)
{
	struct { const char *bytes; size_t len; const char *name; } ok[] = {
		{ "\x1f\x8b\x08\x00", 4, "gzip" }, { "\x28\xb5\x2f\xfd", 4, "zstd" },
		{ "\xfd" "7zXZ\x00\x00", 7, "xz" }, { "BZh91AY", 7, "bzip2" },
		{ "\x89LZO\x00\r\n\x1a\n", 9, "lzop" }, { "PK\x03\x04\x14", 5, "zip" },
		{ "7z\xbc\xaf\x27\x1c", 6, "7z" }, { "\xff\xd8\xff\xe0", 4, "jpeg" },
		{ "\x89PNG\r\n\x1a\n", 8, "png" }, { "GIF89a", 6, "gif" },
		{ "RIFF\x10\0\0\0WEBPVP8 ", 16, "webp" }, { "ID3\x04", 4, "mp3" },
		{ "OggS\0", 5, "ogg" }, { "fLaC", 4, "flac" },
		{ "\0\0\0\x18" "ftypmp42", 12, "mp4" }, { "\x1a\x45\xdf\xa3", 4, "matroska" },
	};
	const char *no[] = { "hello world", "BZh0", "RIFF\0\0\0\0WAVE", "./\0\0ustar", "\x7f" "ELF" };

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		const char *got = cb_magic_format(ok[i].bytes, ok[i].len);
		assert_non_null(got);
		assert_string_equal(got, ok[i].name);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		assert_null(cb_magic_format(no[i], strlen(no[i]) + 1));
	assert_null(cb_magic_format("\x1f", 1));   /* too short */
}

/* ar member: 60-byte header, data, pad to even. */
static size_t ar_member(unsigned char *p, const char *name, const unsigned char *data, size_t len)
{
	char h[61];

	snprintf(h, sizeof(h), "%-16s%-12s%-6s%-6s%-8s%-10zu`\n", name, "0", "0", "0", "100644", len);
	memcpy(p, h, 60);
	memcpy(p + 60, data, len);
	if (len & 1)
		p[60 + len++] = '\n';
	return 60 + len;
}

static void test_deb(void **state)
{
	struct fixture *f = *state;
	char *path = fx_path(f, "p.deb");
	unsigned char *b = cb_xcalloc(1, 64 * 1024), payload[20000] = { 0 };
	struct cb_data_plan plan;
	size_t n = 8;
	int fd;

	memcpy(b, "!<arch>\n", 8);
	n += ar_member(b + n, "debian-binary", (const unsigned char *)"2.0\n", 4);
	memcpy(payload, "\xfd" "7zXZ\x00", 6);
	n += ar_member(b + n, "control.tar.xz", payload, 301);
	n += ar_member(b + n, "data.tar.xz", payload, sizeof(payload));
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	assert_int_equal(cb_write_all(fd, b, n), 0);
	cb_magic_plan(fd, n, &plan);
	assert_non_null(plan.format);
	assert_string_equal(plan.format, "deb");
	assert_int_equal(plan.kind, CB_DATA_COMPRESSED);
	/* an uncompressed data.tar: not stored */
	memcpy(b + n - sizeof(payload) - 60, "data.tar        ", 16);
	memset(b + n - sizeof(payload), 0, 6);
	assert_int_equal(pwrite(fd, b, n, 0), (ssize_t)n);
	cb_magic_plan(fd, n, &plan);
	assert_null(plan.format);
	assert_int_equal(plan.kind, CB_DATA_UNKNOWN);
	close(fd);
	free(b);
	free(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_valid_minimal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_headers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_random_headers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_snapshots, setup, teardown),
		cmocka_unit_test_setup_teardown(test_snapshot_only_clusters, setup, teardown),
		cmocka_unit_test_setup_teardown(test_real_images, setup, teardown),
		cmocka_unit_test_setup_teardown(test_encrypted, setup, teardown),
		cmocka_unit_test(test_magic_formats),
		cmocka_unit_test_setup_teardown(test_deb, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
