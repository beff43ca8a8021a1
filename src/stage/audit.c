/*
 * The tracking audit: the tree now against the staging index, after the
 * thaw (include/cb_audit.h). A merge walk like pass 2's full walk, which
 * reads and copies nothing: a listing and an lstat per entry (the lstats
 * shared out to pass 2's pool), on the deep-stack thread, the directories
 * held in a cb_fdpath of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cb_audit.h"
#include "stage_int.h"

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

/* An entry that looked changed before the mark, to be looked at again
 * (recheck_all): rec NULL for a name the index lacks; gone: a name the
 * index has and the listing lacked (its directory is what is looked at). */
struct suspect {
	char *rel;
	const struct cb_index_rec *rec;
	const char *what;
	int gone;
};

/* At most this many suspects are kept for a second look; any more count
 * as missed straight away (loud rather than silent). */
#define MAX_SUSPECTS 10000

struct audit {
	struct cb_stage *st;
	struct cb_audit *a;
	struct timespec mark;
	struct cb_fdpath p;
	struct p2_pool *pool;
	struct suspect *sus;
	size_t n_sus, cap_sus;
};

/* The ctime was given before the mark, whatever the clock's tick: pass
 * 2's racily-clean rule turned around (cb_stage.h). */
static int settled(const struct timespec *c, const struct timespec *mark)
{
	struct timespec cut = *mark;

	if (c->tv_nsec == 0)
		return c->tv_sec < mark->tv_sec - 1;
	cut.tv_nsec -= CB_STAGE_RACY_TICK_NS;
	if (cut.tv_nsec < 0) {
		cut.tv_nsec += 1000000000L;
		cut.tv_sec--;
	}
	return c->tv_sec < cut.tv_sec || (c->tv_sec == cut.tv_sec && c->tv_nsec < cut.tv_nsec);
}

