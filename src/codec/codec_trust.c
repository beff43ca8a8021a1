/*
 * Trust (include/cb_codec.h): the tokened pieces of the segment being
 * gathered, its trust key, and the deferred pieces read when the segment
 * is not copied on trust after all (its bytes are then keyed as always).
 *
 * A deferred piece uses the archive writer's own fd of the file (a dup of
 * each cost two system calls a file): the writer lends it while it writes
 * the file and hands it over when done (seg_trust_keep_fd), and a segment
 * that ends closes only the fds handed over; one still lent (a file whose
 * data goes on into the next segment) stays the writer's. At most MAX_FDS
 * files a segment are deferred, and at most a quarter of the open files
 * the process may have (a cron job's limit may be low): more are read at
 * once (widened, never dropped).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "cb_codec.h"
#include "cb_util.h"
#include "codec_int.h"

#define MAX_FDS 256

void seg_trust_init(struct seg_trust *t)
{
	struct rlimit r;

	t->max_fds = MAX_FDS;
	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY &&
	    r.rlim_cur / 4 < MAX_FDS)
		t->max_fds = (size_t)(r.rlim_cur / 4);
}

/* The same file as the last deferred piece (the token names the inode)
 * shares its fd. */
static int defer_fd(struct seg_trust *t, int fd, const unsigned char *tok)
{
	if (t->n_fds > 0 && !memcmp(t->last_tok, tok, CB_TOKEN_LEN))
		return (int)t->n_fds - 1;
	if (t->n_fds >= t->max_fds)
		return -1;
	if (!t->fds) {
		t->fds = cb_xcalloc(MAX_FDS, sizeof(*t->fds));
		t->owned = cb_xcalloc(MAX_FDS, sizeof(*t->owned));
	}
	t->owned[t->n_fds] = 0;
	t->fds[t->n_fds++] = fd;
	memcpy(t->last_tok, tok, CB_TOKEN_LEN);
	return (int)t->n_fds - 1;
}

/* The file being written is always the last one deferred: pieces come in
 * the tar's order. */
int seg_trust_keep_fd(struct seg_trust *t, int fd)
{
	if (t->n_fds == 0 || t->fds[t->n_fds - 1] != fd || t->owned[t->n_fds - 1])
		return 0;
	t->owned[t->n_fds - 1] = 1;
	return 1;
}

int seg_trust_piece(struct seg_trust *t, uint64_t at, const unsigned char *tok, int fd,
		    uint64_t off, uint64_t n)
{
	struct seg_piece *p;

	if (!t->on || n == 0)
		return 0;
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 64;
		t->p = cb_xrealloc(t->p, t->cap * sizeof(*t->p));
	}
	p = &t->p[t->n++];
	p->at = at;
	p->n = n;
	p->off = off;
	memcpy(p->tok, tok, CB_TOKEN_LEN);
	p->fdi = t->fn && fd >= 0 ? defer_fd(t, fd, tok) : -1;
	if (p->fdi < 0)
		return 0;
	t->deferred += n;
	return 1;
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* Bytes between pieces as 'B' length bytes, a piece as 'T' token offset
 * length: a piece given by token never keys like the same bytes read. */
void seg_trust_key(const struct seg_trust *t, const unsigned char *settings, size_t settings_len,
		   const unsigned char *evd, const unsigned char *buf, uint64_t len,
		   unsigned char *tkey)
{
	EVP_MD_CTX *k = EVP_MD_CTX_new();
	unsigned char r[1 + CB_TOKEN_LEN + 16];
	uint64_t pos = 0;

	if (!k || EVP_DigestInit_ex(k, EVP_sha256(), NULL) != 1)
		abort();
	EVP_DigestUpdate(k, "cbtrust1", 8);
	EVP_DigestUpdate(k, settings, settings_len);
	EVP_DigestUpdate(k, evd, CB_SEG_KEY);
	for (size_t i = 0; i <= t->n; i++) {
		uint64_t end = i < t->n ? t->p[i].at : len;

		r[0] = 'B';
		put64(r + 1, end - pos);
		EVP_DigestUpdate(k, r, 9);
		EVP_DigestUpdate(k, buf + pos, (size_t)(end - pos));
		if (i == t->n)
			break;
		r[0] = 'T';
		memcpy(r + 1, t->p[i].tok, CB_TOKEN_LEN);
		put64(r + 1 + CB_TOKEN_LEN, t->p[i].off);
		put64(r + 9 + CB_TOKEN_LEN, t->p[i].n);
		EVP_DigestUpdate(k, r, sizeof(r));
		pos = end + t->p[i].n;
	}
	put64(r, len);
	EVP_DigestUpdate(k, r, 8);
	EVP_DigestFinal_ex(k, tkey, NULL);
	EVP_MD_CTX_free(k);
}

/* The error for a deferred read of fd that failed (r < 0) or came short. */
static int fill_error(int fd, ssize_t r)
{
	char link[64], path[4096];
	int e = errno;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	path[n > 0 ? n : 0] = '\0';
	errno = e;
	return r < 0 ? cb_error_errno("cannot read staged file '%s'", path)
		     : cb_error("staged file '%s' shrank while being archived", path);
}

/* The deferred pieces, read into their places: 0, or -1 (error set). A
 * staged file only cbackup writes cannot shrink under it: a short read is
 * an error, not zeros. */
int seg_trust_fill(struct seg_trust *t, unsigned char *buf)
{
	for (size_t i = 0; i < t->n; i++) {
		const struct seg_piece *p = &t->p[i];
		uint64_t done = 0;

		while (p->fdi >= 0 && done < p->n) {
			ssize_t r = pread(t->fds[p->fdi], buf + p->at + done, (size_t)(p->n - done),
					  (off_t)(p->off + done));

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return fill_error(t->fds[p->fdi], r);
			done += (uint64_t)r;
		}
	}
	t->deferred = 0;
	return 0;
}

void seg_trust_record(struct seg_trust *t, const unsigned char *tkey, const unsigned char *key,
		      uint64_t len)
{
	struct cb_codec_trust *r;

	if (t->n_rec == t->cap_rec) {
		t->cap_rec = t->cap_rec ? 2 * t->cap_rec : 256;
		t->rec = cb_xrealloc(t->rec, t->cap_rec * sizeof(*t->rec));
	}
	r = &t->rec[t->n_rec++];
	memcpy(r->tkey, tkey, CB_SEG_KEY);
	memcpy(r->key, key, CB_SEG_KEY);
	r->u_len = len;
}

void seg_trust_reset(struct seg_trust *t)
{
	for (size_t i = 0; i < t->n_fds; i++)
		if (t->owned[i])
			close(t->fds[i]);
	t->n_fds = 0;
	t->n = 0;
	t->deferred = 0;
}

void seg_trust_free(struct seg_trust *t)
{
	seg_trust_reset(t);
	free(t->fds);
	free(t->owned);
	free(t->p);
	free(t->rec);
}
