/*
 * Private to the staging engine (src/stage*.c): the index, the (dev,ino)
 * maps, the per-run context and the copy primitives.
 *
 * The index mirrors the source tree directory by directory: a directory
 * owns one block of NUL-separated child names (the getdents listing itself)
 * and one array of child records sorted by name, so that pass 2 can
 * merge-walk a fresh sorted listing against it.
 */
#ifndef CB_STAGE_INT_H
#define CB_STAGE_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cb_fdpath.h"
#include "cb_stage.h"
#include "cb_throttle.h"
#include "cb_util.h"

struct stage_dir;

struct stage_ent {
	const char *name;           /* points into the parent's names block */
	struct cb_index_rec rec;
	struct stage_dir *sub;      /* the subdirectory's index, or NULL */
};

struct stage_dir {
	char *names;                /* owned: NUL-separated names */
	struct stage_ent *ents;     /* owned: sorted by strcmp(name) */
	size_t n;
};

/* A sorted listing of one directory (without "." and ".."). */
struct listing {
	char *names;                /* NUL-separated, owned until handed over */
	size_t len, cap;
	char **v;                   /* sorted pointers into names */
	size_t n;
};

/* Open addressing map keyed by (dev,ino); values are owned by the map. */
struct ino_slot {
	uint64_t dev, ino;
	void *val;                  /* NULL: empty slot */
};
struct ino_map {
	struct ino_slot *slots;
	size_t cap, n;
};

/* Hardlink map value: where the inode was last staged. */
struct link_ent {
	char *rel;                  /* staged path relative to the root */
	uint64_t sdev, sino;        /* the staged inode */
	unsigned gen;               /* pass that last refreshed it */
};

/* Orphan map value (pass 2): a vanished staged file parked for reuse. */
struct orphan {
	uint64_t size;
	struct timespec mtime, ctime;
	int used;
	char name[24];              /* inside the holding directory */
};

/* Which guest root an index describes (stage_keep.c). */
struct stage_root_id {
	uint64_t fsid;              /* statfs f_fsid; 0 if none */
	uint64_t dev;               /* st_dev: compared only without an fsid */
	uint64_t ino;               /* the root directory's inode */
	uint64_t gen;               /* its generation (FS_IOC_GETVERSION), 0 if none */
};

struct cb_stage {
	char *src, *dst;
	struct cb_strvec excludes;
	const struct cb_stage_skip *skip; /* cb_stage_opts.skip */
	size_t n_skip;
	unsigned skip_said;         /* bit i: skip[i] was met and said */
	struct cb_log *log;
	int dst_fd;                 /* staging root, for linkat() of hardlinks */
	dev_t root_dev;             /* source root's device: never leave it */
	unsigned gen;               /* pass number: 1, 2, ... */
	struct stage_dir *root;     /* index; NULL before pass 1 */
	struct stage_dir *kept;     /* pass 1 over a kept copy: the last run's index */
	int keep;                   /* keep-staging: save the index after each pass */
	int keep_auto;              /* keep-staging auto: a new guest root is no WARN */
	struct cb_index_rec root_rec;
	struct stage_root_id root_id; /* the source root's identity (pass 1) */
	struct ino_map links;
	struct ino_map orphans;
	int hold_fd;                /* pass 2 holding directory, -1 if none */
	int hold_ok;                /* the source root has no entry of its name */
	unsigned orphan_seq;
	struct cb_stage_stats *stats;
	struct cb_fdpath sp, dp;    /* the walk's directories: source, staging */
	struct timespec pass_start; /* this pass's start */
	struct timespec racy_since; /* the last pass's start (cb_stage_decide_racy) */
	struct timespec kept_since; /* the same for the kept index's records */
	char *rel;                  /* "/a/b" of the current entry ("" = root) */
	size_t rel_len, rel_cap;
	uint64_t since_check;       /* bytes copied since the last interrupt check */
	struct cb_throttle throttle; /* bwlimit on data reads */
	struct cb_progress *progress;
	int no_cfr;                 /* copy_file_range unusable: read/write */
	int no_clone;               /* FICLONE unusable here: copy */
	int is_root;                /* may chown */
	int warned_xattr;
	int side_fd;                /* <dst>.xattrs, -1 until a big xattr needs it */
	uint64_t side_stamp;        /* run's start (ns): side store IDs unique across runs */
	unsigned side_seq;
	char *buf;                  /* read/write fallback buffer */
	char *xbuf;                 /* one xattr value */
	int workers;                /* pass 1 copy threads (stage-workers), >= 1 */
	struct stage_pool *pool;    /* pass 1 with workers: the walker's pool */
	/* a worker's view (stage_pool.c): its pool, the shared bucket */
	struct stage_pool *pool_of;
	uint64_t *pool_bytes;       /* the workers' total, under throttle_mu */
	struct cb_throttle *throttle_shared;
	pthread_mutex_t *throttle_mu;
	struct cb_changes *changes; /* pass 2: what tracking saw (NULL: full walk) */
	void (*dir_hook)(void *arg, int fd);  /* cb_stage_set_dir_hook */
	void *dir_hook_arg;
	struct p2_pool *p2pool;     /* pass 2: lstat workers (NULL: one core) */
	uint64_t *tree_inos;        /* cb_stage_note_inodes: open addressing, 0 = empty */
	size_t tree_inos_cap;
	int final_tracked;          /* the last pass 2 went by tracking alone */
	int shallow;                /* pass 2 over tracked directories: an unchanged
				     * subdirectory (same inode) is not entered */
};

