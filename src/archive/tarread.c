/* cb_tarread: tar reader over the codec reader. See include/cb_tarread.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>

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
	int pipe_open = 1;

	EVP_DigestInit_ex(sha, EVP_sha256(), NULL);
	while ((n = read(t->file_fd, buf, READ_BUF)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			t->tee_error = errno;
			break;
		}
		EVP_DigestUpdate(sha, buf, (size_t)n);
		/* the reader may stop early (corrupt data): keep hashing anyway */
		if (pipe_open && cb_write_all(ta->out, buf, (size_t)n) < 0)
			pipe_open = 0;
	}
	close(ta->out);
	EVP_DigestFinal_ex(sha, md, &n_md);
	for (unsigned int i = 0; i < n_md && i < 32; i++)
		snprintf(t->sha256 + 2 * i, 3, "%02x", md[i]);
	EVP_MD_CTX_free(sha);
	free(buf);
	free(ta);
	return NULL;
}

static int start_tee(struct cb_tarread *t)
{
	struct tee_args *ta;
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		return cb_error_errno("cannot create pipe");
	ta = cb_xmalloc(sizeof(*ta));
	ta->t = t;
	ta->out = p[1];
	if (cb_thread_start(&t->tee, tee_main, ta) < 0) {
		close(p[0]);
		close(p[1]);
		free(ta);
		return cb_error("cannot start the checksum thread");
	}
	t->tee_started = 1;
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
	ssize_t n = cb_codec_read(t->reader, t->buf, READ_BUF);

	if (n > 0)
		account(t, t->buf, (size_t)n);
	if (n < 0) {
		t->codec_failed = 1;
		archive_set_error(a, EIO, "%s", cb_last_error());
		return -1;
	}
	*buf = t->buf;
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

static int tarread_open(struct cb_tarread *t, const char *path, int want_sha256,
			const struct cb_tarread_at *at)
{
	memset(t, 0, sizeof(*t));
	t->fd = t->file_fd = -1;
	t->want_sha256 = want_sha256;
	t->file_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (t->file_fd < 0)
		return cb_error_errno("cannot open '%s'", path);
	posix_fadvise(t->file_fd, 0, 0, at ? POSIX_FADV_RANDOM : POSIX_FADV_SEQUENTIAL);
	if (want_sha256 ? start_tee(t) < 0 : (t->fd = t->file_fd, 0))
		return -1;
	t->buf = cb_xmalloc(READ_BUF);
	if (cb_codec_reader_new(&t->reader, t->fd) < 0)
		return cb_error_prefix("'%s'", path);
	if (at && (cb_codec_reader_seek(t->reader, at->c_off, at->u_off) < 0 ||
		   discard(t, at->skip) < 0))
		return cb_error_prefix("'%s'", path);
	t->a = archive_read_new();
	if (!t->a)
		return cb_error("cannot initialise libarchive");
	if (archive_read_support_format_tar(t->a) != ARCHIVE_OK ||
	    archive_read_open(t->a, t, NULL, read_cb, NULL) != ARCHIVE_OK)
		return cb_tarread_error(t, path);
	return 0;
}

int cb_tarread_open(struct cb_tarread *t, const char *path, int want_sha256)
{
	return tarread_open(t, path, want_sha256, NULL);
}

int cb_tarread_open_at(struct cb_tarread *t, const char *path, const struct cb_tarread_at *at)
{
	return tarread_open(t, path, 0, at);
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
}
