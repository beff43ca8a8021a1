/*
 * cb_stage: the staging engine (DESIGN §7). See include/cb_stage.h.
 *
 * Both passes walk the source one directory at a time with openat/fstatat
 * on directory fds, entries in sorted order. Pass 1 creates (or, over a
 * kept staging copy, quick-checks) every entry and builds the index; pass 2
 * merge-walks each source directory against its index records, so new,
 * vanished and changed entries are found in one pass without path lookups.
 *
 * Here: the engine's life (new, free), each pass from its roots, and the
 * estimate. The passes: stage_p1.c, stage_p2.c (tracked: stage_p2track.c);
 * what they share: stage_walk.c; the decision rule: stage_decide.c; the
 * copy of data and metadata: stage_copy.c (workers: stage_pool.c); the
 * index: stage_index.c (kept: stage_keep.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cb_cleanup.h"
#include "cb_rmtree.h"
#include "cb_track.h"
#include "stage_int.h"

/* ---- the public passes ---- */

/* The side store goes with the staging copy: kept with it, else removed. */
static void side_release(struct cb_stage *st)
{
	char *dir = cb_xasprintf("%s%s", st->dst, CB_STAGE_XATTR_DIR);

	if (st->side_fd >= 0)
		close(st->side_fd);
	if (!st->keep && st->dst[0])
		cb_remove_tree(dir);
	free(dir);
}

