/* cb_nbdread: an NBD export into a sparse raw file. See include/cb_nbdread.h. */
#include <errno.h>
#include <fcntl.h>
#include <libnbd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_dynlib.h"
#include "cb_nbdread.h"
#include "cb_throttle.h"
#include "cb_util.h"

#define WINDOW   ((uint64_t)1 << 30)    /* block status asked per request */
#define CHUNK    ((size_t)4 << 20)      /* bytes per NBD read */
#define INFLIGHT 4                      /* NBD reads in flight */
#define ZBLOCK   ((size_t)64 << 10)    /* all-zero blocks of this size stay holes */
#define ALLOC_CTX "base:allocation"

struct extent {
	uint64_t off, len;
	uint32_t flags;
};

struct extents {
	const char *ctx;
	struct extent *v;
	size_t n, alloc;
};

/* libnbd's functions, looked up when a disk is first read (cb_dynlib.h) */
struct nbd_api {
	__typeof__(nbd_create) *create;
	__typeof__(nbd_close) *close;
	__typeof__(nbd_shutdown) *shutdown;
	__typeof__(nbd_get_error) *get_error;
	__typeof__(nbd_set_export_name) *set_export_name;
	__typeof__(nbd_add_meta_context) *add_meta_context;
	__typeof__(nbd_can_meta_context) *can_meta_context;
	__typeof__(nbd_connect_unix) *connect_unix;
	__typeof__(nbd_get_size) *get_size;
	__typeof__(nbd_block_status) *block_status;
	__typeof__(nbd_aio_pread) *aio_pread;
	__typeof__(nbd_aio_command_completed) *aio_command_completed;
	__typeof__(nbd_poll) *poll;
};

struct reader {
	const struct cb_nbdread_opts *o;
	struct nbd_api n;
	struct nbd_handle *h;
	int fd;
	char *buf;
	struct cb_throttle thr;
	struct cb_nbdread_stats *st;
	uint64_t done;              /* for the progress bar */
};

static int nbd_load(struct nbd_api *n)
{
	const struct cb_dynsym syms[] = {
		{ "nbd_create", (void **)&n->create },
		{ "nbd_close", (void **)&n->close },
		{ "nbd_shutdown", (void **)&n->shutdown },
		{ "nbd_get_error", (void **)&n->get_error },
		{ "nbd_set_export_name", (void **)&n->set_export_name },
		{ "nbd_add_meta_context", (void **)&n->add_meta_context },
		{ "nbd_can_meta_context", (void **)&n->can_meta_context },
		{ "nbd_connect_unix", (void **)&n->connect_unix },
		{ "nbd_get_size", (void **)&n->get_size },
		{ "nbd_block_status", (void **)&n->block_status },
		{ "nbd_aio_pread", (void **)&n->aio_pread },
		{ "nbd_aio_command_completed", (void **)&n->aio_command_completed },
		{ "nbd_poll", (void **)&n->poll },
	};

	return cb_dynlib_open("libnbd.so.0", "reading a VM disk", syms, sizeof(syms) / sizeof(syms[0]));
}

static int nbd_fail(const struct reader *r, const char *what)
{
	const char *e = r->n.get_error();

	return cb_error("NBD %s: %s", what, e ? e : "failed");
}

static int on_extents(void *data, const char *ctx, uint64_t off, uint32_t *e, size_t n, int *err)
{
	struct extents *x = data;

	(void)err;
	if (strcmp(ctx, x->ctx))
		return 0;
	for (size_t i = 0; i + 1 < n; i += 2) {
		if (x->n == x->alloc) {
			x->alloc = x->alloc ? 2 * x->alloc : 64;
			x->v = cb_xrealloc(x->v, x->alloc * sizeof(*x->v));
		}
		x->v[x->n++] = (struct extent){ off, e[i], e[i + 1] };
		off += e[i];
	}
	return 0;
}

/* The extents of context CTX covering [off, off+len), clipped to it. */
static int block_status(struct reader *r, const char *ctx, uint64_t off, uint64_t len,
			struct extents *x)
{
	uint64_t end = off + len;

