/* cb_tarread: tar reader over the codec reader. See include/cb_tarread.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>

#include <strings.h>
#include <sys/stat.h>

#include "cb_index.h"
#include "cb_opts.h"
#include "cb_tarread.h"
#include "cb_util.h"

#define READ_BUF (1024 * 1024)

struct tee_args {
	struct cb_tarread *t;
	int out;
};

/* Thread: file -> SHA-256 -> pipe. Closing the pipe ends the stream. */
static void *tee_main(void *arg)
{
	struct tee_args *ta = arg;
	struct cb_tarread *t = ta->t;
	unsigned char *buf = cb_xmalloc(READ_BUF), md[EVP_MAX_MD_SIZE];
	EVP_MD_CTX *sha = EVP_MD_CTX_new();
	unsigned int n_md = 0;
	ssize_t n;
	off_t off = 0;
	int pipe_open = ta->out >= 0;

	EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
	/* pread: a parallel reader reads the same fd (ta->out -1: no pipe) */
	while ((n = pread(t->file_fd, buf, READ_BUF, off)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			t->tee_error = errno;
			break;
		}
		off += n;
		EVP_DigestUpdate(sha, buf, (size_t)n);
		/* the reader may stop early (corrupt data): keep hashing anyway */
		if (pipe_open && cb_write_all(ta->out, buf, (size_t)n) < 0)
			pipe_open = 0;
	}
	if (ta->out >= 0)
		close(ta->out);
	EVP_DigestFinal_ex(sha, md, &n_md);
	for (unsigned int i = 0; i < n_md && i < 32; i++)
		snprintf(t->sha256 + 2 * i, 3, "%02x", md[i]);
	EVP_MD_CTX_free(sha);
	free(buf);
	free(ta);
	return NULL;
}

/* The tee; with pipe, the codec reads the file through it (t->fd). */
static int start_tee(struct cb_tarread *t, int pipe)
{
	struct tee_args *ta;
	int p[2] = { -1, -1 };

	if (pipe && pipe2(p, O_CLOEXEC) < 0)
		return cb_error_errno("cannot create pipe");
	ta = cb_xmalloc(sizeof(*ta));
	ta->t = t;
	ta->out = p[1];
	if (cb_thread_start(&t->tee, tee_main, ta) < 0) {
		if (pipe) {
			close(p[0]);
			close(p[1]);
		}
		free(ta);
		return cb_error("cannot start the checksum thread");
	}
	t->tee_started = 1;
	if (pipe)
		t->fd = p[0];
	return 0;
}

/* Where the data ends: tar's end-of-archive and padding are zeros. */
static void account(struct cb_tarread *t, const unsigned char *buf, size_t n)
{
	size_t i = n;

	while (i > 0 && buf[i - 1] == 0)
		i--;
	if (i > 0)
		t->data_end = t->total + i;
	t->total += n;
}

static la_ssize_t read_cb(struct archive *a, void *cd, const void **buf)
{
	struct cb_tarread *t = cd;
	size_t want = t->limit && t->limit - t->total < READ_BUF ? (size_t)(t->limit - t->total)
								 : READ_BUF;
	const void *data = t->buf;
	ssize_t n = want ? cb_codec_read_view(t->reader, t->buf, want, &data) : 0;

	if (n > 0) {
		account(t, data, (size_t)n);
		cb_progress_update(t->progress, t->progress_base + t->total);
	}
	if (n < 0) {
		t->codec_failed = 1;
		archive_set_error(a, EIO, "%s", cb_last_error());
		return -1;
	}
	*buf = data;
	return n;
}

/* Decode and drop n bytes (from a unit's start to a member's header). */
static int discard(struct cb_tarread *t, uint64_t n)
{
	while (n > 0) {
		ssize_t k = cb_codec_read(t->reader, t->buf, n < READ_BUF ? (size_t)n : READ_BUF);

		if (k < 0)
			return -1;
		if (k == 0)
			return cb_error("archive ends before the offset its catalog gives");
		n -= (uint64_t)k;
	}
	return 0;
}

/* Our own copy of the units to check (the reader keeps a pointer). */
static void keep_units(struct cb_tarread *t, const struct cb_codec_units *u)
{
	if (!u || u->n == 0)
		return;
	t->units.v = cb_xmalloc(u->n * sizeof(*u->v));
	memcpy(t->units.v, u->v, u->n * sizeof(*u->v));
	t->units.n = t->units.cap = u->n;
	t->units.total = u->total;
}

/* A zstd archive read whole from its start: decoded on several threads
 * by the catalog's units (their CRC-32s checked), else by the seek
 * table's. 0 so, 1 not (the reader closed: read it the usual way), -1
 * on error. */
