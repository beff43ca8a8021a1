/* Staging engine: directory listings, the index, (dev,ino) maps, paths and
 * the exclude rule. See src/stage_int.h. */
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stage_int.h"

static void listing_add(struct listing *l, const char *name)
{
	size_t n = strlen(name) + 1;

	if (l->len + n > l->cap) {
		l->cap = l->cap ? l->cap * 2 : 1024;
		while (l->len + n > l->cap)
			l->cap *= 2;
		l->names = cb_xrealloc(l->names, l->cap);
	}
	memcpy(l->names + l->len, name, n);
	l->len += n;
	l->n++;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Pointers are set only once the names block stops moving. */
static void listing_index(struct listing *l)
{
	char *p = l->names;

	l->v = cb_xmalloc((l->n + 1) * sizeof(*l->v));
	for (size_t i = 0; i < l->n; i++) {
		l->v[i] = p;
		p += strlen(p) + 1;
	}
	l->v[l->n] = NULL;
	qsort(l->v, l->n, sizeof(*l->v), cmp_names);
}

/* getdents64 straight on the directory fd (from its start): no DIR stream,
 * and the fd stays usable for the *at() calls that follow. */
int stage_list(int dfd, struct listing *l)
{
	char buf[32768];
	ssize_t got;

	memset(l, 0, sizeof(*l));
	if (lseek(dfd, 0, SEEK_SET) < 0)
		return -1;
	while ((got = getdents64(dfd, buf, sizeof(buf))) > 0) {
		for (ssize_t off = 0; off < got;) {
			struct dirent64 *de = (struct dirent64 *)(buf + off);
			const char *nm = de->d_name;
			off += de->d_reclen;
			if (nm[0] == '.' && (!nm[1] || (nm[1] == '.' && !nm[2])))
				continue;
			listing_add(l, nm);
		}
	}
	if (got < 0) {
		stage_listing_release(l);
		return -1;
	}
	listing_index(l);
	return 0;
}

void stage_listing_release(struct listing *l)
{
	free(l->names);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* Iterative: an index as deep as the tree must not need its depth in
 * stack frames (it is freed on the main thread). */
void stage_dir_free(struct stage_dir *d)
{
	struct stage_dir **todo = NULL;
	size_t n = 0, cap = 0;

	if (!d)
		return;
	todo = cb_xmalloc((cap = 16) * sizeof(*todo));
	todo[n++] = d;
	while (n) {
		d = todo[--n];
		for (size_t i = 0; i < d->n; i++) {
			if (!d->ents[i].sub)
				continue;
			if (n == cap)
				todo = cb_xrealloc(todo, (cap *= 2) * sizeof(*todo));
			todo[n++] = d->ents[i].sub;
		}
		free(d->names);
		free(d->ents);
		free(d);
	}
	free(todo);
}

struct stage_ent *stage_dir_find(struct stage_dir *d, const char *name)
{
	size_t lo = 0, hi = d ? d->n : 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, d->ents[mid].name);
		if (!c)
			return &d->ents[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

static size_t ino_hash(uint64_t dev, uint64_t ino, size_t cap)
{
	uint64_t h = (ino ^ (dev << 32 | dev >> 32)) * 0x9e3779b97f4a7c15ULL;
	return (size_t)(h >> 17) & (cap - 1);
}

static struct ino_slot *ino_slot(const struct ino_map *m, uint64_t dev, uint64_t ino)
{
	size_t i = ino_hash(dev, ino, m->cap);

	while (m->slots[i].val && (m->slots[i].dev != dev || m->slots[i].ino != ino))
		i = (i + 1) & (m->cap - 1);
	return &m->slots[i];
}

void *ino_map_get(const struct ino_map *m, uint64_t dev, uint64_t ino)
{
	return m->cap ? ino_slot(m, dev, ino)->val : NULL;
}

static void ino_map_grow(struct ino_map *m)
{
	struct ino_map big = { NULL, m->cap ? m->cap * 2 : 64, 0 };

	big.slots = cb_xcalloc(big.cap, sizeof(*big.slots));
	for (size_t i = 0; i < m->cap; i++) {
		if (m->slots[i].val) {
			*ino_slot(&big, m->slots[i].dev, m->slots[i].ino) = m->slots[i];
			big.n++;
		}
	}
	free(m->slots);
	*m = big;
}

/* Replaces (without freeing) an existing value for the key. */
void ino_map_put(struct ino_map *m, uint64_t dev, uint64_t ino, void *val)
{
	struct ino_slot *s;

	if ((m->n + 1) * 2 > m->cap)
		ino_map_grow(m);
	s = ino_slot(m, dev, ino);
	if (!s->val)
		m->n++;
	s->dev = dev;
	s->ino = ino;
	s->val = val;
}

void ino_map_clear(struct ino_map *m, void (*free_val)(void *))
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].val && free_val)
			free_val(m->slots[i].val);
	free(m->slots);
	memset(m, 0, sizeof(*m));
}

