/* Unit tests: cb_codec writers and readers against real files and the stock
 * tools (zstd, lzop, gzip). */
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
#include <zlib.h>

#include "cb_codec.h"
#include "cb_rmtree.h"
#include "cb_sink.h"
#include "cb_util.h"
#include "../../src/codec/codec_int.h"

#define DATA_LEN (3 * 1024 * 1024 + 12345)

struct fixture {
	char dir[64];
	unsigned char *data;     /* DATA_LEN bytes of text and random runs */
	char *raw;               /* the data as a plain file */
};

static unsigned xorshift(unsigned *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

/* Alternating 200 KiB runs of text and of random bytes, so lzo sees both
 * compressible blocks and blocks it must store. */
static void make_data(unsigned char *d, size_t len)
{
	unsigned seed = 12345;
	size_t i = 0, line = 0;

	while (i < len) {
		size_t run_end = i + 200 * 1024 > len ? len : i + 200 * 1024;
		int random_run = (i / (200 * 1024)) % 2;

		while (i < run_end) {
			if (random_run) {
				d[i++] = xorshift(&seed) & 0xff;
				continue;
			}
			char tmp[80];
			int n = snprintf(tmp, sizeof(tmp), "line %zu: the quick brown fox %u\n", line++,
					 xorshift(&seed) % 1000);
			for (int k = 0; k < n && i < run_end; k++)
				d[i++] = tmp[k];
		}
	}
}

static char *path_in(struct fixture *f, const char *name)
{
	return cb_xasprintf("%s/%s", f->dir, name);
}

static int setup(void **state)
{
	struct fixture *f = cb_xcalloc(1, sizeof(*f));
	int fd;

	strcpy(f->dir, "/tmp/cb-test-codec.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	f->data = cb_xmalloc(DATA_LEN);
	make_data(f->data, DATA_LEN);
	f->raw = path_in(f, "raw");
	fd = open(f->raw, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || cb_write_all(fd, f->data, DATA_LEN) < 0)
		return -1;
	close(fd);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	cb_remove_tree(f->dir);
	free(f->data);
	free(f->raw);
	free(f);
	return 0;
}

/* Compress len bytes into path, in uneven pieces; fills *stp; returns the
 * file size. hint_len > 0: the first hint_len bytes are hinted as known
 * compressed data. */
/* A codec writer into a new file at path, through an fd sink (as with
 * --stdout). */
struct coding {
	int fd;
	struct cb_sink *s;
	struct cb_codec_writer *w;
};

static void coding_start(struct coding *c, const char *path, const struct cb_codec_params *p)
{
	c->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(c->fd >= 0);
	assert_int_equal(cb_sink_open_fd(&c->s, c->fd, path), 0);
	assert_int_equal(cb_codec_writer_new(&c->w, p, c->s), 0);
}

/* Finish, free, fill *st; the file's size, which is what the stats say
 * went out. */
static off_t coding_end(struct coding *c, const char *path, struct cb_codec_stats *st)
{
	struct stat sb;

	assert_int_equal(cb_codec_finish(c->w), 0);
	cb_codec_writer_stats(c->w, st);
	cb_codec_writer_free(c->w);
	cb_sink_free(c->s);
	close(c->fd);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(st->bytes_out, (uint64_t)sb.st_size);
	return sb.st_size;
}

static off_t compress_full(const char *path, enum cb_compress type, enum cb_policy policy, int threads,
			   const unsigned char *data, size_t len, size_t hint_len, struct cb_codec_stats *stp)
{
	struct cb_codec_params p = { .type = type, .policy = policy, .threads = threads };
	struct cb_codec_stats st;
	struct coding c;
	struct cb_codec_writer *w;
	size_t pos = 0, piece = 1;
	off_t size;

	coding_start(&c, path, &p);
	w = c.w;
	if (hint_len) {
		cb_codec_begin_file(w);
		assert_int_equal(cb_codec_hint(w, CB_DATA_COMPRESSED, hint_len), 0);
	}
	while (pos < len) {
		size_t k = piece > len - pos ? len - pos : piece;
		assert_int_equal(cb_codec_write(w, data + pos, k), 0);
		pos += k;
		piece = piece * 7 % 300007 + 1;
	}
	size = coding_end(&c, path, &st);
	assert_int_equal(st.bytes_in, len);
	if (stp)
		*stp = st;
	return size;
}

static off_t compress_to(const char *path, enum cb_compress type, int threads,
			 const unsigned char *data, size_t len)
{
	return compress_full(path, type, CB_POLICY_ALWAYS, threads, data, len, 0, NULL);
}

/* Read a whole file through cb_codec_reader; -1 on a reader error. */
static ssize_t decompress_file(const char *path, unsigned char *out, size_t cap, enum cb_compress *type)
{
	struct cb_codec_reader *r;
	size_t total = 0, ask = 1;
	ssize_t n;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	if (cb_codec_reader_new(&r, fd) < 0) {
		close(fd);
		return -1;
	}
	if (type)
		*type = cb_codec_reader_type(r);
	do {
		n = cb_codec_read(r, out + total, ask > cap - total ? cap - total : ask);
		if (n > 0)
			total += n;
		ask = ask * 5 % 1000003 + 1;
	} while (n > 0 && total < cap);
	cb_codec_reader_free(r);
	close(fd);
	return n < 0 ? -1 : (ssize_t)total;
}

static int run(const char *fmt, const char *a, const char *b)
{
	char *cmd = cb_xasprintf(fmt, a, b);
	int rc = system(cmd);

	free(cmd);
	return rc;
}

static const char *stock_cmd(enum cb_compress type)
{
	switch (type) {
	case CB_COMPRESS_ZSTD: return "zstd -q -dc '%s' > '%s'";
	case CB_COMPRESS_LZO:  return "lzop -dc '%s' > '%s'";
	case CB_COMPRESS_GZIP: return "gzip -dc '%s' > '%s'";
	case CB_COMPRESS_NONE: return "cat '%s' > '%s'";
	}
	return NULL;
}

static void roundtrip(void **state, enum cb_compress type, int threads)
{
	struct fixture *f = *state;
	char *comp = path_in(f, "comp"), *out = path_in(f, "out");
	unsigned char *back = cb_xmalloc(DATA_LEN + 10);
	enum cb_compress seen;
	off_t size = compress_to(comp, type, threads, f->data, DATA_LEN);

	if (type != CB_COMPRESS_NONE)
		assert_true(size < DATA_LEN);     /* the text half compresses */
	assert_int_equal(decompress_file(comp, back, DATA_LEN + 10, &seen), DATA_LEN);
	assert_int_equal(seen, type);
	assert_memory_equal(back, f->data, DATA_LEN);
	assert_int_equal(run(stock_cmd(type), comp, out), 0);
	assert_int_equal(run("cmp -s '%s' '%s'", out, f->raw), 0);
	if (type == CB_COMPRESS_LZO)
		assert_int_equal(run("lzop -t -q '%s'%s", comp, ""), 0);
	free(back);
	free(comp);
	free(out);
}

static void test_zstd(void **state) { roundtrip(state, CB_COMPRESS_ZSTD, 0); }
static void test_zstd_1thread(void **state) { roundtrip(state, CB_COMPRESS_ZSTD, 1); }
static void test_lzo(void **state) { roundtrip(state, CB_COMPRESS_LZO, 0); }
static void test_gzip(void **state) { roundtrip(state, CB_COMPRESS_GZIP, 0); }
static void test_none(void **state) { roundtrip(state, CB_COMPRESS_NONE, 0); }

static void test_detect(void **state)
{
	const unsigned char zst[] = { 0x28, 0xb5, 0x2f, 0xfd, 0 };
	const unsigned char lzo[] = { 0x89, 'L', 'Z', 'O', 0, '\r', '\n', 0x1a, '\n' };
	const unsigned char gz[] = { 0x1f, 0x8b, 8, 0 };
	enum cb_compress t = CB_COMPRESS_NONE;

	(void)state;
	assert_int_equal(cb_codec_detect(zst, sizeof(zst), &t), 0);
	assert_int_equal(t, CB_COMPRESS_ZSTD);
	assert_int_equal(cb_codec_detect(lzo, sizeof(lzo), &t), 0);
	assert_int_equal(t, CB_COMPRESS_LZO);
	assert_int_equal(cb_codec_detect(gz, sizeof(gz), &t), 0);
	assert_int_equal(t, CB_COMPRESS_GZIP);
	assert_int_equal(cb_codec_detect("./\0\0ustar", 10, &t), -1);
	assert_int_equal(cb_codec_detect(lzo, 8, &t), -1);   /* too short for lzop */
	assert_int_equal(cb_codec_detect(zst, 3, &t), -1);
}

static void truncate_case(void **state, enum cb_compress type, off_t keep_from_end)
{
	struct fixture *f = *state;
	char *comp = path_in(f, "trunc");
	unsigned char *back = cb_xmalloc(DATA_LEN + 16);
	off_t size = compress_to(comp, type, 0, f->data, DATA_LEN);

	/* the buffer has room beyond the data, so the reader must look for
	 * the end of the stream */
	assert_int_equal(truncate(comp, keep_from_end ? size - keep_from_end : size / 2), 0);
	assert_int_equal(decompress_file(comp, back, DATA_LEN + 16, NULL), -1);
	assert_non_null(strstr(cb_last_error(), "truncated"));
	free(back);
	free(comp);
}

static void test_truncated(void **state)
{
	enum cb_compress types[] = { CB_COMPRESS_ZSTD, CB_COMPRESS_LZO, CB_COMPRESS_GZIP };

	for (size_t i = 0; i < 3; i++) {
		truncate_case(state, types[i], 0);
		truncate_case(state, types[i], 3);   /* only the trailer is cut */
	}
}

/* A valid magic followed by noise must fail cleanly, never crash. */
static void test_garbage(void **state)
{
	struct fixture *f = *state;
	char *path = path_in(f, "garbage");
	const unsigned char *magics[] = {
		(const unsigned char *)"\x28\xb5\x2f\xfd", (const unsigned char *)"\x89LZO\x00\r\n\x1a\n",
		(const unsigned char *)"\x1f\x8b",
	};
	const size_t mlen[] = { 4, 9, 2 };
	unsigned char *back = cb_xmalloc(1 << 20), buf[4096];
	unsigned seed = 99;

	for (int round = 0; round < 300; round++) {
		size_t m = round % 3, len = mlen[m] + xorshift(&seed) % (sizeof(buf) - mlen[m]);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		memcpy(buf, magics[m], mlen[m]);
		for (size_t i = mlen[m]; i < len; i++)
			buf[i] = xorshift(&seed);
		assert_int_equal(cb_write_all(fd, buf, len), 0);
		close(fd);
		assert_int_equal(decompress_file(path, back, 1 << 20, NULL), -1);
		assert_true(strlen(cb_last_error()) > 0);
	}
	free(back);
	free(path);
}

/* One flipped byte inside the data: a checksum or the decoder notices. */
static void test_corrupt(void **state)
{
	struct fixture *f = *state;
	char *comp = path_in(f, "corrupt");
	unsigned char *back = cb_xmalloc(DATA_LEN);
	enum cb_compress types[] = { CB_COMPRESS_ZSTD, CB_COMPRESS_LZO, CB_COMPRESS_GZIP };

	for (size_t i = 0; i < 3; i++) {
		off_t size = compress_to(comp, types[i], 0, f->data, DATA_LEN);
		unsigned char b;
		int fd = open(comp, O_RDWR);

		/* the last third holds a random run: stored data in lzo */
		assert_int_equal(pread(fd, &b, 1, size * 2 / 3), 1);
		b ^= 0x40;
		assert_int_equal(pwrite(fd, &b, 1, size * 2 / 3), 1);
		close(fd);
		assert_int_equal(decompress_file(comp, back, DATA_LEN, NULL), -1);
		if (types[i] == CB_COMPRESS_LZO)
			assert_non_null(strstr(cb_last_error(), "checksum mismatch"));
	}
	free(back);
	free(comp);
}

static void test_empty(void **state)
{
	struct fixture *f = *state;
	char *comp = path_in(f, "empty"), *out = path_in(f, "empty.out");
	enum cb_compress types[] = { CB_COMPRESS_ZSTD, CB_COMPRESS_LZO, CB_COMPRESS_GZIP, CB_COMPRESS_NONE };
	unsigned char back[16];
	struct stat sb;

	for (size_t i = 0; i < 4; i++) {
		enum cb_compress seen;
		off_t size = compress_to(comp, types[i], 0, (const unsigned char *)"", 0);

		assert_int_equal(size > 0, types[i] != CB_COMPRESS_NONE);
		assert_int_equal(decompress_file(comp, back, sizeof(back), &seen), 0);
		assert_int_equal(seen, types[i]);
		assert_int_equal(run(stock_cmd(types[i]), comp, out), 0);
		assert_int_equal(stat(out, &sb), 0);
		assert_int_equal(sb.st_size, 0);
	}
	free(comp);
	free(out);
}

/* Concatenated gzip members read as one stream (parallel gzip output). */
static void test_gzip_members(void **state)
{
	struct fixture *f = *state;
	char *a = path_in(f, "a.gz"), *b = path_in(f, "b.gz"), *ab = path_in(f, "ab.gz");
	unsigned char *back = cb_xmalloc(DATA_LEN + 10);

	compress_to(a, CB_COMPRESS_GZIP, 0, f->data, 1000000);
	compress_to(b, CB_COMPRESS_GZIP, 0, f->data + 1000000, DATA_LEN - 1000000);
	{
		char *cmd = cb_xasprintf("cat '%s' '%s' > '%s'", a, b, ab);
		assert_int_equal(system(cmd), 0);
		free(cmd);
	}
	assert_int_equal(decompress_file(ab, back, DATA_LEN + 10, NULL), DATA_LEN);
	assert_memory_equal(back, f->data, DATA_LEN);
	free(back);
	free(a);
	free(b);
	free(ab);
}

static const char *test_cmd(enum cb_compress type)
{
	switch (type) {
	case CB_COMPRESS_ZSTD: return "zstd -q -t '%s'%s";
	case CB_COMPRESS_LZO:  return "lzop -q -t '%s'%s";
	case CB_COMPRESS_GZIP: return "gzip -t '%s'%s";
	case CB_COMPRESS_NONE: break;
	}
	return "true '%s'%s";
}

/* Check a file both with our reader and the stock tool. */
static void check_back(struct fixture *f, const char *comp, enum cb_compress type,
		       const unsigned char *data, size_t len)
{
	char *out = path_in(f, "check.out"), *ref = path_in(f, "check.ref");
	unsigned char *back = cb_xmalloc(len + 10);
	int fd = open(ref, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_int_equal(decompress_file(comp, back, len + 10, NULL), (ssize_t)len);
	assert_memory_equal(back, data, len);
	assert_int_equal(cb_write_all(fd, data, len), 0);
	close(fd);
	assert_int_equal(run(stock_cmd(type), comp, out), 0);
	assert_int_equal(run("cmp -s '%s' '%s'", out, ref), 0);
	assert_int_equal(run(test_cmd(type), comp, ""), 0);
	free(back);
	free(out);
	free(ref);
}

struct codec_case {
	enum cb_compress type;
	int threads;
};

static const struct codec_case policy_cases[] = {
	{ CB_COMPRESS_ZSTD, 0 }, { CB_COMPRESS_ZSTD, 1 }, { CB_COMPRESS_LZO, 0 }, { CB_COMPRESS_LZO, 1 },
	{ CB_COMPRESS_GZIP, 0 }, { CB_COMPRESS_GZIP, 1 }, { CB_COMPRESS_GZIP, 3 },
};

/* 4 MiB of random bytes in auto policy: stored, so hardly any bigger. */
static void test_random_stored(void **state)
{
	struct fixture *f = *state;
	size_t len = 4 * 1024 * 1024;
	unsigned char *rnd = cb_xmalloc(len);
	char *comp = path_in(f, "rnd");
	unsigned seed = 777;

	for (size_t i = 0; i < len; i++)
		rnd[i] = xorshift(&seed) >> 3;
	for (size_t i = 0; i < sizeof(policy_cases) / sizeof(policy_cases[0]); i++) {
		struct cb_codec_stats st;
		off_t size = compress_full(comp, policy_cases[i].type, CB_POLICY_AUTO, policy_cases[i].threads,
					   rnd, len, 0, &st);

		assert_true(st.bytes_stored >= len);
		assert_true(st.bytes_stored_trial >= len);
		assert_true((double)size <= 1.01 * len);
		check_back(f, comp, policy_cases[i].type, rnd, len);
	}
	free(rnd);
	free(comp);
}

/*
 * What a chunk must save to be compressed depends on what the codec's CPU
 * costs (CB_TRIAL_GAIN_*): random bytes whose every KiB ends with a repeat
 * of 80 earlier bytes shrink by about 6% (zstd -1 and gzip -6 alike),
 * enough for zstd and lzo, not for gzip, which stores them; bytes of 100
 * equally likely values shrink by about 15%, and zstd and gzip compress
 * them (lzo, without an entropy coder, cannot).
 */
static void test_trial_gain_by_codec(void **state)
{
	struct fixture *f = *state;
	size_t len = 3 * 1024 * 1024;
	unsigned char *meh = cb_xmalloc(len), *good = cb_xmalloc(len);
	char *comp = path_in(f, "gain");
	unsigned seed = 4242;

	for (size_t i = 0; i < len; i++) {
		meh[i] = i % 1024 >= 1024 - 80 ? meh[i - (1024 - 80)] : xorshift(&seed) & 0xff;
		good[i] = xorshift(&seed) % 100;
	}
	for (size_t i = 0; i < sizeof(policy_cases) / sizeof(policy_cases[0]); i++) {
		enum cb_compress type = policy_cases[i].type;
		struct cb_codec_stats st;
		off_t size;

		size = compress_full(comp, type, CB_POLICY_AUTO, policy_cases[i].threads, meh, len, 0, &st);
		if (type == CB_COMPRESS_GZIP) {
			assert_int_equal(st.bytes_stored_trial, len);
			assert_true((double)size <= 1.01 * len);
		} else {
			assert_int_equal(st.bytes_stored_trial, 0);   /* the trial said: compress */
		}
		if (type == CB_COMPRESS_ZSTD)
			assert_true((double)size <= 0.97 * len);
		check_back(f, comp, type, meh, len);

		size = compress_full(comp, type, CB_POLICY_AUTO, policy_cases[i].threads, good, len, 0, &st);
		assert_int_equal(st.bytes_stored_trial, 0);
		if (type != CB_COMPRESS_LZO)   /* no entropy coder: lzo stores them anyway */
			assert_true((double)size <= 0.9 * len);
		check_back(f, comp, type, good, len);
	}
	free(meh);
	free(good);
	free(comp);
}

/* Bytes hinted as compressed are stored even if they are text; the rest is
 * compressed; always policy ignores the hint. */
static void test_hint_stores(void **state)
{
	struct fixture *f = *state;
	char *comp = path_in(f, "hint");
	size_t text = 1024 * 1024;   /* the fixture's data starts with 200 KiB text runs */

	for (size_t i = 0; i < sizeof(policy_cases) / sizeof(policy_cases[0]); i++) {
		struct cb_codec_stats st, st_all;
		off_t auto_size = compress_full(comp, policy_cases[i].type, CB_POLICY_AUTO,
						policy_cases[i].threads, f->data, DATA_LEN, text, &st);
		off_t always_size;

		check_back(f, comp, policy_cases[i].type, f->data, DATA_LEN);
		assert_int_equal(st.bytes_stored_magic, text);
		assert_int_equal(st.files_stored_magic, 1);
		assert_true(st.files_stored >= 1);
		always_size = compress_full(comp, policy_cases[i].type, CB_POLICY_ALWAYS,
					    policy_cases[i].threads, f->data, DATA_LEN, text, &st_all);
		assert_int_equal(st_all.bytes_stored_magic, 0);
		/* about half of the hinted MiB is text that now went out stored */
		assert_true(auto_size > always_size + (off_t)text / 4);
	}
	free(comp);
}

/* The archive writer's way in: bytes read straight into the chunk
 * (cb_codec_write_buffer), mixed with ordinary writes, a hinted stored run
 * among them. Same stream back, by cbackup and by the stock tool. */
static void test_in_place_writes(void **state)
{
	struct fixture *f = *state;
	char *comp = path_in(f, "inplace");

	for (size_t i = 0; i < sizeof(policy_cases) / sizeof(policy_cases[0]); i++) {
		struct cb_codec_params p = { .type = policy_cases[i].type, .policy = CB_POLICY_AUTO,
					     .threads = policy_cases[i].threads };
		struct cb_codec_stats st;
		struct coding c;
		struct cb_codec_writer *w;
		size_t pos = 0, piece = 70000, in_place = 0;

		coding_start(&c, comp, &p);
		w = c.w;
		for (int n = 0; pos < DATA_LEN; n++) {
			size_t k = piece < DATA_LEN - pos ? piece : DATA_LEN - pos, room = 0;
			unsigned char *dst;

			if (pos == 1024 * 1024)   /* a 600 KiB run said to be compressed */
				assert_int_equal(cb_codec_hint(w, CB_DATA_COMPRESSED, 600 * 1024), 0);
			dst = n % 4 == 3 ? NULL : cb_codec_write_buffer(w, &room);
			if (dst) {
				k = k < room ? k : room;
				memcpy(dst, f->data + pos, k);
				in_place += k;
			}
			assert_int_equal(cb_codec_write(w, dst ? dst : f->data + pos, k), 0);
			pos += k;
			piece = piece * 3 % 300007 + 1;
		}
		coding_end(&c, comp, &st);
		assert_true(in_place > DATA_LEN / 3);
		check_back(f, comp, p.type, f->data, DATA_LEN);
	}
	free(comp);
}

/* A full disk under the writer: the error that reaches the caller names the
 * write that failed, whichever call ran into it. */
static void test_write_error_named(void **state)
{
	struct fixture *f = *state;

	for (size_t i = 0; i < sizeof(policy_cases) / sizeof(policy_cases[0]); i++) {
		struct cb_codec_params p = { .type = policy_cases[i].type, .policy = CB_POLICY_AUTO,
					     .threads = policy_cases[i].threads };
		struct cb_codec_writer *w;
		struct cb_sink *s;
		int fd = open("/dev/full", O_WRONLY), failed = 0;

		assert_true(fd >= 0);
		assert_int_equal(cb_sink_open_fd(&s, fd, "/dev/full"), 0);
		assert_int_equal(cb_codec_writer_new(&w, &p, s), 0);
		for (size_t pos = 0; pos + 65536 <= DATA_LEN && !failed; pos += 65536) {
			size_t room = 0;
			unsigned char *dst = cb_codec_write_buffer(w, &room);

			if (dst && room >= 65536)
				memcpy(dst, f->data + pos, 65536);
			else
				dst = f->data + pos;
			failed = cb_codec_write(w, dst, 65536) < 0;
		}
		if (!failed)
			failed = cb_codec_finish(w) < 0;
		assert_true(failed);
		assert_non_null(strstr(cb_last_error(), "cannot write '/dev/full'"));
		cb_codec_writer_free(w);
		cb_sink_free(s);
		close(fd);
	}
}

/* Parallel lzo, gzip and zstd (a frame per unit on each worker): the same
 * bytes whatever the thread count. */
static void test_threads_deterministic(void **state)
{
	struct fixture *f = *state;
	enum cb_compress types[] = { CB_COMPRESS_LZO, CB_COMPRESS_GZIP, CB_COMPRESS_ZSTD };
	int threads[] = { 1, 2, 3, 8 };
	char *ref = path_in(f, "det.ref"), *comp = path_in(f, "det");

	for (size_t t = 0; t < 3; t++) {
		for (int pol = 0; pol < 2; pol++)
			for (size_t i = 0; i < 4; i++) {
				enum cb_policy policy = pol ? CB_POLICY_ALWAYS : CB_POLICY_AUTO;

				compress_full(i ? comp : ref, types[t], policy, threads[i], f->data, DATA_LEN,
					      300000, NULL);
				if (i)
					assert_int_equal(run("cmp -s '%s' '%s'", ref, comp), 0);
			}
		check_back(f, ref, types[t], f->data, DATA_LEN);
	}
	free(ref);
	free(comp);
}

/* Files alternately hinted as compressed (stored chunks) and not (text
 * that workers compress), so stored chunks meet an empty pool (run on the
 * caller) and a busy one (queued behind compressing jobs): the bytes must
 * still not depend on the thread count, and read back with stock tools. */
static off_t compress_interleaved(const char *path, enum cb_compress type, int threads,
				  const unsigned char *data, size_t len, uint64_t *copied)
{
	struct cb_codec_params p = { .type = type, .policy = CB_POLICY_AUTO, .threads = threads };
	static const size_t seg[] = { 2500000, 1300000, 700000, 3100000, 1048576, 900000 };
	struct cb_codec_stats st;
	struct coding c;
	struct cb_codec_writer *w;
	off_t size;

	coding_start(&c, path, &p);
	w = c.w;
	for (size_t pos = 0, i = 0; pos < len; i++) {
		size_t k = seg[i % 6] < len - pos ? seg[i % 6] : len - pos;

		cb_codec_begin_file(w);
		if (i % 2)
			assert_int_equal(cb_codec_hint(w, CB_DATA_COMPRESSED, k), 0);
		for (size_t off = 0; off < k;) {   /* in tar-like 10 KiB writes */
			size_t n = k - off < 10240 ? k - off : 10240;
			assert_int_equal(cb_codec_write(w, data + pos + off, n), 0);
			off += n;
		}
		pos += k;
	}
	assert_int_equal(cb_codec_finish(w), 0);
	if (copied)
		*copied = w->chunk_copied;
	size = coding_end(&c, path, &st);
	assert_true(st.bytes_stored_magic >= 1300000 + 3100000);
	return size;
}

static void test_threads_deterministic_interleaved(void **state)
{
	struct fixture *f = *state;
	enum cb_compress types[] = { CB_COMPRESS_LZO, CB_COMPRESS_GZIP, CB_COMPRESS_ZSTD };
	int threads[] = { 1, 2, 3, 8 };
	char *ref = path_in(f, "inter.ref"), *comp = path_in(f, "inter");
	size_t len = 4 * DATA_LEN;
	unsigned char *data = cb_xmalloc(len);

	for (size_t i = 0; i < 4; i++)   /* text and random runs, four times */
		memcpy(data + i * DATA_LEN, f->data, DATA_LEN);
	for (size_t t = 0; t < 3; t++) {
		for (size_t i = 0; i < 4; i++) {
			compress_interleaved(i ? comp : ref, types[t], threads[i], data, len, NULL);
			if (i)
				assert_int_equal(run("cmp -s '%s' '%s'", ref, comp), 0);
		}
		check_back(f, ref, types[t], data, len);
	}
	free(data);
	free(ref);
	free(comp);
}

/* zstd gathers each segment in the input buffer of the pool job that
 * compresses it: its frames (stored runs among compressed ones) are taken
 * in place, no byte copied from a segment buffer into a job, so the
 * segment costs no buffer of its own. */
static void test_zstd_segments_handed_over(void **state)
{
	struct fixture *f = *state;
	char *comp = path_in(f, "handed");
	size_t len = 4 * DATA_LEN;
	unsigned char *data = cb_xmalloc(len);

	for (size_t i = 0; i < 4; i++)
		memcpy(data + i * DATA_LEN, f->data, DATA_LEN);
	for (int threads = 1; threads <= 3; threads++) {
		uint64_t copied = 1;

		compress_interleaved(comp, CB_COMPRESS_ZSTD, threads, data, len, &copied);
		assert_int_equal(copied, 0);
		check_back(f, comp, CB_COMPRESS_ZSTD, data, len);
	}
	free(data);
	free(comp);
}

/* What a pool's jobs were given: their distinct input and output buffers. */
struct pool_seen {
	const unsigned char *in[8], *out[8];
	size_t n_in, n_out;
};

static void seen_add(const unsigned char **v, size_t *n, const unsigned char *p)
{
	for (size_t i = 0; i < *n; i++)
		if (v[i] == p)
			return;
	assert_true(*n < 8);
	v[(*n)++] = p;
}

static int seen_run(void *ctx, struct cb_pool_job *j, void *scratch)
{
	(void)ctx, (void)scratch;
	j->out[0] = j->in[0];
	j->out_len = 1;
	return 0;
}

static int seen_emit(void *ctx, struct cb_pool_job *j)
{
	struct pool_seen *seen = ctx;

	assert_int_equal(j->out[0], j->in[0]);
	seen_add(seen->in, &seen->n_in, j->in);
	seen_add(seen->out, &seen->n_out, j->out);
	return 0;
}

static void *seen_scratch_new(void *ctx)
{
	return ctx;
}

static void seen_scratch_free(void *scratch)
{
	(void)scratch;
}

/* The parallel reader's ring: ~64 MiB of decoded units (16 of 4 MiB, the
 * cap for 1 MiB store units), never fewer than 2 a worker. */
static void test_par_ring_depth(void **state)
{
	const uint64_t mib = 1 << 20;

	(void)state;
	assert_int_equal(cb_codec_par_depth(2, 155, 155 * 4 * mib), 16);
	assert_int_equal(cb_codec_par_depth(2, 1000, 1000 * mib), 64);
	assert_int_equal(cb_codec_par_depth(8, 10, 10 * 80 * mib), 16);
	assert_int_equal(cb_codec_par_depth(2, 3, 3 * 64 * mib), 4);
	assert_int_equal(cb_codec_par_depth(2, 0, 0), 64);
}

/* The job being filled holds no output buffer: a pool has one fewer of
 * them than jobs, and every job's output is its own while it is out. */
static void test_pool_outputs_fewer_than_jobs(void **state)
{
	static const struct cb_pool_ops ops = { .run = seen_run, .emit = seen_emit,
						.scratch_new = seen_scratch_new,
						.scratch_free = seen_scratch_free };

	(void)state;
	for (int threads = 1; threads <= 3; threads++) {
		struct pool_seen seen = { 0 };
		struct cb_pool *p = cb_pool_new(threads, 4096, 0, &ops, &seen);
		size_t jobs = threads == 1 ? 1 : (size_t)threads + 2;

		for (int i = 0; i < 300; i++) {
			struct cb_pool_job *j = cb_pool_acquire(p);

			assert_non_null(j);
			j->in[0] = (unsigned char)i;
			j->m.len = 1;
			j->m.cls = CB_CHUNK_COMPRESS;
			assert_int_equal(cb_pool_submit(p), 0);
		}
		assert_int_equal(cb_pool_drain(p), 0);
		cb_pool_free(p);
		assert_int_equal(seen.n_in, jobs);
		assert_true(seen.n_out <= (jobs > 1 ? jobs - 1 : 1));
	}
}

/* Parallel gzip stays within a whisker of a single deflate stream. */
static void test_gzip_parallel_ratio(void **state)
{
	struct fixture *f = *state;
	char *comp = path_in(f, "ratio");
	off_t classic = compress_to(comp, CB_COMPRESS_GZIP, 0, f->data, DATA_LEN);
	off_t par = compress_to(comp, CB_COMPRESS_GZIP, 2, f->data, DATA_LEN);

	assert_true(par <= classic + classic / 100);
	check_back(f, comp, CB_COMPRESS_GZIP, f->data, DATA_LEN);
	free(comp);
}

static void test_summary(void **state)
{
	struct cb_codec_stats st = { .bytes_stored = 3 << 20, .bytes_stored_magic = 2 << 20,
				     .bytes_stored_trial = 1 << 20, .files_stored = 7,
				     .files_stored_magic = 5 };
	char buf[256];

	(void)state;
	cb_codec_stats_summary(&st, buf, sizeof(buf));
	assert_non_null(strstr(buf, "in 7 files"));
	assert_non_null(strstr(buf, "in 5 files"));
}

/* cb_crc32 (ISA-L) gives zlib's crc32() values, for every length and
 * alignment (its folding loops have head and tail cases) and chained. */
static void test_crc32_as_zlib(void **state)
{
	unsigned char *buf = cb_xmalloc(70000);
	unsigned seed = 7;

	(void)state;
	for (size_t i = 0; i < 70000; i++)
		buf[i] = xorshift(&seed) & 0xff;
	for (size_t off = 0; off < 16; off += 3)
		for (size_t len = 0; len < 600; len++)
			assert_int_equal(cb_crc32(0, buf + off, len), (uint32_t)crc32(0, buf + off, len));
	for (size_t len = 600; len + 16 < 70000; len = len * 3 + 1)
		assert_int_equal(cb_crc32(0, buf + 5, len), (uint32_t)crc32(0, buf + 5, len));
	/* chained: the CRC of a whole = the CRC of its parts, fed in order */
	assert_int_equal(cb_crc32(cb_crc32(0, buf, 12345), buf + 12345, 70000 - 12345),
			 (uint32_t)crc32(0, buf, 70000));
	assert_int_equal(cb_crc32(0x12345678, buf, 0), 0x12345678);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_zstd, setup, teardown),
		cmocka_unit_test_setup_teardown(test_zstd_1thread, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lzo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gzip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_none, setup, teardown),
		cmocka_unit_test(test_detect),
		cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_garbage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gzip_members, setup, teardown),
		cmocka_unit_test_setup_teardown(test_random_stored, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hint_stores, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trial_gain_by_codec, setup, teardown),
		cmocka_unit_test_setup_teardown(test_in_place_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_error_named, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threads_deterministic, setup, teardown),
		cmocka_unit_test_setup_teardown(test_threads_deterministic_interleaved, setup, teardown),
		cmocka_unit_test_setup_teardown(test_zstd_segments_handed_over, setup, teardown),
		cmocka_unit_test(test_pool_outputs_fewer_than_jobs),
		cmocka_unit_test(test_par_ring_depth),
		cmocka_unit_test_setup_teardown(test_gzip_parallel_ratio, setup, teardown),
		cmocka_unit_test(test_summary),
		cmocka_unit_test(test_crc32_as_zlib),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