static int same_ts(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* How the entry differs from what was archived, or NULL if it does not. */
static const char *differs(const struct cb_index_rec *o, const struct stat *sb)
{
	if ((o->mode & S_IFMT) != (sb->st_mode & S_IFMT) || o->ino != (uint64_t)sb->st_ino ||
	    o->dev != (uint64_t)sb->st_dev || o->rdev != (uint64_t)sb->st_rdev)
		return "replaced";
	if (o->size != (uint64_t)sb->st_size || !same_ts(&o->mtime, &sb->st_mtim))
		return "content";
	if (o->mode != sb->st_mode || o->uid != sb->st_uid || o->gid != sb->st_gid)
		return "mode or owner";
	/* xattrs, ACLs, flags, the link count: only the ctime moves */
	if (!same_ts(&o->ctime, &sb->st_ctim))
		return "attributes";
	return NULL;
}

static void missed(struct audit *au, const char *rel, const char *what)
{
	struct cb_audit *a = au->a;

	a->missed++;
	if (a->n_names == CB_AUDIT_NAMES)
		return;
	if (!a->paths) {
		a->paths = cb_xcalloc(CB_AUDIT_NAMES, sizeof(*a->paths));
		a->whats = cb_xcalloc(CB_AUDIT_NAMES, sizeof(*a->whats));
	}
	a->whats[a->n_names] = what;
	a->paths[a->n_names++] = cb_xstrdup(rel);
}

/* The entry at the current name looked changed before the mark. A stat is
 * not atomic with the change it races: an open(O_TRUNC) sets the size
 * before the times (ext4 and xfs alike), so a file the guest truncates
 * right now can show its new size with its old mtime and ctime. Such an
 * entry is looked at again once the walk is done (recheck_all). */
static void suspect(struct audit *au, const struct cb_index_rec *rec, const char *what, int gone)
{
	struct suspect *s;

	if (au->n_sus == MAX_SUSPECTS) {
		missed(au, stage_relname(au->st), what);
		return;
	}
	if (au->n_sus == au->cap_sus) {
		au->cap_sus = au->cap_sus ? 2 * au->cap_sus : 16;
		au->sus = cb_xrealloc(au->sus, au->cap_sus * sizeof(*au->sus));
	}
	s = &au->sus[au->n_sus++];
	s->rel = cb_xstrdup(stage_relname(au->st));
	s->rec = rec;
	s->what = what;
	s->gone = gone;
}

static int audit_dir(struct audit *au, const struct stage_dir *d, int dir_settled);

/* Enter the directory NAME at level lv (the one the index has: same
 * inode). A directory gone or replaced since its stat is not entered: its
 * ctime (and its parent's) moved after that stat. 0 or -1. */
static int enter(struct audit *au, size_t lv, const char *name, const struct stat *sb,
		 const struct stage_dir *sub)
{
	int fd = cb_fdpath_fd(&au->p, lv), cfd, ret;
	struct stat now;

	if (fd < 0)
		return errno == ENOENT || errno == ESTALE ? 0 : cb_error_errno("audit: cannot open '%s'",
									  stage_relname(au->st));
	cfd = openat(fd, name, DIR_FLAGS | O_NOATIME);
	if (cfd < 0 && errno == EPERM)
		cfd = openat(fd, name, DIR_FLAGS);
	if (cfd < 0 || fstat(cfd, &now) < 0 || now.st_ino != sb->st_ino || now.st_dev != sb->st_dev) {
		if (cfd >= 0)
			close(cfd);
		return 0;
	}
	if (cb_fdpath_push(&au->p, cfd, name, 0) < 0)
		return cb_error_errno("audit: cannot enter '%s'", stage_relname(au->st));
	ret = audit_dir(au, sub, settled(&sb->st_ctim, &au->mark));
	cb_fdpath_pop(&au->p);
	return ret;
}

/* One name of the listing, o its record (NULL: the index lacks it). */
static int audit_entry(struct audit *au, size_t lv, const char *name, const struct stage_ent *o,
		       const struct stat *sb)
{
	struct cb_stage *st = au->st;
	const char *what;

	au->a->checked++;
	if (!o) {
		/* never staged: a socket, an excluded entry */
		if (S_ISSOCK(sb->st_mode) || stage_left_out(st, sb) ||
		    stage_excluded_slash(&st->excludes, st->rel, S_ISDIR(sb->st_mode)))
			return 0;
		if (settled(&sb->st_ctim, &au->mark))
			suspect(au, NULL, "not archived", 0);
		return 0;
	}
	if ((what = differs(&o->rec, sb)) && settled(&sb->st_ctim, &au->mark))
		suspect(au, &o->rec, what, 0);
	if (!S_ISDIR(sb->st_mode) || !S_ISDIR(o->rec.mode) || o->rec.ino != (uint64_t)sb->st_ino ||
	    sb->st_dev != st->root_dev || !o->sub)
		return 0;
	return enter(au, lv, name, sb, o->sub);
}

/* Index entries the listing lacks: removed; before the mark if their
 * directory's last change was. */
static void audit_gone(struct audit *au, const struct stage_dir *d, const struct listing *l,
		       int dir_settled)
{
	size_t j = 0, saved;

	for (size_t i = 0; d && i < d->n; i++) {
		int c = 1;
		while (j < l->n && (c = strcmp(l->v[j], d->ents[i].name)) < 0)
			j++;
		if (j < l->n && c == 0)
			continue;
		au->a->checked++;
		if (!dir_settled)
			continue;
		stage_rel_push(au->st, d->ents[i].name, &saved);
		suspect(au, NULL, "gone", 1);
		stage_rel_pop(au->st, saved);
	}
}

static int audit_dir(struct audit *au, const struct stage_dir *d, int dir_settled)
{
	size_t lv = cb_fdpath_top(&au->p), j = 0, saved;
	int fd = cb_fdpath_fd(&au->p, lv), ret = 0, *err;
	struct listing l;
	struct stat *pre, one;

	if (fd < 0 || stage_list(fd, &l) < 0)
		return errno == ENOENT || errno == ESTALE ? 0 : cb_error_errno("audit: cannot list '%s'",
									  stage_relname(au->st));
	p2_pool_stat(au->pool, fd, &l, &pre, &err);
	audit_gone(au, d, &l, dir_settled);
	for (size_t i = 0; i < l.n && ret == 0; i++) {
		const struct stage_ent *o = NULL;
		while (d && j < d->n && strcmp(d->ents[j].name, l.v[i]) < 0)
			j++;
		if (d && j < d->n && !strcmp(d->ents[j].name, l.v[i]))
			o = &d->ents[j];
		if (pre ? (errno = err[i]) != 0 :
			  (fd = cb_fdpath_fd(&au->p, lv)) < 0 ||
			  fstatat(fd, l.v[i], &one, AT_SYMLINK_NOFOLLOW) < 0)
			continue;   /* gone since the listing: after the mark */
		stage_rel_push(au->st, l.v[i], &saved);
		ret = audit_entry(au, lv, l.v[i], o, pre ? &pre[i] : &one);
		stage_rel_pop(au->st, saved);
	}
	free(pre);
	free(err);
	stage_listing_release(&l);
	return ret;
}

/* lstat REL ("" the root itself) beneath ROOT, one component at a time,
 * following no symlink. 0, or -1 (errno set). */
static int stat_beneath(int root, const char *rel, struct stat *sb)
{
	char *copy, *name, *slash;
	int fd = root, next, ret = -1;

	if (!*rel)
		return fstat(root, sb);
	copy = cb_xstrdup(rel);
	name = copy;
	while ((slash = strchr(name, '/'))) {
		*slash = '\0';
		next = openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd != root)
			close(fd);
		if (next < 0)
			goto out;
		fd = next;
		name = slash + 1;
	}
	ret = fstatat(fd, name, sb, AT_SYMLINK_NOFOLLOW);
	if (fd != root) {
		int saved = errno;
		close(fd);
		errno = saved;
	}
out:
	free(copy);
	return ret;
}

