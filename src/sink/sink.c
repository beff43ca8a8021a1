/*
 * cb_sink: the storage writer. See include/cb_sink.h.
 * A storage file is written as FINAL.tmp and renamed only after fsync, so a
 * crash or error never leaves a partial archive under the final name.
 *
 * One idea in 645 lines: the archive's way to its final name (the .tmp,
 * the write-behind buffer, the copies of reused units, the hasher, fsync
 * and rename) is one state machine over one struct.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>
#define OPENSSL_SUPPRESS_DEPRECATED   /* SHA256_CTX: its state is kept (sink_state.c) */
#include <openssl/sha.h>

#include "cb_cleanup.h"
#include "cb_private.h"
#include "cb_sink.h"
#include "cb_syncer.h"
#include "cb_throttle.h"
#include "cb_util.h"
#include "sink_int.h"

/*
 * Write-behind slots: bytes are gathered into SLOT_SIZE buffers; a full slot
 * is handed to the hasher thread and written by the caller at the same time,
 * so SHA-256 (about as slow as a page-cache copy, even with SHA-NI) runs on
 * the other core instead of adding to every write. A slot is filled again
 * only once the hasher is done with it. Without the thread, slots are hashed
 * inline (same digest). A slot marked (a segment ends with it) has the
 * state after it kept (cb_sink_states).
 */
#define SLOT_SIZE (1024 * 1024)
#define NSLOTS 4

struct hasher {
	pthread_t th;
	int running;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t posted;        /* slots handed over (sequence numbers) */
	uint64_t hashed;        /* slots done */
	int quit;
};

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
	SHA256_CTX sha;
	char sha_hex[65];
	uint64_t hash_off;      /* bytes in sha: the hasher's while it runs */
	struct cb_sink_state *states;   /* kept at marks: the hasher's while it runs */
	size_t n_states, cap_states;
	/* cb_sink_resume: the previous archive, its states; in_prefix while
	 * every byte so far was copied from it at its own offset */
	const struct cb_sink_state *prev;
	size_t n_prev;
	int prev_fd;
	int in_prefix;
	int rfd;                /* fd opened again for reading (copies are checked), or -1 */
	uint64_t copies_fixed;  /* copied ranges that had to be written again */
	uint64_t resumed;
	struct cb_throttle throttle;
	unsigned char *slot[NSLOTS];
	size_t slot_len[NSLOTS];
	unsigned char slot_mark[NSLOTS];   /* keep the state after this slot */
	uint64_t seq;           /* sequence number of the slot being filled */
	size_t fill;            /* bytes in it */
	int slot_ready;         /* the hasher has released it */
	int checksum;           /* compute the SHA-256 */
	struct hasher h;
	uint64_t written;       /* bytes handed to write(2) */
	struct cb_syncer *syncer;  /* storage files: made durable as written */
	cb_sink_split_fn *split;   /* a unit store's: takes the bytes instead of fd */
	void *split_ctx;
};

/* Room for one more kept state: the hasher's while it runs. */
static struct cb_sink_state *new_state(struct cb_sink *s)
{
	if (s->n_states == s->cap_states) {
		s->cap_states = s->cap_states ? 2 * s->cap_states : 64;
		s->states = cb_xrealloc(s->states, s->cap_states * sizeof(*s->states));
	}
	return &s->states[s->n_states++];
}

static void keep_state(struct cb_sink *s)
{
	if (s->n_states > 0 && s->states[s->n_states - 1].off == s->hash_off)
		return;
	sink_state_save(&s->sha, s->hash_off, new_state(s));
}

/* Slot i into the digest: on the hasher thread, or inline without one. */
static void hash_slot(struct cb_sink *s, size_t i)
{
	SHA256_Update(&s->sha, s->slot[i], s->slot_len[i]);
	s->hash_off += s->slot_len[i];
	if (s->slot_mark[i])
		keep_state(s);
	s->slot_mark[i] = 0;
}