void stage_rec_fill(struct cb_index_rec *r, const struct stat *sb)
{
	r->dev = sb->st_dev;
	r->ino = sb->st_ino;
	r->size = (uint64_t)sb->st_size;
	r->mtime = sb->st_mtim;
	r->ctime = sb->st_ctim;
	r->mode = sb->st_mode;
	r->uid = sb->st_uid;
	r->gid = sb->st_gid;
	r->rdev = sb->st_rdev;
}

void stage_rel_push(struct cb_stage *st, const char *name, size_t *saved)
{
	size_t n = strlen(name);

	*saved = st->rel_len;
	if (st->rel_len + n + 2 > st->rel_cap) {
		st->rel_cap = (st->rel_len + n + 2) * 2;
		st->rel = cb_xrealloc(st->rel, st->rel_cap);
	}
	st->rel[st->rel_len++] = '/';
	memcpy(st->rel + st->rel_len, name, n + 1);
	st->rel_len += n;
}

void stage_rel_pop(struct cb_stage *st, size_t saved)
{
	st->rel_len = saved;
	st->rel[saved] = '\0';
}

/* The current path for messages: "var/log/x", or "." for the root. */
const char *stage_relname(const struct cb_stage *st)
{
	return st->rel_len ? st->rel + 1 : ".";
}

int stage_left_out(struct cb_stage *st, const struct stat *sb)
{
	for (size_t i = 0; S_ISDIR(sb->st_mode) && i < st->n_skip; i++) {
		const struct cb_stage_skip *k = &st->skip[i];
		if (sb->st_dev != k->dev || sb->st_ino != k->ino)
			continue;
		if (!(st->skip_said & (1u << i)) && st->log) {
			st->skip_said |= 1u << i;
			if (k->warn)
				cb_warn(st->log, "leaving out '%s': %s", st->rel_len ? st->rel : "/", k->what);
			else
				cb_info(st->log, "leaving out '%s': %s", st->rel_len ? st->rel : "/", k->what);
		}
		return 1;
	}
	return 0;
}

static int match_one(const char *pat, const char *slashpath)
{
	if (pat[0] == '/')
		return !fnmatch(pat, slashpath, FNM_PATHNAME);
	/* unanchored: try every suffix that starts at a component boundary */
	for (const char *s = slashpath; s; s = strchr(s + 1, '/'))
		if (!fnmatch(pat, s + 1, FNM_PATHNAME))
			return 1;
	return 0;
}

/* slashpath is "/etc/passwd": the relative path with a leading '/'. */
int stage_excluded_slash(const struct cb_strvec *ex, const char *slashpath, int is_dir)
{
	char buf[1024];

	for (size_t i = 0; ex && i < ex->n; i++) {
		const char *p = ex->v[i];
		size_t len = strlen(p);
		if (len > 1 && p[len - 1] == '/') {
			if (!is_dir || len >= sizeof(buf))
				continue;
			memcpy(buf, p, len - 1);
			buf[len - 1] = '\0';
			p = buf;
		}
		if (match_one(p, slashpath))
			return 1;
	}
	return 0;
}

int cb_stage_excluded(const struct cb_strvec *excludes, const char *relpath, int is_dir)
{
	char *s;
	int r;

	if (!excludes || !excludes->n)
		return 0;
	s = cb_xasprintf("/%s", relpath);
	r = stage_excluded_slash(excludes, s, is_dir);
	free(s);
	return r;
}

/* Component by component, never following a symlink: the path may be
 * longer than PATH_MAX. */
int stage_open_below(int fd, const char *rel)
{
	char *path = cb_xstrdup(rel), *p = path, *slash;
	int cur = dup(fd), err;

	while (cur >= 0 && *p) {
		int next;
		if ((slash = strchr(p, '/')))
			*slash = '\0';
		next = openat(cur, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		err = errno;
		close(cur);
		errno = err;
		cur = next;
		p = slash ? slash + 1 : p + strlen(p);
	}
	free(path);
	return cur;
}
