/*
 * Staging engine: the index kept beside a kept staging copy (keep-staging),
 * so that the next run's pass 1 decides by the full pass-2 rule (ctime
 * included) instead of trusting a size and mtime that a guest can put back.
 *
 * <dst>.index:
 *   header  "CBSTIDX" + format version (one ASCII digit), the body's
 *           length, and the identity of the guest root it describes: the
 *           file system's statfs f_fsid (stable across reboots where st_dev
 *           is not), st_dev, the root's inode and its generation
 *           (FS_IOC_GETVERSION, 0 where the file system has none), and
 *           the start of the pass that took the records (for the racily
 *           clean rule, cb_stage_decide_racy);
 *   body    the tree depth first (per directory: a count, then per entry:
 *           name length, name, the record, a flag and the subdirectory);
 *   trailer SHA-256 of the body followed by the magic and the header.
 * A checksum that can be forged does no harm here (only root writes the
 * file, in a root-only directory); SHA-256 rather than a 64-bit FNV so
 * that no damage, random or patterned, goes unseen. It is written to a
 * new file and renamed into place; pass 1 removes it before it changes
 * anything, so an interrupted run leaves no index that the staging copy
 * no longer matches. Native byte order: the index never leaves the host
 * that wrote it. Whatever does not check out (damaged, truncated, another
 * version, another root) is named in a WARN: line and pass 1 copies all.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <openssl/evp.h>
#include <sys/ioctl.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "stage_int.h"

#define KEEP_MAGIC "CBSTIDX"
#define KEEP_VERSION '3'
#define KEEP_MAX_NAME 4096
#define KEEP_REC_WORDS 11
#define KEEP_SUM 32   /* SHA-256 */

/* After the 8 bytes of magic and version. */
struct keep_header {
	uint64_t body_len;
	struct stage_root_id id;
	struct timespec since;      /* start of the pass that took the records */
};

struct kout {
	FILE *f;
	EVP_MD_CTX *sum;
	uint64_t len;
};

void stage_root_id_get(int fd, const struct stat *sb, struct stage_root_id *id)
{
	struct statfs fs;
	int gen = 0;

	memset(id, 0, sizeof(*id));
	if (fstatfs(fd, &fs) == 0)
		memcpy(&id->fsid, &fs.f_fsid, sizeof(id->fsid) < sizeof(fs.f_fsid)
						     ? sizeof(id->fsid) : sizeof(fs.f_fsid));
	if (ioctl(fd, FS_IOC_GETVERSION, &gen) == 0)
		id->gen = (uint64_t)(unsigned)gen;
	id->dev = sb->st_dev;
	id->ino = sb->st_ino;
}

