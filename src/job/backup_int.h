/*
 * backup_int.h: the state of one guest's backup (struct guest_run) and
 * what the files of src/job/backup*.c call of each other. Not a public
 * header: the job calls cb_backup.h.
 */
#ifndef CB_BACKUP_INT_H
#define CB_BACKUP_INT_H

#include <dirent.h>
#include <errno.h>
#include <malloc.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <syslog.h>
#include "cb_archive.h"
#include "cb_audit.h"
#include "cb_catalog.h"
#include "cb_backup.h"
#include "cb_cleanup.h"
#include "cb_discover.h"
#include "cb_fullsync.h"
#include "cb_keepauto.h"
#include "cb_codec.h"
#include "cb_encarchive.h"
#include "cb_ct_volumes.h"
#include "cb_index.h"
#include "cb_exit.h"
#include "cb_guest.h"
#include "cb_hook.h"
#include "cb_imgstage.h"
#include "cb_jobstatus.h"
#include "cb_leftovers.h"
#include "cb_lock.h"
#include "cb_pvect.h"
#include "cb_notes.h"
#include "cb_objstore.h"
#include "cb_private.h"
#include "cb_prune.h"
#include "cb_pve.h"
#include "cb_reuse.h"
#include "cb_reuse_trust.h"
#include "cb_rmtree.h"
#include "cb_run.h"
#include "cb_sink.h"
#include "cb_snapshot.h"
#include "cb_stage.h"
#include "cb_store.h"
#include "cb_track.h"
#include "cb_vmsnap.h"

/* A container's extra volume (key mp): host SOURCE at TARGET in the guest. */
struct mount_point {
	char *source;
	char *target;               /* "./srv/data", as archived */
	char *stage_dir;            /* suspend/stop: its own staging copy */
	struct cb_stage *stage;
};

struct guest_run {
	struct cb_opts opts;         /* as resolved: read only (cb_opts.h) */
	enum cb_mode mode;           /* the mode run: snapshot falls back to suspend */
	struct cb_log *log;
	struct cb_strvec excludes;   /* exclude-path + stdexcludes */
	char *stage_dir;
	char *archive_path;
	char *log_path;
	time_t started_wall;
	double started;
	struct cb_guest guest;
	struct cb_stage *stage;       /* ct: the file tree */
	struct cb_track *track;       /* ct: changes from pass 1 to the freeze */
	struct timespec track_end;    /* ct: where tracking's view ended (cb_audit.h) */
	int fullsync_pending;         /* ct: the last audit found a miss (cb_fullsync.h) */
	struct cb_imgstage *images;   /* vm: the disk images */
	struct cb_vmsnap *vm;          /* vm: QEMU's copy-before-write snapshot */
	struct cb_vmsnap_opts vm_opts;
	int stage_created;
	int keep;                    /* keep-staging as decided for this run (auto resolved) */
	int drop_kept;               /* auto: the kept copy is used, then removed */
	struct cb_progress progress; /* TTY progress of pass 1 and the archive */
	char hostname[256];          /* the guest's, for hooks */
	int hostname_configured;     /* hostname is its config's (vzdump's "CT Name:") */
	uint64_t estimate;           /* bytes the staging copy needs */
	int estimate_after_sync;     /* keep-staging: measured by the first sync */
	uint64_t first_bytes;        /* the first sync's tree: file bytes + a header each */
	/* ct: progress totals from the estimate's walk (cb_stage_est): the
	 * root's file bytes (its first sync), the tar stream (the archive) */
	uint64_t sync_total, archive_total;
	struct cb_lock guest_lock;   /* host-local, per guest */
	struct cb_lock store_lock;   /* on the storage, per guest */
	struct cb_guest_result *res; /* what the job reports (mail, JSON) */
	struct mount_point *mps;     /* ct: the mp volumes */
	size_t n_mps;
	struct cb_ct_volume *vols;       /* ct: root and mps that are images, held open (cb_ct_volume) */
	/* snapshot mode: one backend and snapshot per volume, root first */
	const struct cb_snap_backend **snap_be;
	struct cb_snapshot *snaps;
	char mode_why[512];          /* why this mode (for the log and --dry-run) */
	int stopped;                 /* not running: copied as it is, never frozen */
	char *stop_cmd, *start_cmd;  /* mode stop: how the guest is stopped and started */
	struct cb_stage_skip own[2]; /* ct: where cbackup writes, left out if met (cb_stage.h) */
	size_t n_own;
	struct cb_objstore *store;   /* layout = store (or S3): where the night goes */
	struct cb_store_night *night;
	struct cb_objstore_lock *object_lock;  /* S3: the guest's lock object (other hosts) */
	char *archive_label;         /* a store's night: "STORAGE:NAME" */
};

