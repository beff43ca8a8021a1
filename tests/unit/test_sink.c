/* Unit tests: cb_sink, the storage writer whose SHA-256 runs on a thread of
 * its own over 1 MiB write-behind slots. The digest and the file must be
 * exactly those of the bytes given, whatever the pattern of calls. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <cmocka.h>
#include <openssl/evp.h>

#include "cb_cleanup.h"
#include "cb_sink.h"
#include "cb_syncer.h"
#include "cb_util.h"

#define MIB (1024 * 1024)
#define DATA_LEN (11 * MIB + 777)   /* more slots than the sink has */

struct fixture {
	char dir[64];
	unsigned char *data;
};

static int setup(void **state)
{
	struct fixture *f = cb_xcalloc(1, sizeof(*f));
	unsigned seed = 99;

	strcpy(f->dir, "/tmp/cb-test-sink-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	f->data = cb_xmalloc(DATA_LEN);
	for (size_t i = 0; i < DATA_LEN; i++) {
		seed = seed * 1103515245 + 12345;
		f->data[i] = seed >> 16;
	}
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f->data);
	free(f);
	return 0;
}

static void md_hex(const unsigned char md[32], char hex[65])
{
	for (unsigned int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

static void sha256_hex(const unsigned char *buf, size_t len, char hex[65])
{
	unsigned char md[32];
	unsigned int n = 0;

	assert_int_equal(EVP_Digest(buf, len, md, &n, EVP_sha256(), NULL), 1);
	md_hex(md, hex);
}

static void assert_file_is(const char *path, const unsigned char *buf, size_t len)
{
	struct stat st;
	unsigned char *got = cb_xmalloc(len + 1);
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, len);
	for (size_t off = 0; off < len;) {
		ssize_t n = read(fd, got + off, len - off);
		assert_true(n > 0);
		off += n;
	}
	assert_memory_equal(got, buf, len);
	close(fd);
	free(got);
}

/* Tiny writes, slot-sized ones, writes that straddle slots, and in-place
 * filling through cb_sink_buffer/cb_sink_advance, interleaved. */
static void feed_mixed(struct cb_sink *s, const unsigned char *d, size_t len)
{
	static const size_t sizes[] = { 1, 3, MIB, 5, 2 * MIB + 17, 4096, MIB - 1, 3 * MIB };
	size_t off = 0;

	for (int i = 0; off < len; i++) {
		size_t k = sizes[i % 8] < len - off ? sizes[i % 8] : len - off;

		if (i % 3 == 2) {         /* in place, in pieces of what the slot has */
			size_t done = 0;
			while (done < k) {
				size_t avail;
				unsigned char *p = cb_sink_buffer(s, &avail);
				size_t n = k - done < avail ? k - done : avail;

				assert_non_null(p);
				assert_true(avail >= 1);
				memcpy(p, d + off + done, n);
				assert_int_equal(cb_sink_advance(s, n), 0);
				done += n;
			}
		} else {
			assert_int_equal(cb_sink_write(s, d + off, k), 0);
		}
		off += k;
	}
}

/* The previous archive: DATA_LEN bytes of data, states kept at 1 MiB + 5,
 * 3 MiB and 6 MiB + 1 (cb_sink_mark); its fd open for reading. */
static int write_prev(struct fixture *f, struct cb_sink_state **states, size_t *n)
{
	char *path = cb_xasprintf("%s/prev", f->dir);
	static const size_t at[] = { MIB + 5, 3 * MIB, 6 * MIB + 1, DATA_LEN };
	const struct cb_sink_state *v;
	struct cb_sink *s;
	size_t done = 0;
	int fd;

	assert_int_equal(cb_sink_open_file(&s, path), 0);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(cb_sink_write(s, f->data + done, at[i] - done), 0);
		done = at[i];
		if (i < 3)
			assert_int_equal(cb_sink_mark(s), 0);
	}
	assert_int_equal(cb_sink_commit(s), 0);
	v = cb_sink_states(s, n);
	assert_int_equal(*n, 3);
	assert_true(v[0].off == MIB + 5 && v[1].off == 3 * MIB && v[2].off == 6 * MIB + 1);
	*states = cb_xmalloc(*n * sizeof(**states));
	memcpy(*states, v, *n * sizeof(**states));
	cb_sink_free(s);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	free(path);
	return fd;
}