	x->ctx = ctx;
	x->n = 0;
	while (off < end) {
		size_t first = x->n;
		uint64_t ask = end - off < WINDOW ? end - off : WINDOW;
		nbd_extent_callback cb = { .callback = on_extents, .user_data = x };
		if (r->n.block_status(r->h, ask, off, cb, 0) < 0)
			return nbd_fail(r, "block status");
		if (x->n == first)
			return cb_error("NBD block status: no extents at %llu", (unsigned long long)off);
		for (size_t i = first; i < x->n; i++) {
			if (x->v[i].off + x->v[i].len > end)
				x->v[i].len = end - x->v[i].off;
			off = x->v[i].off + x->v[i].len;
		}
	}
	return 0;
}

static int is_zero(const char *p, size_t n)
{
	return n == 0 || (!p[0] && !memcmp(p, p + 1, n - 1));
}

static int punch(struct reader *r, uint64_t off, uint64_t len)
{
	if (!r->o->bitmap)
		return 0;   /* a fresh file: a hole already */
	if (fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) < 0)
		return cb_error_errno("cannot punch a hole in '%s'", r->o->file);
	return 0;
}

/* One chunk read: blocks of zeros stay (or become) holes. */
static int store(struct reader *r, const char *buf, uint64_t off, size_t n)
{
	for (size_t b = 0; b < n; b += ZBLOCK) {
		size_t k = n - b < ZBLOCK ? n - b : ZBLOCK;
		if (is_zero(buf + b, k)) {
			if (punch(r, off + b, k) < 0)
				return -1;
		} else if (pwrite(r->fd, buf + b, k, (off_t)(off + b)) != (ssize_t)k) {
			return cb_error_errno("cannot write '%s'", r->o->file);
		} else {
			r->st->written += k;
		}
	}
	return 0;
}

/* INFLIGHT reads of CHUNK bytes at once (QEMU serves them concurrently),
 * stored in order as they complete. */
static int copy_data(struct reader *r, uint64_t off, uint64_t len)
{
	struct slot { uint64_t off; size_t n; int64_t cookie; } q[INFLIGHT];
	size_t head = 0, count = 0;

	while (len || count) {
		while (len && count < INFLIGHT) {
			struct slot *s = &q[(head + count) % INFLIGHT];
			s->off = off;
			s->n = len < CHUNK ? (size_t)len : CHUNK;
			s->cookie = r->n.aio_pread(r->h, r->buf + ((head + count) % INFLIGHT) * CHUNK,
						   s->n, off, NBD_NULL_COMPLETION, 0);
			if (s->cookie < 0)
				return nbd_fail(r, "read");
			off += s->n;
			len -= s->n;
			count++;
		}
		struct slot *s = &q[head];
		int done;
		while ((done = r->n.aio_command_completed(r->h, (uint64_t)s->cookie)) == 0)
			if (r->n.poll(r->h, -1) < 0)
				return nbd_fail(r, "read");
		if (done < 0)
			return nbd_fail(r, "read");
		r->st->read += s->n;
		if (store(r, r->buf + head * CHUNK, s->off, s->n) < 0)
			return -1;
		cb_throttle_account(&r->thr, s->n);
		r->done += s->n;
		cb_progress_update(r->o->progress, r->done);
		head = (head + 1) % INFLIGHT;
		count--;
	}
	return 0;
}

/* [off, off+len) by the allocation map: data copied, the rest a hole. */
static int copy_range(struct reader *r, uint64_t off, uint64_t len)
{
	struct extents a = { 0 };
	int rc = block_status(r, ALLOC_CTX, off, len, &a);

	for (size_t i = 0; rc == 0 && i < a.n; i++) {
		if (a.v[i].flags & LIBNBD_STATE_ZERO) {
			rc = punch(r, a.v[i].off, a.v[i].len);
			r->done += a.v[i].len;
		} else {
			rc = copy_data(r, a.v[i].off, a.v[i].len);
		}
	}
	free(a.v);
	return rc;
}

