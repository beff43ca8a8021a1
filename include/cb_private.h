/*
 * cb_private: directories only root can enter, and files cbackup creates
 * in directories others can write to.
 *
 * A backup runs as root beside unprivileged users, in a shared /var/tmp and
 * into dump directories other hosts write to. Nothing found at a
 * predictable name is trusted: the staging copy lives in a root-only
 * directory cbackup creates and checks with fstat, each guest's staging
 * directory is created with mkdirat (never adopted) and recorded with a
 * marker, and files in shared directories are created O_EXCL|O_NOFOLLOW
 * with explicit modes whatever the umask.
 */
#ifndef CB_PRIVATE_H
#define CB_PRIVATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Open PATH as a private directory: created with mode 0700 when missing,
 * then checked on the open fd: a directory (not a symlink), owned by the
 * effective user, no group or other permission bits. Returns the fd
 * (O_DIRECTORY, close-on-exec) or -1 with an error naming PATH and what
 * is wrong with it.
 */
int cb_private_dir_open(const char *path);

/*
 * The staging directory of guest ID: TMPDIR/cbackup/cbackup-ID.stage
 * (*path_out, caller frees). With reuse (keep-staging), a directory that
 * cbackup created and recorded earlier (its marker beside it names its
 * device, inode and ctime at the end of the last run) is kept; anything else there is removed first and a
 * new one made with mkdirat and recorded. *reused says which.
 */
int cb_stage_dir_prepare(const char *tmpdir, const char *id, int reuse, char **path_out,
			 int *reused);
/* 1 if guest ID has a staging directory cb_stage_dir_prepare would keep
 * (recorded by a keep-staging run), without touching anything. */
int cb_stage_dir_kept(const char *tmpdir, const char *id);
/* Record the staging directory as it is now (end of a keep-staging run). */
int cb_stage_dir_record(const char *stage_path);
/* Remove the staging directory and its marker, and the private parent
 * when nothing else is left in it. */
int cb_stage_dir_remove(const char *stage_path);

/*
 * Kept staging copies (keep-staging) in TMPDIR: every recorded staging
 * directory (its marker matches), of guest ID only when ID is not NULL,
 * with the space it and its companions (index, side store, mount points'
 * copies) take. 0 (none: *n = 0) or -1.
 */
struct cb_kept_copy {
	char id[256];
	char *path;
	uint64_t bytes;
};
int cb_kept_copies(const char *tmpdir, const char *id, struct cb_kept_copy **out, size_t *n);
void cb_kept_copies_free(struct cb_kept_copy *v, size_t n);
/*
 * keep-staging 0: move the staging directory and its companions aside
 * (TMPDIR/cbackup/.trash-cbackup-ID.stage.PID, one rename each) and
 * remove them with WORKERS threads in the background, so that the run's
 * result line does not wait for it; cb_trash_wait() joins (the job does,
 * after its last line). A killed run's trash is removed by the next run of
 * the guest (cb_stage_dir_prepare). *out is NULL when the removal was
 * done at once (no thread). 0 or -1 (nothing moved: remove it now).
 */
struct cb_trash;
int cb_stage_dir_trash(const char *stage_path, int workers, struct cb_trash **out);
int cb_trash_wait(struct cb_trash *t);

/* Remove guest ID's staging directory and every companion of it; the
 * caller holds the guest's lock. */
int cb_stage_dir_purge(const char *tmpdir, const char *id);

/*
 * Create PATH (O_CREAT|O_EXCL|O_NOFOLLOW) with exactly MODE (fchmod after
 * the open, so the umask does not matter). Returns the fd or -1 (errno
 * kept: EEXIST when the name is taken, by a symlink too).
 */
int cb_create_excl(const char *path, mode_t mode);
/* The same, NAME relative to DIRFD. */
int cb_create_excl_at(int dirfd, const char *name, mode_t mode);

/* Create DIRFD/NAME as cb_create_excl_at(0644) with DATA, fsynced; on any
 * error nothing is left. 0 or -1 (error set). */
int cb_create_file_at(int dirfd, const char *name, const void *data, size_t len);

/*
 * Write TEXT to PATH through PATH.tmp (any old PATH.tmp, a planted
 * symlink included, is unlinked, then created O_EXCL), fsync, rename:
 * PATH is replaced whole, never followed, with exactly MODE.
 */
int cb_write_file_replace(const char *path, const char *text, mode_t mode);
/* The same with LEN bytes of DATA. */
int cb_write_file_replace_bytes(const char *path, const void *data, size_t len, mode_t mode);
/* The same with what FILL writes to the fd (0, or -1 with errno set). */
int cb_write_file_replace_with(const char *path, mode_t mode, int (*fill)(int fd, void *ctx),
			       void *ctx);

#endif
