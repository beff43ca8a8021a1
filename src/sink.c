/*
 * cb_sink: the storage writer. See include/cb_sink.h.
 * A storage file is written as FINAL.tmp and renamed only after fsync, so a
 * crash or error never leaves a partial archive under the final name.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "cb_cleanup.h"
#include "cb_sink.h"
#include "cb_throttle.h"
#include "cb_util.h"

struct cb_sink {
	int fd;
	int owns_fd;
	char *final_path;       /* NULL for an fd sink */
	char *tmp_path;
	char *name;             /* for messages */
	int prepared;
	int committed;
	int cleanup_handle;
	uint64_t bytes;
	double write_seconds;
	EVP_MD_CTX *sha;
	char sha_hex[65];
	struct cb_throttle throttle;
};

/* Cleanup-stack action: async-signal-safe removal of the .tmp file. */
static void unlink_tmp(void *arg)
{
	struct cb_sink *s = arg;
	unlink(s->tmp_path);
}

static struct cb_sink *sink_alloc(const char *name)
{
	struct cb_sink *s = cb_xcalloc(1, sizeof(*s));

	s->fd = -1;
	s->cleanup_handle = -1;
	s->name = cb_xstrdup(name);
	cb_throttle_init(&s->throttle, 0);
	s->sha = EVP_MD_CTX_new();
	if (!s->sha || EVP_DigestInit_ex(s->sha, EVP_sha256(), NULL) != 1) {
		fprintf(stderr, "ERROR: cannot initialise SHA-256\n");
		abort();
	}
	return s;
}

int cb_sink_open_file(struct cb_sink **out, const char *final_path)
{
	struct cb_sink *s = sink_alloc(final_path);

	s->final_path = cb_xstrdup(final_path);
	s->tmp_path = cb_xasprintf("%s.tmp", final_path);
	s->fd = open(s->tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (s->fd < 0) {
		cb_error_errno("cannot create '%s'", s->tmp_path);
		cb_sink_free(s);
		return -1;
	}
	s->owns_fd = 1;
	s->cleanup_handle = cb_cleanup_push(unlink_tmp, s);
	*out = s;
	return 0;
}

int cb_sink_open_fd(struct cb_sink **out, int fd, const char *name)
{
	struct cb_sink *s = sink_alloc(name);

	s->fd = fd;
	*out = s;
	return 0;
}

int cb_sink_write(struct cb_sink *s, const void *buf, size_t len)
{
	double t0;

	/* a signal may have removed the .tmp already: stop with its name */
	if (cb_check_interrupt() < 0)
		return -1;
	cb_throttle_account(&s->throttle, len);
	t0 = cb_now();
	if (cb_write_all(s->fd, buf, len) < 0)
		return cb_error_errno("cannot write '%s'", s->tmp_path ? s->tmp_path : s->name);
	s->write_seconds += cb_now() - t0;
	s->bytes += len;
	EVP_DigestUpdate(s->sha, buf, len);
	return 0;
}

static void finish_digest(struct cb_sink *s)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	EVP_DigestFinal_ex(s->sha, md, &n);
	for (unsigned int i = 0; i < n && i < 32; i++)
		snprintf(s->sha_hex + 2 * i, 3, "%02x", md[i]);
}

static int fsync_dir_of(const char *path)
{
	char *copy = cb_xstrdup(path);
	int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ret = 0;

	if (fd < 0 || fsync(fd) < 0)
		ret = cb_error_errno("cannot sync directory of '%s'", path);
	if (fd >= 0)
		close(fd);
	free(copy);
	return ret;
}

int cb_sink_prepare(struct cb_sink *s)
{
	if (s->prepared)
		return 0;
	if (cb_check_interrupt() < 0)
		return -1;
	finish_digest(s);
	s->prepared = 1;
	if (!s->final_path)
		return 0;
	if (fsync(s->fd) < 0)
		return cb_error_errno("cannot sync '%s'", s->tmp_path);
	if (close(s->fd) < 0) {
		s->fd = -1;
		return cb_error_errno("cannot close '%s'", s->tmp_path);
	}
	s->fd = -1;
	return 0;
}

int cb_sink_commit(struct cb_sink *s)
{
	if (cb_sink_prepare(s) < 0 || cb_check_interrupt() < 0)
		return -1;
	if (!s->final_path) {
		s->committed = 1;
		return 0;
	}
	if (rename(s->tmp_path, s->final_path) < 0)
		return cb_error_errno("cannot rename '%s' to '%s'", s->tmp_path, s->final_path);
	s->committed = 1;
	cb_cleanup_pop(s->cleanup_handle, 0);
	s->cleanup_handle = -1;
	return fsync_dir_of(s->final_path);
}

void cb_sink_free(struct cb_sink *s)
{
	if (!s)
		return;
	if (s->owns_fd && s->fd >= 0)
		close(s->fd);
	if (s->tmp_path && !s->committed)
		unlink(s->tmp_path);
	cb_cleanup_pop(s->cleanup_handle, 0);
	EVP_MD_CTX_free(s->sha);
	free(s->final_path);
	free(s->tmp_path);
	free(s->name);
	free(s);
}

void cb_sink_set_bwlimit(struct cb_sink *s, long kib_per_s)
{
	cb_throttle_init(&s->throttle, kib_per_s);
}

uint64_t cb_sink_bytes(const struct cb_sink *s)
{
	return s->bytes;
}

const char *cb_sink_sha256(const struct cb_sink *s)
{
	return s->sha_hex;
}

double cb_sink_write_seconds(const struct cb_sink *s)
{
	return s->write_seconds;
}