/* Bitmap mode: only what the dirty bitmap marks. */
static int copy_dirty(struct reader *r)
{
	struct extents d = { 0 };
	char ctx[512];
	int rc;

	snprintf(ctx, sizeof(ctx), "qemu:dirty-bitmap:%s", r->o->bitmap);
	rc = block_status(r, ctx, 0, r->st->size, &d);
	for (size_t i = 0; rc == 0 && i < d.n; i++) {
		if (!(d.v[i].flags & 1)) {   /* NBD_STATE_DIRTY */
			r->done += d.v[i].len;
			continue;
		}
		r->st->dirty += d.v[i].len;
		rc = copy_range(r, d.v[i].off, d.v[i].len);
	}
	free(d.v);
	return rc;
}

static int open_file(struct reader *r)
{
	struct stat sb;
	int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (r->o->bitmap ? 0 : O_TRUNC);

	r->fd = openat(r->o->dir_fd, r->o->file, flags, 0600);
	if (r->fd < 0)
		return cb_error_errno("cannot open '%s'", r->o->file);
	if (fstat(r->fd, &sb) < 0 || !S_ISREG(sb.st_mode))
		return cb_error("'%s' is not a regular file", r->o->file);
	if (r->o->bitmap && (uint64_t)sb.st_size != r->st->size)
		return cb_error("the kept image '%s' is %lld bytes, the disk %llu", r->o->file,
				(long long)sb.st_size, (unsigned long long)r->st->size);
	if (ftruncate(r->fd, (off_t)r->st->size) < 0)
		return cb_error_errno("cannot size '%s'", r->o->file);
	return 0;
}

static int connect_export(struct reader *r, int *no_bitmap)
{
	char ctx[512];

	snprintf(ctx, sizeof(ctx), "qemu:dirty-bitmap:%s", r->o->bitmap ? r->o->bitmap : "");
	if (nbd_load(&r->n) < 0)
		return -1;
	if (!(r->h = r->n.create()))
		return nbd_fail(r, "handle");
	if (r->n.set_export_name(r->h, r->o->export_name) < 0 ||
	    r->n.add_meta_context(r->h, ALLOC_CTX) < 0 ||
	    (r->o->bitmap && r->n.add_meta_context(r->h, ctx) < 0))
		return nbd_fail(r, "set-up");
	if (r->n.connect_unix(r->h, r->o->socket) < 0)
		return nbd_fail(r, "connect");
	if (r->n.can_meta_context(r->h, ALLOC_CTX) != 1)
		return cb_error("NBD export '%s' has no allocation map", r->o->export_name);
	if (r->o->bitmap && r->n.can_meta_context(r->h, ctx) != 1) {
		*no_bitmap = 1;
		return cb_error("NBD export '%s' does not offer the bitmap '%s'", r->o->export_name,
				r->o->bitmap);
	}
	int64_t size = r->n.get_size(r->h);
	if (size < 0)
		return nbd_fail(r, "size");
	r->st->size = (uint64_t)size;
	return 0;
}

int cb_nbdread(const struct cb_nbdread_opts *o, struct cb_nbdread_stats *st, int *no_bitmap)
{
	struct reader r = { .o = o, .fd = -1, .st = st };
	double t0 = cb_now();
	int rc = -1;

	memset(st, 0, sizeof(*st));
	*no_bitmap = 0;
	cb_throttle_init(&r.thr, o->bwlimit);
	if (connect_export(&r, no_bitmap) < 0 || open_file(&r) < 0)
		goto out;
	r.buf = cb_xmalloc(CHUNK * INFLIGHT);
	rc = o->bitmap ? copy_dirty(&r) : copy_range(&r, 0, st->size);
	if (rc == 0 && fsync(r.fd) < 0)
		rc = cb_error_errno("cannot write '%s'", o->file);
out:
	if (r.h) {
		r.n.shutdown(r.h, 0);
		r.n.close(r.h);
	}
	if (r.fd >= 0)
		close(r.fd);
	free(r.buf);
	st->seconds = cb_now() - t0;
	return rc;
}
