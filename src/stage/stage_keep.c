/*
 * Staging engine: the index kept beside a kept staging copy (keep-staging),
 * so that the next run's pass 1 decides by the full pass-2 rule (ctime
 * included) instead of trusting a size and mtime that a guest can put back.
 *
 * <dst>.index: "CBSTIDX1", the tree depth first (per directory: a count,
 * then per entry: name length, name, the record, a flag and the
 * subdirectory), then an FNV-1a 64 checksum of everything before it. It
 * is written to a new file and renamed into place; pass 1 removes it
 * before it changes anything, so an interrupted run leaves no index that
 * the staging copy no longer matches. Native byte order: the index never
 * leaves the host that wrote it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stage_int.h"

#define KEEP_MAGIC "CBSTIDX1"
#define KEEP_MAX_NAME 4096
#define KEEP_REC_WORDS 11

struct kout {
	FILE *f;
	uint64_t sum;
};

static void fnv(uint64_t *h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		*h = (*h ^ c[i]) * 0x100000001b3ULL;
}

static void kput(struct kout *o, const void *p, size_t n)
{
	fnv(&o->sum, p, n);
	fwrite(p, 1, n, o->f);
}

static void rec_words(const struct cb_index_rec *r, uint64_t w[KEEP_REC_WORDS])
{
	uint64_t v[KEEP_REC_WORDS] = {
		r->dev, r->ino, r->size, (uint64_t)r->mtime.tv_sec, (uint64_t)r->mtime.tv_nsec,
		(uint64_t)r->ctime.tv_sec, (uint64_t)r->ctime.tv_nsec, r->mode, r->uid, r->gid, r->rdev,
	};
	memcpy(w, v, sizeof(v));
}

static void put_dir(struct kout *o, const struct stage_dir *d)
{
	uint64_t n = d->n;

	kput(o, &n, sizeof(n));
	for (size_t i = 0; i < d->n; i++) {
		const struct stage_ent *e = &d->ents[i];
		uint32_t len = (uint32_t)strlen(e->name);
		uint64_t w[KEEP_REC_WORDS];
		unsigned char sub = e->sub != NULL;

		rec_words(&e->rec, w);
		kput(o, &len, sizeof(len));
		kput(o, e->name, len);
		kput(o, w, sizeof(w));
		kput(o, &sub, 1);
		if (sub)
			put_dir(o, e->sub);
	}
}

static char *index_path(const struct cb_stage *st, const char *suffix)
{
	return cb_xasprintf("%s.index%s", st->dst, suffix);
}

void stage_keep_drop(struct cb_stage *st)
{
	char *path = index_path(st, "");

	unlink(path);
	free(path);
}

int stage_keep_save(struct cb_stage *st)
{
	char *tmp = index_path(st, ".new"), *path = index_path(st, "");
	struct kout o = { NULL, 0xcbf29ce484222325ULL };
	int fd, ret = -1;

	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || !(o.f = fdopen(fd, "w"))) {
		cb_error_errno("cannot create staging index '%s'", tmp);
		if (fd >= 0)
			close(fd);
		goto out;
	}
	fwrite(KEEP_MAGIC, 1, 8, o.f);
	put_dir(&o, st->root);
	fwrite(&o.sum, sizeof(o.sum), 1, o.f);
	if (fflush(o.f) || ferror(o.f) || fsync(fileno(o.f)) < 0) {
		cb_error_errno("cannot write staging index '%s'", tmp);
		goto out;
	}
	if (rename(tmp, path) < 0)
		cb_error_errno("cannot rename staging index to '%s'", path);
	else
		ret = 0;
out:
	if (o.f)
		fclose(o.f);
	if (ret < 0)
		unlink(tmp);
	free(tmp);
	free(path);
	return ret;
}

/* ---- loading ---- */

struct kin {
	const unsigned char *p, *end;
};

static int kget(struct kin *in, void *out, size_t n)
{
	if ((size_t)(in->end - in->p) < n)
		return -1;
	memcpy(out, in->p, n);
	in->p += n;
	return 0;
}