/* backup_preflight.c: before anything is copied */
const char *backup_type_upper(const struct guest_run *r);
void backup_find_hostname(struct guest_run *r);
int backup_guest_hook_bounded(struct guest_run *r, const char *phase, int timeout_ms);
int backup_guest_hook(struct guest_run *r, const char *phase);
void backup_warn_unimplemented(struct guest_run *r);
void backup_build_excludes(struct guest_run *r);
int backup_reads_snapshots(const struct guest_run *r);
int backup_check_dump_space(struct guest_run *r, uint64_t need);
int backup_preflight(struct guest_run *r);

/* backup_store.c: a night to a unit store (r->store, opened by the caller) */
int backup_store_open(struct guest_run *r, struct cb_sink **sink);
void backup_store_attach(struct guest_run *r, struct cb_codec_writer *codec);
char *backup_store_idx_path(const struct guest_run *r);
int backup_store_commit(struct guest_run *r, const char *idx_path, const char *idx_hex);
void backup_store_log(struct guest_run *r);
void backup_store_end_night(struct guest_run *r);
void backup_store_close(struct guest_run *r);
/* 0 for an S3 storage: its night writes nothing in a dumpdir (nor with
 * --stdout); its log file (and an encrypted archive's) is
 * backup_host_log_path()'s. */
int backup_uses_dumpdir(const struct guest_run *r);
/* TMPDIR/cbackup/TYPE-ID.log, the last one removed (malloc'd), or NULL. */
char *backup_host_log_path(const struct guest_run *r);
/* The night's archive as the admin names it: a store's "STORAGE:NAME"
 * (what restore, verify and list take), else the archive's path ("-"
 * with --stdout): the hook's TARGET, the log, the status. */
const char *backup_target(const struct guest_run *r);

/* backup_stage.c: staging and the freeze */
void backup_warn_no_freezer(struct guest_run *r, const char *what);
int backup_frozen_section(struct guest_run *r, int (*work)(struct guest_run *));
int backup_stage_guest(struct guest_run *r);

/* backup_mode.c: the mode */
void backup_choose_mode(struct guest_run *r);
int backup_snapshot_guest(struct guest_run *r);
void backup_remove_snapshots(struct guest_run *r);

/* backup_archive.c: the archive */
void backup_release_indexes(struct guest_run *r);
int backup_write_archive(struct guest_run *r);

/* backup_enc.c: encryption at rest (cb_encarchive.h). The codec writes
 * into the sealing writer's sink; the plain catalog and .sha256 go to a
 * private directory on the tmpdir (r->archive_path points there between
 * begin and finish), sealed into the encrypted catalog at finish. */
struct backup_enc;
int backup_encrypts(const struct guest_run *r);
/* NULL in *out when the guest is not encrypted. 0 or -1. */
int backup_enc_begin(struct guest_run *r, struct backup_enc **out);
/* The codec's sink; what it copies from (the previous archive, NULL:
 * none), for the trust map's name. */
struct cb_sink *backup_enc_sink(struct backup_enc *e);
void backup_enc_attach(struct backup_enc *e, struct cb_codec_writer *codec);
const struct cb_reuse *backup_enc_prev(const struct backup_enc *e);
/* Before the first byte: the archive's SHA-256 resumes from the states
 * at path (kept with the staging copy; NULL: none). */
void backup_enc_resume(struct backup_enc *e, const char *path);
int backup_enc_finish(struct guest_run *r, struct backup_enc *e, const char *path);
void backup_enc_free(struct guest_run *r, struct backup_enc *e);
/* NAME.notes beside the archive, sealed. */
int backup_enc_notes(struct guest_run *r, const char *text);

#endif