#define STAGE_BUF_SIZE (1 << 20)
#define STAGE_XATTR_MAX 65536

/* The hidden holding directory (pass 2) at the staging root. */
#define STAGE_HOLD_NAME ".cbackup-stage-orphans"

/* stage_index.c */
int stage_list(int dfd, struct listing *l);
void stage_listing_release(struct listing *l);
void stage_dir_free(struct stage_dir *d);
struct stage_ent *stage_dir_find(struct stage_dir *d, const char *name);
void *ino_map_get(const struct ino_map *m, uint64_t dev, uint64_t ino);
void ino_map_put(struct ino_map *m, uint64_t dev, uint64_t ino, void *val);
void ino_map_clear(struct ino_map *m, void (*free_val)(void *));
void stage_rec_fill(struct cb_index_rec *r, const struct stat *sb);
void stage_rel_push(struct cb_stage *st, const char *name, size_t *saved);
void stage_rel_pop(struct cb_stage *st, size_t saved);
const char *stage_relname(const struct cb_stage *st);
/* sb (the entry at st->rel) is a directory of opts.skip: said once, 1. */
int stage_left_out(struct cb_stage *st, const struct stat *sb);
int stage_excluded_slash(const struct cb_strvec *ex, const char *slashpath, int is_dir);
/* The directory rel ("a/b"; "" is fd itself) below fd, opened one
 * component at a time with O_NOFOLLOW: a new fd, or -1 with errno. */
int stage_open_below(int fd, const char *rel);

/* stage_decide.c: the decision rule's clock comparisons, for pass 2 */
int stage_ts_eq(const struct timespec *a, const struct timespec *b);
/* ctime in or after the clock tick of since: a change may hide in it */
int stage_racy(const struct timespec *ctime, const struct timespec *since);

/* stage_walk.c: what both passes share. A source entry that vanished or
 * changed type under pass 1 is left to pass 2 (stage_vanished: counted,
 * 1); the directories of the walk by level (the source's: 0, 1 if it
 * moved or vanished, -1; the staged one's fd or -1); the hardlink map. */
int stage_vanished(struct cb_stage *st);
int stage_gone_errno(int err);
int stage_src_open(struct cb_stage *st, int sfd, const char *name, int flags,
		   const struct stat *sb, int *fd);
int stage_src_dir(struct cb_stage *st, size_t lv, int *fd);
int stage_dst_dir(struct cb_stage *st, size_t lv);
int stage_descend(struct cb_stage *st, int sfd, int dfd, const char *name);
void stage_ascend(struct cb_stage *st);
int stage_dir_meta(struct cb_stage *st, size_t lv, const char *name, const struct stat *sb,
		   int fresh);
void stage_free_link(void *p);
int stage_link_remember_at(struct cb_stage *st, int dfd, const char *name, const struct stat *sb);
void stage_link_remember(struct cb_stage *st, const struct stat *sb, const struct stat *staged);
int stage_link_existing(struct cb_stage *st, int dfd, const char *name, const struct stat *sb);
void stage_paths_at(struct cb_stage *st, int sfd, int dfd);
void stage_paths_release(struct cb_stage *st);