/* Is the suspect still a change made before the mark? What cannot be
 * looked at again for another reason than its being gone stays one. */
static int still_missed(struct audit *au, int root, struct suspect *s)
{
	struct stat now;
	char *parent, *slash;
	int ret;

	if (s->gone) {
		parent = cb_xstrdup(s->rel);
		slash = strrchr(parent, '/');
		*(slash ? slash : parent) = '\0';
		ret = stat_beneath(root, parent, &now);
		free(parent);
		if (ret < 0)
			return errno != ENOENT && errno != ENOTDIR && errno != ELOOP;
		return settled(&now.st_ctim, &au->mark);
	}
	if (stat_beneath(root, s->rel, &now) < 0)
		return errno != ENOENT && errno != ENOTDIR && errno != ELOOP;
	if (!settled(&now.st_ctim, &au->mark))
		return 0;
	if (s->rec && !(s->what = differs(s->rec, &now)))
		return 0;
	return 1;
}

/* Look at the suspects again, after 20 ms and then at doubling intervals
 * (1.26 s in all): a change in flight ends with a new ctime or with the
 * entry as the index has it; one still there after the last look is a
 * change the tracker missed. */
static void recheck_all(struct audit *au, int root)
{
	static const long delays_ms[] = { 20, 40, 80, 160, 320, 640 };
	size_t first = au->n_sus, kept;

	for (size_t r = 0; r < sizeof(delays_ms) / sizeof(*delays_ms) && au->n_sus; r++) {
		struct timespec ts = { 0, delays_ms[r] * 1000000L };
		nanosleep(&ts, NULL);
		kept = 0;
		for (size_t i = 0; i < au->n_sus; i++) {
			if (still_missed(au, root, &au->sus[i]))
				au->sus[kept++] = au->sus[i];
			else
				free(au->sus[i].rel);
		}
		au->n_sus = kept;
	}
	au->a->in_flight = first - au->n_sus;
	for (size_t i = 0; i < au->n_sus; i++) {
		missed(au, au->sus[i].rel, au->sus[i].what);
		free(au->sus[i].rel);
	}
	free(au->sus);
	au->sus = NULL;
	au->n_sus = au->cap_sus = 0;
}

static int audit_root(void *arg)
{
	struct audit *au = arg;
	struct cb_stage *st = au->st;
	int fd = open(st->src, DIR_FLAGS), ret;
	struct stat sb;

	if (fd < 0 || fstat(fd, &sb) < 0) {
		ret = cb_error_errno("audit: cannot open '%s'", st->src);
		if (fd >= 0)
			close(fd);
		return ret;
	}
	stage_rel_pop(st, 0);
	au->a->checked++;
	if (differs(&st->root_rec, &sb) && settled(&sb.st_ctim, &au->mark))
		suspect(au, &st->root_rec, differs(&st->root_rec, &sb), 0);
	if (sb.st_ino == (ino_t)st->root_rec.ino) {
		cb_fdpath_init(&au->p, fd, O_NOATIME);
		au->pool = p2_pool_new();
		ret = audit_dir(au, st->root, settled(&sb.st_ctim, &au->mark));
		p2_pool_free(au->pool);
		cb_fdpath_release(&au->p);
	} else {
		ret = 0;
	}
	recheck_all(au, fd);
	close(fd);
	return ret;
}

int cb_audit_run(struct cb_stage *st, const struct timespec *mark, struct cb_audit *a)
{
	struct audit au = { .st = st, .a = a, .mark = *mark };
	double start = cb_now();
	int ret;

	memset(a, 0, sizeof(*a));
	if (!st->root)
		return cb_error("audit of '%s' without an index", st->src);
	if (!st->rel) {
		st->rel_cap = 256;
		st->rel = cb_xcalloc(1, st->rel_cap);
	}
	ret = cb_call_deep(audit_root, &au);
	a->seconds = cb_now() - start;
	return ret;
}

void cb_audit_release(struct cb_audit *a)
{
	for (size_t i = 0; i < a->n_names; i++)
		free(a->paths[i]);
	free(a->paths);
	free(a->whats);
	memset(a, 0, sizeof(*a));
}