static int get_ent(struct kin *in, struct stage_ent *e, char **names, size_t *len, size_t *cap,
		   int depth);

static struct stage_dir *get_dir(struct kin *in, int depth)
{
	struct stage_dir *d = cb_xcalloc(1, sizeof(*d));
	size_t len = 0, cap = 0, off = 0;
	uint64_t n;

	if (kget(in, &n, sizeof(n)) < 0 || n > (uint64_t)(in->end - in->p))
		goto bad;
	d->ents = cb_xcalloc(n ? n : 1, sizeof(*d->ents));
	for (; d->n < n; d->n++)
		if (get_ent(in, &d->ents[d->n], &d->names, &len, &cap, depth) < 0)
			goto bad;
	/* names were stored as offsets while the block grew */
	for (size_t i = 0; i < d->n; i++, off += strlen(d->names + off) + 1)
		d->ents[i].name = d->names + off;
	return d;
bad:
	for (size_t i = 0; i < d->n; i++)
		d->ents[i].name = "";
	stage_dir_free(d);
	return NULL;
}

static int get_ent(struct kin *in, struct stage_ent *e, char **names, size_t *len, size_t *cap,
		   int depth)
{
	uint64_t w[KEEP_REC_WORDS];
	uint32_t n;
	unsigned char sub;

	if (kget(in, &n, sizeof(n)) < 0 || n == 0 || n > KEEP_MAX_NAME ||
	    (size_t)(in->end - in->p) < n || memchr(in->p, '\0', n) || memchr(in->p, '/', n))
		return -1;
	if (*len + n + 1 > *cap) {
		*cap = (*len + n + 1) * 2;
		*names = cb_xrealloc(*names, *cap);
	}
	memcpy(*names + *len, in->p, n);
	(*names)[*len + n] = '\0';
	*len += n + 1;
	in->p += n;
	if (kget(in, w, sizeof(w)) < 0 || kget(in, &sub, 1) < 0 || sub > 1)
		return -1;
	e->rec = (struct cb_index_rec){
		w[0], w[1], w[2], { (time_t)w[3], (long)w[4] }, { (time_t)w[5], (long)w[6] },
		(mode_t)w[7], (uid_t)w[8], (gid_t)w[9], w[10],
	};
	e->sub = NULL;
	if (sub && (depth > 100000 || !(e->sub = get_dir(in, depth + 1))))
		return -1;
	return 0;
}

static struct stage_dir *parse(const unsigned char *buf, size_t size)
{
	uint64_t sum = 0xcbf29ce484222325ULL, want;
	struct kin in = { buf + 8, buf + size - sizeof(want) };
	struct stage_dir *d;

	if (size < 8 + sizeof(uint64_t) + sizeof(uint64_t) || memcmp(buf, KEEP_MAGIC, 8))
		return NULL;
	memcpy(&want, buf + size - sizeof(want), sizeof(want));
	fnv(&sum, buf + 8, size - 8 - sizeof(want));
	if (sum != want)
		return NULL;
	d = get_dir(&in, 0);
	if (d && in.p != in.end) {
		stage_dir_free(d);
		d = NULL;
	}
	return d;
}

static int read_all(int fd, unsigned char *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(fd, buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

/* The kept index, or NULL (none, unreadable, damaged: a full pass 1). */
struct stage_dir *stage_keep_load(struct cb_stage *st)
{
	char *path = index_path(st, "");
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stage_dir *d = NULL;
	unsigned char *buf = NULL;
	struct stat sb;

	if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid())
		goto out;
	buf = cb_xmalloc((size_t)sb.st_size + 1);
	if (read_all(fd, buf, (size_t)sb.st_size) == 0)
		d = parse(buf, (size_t)sb.st_size);
	if (!d)
		cb_warn(st->log, "staging index '%s' is damaged: full first sync", path);
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	free(path);
	return d;
}