static void *hasher_main(void *arg)
{
	struct cb_sink *s = arg;
	struct hasher *h = &s->h;

	pthread_mutex_lock(&h->mu);
	for (;;) {
		uint64_t n;

		while (h->hashed == h->posted && !h->quit)
			pthread_cond_wait(&h->cv, &h->mu);
		if (h->hashed == h->posted)
			break;
		n = h->hashed;
		pthread_mutex_unlock(&h->mu);
		hash_slot(s, n % NSLOTS);
		pthread_mutex_lock(&h->mu);
		h->hashed = n + 1;
		pthread_cond_broadcast(&h->cv);
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

static void hasher_start(struct cb_sink *s)
{
	pthread_mutex_init(&s->h.mu, NULL);
	pthread_cond_init(&s->h.cv, NULL);
	s->h.running = cb_thread_start(&s->h.th, hasher_main, s) == 0;
}

/* Wait until the hasher has finished every slot before sequence number
 * upto (all posted ones: upto = s->seq). */
static void hasher_wait(struct cb_sink *s, uint64_t upto)
{
	if (!s->h.running)
		return;
	pthread_mutex_lock(&s->h.mu);
	while (s->h.hashed < upto)
		pthread_cond_wait(&s->h.cv, &s->h.mu);
	pthread_mutex_unlock(&s->h.mu);
}

/* The slot being filled (s->seq), its length set, to the hasher. */
static void hasher_post(struct cb_sink *s)
{
	if (!s->checksum)
		return;
	if (s->seq == 0)
		hasher_start(s);
	if (!s->h.running) {
		hash_slot(s, s->seq % NSLOTS);
		return;
	}
	pthread_mutex_lock(&s->h.mu);
	s->h.posted = s->seq + 1;
	pthread_cond_broadcast(&s->h.cv);
	pthread_mutex_unlock(&s->h.mu);
}

static void hasher_stop(struct cb_sink *s)
{
	if (!s->h.running)
		return;
	pthread_mutex_lock(&s->h.mu);
	s->h.quit = 1;
	pthread_cond_broadcast(&s->h.cv);
	pthread_mutex_unlock(&s->h.mu);
	pthread_join(s->h.th, NULL);
	s->h.running = 0;
	pthread_cond_destroy(&s->h.cv);
	pthread_mutex_destroy(&s->h.mu);
}

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
	SHA256_Init(&s->sha);
	s->prev_fd = -1;
	s->rfd = -1;
	s->slot[0] = cb_xmalloc_huge(NSLOTS * SLOT_SIZE);
	for (int i = 1; i < NSLOTS; i++)
		s->slot[i] = s->slot[0] + i * SLOT_SIZE;
	s->slot_ready = 1;
	s->checksum = 1;
	return s;
}

int cb_sink_open_file(struct cb_sink **out, const char *final_path)
{
	struct cb_sink *s = sink_alloc(final_path);

	s->final_path = cb_xstrdup(final_path);
	s->tmp_path = cb_xasprintf("%s.tmp", final_path);
	/* never through a planted symlink, never over another's file; 0640
	 * whatever the umask */
	s->fd = cb_create_excl(s->tmp_path, 0640);
	if (s->fd < 0) {
		cb_error_errno("cannot create '%s'", s->tmp_path);
		cb_sink_free(s);
		return -1;
	}
	s->owns_fd = 1;
	s->syncer = cb_syncer_start(s->fd, s->tmp_path);
	s->cleanup_handle = cb_cleanup_push(unlink_tmp, s);
	if (s->cleanup_handle < 0) {
		/* a signal now would leave the .tmp behind: do not go on */
		cb_error("cleanup stack full, cannot protect '%s'", s->tmp_path);
		cb_sink_free(s);
		return -1;
	}
	*out = s;
	return 0;
}

int cb_sink_open_fd(struct cb_sink **out, int fd, const char *name)
{
	struct cb_sink *s = sink_alloc(name);

	s->fd = fd;
	s->checksum = 0;
	*out = s;
	return 0;
}

int cb_sink_open_split(struct cb_sink **out, const char *name, cb_sink_split_fn *fn, void *ctx)
{
	struct cb_sink *s = sink_alloc(name);

	s->split = fn;
	s->split_ctx = ctx;
	*out = s;
	return 0;
}

/* The slot being filled, once the hasher has let go of it. */
static unsigned char *current_slot(struct cb_sink *s)
{
	if (!s->slot_ready) {
		hasher_wait(s, s->seq >= NSLOTS ? s->seq - NSLOTS + 1 : 0);
		s->slot_ready = 1;
	}
	return s->slot[s->seq % NSLOTS];
}

static int write_through(struct cb_sink *s, const void *buf, size_t len)
{
	double t0;

	if (cb_throttle_account(&s->throttle, len) < 0)
		return -1;
	t0 = cb_now();
	if (s->split) {
		if (s->split(s->split_ctx, buf, len) < 0)
			return -1;
	} else if (cb_write_all(s->fd, buf, len) < 0) {
		return cb_error_errno("cannot write '%s'", s->tmp_path ? s->tmp_path : s->name);
	}
	s->written += len;
	if (cb_syncer_written(s->syncer, s->written) < 0)
		return -1;
	s->write_seconds += cb_now() - t0;
	return 0;
}

/* The current slot's first len bytes to the hasher; the next slot is current. */
static void post_slot(struct cb_sink *s, size_t len)
{
	s->slot_len[s->seq % NSLOTS] = len;
	hasher_post(s);
	s->seq++;
	s->fill = 0;
	s->slot_ready = 0;
}

/* Hash and write the filled part of the current slot, move to the next. */
static int flush_slot(struct cb_sink *s)
{
	unsigned char *buf = s->slot[s->seq % NSLOTS];
	size_t len = s->fill;

	if (len == 0)
		return 0;
	post_slot(s, len);
	return write_through(s, buf, len);
}

static int leave_prefix(struct cb_sink *s);

unsigned char *cb_sink_buffer(struct cb_sink *s, size_t *avail)
{
	if (leave_prefix(s) < 0 || (s->fill == SLOT_SIZE && flush_slot(s) < 0))
		return NULL;
	*avail = SLOT_SIZE - s->fill;
	return current_slot(s) + s->fill;
}

int cb_sink_advance(struct cb_sink *s, size_t len)
{
	/* a signal may have removed the .tmp already: stop with its name */
	if (cb_check_interrupt() < 0)
		return -1;
	s->fill += len;
	s->bytes += len;
	if (s->fill == SLOT_SIZE)
		return flush_slot(s);
	return 0;
}

int cb_sink_write(struct cb_sink *s, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	if (cb_check_interrupt() < 0 || leave_prefix(s) < 0)
		return -1;
	/* nothing to hash: big buffers go out as they are, without a copy */
	if (!s->checksum && len >= SLOT_SIZE / 4) {
		if (flush_slot(s) < 0 || write_through(s, p, len) < 0)
			return -1;
		s->bytes += len;
		return 0;
	}
	while (len > 0) {
		size_t avail, k;
		unsigned char *dst = cb_sink_buffer(s, &avail);

		if (!dst)
			return -1;
		k = len < avail ? len : avail;
		memcpy(dst, p, k);
		if (cb_sink_advance(s, k) < 0)
			return -1;
		p += k;
		len -= k;
	}
	return 0;
}

/* The file opened again for reading (once), or -1. */
static int read_fd(struct cb_sink *s)
{
	if (s->rfd == -1)
		s->rfd = sink_reopen_read(s->fd);
	if (s->rfd < 0)
		s->rfd = -2;   /* tried */
	return s->rfd >= 0 ? s->rfd : -1;
}

/* copy_file_range from off; what the kernel cannot copy is written from
 * bytes. src_fd is a file others may write to: what the kernel copied is
 * checked against bytes (sink_copy_check). */
static int copy_range(struct cb_sink *s, int src_fd, uint64_t off, uint64_t len,
		      const unsigned char *bytes)
{
	loff_t in = (loff_t)off;
	off_t at = lseek(s->fd, 0, SEEK_CUR);
	uint64_t done = 0;
	int fixed;

	while (done < len) {
		ssize_t n = copy_file_range(src_fd, &in, s->fd, NULL, (size_t)(len - done), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += (uint64_t)n;
	}
	if (done > 0 && (at < 0 || sink_copy_check(s->fd, read_fd(s), (uint64_t)at, done, bytes,
						     &fixed) < 0))
		return cb_error_errno("cannot write '%s'", s->tmp_path ? s->tmp_path : s->name);
	if (done > 0 && fixed)
		s->copies_fixed++;
	if (done < len && cb_write_all(s->fd, bytes + done, (size_t)(len - done)) < 0)
		return cb_error_errno("cannot write '%s'", s->tmp_path ? s->tmp_path : s->name);
	return 0;
}

/* Bytes written some other way (copied by the kernel) to the hasher, in
 * order, through the slots: copied in (the caller reuses its buffer at
 * once), so that their SHA-256 runs on the hasher's thread beside the
 * next segment's work; done inline it was a sixth of a night that copies
 * most of its units. With bytes NULL they are read from src_fd at off.
 * The state after the last of them is kept (a segment ends there). */
static int hash_only(struct cb_sink *s, const unsigned char *p, int src_fd, uint64_t off,
		     uint64_t len)
{
	while (len > 0) {
		unsigned char *dst = current_slot(s);
		size_t k = len < SLOT_SIZE ? (size_t)len : SLOT_SIZE;

		if (p)
			memcpy(dst, p, k);
		else if (cb_pread_all(src_fd, dst, k, (off_t)off) < 0)
			return cb_error_errno("cannot read the previous archive to hash '%s'",
					      s->tmp_path ? s->tmp_path : s->name);
		s->slot_mark[s->seq % NSLOTS] = k == len;
		post_slot(s, k);
		p = p ? p + k : NULL;
		off += k;
		len -= k;
	}
	return 0;
}

/* The bytes so far, all copied from the previous archive at their own
 * offsets, are in the digest: by the state the previous archive had
 * there (its states up to there are this archive's too), or else read
 * back from it and hashed. */
static int leave_prefix(struct cb_sink *s)
{
	const struct cb_sink_state *st;

	if (!s->in_prefix)
		return 0;
	s->in_prefix = 0;
	if (s->bytes == 0)
		return 0;
	st = sink_state_find(s->prev, s->n_prev, s->bytes);
	/* read back from this file, whose copies were checked: the previous
	 * archive may have changed since */
	if (!st || sink_state_load(st, &s->sha) < 0)
		return hash_only(s, NULL, read_fd(s) >= 0 ? s->rfd : s->prev_fd, 0, s->bytes);
	s->hash_off = s->bytes;
	s->resumed = s->bytes;
	for (size_t i = 0; i < s->n_prev && s->prev[i].off <= s->bytes; i++)
		*new_state(s) = s->prev[i];
	return 0;
}

void cb_sink_resume(struct cb_sink *s, int src_fd, const struct cb_sink_state *v, size_t n)
{
	if (!s->checksum || s->bytes > 0 || n == 0 || src_fd < 0)
		return;
	s->prev = v;
	s->n_prev = n;
	s->prev_fd = src_fd;
	s->in_prefix = 1;
}

int cb_sink_mark(struct cb_sink *s)
{
	size_t len = s->fill;
	unsigned char *buf;

	if (!s->checksum || s->in_prefix)
		return 0;
	buf = current_slot(s);   /* the hasher is done with it: its mark is ours */
	s->slot_mark[s->seq % NSLOTS] = 1;
	post_slot(s, len);
	return len ? write_through(s, buf, len) : 0;
}

const struct cb_sink_state *cb_sink_states(const struct cb_sink *s, size_t *n)
{
	*n = s->prepared ? s->n_states : 0;
	return *n ? s->states : NULL;
}

uint64_t cb_sink_resumed_bytes(const struct cb_sink *s)
{
	return s->resumed;
}

uint64_t cb_sink_copies_fixed(const struct cb_sink *s)
{
	return s->copies_fixed;
}

int cb_sink_copy(struct cb_sink *s, int src_fd, uint64_t off, uint64_t len,
		 const unsigned char *bytes)
{
	double t0;

	if (cb_check_interrupt() < 0 || flush_slot(s) < 0)
		return -1;
	/* the same bytes at the same offset as in the previous archive: its
	 * state will do (leave_prefix) */
	if (s->in_prefix && (src_fd != s->prev_fd || off != s->bytes) && leave_prefix(s) < 0)
		return -1;
	if (s->checksum && !s->in_prefix && hash_only(s, bytes, src_fd, off, len) < 0)
		return -1;
	if (cb_throttle_account(&s->throttle, len) < 0)
		return -1;
	t0 = cb_now();
	if (!s->split && copy_range(s, src_fd, off, len, bytes) < 0)
		return -1;
	s->written += len;
	s->bytes += len;
	if (cb_syncer_written(s->syncer, s->written) < 0)
		return -1;
	s->write_seconds += cb_now() - t0;
	return 0;
}

int cb_sink_flush(struct cb_sink *s)
{
	if (cb_check_interrupt() < 0)
		return -1;
	return flush_slot(s);
}

static void finish_digest(struct cb_sink *s)
{
	unsigned char md[SHA256_DIGEST_LENGTH];

	SHA256_Final(md, &s->sha);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
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
	int rc;

	if (s->prepared)
		return 0;
	if (leave_prefix(s) < 0 || cb_sink_flush(s) < 0)
		return -1;
	hasher_wait(s, s->seq);
	if (s->checksum)
		finish_digest(s);
	s->prepared = 1;
	if (!s->final_path)
		return 0;
	rc = cb_syncer_stop(s->syncer);
	s->syncer = NULL;
	if (rc < 0)
		return -1;
	if (fsync(s->fd) < 0)
		return cb_error_errno("cannot sync '%s'", s->tmp_path);
	/* on disk now: leave the page cache as it was before the backup */
	posix_fadvise(s->fd, 0, 0, POSIX_FADV_DONTNEED);
	if (close(s->fd) < 0) {
		s->fd = -1;
		return cb_error_errno("cannot close '%s'", s->tmp_path);
	}
	s->fd = -1;
	return 0;
}

/* An archive never replaces one of the same name. File systems without
 * RENAME_NOREPLACE (NFS, some FUSE): link() fails on an existing name too. */
static int rename_noreplace(const char *from, const char *to)
{
	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
		return -1;
	if (link(from, to) < 0)
		return -1;
	unlink(from);
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
	if (rename_noreplace(s->tmp_path, s->final_path) < 0)
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
	cb_syncer_cancel(s->syncer);
	if (s->owns_fd && s->fd >= 0)
		close(s->fd);
	if (s->rfd >= 0)
		close(s->rfd);
	if (s->tmp_path && !s->committed)
		unlink(s->tmp_path);
	cb_cleanup_pop(s->cleanup_handle, 0);
	hasher_stop(s);
	cb_free_huge(s->slot[0], NSLOTS * SLOT_SIZE);
	free(s->states);
	free(s->final_path);
	free(s->tmp_path);
	free(s->name);
	free(s);
}

void cb_sink_set_checksum(struct cb_sink *s, int on)
{
	if (s->bytes == 0)
		s->checksum = on;
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

double cb_sink_throttled_seconds(const struct cb_sink *s)
{
	return s->throttle.waited;
}