/* The new archive: a copy of prev [0, a), then a copy of prev [b, c) (b
 * may differ from a: a copy moved), then len bytes of data at a + 3.
 * Its .sha256 must be the SHA-256 of what it holds, however much was
 * taken from the previous archive's states (*resumed). */
static void resumed_digest(struct fixture *f, int prev, const struct cb_sink_state *v, size_t n,
			   size_t a, size_t b, size_t c, size_t len, uint64_t *resumed)
{
	char *path = cb_xasprintf("%s/new", f->dir);
	unsigned char *want = cb_xmalloc(a + (c - b) + len + 1);
	char hex[65];
	struct cb_sink *s;

	unlink(path);
	memcpy(want, f->data, a);
	memcpy(want + a, f->data + b, c - b);
	memcpy(want + a + (c - b), f->data + a + 3, len);
	assert_int_equal(cb_sink_open_file(&s, path), 0);
	cb_sink_resume(s, prev, v, n);
	assert_int_equal(cb_sink_copy(s, prev, 0, a, f->data), 0);
	if (c > b)
		assert_int_equal(cb_sink_copy(s, prev, b, c - b, f->data + b), 0);
	if (len)
		assert_int_equal(cb_sink_write(s, f->data + a + 3, len), 0);
	assert_int_equal(cb_sink_commit(s), 0);
	sha256_hex(want, a + (c - b) + len, hex);
	assert_string_equal(cb_sink_sha256(s), hex);
	assert_file_is(path, want, a + (c - b) + len);
	*resumed = cb_sink_resumed_bytes(s);
	cb_sink_free(s);
	free(want);
	free(path);
}

/* cb_sink_resume: the digest resumes from a state of the same bytes at
 * the same offset, never from one of another offset. */
static void test_resume_from_states(void **state)
{
	struct fixture *f = *state;
	struct cb_sink_state *v;
	size_t n;
	uint64_t resumed;
	int prev = write_prev(f, &v, &n);

	/* the start copied to a state, then new bytes: resumed there */
	resumed_digest(f, prev, v, n, 3 * MIB, 0, 0, 1000, &resumed);
	assert_int_equal(resumed, 3 * MIB);
	/* two copies at their own offsets, to the state at 6 MiB + 1 */
	resumed_digest(f, prev, v, n, 3 * MIB, 3 * MIB, 6 * MIB + 1, 10, &resumed);
	assert_int_equal(resumed, 6 * MIB + 1);
	/* the second copy moved (from 6 MiB + 1 to 3 MiB): the state at
	 * 3 MiB, and the moved bytes hashed */
	resumed_digest(f, prev, v, n, 3 * MIB, 6 * MIB + 1, 8 * MIB, 5, &resumed);
	assert_int_equal(resumed, 3 * MIB);
	/* a copied start without a state at its end: read back and hashed */
	resumed_digest(f, prev, v, n, 2 * MIB, 0, 0, 77, &resumed);
	assert_int_equal(resumed, 0);
	/* a state that does not hold what it claims is not used */
	v[1].st[40] ^= 1;
	v[1].off += 64;
	resumed_digest(f, prev, v, n, 3 * MIB + 64, 0, 0, 1, &resumed);
	assert_int_equal(resumed, 0);
	close(prev);
	free(v);
}

static void test_file_digest_matches(void **state)
{
	struct fixture *f = *state;
	char *path = cb_xasprintf("%s/a.tar", f->dir), *tmp = cb_xasprintf("%s.tmp", path);
	char want[65];
	struct cb_sink *s;

	assert_int_equal(cb_sink_open_file(&s, path), 0);
	feed_mixed(s, f->data, DATA_LEN);
	assert_int_equal(cb_sink_bytes(s), DATA_LEN);
	assert_int_equal(cb_sink_prepare(s), 0);
	assert_int_equal(access(path, F_OK), -1);   /* not renamed yet */
	sha256_hex(f->data, DATA_LEN, want);
	assert_string_equal(cb_sink_sha256(s), want);
	assert_int_equal(cb_sink_commit(s), 0);
	assert_int_equal(access(tmp, F_OK), -1);
	assert_file_is(path, f->data, DATA_LEN);
	cb_sink_free(s);
	free(path);
	free(tmp);
}