static void kput(struct kout *o, const void *p, size_t n)
{
	EVP_DigestUpdate(o->sum, p, n);
	fwrite(p, 1, n, o->f);
	o->len += n;
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

void stage_keep_drop(struct cb_stage *st, int aside)
{
	char *path = index_path(st, ""), *tmp = index_path(st, ".new");

	if (!aside || rename(path, tmp) < 0)
		unlink(path);
	free(tmp);
	free(path);
}

/* Header (with a body length patched in once known), body, checksum. */
static int write_index(struct cb_stage *st, struct kout *o)
{
	char magic[8] = KEEP_MAGIC;
	struct keep_header h = { 0, st->root_id, st->pass_start };
	unsigned char sum[EVP_MAX_MD_SIZE];
	unsigned int sum_len = 0;

	magic[7] = KEEP_VERSION;
	fwrite(magic, 1, sizeof(magic), o->f);
	fwrite(&h, 1, sizeof(h), o->f);
	put_dir(o, st->root);
	h.body_len = o->len;
	if (fseek(o->f, sizeof(magic), SEEK_SET) < 0)
		return -1;
	fwrite(&h, 1, sizeof(h), o->f);
	if (fseek(o->f, 0, SEEK_END) < 0)
		return -1;
	/* the header is summed too: a root id or length that rotted is seen */
	EVP_DigestUpdate(o->sum, magic, sizeof(magic));
	EVP_DigestUpdate(o->sum, &h, sizeof(h));
	if (EVP_DigestFinal_ex(o->sum, sum, &sum_len) != 1 || sum_len != KEEP_SUM)
		return -1;
	fwrite(sum, 1, KEEP_SUM, o->f);
	return fflush(o->f) || ferror(o->f) || fsync(fileno(o->f)) < 0 ? -1 : 0;
}

int stage_keep_save(struct cb_stage *st)
{
	char *tmp = index_path(st, ".new"), *path = index_path(st, "");
	struct kout o = { NULL, EVP_MD_CTX_new(), 0 };
	int fd, ret = -1;

	unlink(tmp);
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || !(o.f = fdopen(fd, "w+"))) {
		cb_error_errno("cannot create staging index '%s'", tmp);
		if (fd >= 0)
			close(fd);
		goto out;
	}
	if (!o.sum || EVP_DigestInit_ex(o.sum, EVP_sha256(), NULL) != 1 || write_index(st, &o) < 0) {
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
	EVP_MD_CTX_free(o.sum);
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

static int same_root(const struct stage_root_id *a, const struct stage_root_id *b)
{
	/* f_fsid where the file system has one (st_dev may move at a reboot) */
	if (a->fsid || b->fsid) {
		if (a->fsid != b->fsid)
			return 0;
	} else if (a->dev != b->dev) {
		return 0;
	}
	return a->ino == b->ino && a->gen == b->gen;
}

/* The same file system under another st_dev (a reboot): records follow. */
static void remap_dev(struct stage_dir *d, uint64_t from, uint64_t to)
{
	for (size_t i = 0; d && i < d->n; i++) {
		if (d->ents[i].rec.dev == from)
			d->ents[i].rec.dev = to;
		remap_dev(d->ents[i].sub, from, to);
	}
}

static int sum_ok(const unsigned char *buf, size_t hdr_len, size_t body_len)
{
	unsigned char sum[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	int ok = c && EVP_DigestInit_ex(c, EVP_sha256(), NULL) == 1 &&
		 EVP_DigestUpdate(c, buf + hdr_len, body_len) == 1 &&
		 EVP_DigestUpdate(c, buf, hdr_len) == 1 && EVP_DigestFinal_ex(c, sum, &n) == 1 &&
		 n == KEEP_SUM && !memcmp(sum, buf + hdr_len + body_len, KEEP_SUM);

	EVP_MD_CTX_free(c);
	return ok;
}

/* Checks the frame around the body; NULL if it holds, else why not. */
static const char *check_frame(const unsigned char *buf, size_t size, struct keep_header *h,
			       char *msg, size_t msg_len)
{
	size_t hdr_len = 8 + sizeof(*h);

	if (size < 8)
		return "is truncated, it is damaged";
	if (memcmp(buf, KEEP_MAGIC, 7) || buf[7] < '0' || buf[7] > '9')
		return "is not a cbackup staging index";
	if (buf[7] != KEEP_VERSION) {
		snprintf(msg, msg_len, "has format version %c, this cbackup reads %c", buf[7],
			 KEEP_VERSION);
		return msg;
	}
	if (size < hdr_len + KEEP_SUM)
		return "is truncated, it is damaged";
	memcpy(h, buf + 8, sizeof(*h));
	if (h->body_len > size - hdr_len - KEEP_SUM)
		return "is truncated, it is damaged";
	if (h->body_len < size - hdr_len - KEEP_SUM)
		return "has data after its end, it is damaged";
	if (!sum_ok(buf, hdr_len, (size_t)h->body_len))
		return "fails its checksum, it is damaged";
	return NULL;
}

static const char foreign_root[] =
	"describes another guest root (file system, root inode or generation)";

/* The tree, or NULL with *why set. */
static struct stage_dir *parse(struct cb_stage *st, const unsigned char *buf, size_t size,
			       const char **why, char *msg, size_t msg_len)
{
	struct keep_header h;
	struct kin in;
	struct stage_dir *d;

	if ((*why = check_frame(buf, size, &h, msg, msg_len)) != NULL)
		return NULL;
	if (!same_root(&h.id, &st->root_id)) {
		*why = foreign_root;
		return NULL;
	}
	in = (struct kin){ buf + 8 + sizeof(h), buf + 8 + sizeof(h) + h.body_len };
	d = get_dir(&in, 0);
	if (!d || in.p != in.end) {
		stage_dir_free(d);
		*why = "does not parse, it is damaged";
		return NULL;
	}
	if (h.id.dev != st->root_id.dev)
		remap_dev(d, h.id.dev, st->root_id.dev);
	st->kept_since = h.since;
	return d;
}

/* The kept index, or NULL (none, unreadable, damaged, foreign: a full
 * pass 1, with a WARN: saying why unless there simply is none). */
struct stage_dir *stage_keep_load(struct cb_stage *st)
{
	char *path = index_path(st, "");
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stage_dir *d = NULL;
	unsigned char *buf = NULL;
	const char *why = "cannot be read";
	char msg[96];
	struct stat sb;

	if (fd < 0 && errno == ENOENT)
		why = "is missing";
	else if (fd < 0 || fstat(fd, &sb) < 0)
		why = "cannot be opened";
	else if (!S_ISREG(sb.st_mode) || sb.st_uid != geteuid())
		why = "is not a regular file of ours";
	else {
		buf = cb_xmalloc((size_t)sb.st_size + 1);
		if (cb_read_all(fd, buf, (size_t)sb.st_size) == 0)
			d = parse(st, buf, (size_t)sb.st_size, &why, msg, sizeof(msg));
	}
	/* keep-staging auto: a guest made anew (a restore) is no fault */
	if (!d && why == foreign_root && st->keep_auto)
		cb_info(st->log, "staging index '%s' %s: full first sync", path, why);
	else if (!d)
		cb_warn(st->log, "staging index '%s' %s: full first sync", path, why);
	if (fd >= 0)
		close(fd);
	free(buf);
	free(path);
	return d;
}