int cb_stage_new(struct cb_stage **out, const struct cb_stage_opts *opts, struct cb_log *log)
{
	struct cb_stage *st = cb_xcalloc(1, sizeof(*st));
	size_t n;

	st->src = cb_xstrdup(opts->src);
	st->dst = cb_xstrdup(opts->dst);
	/* trailing '/' off: paths are built as root + "/rel" ("/" becomes "") */
	for (n = strlen(st->src); n > 0 && st->src[n - 1] == '/'; n--)
		st->src[n - 1] = '\0';
	for (n = strlen(st->dst); n > 1 && st->dst[n - 1] == '/'; n--)
		st->dst[n - 1] = '\0';
	if (opts->excludes)
		cb_strvec_copy(&st->excludes, opts->excludes);
	st->skip = opts->skip;
	st->n_skip = opts->n_skip < CB_STAGE_MAX_SKIP ? opts->n_skip : CB_STAGE_MAX_SKIP;
	st->log = log;
	cb_throttle_init(&st->throttle, opts->bwlimit);
	st->progress = opts->progress;
	st->keep = opts->keep;
	st->keep_auto = opts->keep_auto;
	st->workers = opts->workers > 0 ? opts->workers : (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (st->workers < 1)
		st->workers = 1;
	st->dst_fd = st->hold_fd = st->side_fd = -1;
	st->side_stamp = (uint64_t)(cb_now() * 1e9);
	st->is_root = geteuid() == 0;
	st->buf = cb_xmalloc(STAGE_BUF_SIZE);
	st->xbuf = cb_xmalloc(STAGE_XATTR_MAX);
	st->rel = cb_xcalloc(1, st->rel_cap = 256);
	*out = st;
	return 0;
}

void cb_stage_release_index(struct cb_stage *st)
{
	if (!st)
		return;
	stage_dir_free(st->root);
	st->root = NULL;
	stage_dir_free(st->kept);
	st->kept = NULL;
	cb_changes_free(st->changes);
	st->changes = NULL;
	free(st->tree_inos);
	st->tree_inos = NULL;
	st->tree_inos_cap = 0;
	ino_map_clear(&st->links, stage_free_link);
}

void cb_stage_free(struct cb_stage *st)
{
	if (!st)
		return;
	stage_pool_finish(st);
	stage_hold_release(st);
	if (st->dst_fd >= 0)
		close(st->dst_fd);
	stage_dir_free(st->root);
	stage_dir_free(st->kept);
	cb_changes_free(st->changes);
	free(st->tree_inos);
	ino_map_clear(&st->links, stage_free_link);
	cb_strvec_clear(&st->excludes);
	side_release(st);   /* before dst: the side store is named from it */
	free(st->src);
	free(st->dst);
	free(st->buf);
	free(st->xbuf);
	free(st->rel);
	free(st);
}

static int open_src_root(struct cb_stage *st, struct stat *sb)
{
	int fd = open(st->src[0] ? st->src : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return cb_error_errno("cannot open source '%s'", st->src[0] ? st->src : "/");
	if (fstat(fd, sb) < 0) {
		close(fd);
		return cb_error_errno("cannot stat source '%s'", st->src);
	}
	return fd;
}

/* Staging root: created 0700 (the source's mode comes at the end, so a
 * half-made copy is never readable). *fresh: it was empty. */
static int open_dst_root(struct cb_stage *st, int *fresh)
{
	struct listing l;

	if (mkdir(st->dst, 0700) < 0 && errno != EEXIST)
		return cb_error_errno("cannot create staging directory '%s'", st->dst);
	if (st->dst_fd < 0)
		st->dst_fd = open(st->dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st->dst_fd < 0 || fchmod(st->dst_fd, 0700) < 0)
		return cb_error_errno("cannot open staging directory '%s'", st->dst);
	if (stage_list(st->dst_fd, &l) < 0)
		return cb_error_errno("cannot list staging directory '%s'", st->dst);
	*fresh = l.n == 0;
	stage_listing_release(&l);
	return 0;
}

/* The source root itself cannot vanish: that is an error. */
static int root_ret(struct cb_stage *st, int ret)
{
	return ret == 1 ? cb_error("source '%s' vanished", st->src) : ret;
}

static void begin_pass(struct cb_stage *st, struct cb_stage_stats *stats)
{
	memset(stats, 0, sizeof(*stats));
	st->stats = stats;
	st->gen++;
	st->rel_len = 0;
	st->rel[0] = '\0';
	st->since_check = 0;
	stats->seconds = cb_now();
	/* what the last pass recorded with a ctime from its start on may have
	 * changed again in the same timestamp tick (cb_stage_decide_racy) */
	st->racy_since = st->pass_start;
	clock_gettime(CLOCK_REALTIME, &st->pass_start);
}

static int pass1(struct cb_stage *st, struct cb_stage_stats *stats)
{
	struct stat sb;
	int sfd, fresh = 0, ret;

	begin_pass(st, stats);
	stage_dir_free(st->root);
	st->root = NULL;
	sfd = open_src_root(st, &sb);
	if (sfd < 0)
		return -1;
	st->root_dev = sb.st_dev;
	stage_root_id_get(sfd, &sb, &st->root_id);
	ret = open_dst_root(st, &fresh);
	if (ret == 0 && st->dir_hook)
		st->dir_hook(st->dir_hook_arg, st->dst_fd);
	stats->files++;
	/* the kept index is read, then removed before anything changes: an
	 * interrupted run leaves a copy that no index vouches for */
	if (ret == 0 && st->keep && !fresh)
		st->kept = stage_keep_load(st);
	stage_keep_drop(st, 0);
	if (ret == 0 && st->workers > 1)
		ret = stage_pool_start(st, st->workers);
	stage_paths_at(st, sfd, st->dst_fd);
	if (ret == 0)
		ret = root_ret(st, stage_p1_walk(st, fresh, st->kept, &st->root));
	stage_paths_release(st);
	/* every file's copy done before the root's times and the index; a
	 * signal that came while the last files were copied stops here */
	if (stage_pool_finish(st) < 0 || (ret == 0 && st->workers > 1 && cb_check_interrupt() < 0))
		ret = -1;
	stage_dir_free(st->kept);
	st->kept = NULL;
	if (ret == 0)
		ret = stage_meta(st, sfd, st->dst_fd, -1, -1, ".", &sb, fresh);
	stage_rec_fill(&st->root_rec, &sb);
	if (ret == 0 && st->keep)
		ret = stage_keep_save(st);
	close(sfd);
	stats->seconds = cb_now() - stats->seconds;
	return ret;
}

static int pass2(struct cb_stage *st, struct cb_stage_stats *stats)
{
	struct stat sb;
	enum cb_delta delta;
	int sfd, ret, dirty = 0;

	if (!st->root)
		return cb_error("final sync of '%s' without a complete first sync", st->src);
	/* the guest is frozen now: a bandwidth limit would only lengthen that,
	 * and the pass is too short for a progress line */
	cb_throttle_init(&st->throttle, 0);
	st->progress = NULL;
	begin_pass(st, stats);
	sfd = open_src_root(st, &sb);
	if (sfd < 0)
		return -1;
	st->root_dev = sb.st_dev;
	stats->files++;
	delta = cb_stage_decide(&st->root_rec, &sb);
	/* what pass 1 kept no longer vouches for the copy pass 2 changes;
	 * cb_stage_save_index() writes the new one once the guest runs again */
	if (st->keep)
		stage_keep_drop(st, 1);
	st->hold_ok = !stage_dir_find(st->root, STAGE_HOLD_NAME);
	st->p2pool = p2_pool_new();
	ret = st->changes ? stage_p2_tracked(st, sfd, &dirty) : 1;
	st->final_tracked = ret == 0;
	if (ret == 1) {
		cb_info(st->log, "pass 2: full walk");
		stage_paths_at(st, sfd, st->dst_fd);
		ret = root_ret(st, stage_p2_walk(st, st->root, &st->root, &dirty));
		stage_paths_release(st);
	}
	cb_changes_free(st->changes);
	st->changes = NULL;
	p2_pool_free(st->p2pool);
	st->p2pool = NULL;
	dirty |= st->hold_fd >= 0;
	stage_hold_release(st);
	/* the root's own metadata last: its children are done */
	if (ret == 0 && (dirty || delta != CB_DELTA_SAME))
		ret = stage_meta(st, sfd, st->dst_fd, -1, -1, ".", &sb, 0);
	stage_rec_fill(&st->root_rec, &sb);
	if (ret < 0) {  /* a half-updated index would lie to a later pass */
		stage_dir_free(st->root);
		st->root = NULL;
	}
	close(sfd);
	stats->seconds = cb_now() - stats->seconds;
	return ret;
}

void cb_stage_set_dir_hook(struct cb_stage *st, void (*fn)(void *arg, int fd), void *arg)
{
	st->dir_hook = fn;
	st->dir_hook_arg = arg;
}

int cb_stage_final_tracked(const struct cb_stage *st)
{
	return st->final_tracked;
}

void cb_stage_set_changes(struct cb_stage *st, struct cb_changes *c)
{
	cb_changes_free(st->changes);
	st->changes = c;
}

/* The walks recurse once per directory level: they run on a thread with
 * a deep stack (cb_call_deep), so a guest's depth is not bounded by the
 * main thread's 8 MiB. */
struct pass_call {
	struct cb_stage *st;
	struct cb_stage_stats *stats;
	int pass;
};

static int pass_call(void *arg)
{
	struct pass_call *c = arg;

	return c->pass == 1 ? pass1(c->st, c->stats) : pass2(c->st, c->stats);
}

int cb_stage_pass1(struct cb_stage *st, struct cb_stage_stats *stats)
{
	return cb_call_deep(pass_call, &(struct pass_call){ st, stats, 1 });
}

int cb_stage_pass2(struct cb_stage *st, struct cb_stage_stats *stats)
{
	return cb_call_deep(pass_call, &(struct pass_call){ st, stats, 2 });
}

static int save_index_call(void *arg)
{
	return stage_keep_save(arg);
}

int cb_stage_save_index(struct cb_stage *st)
{
	if (!st->keep || !st->root)
		return 0;
	return cb_call_deep(save_index_call, st);
}

/* ---- estimate ---- */

/* An entry's share of est->data and est->tar (see cb_stage_est). */
static void est_count(struct cb_stage_est *est, const struct stat *sb)
{
	uint64_t data = 0;

	est->entries++;
	est->bytes += S_ISREG(sb->st_mode) ? (uint64_t)sb->st_blocks * 512 : 4096;
	if (S_ISSOCK(sb->st_mode))
		return;   /* not staged, not archived */
	if (S_ISREG(sb->st_mode)) {
		data = (uint64_t)sb->st_size;
		if ((uint64_t)sb->st_blocks * 512 < data)
			data = (uint64_t)sb->st_blocks * 512;
		est->data += sb->st_nlink > 1 ? data / sb->st_nlink : data;
		data = (data + 511) & ~(uint64_t)511;
		data = sb->st_nlink > 1 ? data / sb->st_nlink : data;
	}
	est->tar += 512 + data;
}

static int est_dir(struct cb_stage *st, struct cb_stage_est *est)
{
	size_t lv = cb_fdpath_top(&st->sp);
	struct listing l;
	int fd = cb_fdpath_fd(&st->sp, lv), ret = 0;

	/* removed (or moved) since it was entered: nothing */
	if (fd < 0 || stage_list(fd, &l) < 0)
		return stage_gone_errno(errno) && lv ? 0 : stage_fail(st, "cannot list", "in source");
	for (size_t i = 0; i < l.n && ret == 0; i++) {
		struct stat sb;
		size_t saved;
		stage_rel_push(st, l.v[i], &saved);
		if ((fd = cb_fdpath_fd(&st->sp, lv)) >= 0 &&
		    fstatat(fd, l.v[i], &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
		    !stage_excluded_slash(&st->excludes, st->rel, S_ISDIR(sb.st_mode))) {
			est_count(est, &sb);
			if (S_ISDIR(sb.st_mode) && sb.st_dev == st->root_dev) {
				int sub = stage_open_src(st, fd, l.v[i], O_RDONLY | O_DIRECTORY, &sb);
				if (sub >= 0 && cb_fdpath_push(&st->sp, sub, l.v[i], st->rel_len) == 0) {
					ret = est_dir(st, est);
					cb_fdpath_pop(&st->sp);
				}
			}
		}
		stage_rel_pop(st, saved);
	}
	stage_listing_release(&l);
	return ret;
}

static int estimate(const char *src, const struct cb_strvec *excludes, struct cb_stage_est *est)
{
	struct cb_stage *st;
	struct cb_stage_opts o = { .src = src, .dst = "", .excludes = excludes };
	struct stat sb;
	int fd, ret;

	*est = (struct cb_stage_est){ .bytes = 4096, .entries = 1, .tar = 512 };
	cb_stage_new(&st, &o, NULL);
	fd = open_src_root(st, &sb);
	ret = fd < 0 ? -1 : 0;
	if (ret == 0) {
		st->root_dev = sb.st_dev;
		cb_fdpath_init(&st->sp, fd, O_NOATIME);
		ret = est_dir(st, est);
		cb_fdpath_release(&st->sp);
		close(fd);
	}
	cb_stage_free(st);
	return ret;
}

struct est_call {
	const char *src;
	const struct cb_strvec *excludes;
	struct cb_stage_est *est;
};

static int est_call(void *arg)
{
	struct est_call *c = arg;

	return estimate(c->src, c->excludes, c->est);
}

int cb_stage_estimate(const char *src, const struct cb_strvec *excludes, struct cb_stage_est *e)
{
	return cb_call_deep(est_call, &(struct est_call){ src, excludes, e });
}