/* Exact multiples of the slot size, and nothing at all. */
static void test_slot_boundaries(void **state)
{
	struct fixture *f = *state;
	static const size_t lens[] = { 0, 1, MIB, 4 * MIB, 5 * MIB, 8 * MIB + 1 };

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		char *path = cb_xasprintf("%s/b%zu", f->dir, i);
		char want[65];
		struct cb_sink *s;

		assert_int_equal(cb_sink_open_file(&s, path), 0);
		if (lens[i])
			assert_int_equal(cb_sink_write(s, f->data, lens[i]), 0);
		assert_int_equal(cb_sink_commit(s), 0);
		sha256_hex(f->data, lens[i], want);
		assert_string_equal(cb_sink_sha256(s), want);
		assert_file_is(path, f->data, lens[i]);
		cb_sink_free(s);
		free(path);
	}
}

/* stdout needs no checksum; the bench asks for one. */
static void test_fd_sink_checksum_switch(void **state)
{
	struct fixture *f = *state;

	for (int on = 0; on <= 1; on++) {
		char *path = cb_xasprintf("%s/fd%d", f->dir, on);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		char want[65];
		struct cb_sink *s;

		assert_true(fd >= 0);
		assert_int_equal(cb_sink_open_fd(&s, fd, path), 0);
		cb_sink_set_checksum(s, on);
		feed_mixed(s, f->data, 6 * MIB + 5);
		assert_int_equal(cb_sink_commit(s), 0);
		sha256_hex(f->data, 6 * MIB + 5, want);
		assert_string_equal(cb_sink_sha256(s), on ? want : "");
		assert_file_is(path, f->data, 6 * MIB + 5);
		cb_sink_free(s);
		close(fd);
		free(path);
	}
}

/* A device that is always full: the error reaches the caller no later than
 * cb_sink_prepare(), names the target, and nothing hangs on the way out. */
static void test_write_error_surfaces(void **state)
{
	struct fixture *f = *state;
	int fd = open("/dev/full", O_WRONLY);
	struct cb_sink *s;
	int failed = 0;

	assert_true(fd >= 0);
	assert_int_equal(cb_sink_open_fd(&s, fd, "/dev/full"), 0);
	cb_sink_set_checksum(s, 1);
	for (size_t off = 0; off < 3 * MIB && !failed; off += 100000)
		failed = cb_sink_write(s, f->data + off, 100000) < 0;
	if (!failed)
		failed = cb_sink_prepare(s) < 0;
	assert_true(failed);
	assert_non_null(strstr(cb_last_error(), "cannot write '/dev/full'"));
	cb_sink_free(s);
	close(fd);
}

/* Pages of [off, off + len) of path that are in the page cache. */
static size_t resident_pages(const char *path, size_t off, size_t len)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t n = (len + page - 1) / page, count = 0;
	unsigned char *vec = cb_xmalloc(n);
	int fd = open(path, O_RDONLY);
	void *map;

	assert_true(fd >= 0);
	map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)off);
	assert_true(map != MAP_FAILED);
	assert_int_equal(mincore(map, len, vec), 0);
	for (size_t i = 0; i < n; i++)
		count += vec[i] & 1;
	munmap(map, len);
	close(fd);
	free(vec);
	return count;
}

/*
 * A storage file bigger than the syncer lets stay behind: while it is being
 * written, its beginning is already on disk and out of the page cache (the
 * writer waits once more than CB_SYNCER_MAX_BEHIND bytes are not, so this
 * holds at that point without any timing); once committed, none of it is
 * cached, and it holds exactly the bytes given.
 */