static int open_parallel(struct cb_tarread *t, uint64_t size)
{
	struct cb_codec_units seek = { 0 };
	struct cb_codec_par par = { &t->units, t->units.total, size, 1, 0, 0 };
	int rc = 1;

	if (cb_codec_reader_new(&t->reader, t->file_fd) < 0)
		return cb_error_prefix("'%s'", t->path);
	if (cb_codec_reader_type(t->reader) == CB_COMPRESS_ZSTD && !t->units.n &&
	    cb_zstd_read_seek_table(t->file_fd, size, &seek) == 0)
		par = (struct cb_codec_par){ &seek, seek.total, size, 0, 0, 0 };
	if (par.units->n)
		rc = cb_codec_reader_parallel(t->reader, &par);
	cb_codec_units_release(&seek);
	if (rc < 0)
		return cb_error_prefix("'%s'", t->path);
	if (rc > 0) {
		cb_codec_reader_free(t->reader);
		t->reader = NULL;
		if (lseek(t->file_fd, 0, SEEK_SET) < 0)
			return cb_error_errno("cannot seek in '%s'", t->path);
	}
	return rc;
}

/* The tar reader over the codec's bytes. */
static int open_tar(struct cb_tarread *t, const char *what)
{
	t->a = archive_read_new();
	if (!t->a)
		return cb_error("cannot initialise libarchive");
	if (archive_read_support_format_tar(t->a) != ARCHIVE_OK ||
	    archive_read_open(t->a, t, NULL, read_cb, NULL) != ARCHIVE_OK)
		return cb_tarread_error(t, what);
	return 0;
}

static int tarread_open(struct cb_tarread *t, const char *path, int want_sha256,
			const struct cb_tarread_at *at, const struct cb_codec_units *units)
{
	struct stat st;
	int par = 1;

	memset(t, 0, sizeof(*t));
	t->path = path;
	t->fd = t->file_fd = -1;
	t->want_sha256 = want_sha256;
	t->file_fd = cb_open_regular_given(path, "", &st);
	if (t->file_fd < 0)
		return -1;
	posix_fadvise(t->file_fd, 0, 0, at ? POSIX_FADV_RANDOM : POSIX_FADV_SEQUENTIAL);
	t->buf = cb_xmalloc(READ_BUF);
	keep_units(t, at ? at->units : units);
	if (!at) {
		if ((par = open_parallel(t, (uint64_t)st.st_size)) < 0)
			return -1;
		if (par == 0 && want_sha256 && start_tee(t, 0) < 0)
			return -1;
	}
	if (par != 0) {
		if (want_sha256 ? start_tee(t, 1) < 0 : (t->fd = t->file_fd, 0))
			return -1;
		if (cb_codec_reader_new(&t->reader, t->fd) < 0)
			return cb_error_prefix("'%s'", path);
	}
	cb_codec_reader_check_units(t->reader, &t->units, (uint64_t)st.st_size);
	if (at && (cb_codec_reader_seek(t->reader, at->c_off, at->u_off) < 0 ||
		   discard(t, at->skip) < 0))
		return cb_error_prefix("'%s'", path);
	t->limit = at ? at->limit : 0;
	return open_tar(t, path);
}

int cb_tarread_open(struct cb_tarread *t, const char *path, int want_sha256)
{
	return tarread_open(t, path, want_sha256, NULL, NULL);
}

int cb_tarread_open_at(struct cb_tarread *t, const char *path, const struct cb_tarread_at *at)
{
	return tarread_open(t, path, 0, at, NULL);
}

/* A stream's reader: zstd with the catalog's units decoded on several
 * threads (the units read from the stream in turn), any other sequential. */
static int open_stream_reader(struct cb_tarread *t, uint64_t size)
{
	struct cb_codec_par par = { &t->units, t->units.total, size, 1, 0, 1 };
	int rc = 0;

	if (cb_codec_reader_new(&t->reader, t->fd) < 0)
		return -1;
	if (cb_codec_reader_type(t->reader) == CB_COMPRESS_ZSTD && t->units.n)
		rc = cb_codec_reader_parallel(t->reader, &par);
	return rc < 0 ? -1 : 0;
}

int cb_tarread_open_stream(struct cb_tarread *t, int fd, const char *label, uint64_t size,
			   const struct cb_codec_units *units)
{
	memset(t, 0, sizeof(*t));
	t->path = label;
	t->fd = t->file_fd = fd;
	t->buf = cb_xmalloc(READ_BUF);
	keep_units(t, units);
	if (open_stream_reader(t, size) < 0)
		return cb_error_prefix("'%s'", label);
	cb_codec_reader_check_units(t->reader, &t->units, size);
	return open_tar(t, label);
}

int cb_tarread_expected_sha256(const char *archive, char hex[65])
{
	char *path = cb_xasprintf("%s.sha256", archive);
	int fd = cb_open_regular(path, 0, "checksum file", NULL);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
	int ret = 1;

	hex[0] = '\0';
	if (f) {
		ret = fscanf(f, "%64[0-9a-fA-F]", hex) == 1 && strlen(hex) == 64 ? 0
		      : cb_error("checksum file '%s' is not in sha256sum format", path);
		fclose(f);
	} else if (fd >= 0) {
		close(fd);
		ret = cb_error_errno("cannot read '%s'", path);
	} else if (errno != ENOENT) {
		ret = -1;
	}
	free(path);
	return ret;
}