/* stage_p1.c: pass 1 of the directory at the top of the paths (fresh: the
 * staging side is new), and the creation of an entry, also for pass 2 */
int stage_open_new(struct cb_stage *st, int dfd, const char *name);
int stage_fill_reg(struct cb_stage *st, int in, int out, int dfd, const char *name,
		   const struct stat *sb, int fresh);
int stage_create_entry(struct cb_stage *st, int sfd, int dfd, const char *name,
		       const struct stat *sb, int fresh, struct stage_ent *e);
int stage_source_count(struct cb_stage *st, const struct stat *sb, int check_excl);
int stage_list_source(struct cb_stage *st, int sfd, struct listing *l);
struct stage_dir *stage_dir_from_listing(struct listing *l);
int stage_p1_walk(struct cb_stage *st, int fresh, struct stage_dir *kept, struct stage_dir **out);

/* stage_p2.c: pass 2 of the directory at the top of the paths; the parked
 * vanished files released */
int stage_p2_walk(struct cb_stage *st, struct stage_dir *old, struct stage_dir **out, int *dirty);
void stage_hold_release(struct cb_stage *st);

/* stage_p2.c: pass 2 of one directory (sfd, and its staged twin dfd, open),
 * for the tracked pass. */
int stage_p2_dir(struct cb_stage *st, int sfd, int dfd, struct stage_dir *old,
		 struct stage_dir **out, int *dirty);
/* ... only the entries NAMES of that directory, index d: 0, -1, or 1
 * (nothing done) if one is not an entry the index has, not a directory on
 * either side, still there: the caller lists the directory. */
int stage_p2_names(struct cb_stage *st, int sfd, int dfd, struct stage_dir *d,
		   char *const *names, size_t n, int *dirty);

/* stage_p2track.c: pass 2 over what change tracking saw. 0, 1 if it cannot
 * be exact (the caller walks the whole tree), -1 on error. */
int stage_p2_tracked(struct cb_stage *st, int sfd, int *dirty);

/* stage_p2par.c: pass 2 takes the stats of a listing on several threads */
struct p2_pool;
struct p2_pool *p2_pool_new(void);   /* NULL with one core */
void p2_pool_free(struct p2_pool *p);
void p2_pool_stat(struct p2_pool *p, int dfd, const struct listing *l, struct stat **sb,
		     int **err);

/* stage_keep.c */
struct stage_dir *stage_keep_load(struct cb_stage *st);
int stage_keep_save(struct cb_stage *st);
/* The kept index no longer vouches for the copy: removed, or (aside: the
 * guest is frozen) renamed to the save's temporary name, which the save
 * removes once the guest runs again (unlinking a 100 MB index frees its
 * blocks: 40 ms). */
void stage_keep_drop(struct cb_stage *st, int aside);
void stage_root_id_get(int fd, const struct stat *sb, struct stage_root_id *id);

/* stage_pool.c */
struct stage_pool;
int stage_pool_start(struct cb_stage *st, int workers);
int stage_pool_push(struct cb_stage *st, int in, int out, const struct stat *sb, int fresh);
int stage_pool_failed(struct cb_stage *st);
void stage_pool_kick(struct cb_stage *st);
int stage_pool_finish(struct cb_stage *st);

/* stage_copy.c */
/* openat below sdfd, never following a symlink; with sb, the fd must be
 * the entry sb describes (type, dev, ino), else -1 with errno ESTALE. */
int stage_open_src(struct cb_stage *st, int sdfd, const char *name, int flags,
		   const struct stat *sb);
int stage_copy_data(struct cb_stage *st, int in, int out, const struct stat *sb);
int stage_meta(struct cb_stage *st, int sfd, int dfd, int sdfd, int ddfd, const char *name,
	       const struct stat *sb, int fresh);
int stage_make_special(struct cb_stage *st, int sdfd, int ddfd, const char *name,
		       const struct stat *sb);
int stage_remove(struct cb_stage *st, int ddfd, const char *name, uint64_t *count);
int stage_fail(struct cb_stage *st, const char *verb, const char *where);

#endif