static void test_durable_while_written(void **state)
{
	struct fixture *f = *state;
	char *path = cb_xasprintf("%s/big.tar", f->dir), *tmp = cb_xasprintf("%s.tmp", path);
	const size_t total = CB_SYNCER_MAX_BEHIND + 2 * CB_SYNCER_CHUNK + 8 * MIB;
	const size_t early = CB_SYNCER_CHUNK;   /* surely synced and dropped by the end */
	long page = sysconf(_SC_PAGESIZE);
	EVP_MD_CTX *want_ctx = EVP_MD_CTX_new();
	unsigned char md[32];
	unsigned int mdlen = 0;
	char want[65];
	struct statfs sfs;
	struct cb_sink *s;

	assert_int_equal(statfs(f->dir, &sfs), 0);
	if (sfs.f_type == 0x01021994 /* TMPFS_MAGIC */) {
		/* tmpfs pages are the file: there is no disk to sync to, no cache to leave */
		print_message("skipped: %s is on tmpfs, where the page cache cannot be dropped\n", f->dir);
		skip();
	}
	EVP_DigestInit_ex(want_ctx, EVP_sha256(), NULL);
	assert_int_equal(cb_sink_open_file(&s, path), 0);
	for (size_t off = 0; off < total;) {
		size_t k = total - off < 7 * MIB ? total - off : 7 * MIB;

		assert_int_equal(cb_sink_write(s, f->data, k), 0);
		EVP_DigestUpdate(want_ctx, f->data, k);
		off += k;
	}
	assert_true(resident_pages(tmp, 0, early) <= early / page / 100);
	assert_int_equal(cb_sink_commit(s), 0);
	assert_true(resident_pages(path, 0, total) <= total / page / 100);
	EVP_DigestFinal_ex(want_ctx, md, &mdlen);
	md_hex(md, want);
	assert_string_equal(cb_sink_sha256(s), want);
	cb_sink_free(s);
	EVP_MD_CTX_free(want_ctx);
	free(path);
	free(tmp);
}

/* Freed without commit: the .tmp is gone, the final name never appears. */
static void test_abort_removes_tmp(void **state)
{
	struct fixture *f = *state;
	char *path = cb_xasprintf("%s/c.tar", f->dir), *tmp = cb_xasprintf("%s.tmp", path);
	struct cb_sink *s;

	assert_int_equal(cb_sink_open_file(&s, path), 0);
	assert_int_equal(cb_sink_write(s, f->data, 2 * MIB + 3), 0);
	assert_int_equal(access(tmp, F_OK), 0);
	assert_int_equal(access(path, F_OK), -1);   /* written under NAME.tmp only */
	cb_sink_free(s);
	assert_int_equal(access(tmp, F_OK), -1);
	assert_int_equal(access(path, F_OK), -1);
	free(path);
	free(tmp);
}

static void nothing(void *arg)
{
	(void)arg;
}

/* With the cleanup stack full, a signal could not remove the .tmp: the
 * sink refuses to open (nothing left behind) rather than go on unprotected. */
static void test_open_refused_when_unprotected(void **state)
{
	struct fixture *f = *state;
	char *path = cb_xasprintf("%s/d.tar", f->dir), *tmp = cb_xasprintf("%s.tmp", path);
	struct cb_sink *s = NULL;
	int h[64], n = 0;

	while (n < 64 && (h[n] = cb_cleanup_push(nothing, NULL)) >= 0)
		n++;
	assert_true(n < 64);
	assert_int_equal(cb_sink_open_file(&s, path), -1);
	assert_non_null(strstr(cb_last_error(), "cleanup stack full"));
	assert_int_equal(access(tmp, F_OK), -1);
	while (n > 0)
		cb_cleanup_pop(h[--n], 0);
	assert_int_equal(cb_sink_open_file(&s, path), 0);
	cb_sink_free(s);
	free(path);
	free(tmp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_file_digest_matches, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slot_boundaries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fd_sink_checksum_switch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_error_surfaces, setup, teardown),
		cmocka_unit_test_setup_teardown(test_abort_removes_tmp, setup, teardown),
		cmocka_unit_test_setup_teardown(test_open_refused_when_unprotected, setup, teardown),
		cmocka_unit_test_setup_teardown(test_durable_while_written, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resume_from_states, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