/* The units of ARCHIVE.idx with their digests, if it is there and sound
 * (a catalog that is not: the codecs' own checks remain). With bind, the
 * catalog against the line ARCHIVE.sha256 gives it: 1 the same, 0 the
 * .sha256 names no catalog (or none is usable), -1 another (error set). */
static int catalog_units(const char *archive, struct cb_codec_units *u, int bind,
			 enum cb_compress *codec)
{
	char *path = cb_xasprintf("%s.idx", archive), want[65];
	struct stat st;
	struct cb_idx x;
	int bound = 0;

	memset(u, 0, sizeof(*u));
	if (stat(archive, &st) == 0 && access(path, F_OK) == 0 &&
	    cb_idx_open(&x, path, (uint64_t)st.st_size) == 0) {
		if (cb_idx_check_digest(&x) == 0) {
			cb_idx_units(&x, u);
			u->total = x.tar_size;
			*codec = x.codec;
			/* a plain tar's units are not checked as it is read */
			if (bind && x.codec != CB_COMPRESS_NONE && u->n &&
			    cb_idx_expected_sha256(archive, want) == 0)
				bound = cb_idx_check_sha256(&x, want, archive) == 0 ? 1 : -1;
		}
		cb_idx_close(&x);
	}
	free(path);
	return bound;
}

int cb_tarread_open_checked(struct cb_tarread *t, const char *path, enum cb_tarread_sum sum)
{
	char hex[65] = "";
	struct cb_codec_units u;
	int have = sum == CB_SUM_NONE ? 1 : cb_tarread_expected_sha256(path, hex);
	enum cb_compress codec = CB_COMPRESS_NONE;
	int bound = 0, ret = -1;

	memset(t, 0, sizeof(*t));
	t->fd = t->file_fd = -1;
	if (have < 0)
		return -1;
	bound = catalog_units(path, &u, sum == CB_SUM_CATALOG && have == 0, &codec);
	/* the catalog bound by the .sha256 checks every unit of the file
	 * before any of its bytes is used: no second pass to hash it whole */
	if (bound == 1)
		have = 1;
	if (bound >= 0)
		ret = tarread_open(t, path, have == 0, NULL, &u);
	/* ... when the file is what the catalog says it is */
	if (ret == 0 && bound == 1 && cb_codec_reader_type(t->reader) != codec)
		ret = cb_error("'%s': the catalog does not match the archive (a %s archive, it says %s)",
			       path, cb_compress_name(cb_codec_reader_type(t->reader)),
			       cb_compress_name(codec));
	cb_codec_units_release(&u);
	snprintf(t->expect_sha256, sizeof(t->expect_sha256), "%s", have == 0 ? hex : "");
	return ret;
}

int cb_tarread_end(struct cb_tarread *t)
{
	if (cb_tarread_finish_stream(t) < 0)
		return -1;
	if (!t->expect_sha256[0])
		return 0;
	if (cb_tarread_finish_sha256(t) < 0)
		return -1;
	if (strcasecmp(t->expect_sha256, t->sha256))
		return cb_error("checksum mismatch: '%s.sha256' says %s, the archive has %s", t->path,
				t->expect_sha256, t->sha256);
	return 0;
}

int cb_tarread_error(struct cb_tarread *t, const char *what)
{
	if (t->codec_failed)
		return cb_error_prefix("%s", what);
	return cb_error("%s: %s", what, t->a ? archive_error_string(t->a) : "no archive");
}

#define TAR_BLOCK 512

int cb_tarread_finish_stream(struct cb_tarread *t)
{
	ssize_t n;

	while ((n = cb_codec_read(t->reader, t->buf, READ_BUF)) > 0)
		account(t, t->buf, (size_t)n);
	if (n < 0)
		return cb_error_prefix("after the last entry");
	if (t->total % TAR_BLOCK)
		return cb_error("the tar stream ends inside a block (%llu bytes: cut short or "
				"extended)", (unsigned long long)t->total);
	if (t->total - t->data_end < 2 * TAR_BLOCK)
		return cb_error("the tar stream lacks its end-of-archive blocks (cut short?)");
	return 0;
}

int cb_tarread_finish_sha256(struct cb_tarread *t)
{
	if (!t->tee_started)
		return cb_error("no checksum was computed");
	if (t->fd >= 0)
		close(t->fd);   /* unblocks the tee if the reader stopped early */
	t->fd = -1;
	pthread_join(t->tee, NULL);
	t->tee_started = 0;
	if (t->tee_error) {
		errno = t->tee_error;
		return cb_error_errno("cannot read archive");
	}
	return 0;
}

void cb_tarread_close(struct cb_tarread *t)
{
	if (t->a)
		archive_read_free(t->a);
	t->a = NULL;
	if (t->tee_started)
		cb_tarread_finish_sha256(t);
	cb_codec_reader_free(t->reader);
	t->reader = NULL;
	if (t->fd >= 0 && t->fd != t->file_fd)
		close(t->fd);
	if (t->file_fd >= 0)
		close(t->file_fd);
	t->fd = t->file_fd = -1;
	free(t->buf);
	t->buf = NULL;
	cb_codec_units_release(&t->units);
}
