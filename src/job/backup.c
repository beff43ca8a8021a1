/*
 * cb_backup: the phases of one guest's backup. See include/cb_backup.h.
 * In src/job/, the top floor: it drives the modules below (guest, stage,
 * archive, codec, sink, and cmd/'s prune and leftovers).
 *
 * struct guest_run is the mutable state of one guest's backup; the
 * resolved options in it are filled once and then only read.
 */
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
#include "cb_ctvol.h"
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
#include "cb_track.h"
#include "cb_vmcbw.h"

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
	struct cb_vmcbw *vm;          /* vm: QEMU's copy-before-write snapshot */
	struct cb_vmcbw_opts vm_opts;
	int stage_created;
	int keep;                    /* keep-staging as decided for this run (auto resolved) */
	int drop_kept;               /* auto: the kept copy is used, then removed */
	struct cb_progress progress; /* TTY progress of pass 1 and the archive */
	char hostname[256];          /* the guest's, for hooks */
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
	struct cb_ctvol *vols;       /* ct: root and mps that are images, held open (cb_ctvol) */
	/* snapshot mode: one backend and snapshot per volume, root first */
	const struct cb_snap_backend **snap_be;
	struct cb_snapshot *snaps;
	char mode_why[512];          /* why this mode (for the log and --dry-run) */
	int stopped;                 /* not running: copied as it is, never frozen */
	char *stop_cmd, *start_cmd;  /* mode stop: how the guest is stopped and started */
	struct cb_stage_skip own[2]; /* ct: where cbackup writes, left out if met (cb_stage.h) */
	size_t n_own;
};

static const char *const std_excludes[] = { "/tmp/?*", "/var/tmp/?*", "/var/run/?*.pid", NULL };

char *cb_backup_archive_name(enum cb_guest_type type, const char *id, time_t when,
			     enum cb_compress compress, enum cb_archive_name naming)
{
	struct tm tm;
	char stamp[32];

	localtime_r(&when, &tm);
	strftime(stamp, sizeof(stamp), "%Y_%m_%d-%H_%M_%S", &tm);
	if (type == CB_GUEST_CT && naming == CB_NAME_VZDUMP && cb_catalog_pve_vmid(id))
		return cb_xasprintf("vzdump-lxc-%s-%s.tar%s", id, stamp, cb_compress_ext(compress));
	return cb_xasprintf("cbackup-%s-%s-%s.tar%s", cb_guest_type_name(type), id, stamp,
			    cb_compress_ext(compress));
}


static const char *type_upper(const struct guest_run *r)
{
	return cb_guest_type_label(r->opts.type);
}

/* "hostname: x" (Proxmox), "hostname = x", "lxc.uts.name = x" in FILE. */
static int hostname_from_config(const char *file, char *out, size_t len)
{
	static const char *const keys[] = { "hostname", "lxc.uts.name", NULL };
	FILE *f = file ? fopen(file, "re") : NULL;
	char line[512];
	int found = 0;

	while (f && !found && fgets(line, sizeof(line), f)) {
		for (int i = 0; keys[i] && !found; i++) {
			size_t k = strlen(keys[i]);
			char *v = line + k;
			if (strncmp(line, keys[i], k) || (*v != ':' && *v != '=' && *v != ' '))
				continue;
			v += strspn(v, " \t:=");
			v[strcspn(v, " \t\r\n")] = '\0';
			found = *v && snprintf(out, len, "%s", v) > 0;
		}
	}
	if (f)
		fclose(f);
	return found;
}

/* The first word of FILE's first line ("" if none). */
static void first_word(const char *file, char *out, size_t len)
{
	FILE *f = fopen(file, "re");

	out[0] = '\0';
	if (f && fgets(out, (int)len, f))
		out[strcspn(out, " \t\r\n")] = '\0';
	if (f)
		fclose(f);
}

/* vzdump gives hooks the guest's host name: from its config, else the
 * container's /etc/hostname, else "CT101" / "VM200". */
static void find_hostname(struct guest_run *r)
{
	if (hostname_from_config(r->opts.guest_config, r->hostname, sizeof(r->hostname)))
		return;
	if (r->opts.root) {
		char *etc = cb_xasprintf("%s/etc/hostname", r->opts.root);
		first_word(etc, r->hostname, sizeof(r->hostname));
		free(etc);
	}
	if (!r->hostname[0])
		snprintf(r->hostname, sizeof(r->hostname), "%s%s", type_upper(r), r->opts.id);
}

/* timeout_ms: 0 for none; a hook run while the guest is frozen gets what is
 * left of max-freeze (the watchdog thaws at that deadline anyway). */
static int guest_hook_bounded(struct guest_run *r, const char *phase, int timeout_ms)
{
	struct cb_hook_env env = {
		.dumpdir = r->opts.dumpdir, .storeid = r->opts.storage,
		.vmtype = r->opts.type == CB_GUEST_VM ? "qemu" : "lxc",
		.target = r->archive_path, .logfile = r->log_path, .hostname = r->hostname,
		.timeout_ms = timeout_ms,
	};

	if (r->opts.dry_run)
		return 0;   /* a dry run runs nothing */
	return cb_hook_run(r->opts.script, phase, cb_mode_name(r->mode), r->opts.id, &env, r->log);
}

static int guest_hook(struct guest_run *r, const char *phase)
{
	return guest_hook_bounded(r, phase, 0);
}

/* Options whose feature is not built yet: say so once per guest. */
static void warn_unimplemented(struct guest_run *r)
{
	struct cb_opts def;

	cb_opts_init(&def);
	for (const struct cb_opt_schema *s = cb_opt_table; s->key; s++) {
		const char *a = (const char *)&r->opts + s->offset, *b = (const char *)&def + s->offset;
		int differs;
		if (!s->since_issue)
			continue;
		if (s->type == CB_OPT_STRING)
			differs = *(char *const *)a != NULL;
		else if (s->type == CB_OPT_LIST)
			differs = ((const struct cb_strvec *)a)->n > 0;
		else if (s->type == CB_OPT_LONG)
			differs = *(const long *)a != *(const long *)b;
		else if (s->type == CB_OPT_DOUBLE)
			differs = *(const double *)a != *(const double *)b;
		else
			differs = *(const int *)a != *(const int *)b;
		if (!differs)
			continue;
		cb_warn(r->log, "'%s' is not implemented in this version: ignored", s->key);
	}
	cb_opts_release(&def);
}

static void build_excludes(struct guest_run *r)
{
	cb_strvec_copy(&r->excludes, &r->opts.exclude_paths);
	if (r->opts.stdexcludes)
		for (int i = 0; std_excludes[i]; i++)
			cb_strvec_push(&r->excludes, std_excludes[i]);
}

static int check_dir(const char *what, const char *path, int need_write)
{
	struct stat st;

	if (!path)
		return cb_error("no %s configured", what);
	if (stat(path, &st) < 0)
		return cb_error_errno("%s '%s'", what, path);
	if (!S_ISDIR(st.st_mode))
		return cb_error("%s '%s' is not a directory", what, path);
	if (need_write && access(path, W_OK) < 0)
		return cb_error_errno("%s '%s' is not writable", what, path);
	return 0;
}

/* Snapshot mode of a container reads its volumes' snapshots, nothing is
 * staged; a VM's snapshot mode is QEMU's live backup into the staging
 * directory (cb_vmcbw.h). */
static int reads_snapshots(const struct guest_run *r)
{
	return r->mode == CB_MODE_SNAPSHOT && r->opts.type != CB_GUEST_VM;
}

/* What staging one container volume needs: with reflink staging its
 * file data is cloned, not copied, and counts as free. */
static int volume_estimate(struct guest_run *r, const char *src, uint64_t *need, uint64_t *entries)
{
	struct cb_stage_est e;

	if (cb_stage_estimate(src, &r->excludes, &e) < 0)
		return -1;
	if (r->mode != CB_MODE_SNAPSHOT && cb_reflink_possible(src, r->opts.tmpdir)) {
		cb_verbose(r->log, "'%s' and tmpdir share a file system that clones data (reflink): "
			   "file data needs no space", src);
		e.bytes = e.entries * 4096;
	}
	if (src == r->opts.root)
		r->sync_total = e.data;
	r->archive_total += e.tar;
	*need += e.bytes;
	*entries += e.entries;
	return 0;
}

static int guest_estimate(struct guest_run *r, uint64_t *need, uint64_t *entries)
{
	if (r->opts.type == CB_GUEST_VM)
		return cb_imgstage_estimate(&r->opts.disks, need);
	if (volume_estimate(r, r->opts.root, need, entries) < 0)
		return -1;
	for (size_t i = 0; i < r->n_mps; i++)
		if (volume_estimate(r, r->mps[i].source, need, entries) < 0)
			return -1;
	return 0;
}

/* The archive's size is known only once written: compressed it is
 * usually smaller than the guest, so a dump disk with less free space than
 * the guest holds is a warning (in --dry-run too), not a refusal. */
static int check_dump_space(struct guest_run *r, uint64_t need)
{
	struct statvfs vfs;
	char need_s[32], avail_s[32];
	uint64_t avail;

	if (statvfs(r->opts.dumpdir, &vfs) < 0)
		return cb_error_errno("cannot stat dumpdir '%s'", r->opts.dumpdir);
	avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	cb_fmt_bytes(need_s, sizeof(need_s), need);
	cb_fmt_bytes(avail_s, sizeof(avail_s), avail);
	if (avail < need)
		cb_warn(r->log, "dumpdir '%s' has %s free and the guest holds %s before compression: "
			"the archive may not fit", r->opts.dumpdir, avail_s, need_s);
	else
		cb_verbose(r->log, "dumpdir '%s': %s free for at most %s", r->opts.dumpdir, avail_s,
			   need_s);
	return 0;
}

/* A container with a kept staging copy (keep-staging 1): its tmpdir is
 * not checked for room (only the change is copied) and the dump disk's
 * check needs only the guest's size, which the first sync measures as it
 * walks: a walk of the whole guest ahead of it for an estimate, every
 * night, cost about as much as a tenth of a night that copies most units. */
static int estimate_after_sync(const struct guest_run *r)
{
	return r->keep && !r->opts.dry_run && r->opts.type == CB_GUEST_CT &&
	       !reads_snapshots(r) && cb_stage_dir_kept(r->opts.tmpdir, r->opts.id);
}

/* keep-staging auto decides for a container's staging copy: VM disks
 * and snapshot mode keep nothing. KEPT: a copy is kept there already (it
 * takes its room now; one that is not to be kept is still the cheaper
 * source of this run's first sync, and is removed after it), else NEED is
 * what the copy will take. -1 when statvfs fails. */
static int keep_auto(struct guest_run *r, int kept, uint64_t need)
{
	char why[256];
	int keep;

	if (r->opts.keep_staging != CB_KEEP_AUTO || r->opts.type != CB_GUEST_CT || reads_snapshots(r))
		return 0;
	keep = cb_keep_auto_decide(r->opts.tmpdir, r->opts.keep_staging_free, kept ? 0 : need, why,
				   sizeof(why));
	if (keep < 0)
		return -1;
	cb_info(r->log, "keep-staging auto: %s%s", why,
		kept && !keep ? " (this run's first sync still starts from it)" : "");
	r->keep = keep || kept;
	r->drop_kept = kept && !keep;
	return 0;
}

static int check_space(struct guest_run *r)
{
	uint64_t need = 0, entries = 0, avail;
	struct statvfs vfs;
	char need_s[32], avail_s[32];
	int kept = r->opts.keep_staging == CB_KEEP_AUTO && cb_stage_dir_kept(r->opts.tmpdir, r->opts.id);

	r->keep = r->opts.keep_staging == CB_KEEP_ON;
	if (kept && keep_auto(r, 1, 0) < 0)
		return -1;
	if (estimate_after_sync(r)) {
		r->estimate_after_sync = 1;
		cb_verbose(r->log, "space estimate: by the first sync (a kept staging copy)");
		return 0;
	}
	if (guest_estimate(r, &need, &entries) < 0)
		return -1;
	if (statvfs(r->opts.tmpdir, &vfs) < 0)
		return cb_error_errno("cannot stat tmpdir '%s'", r->opts.tmpdir);
	avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	r->estimate = need;
	if (!kept && keep_auto(r, 0, need) < 0)
		return -1;
	cb_fmt_bytes(need_s, sizeof(need_s), need);
	cb_fmt_bytes(avail_s, sizeof(avail_s), avail);
	cb_verbose(r->log, "space estimate: %s in %llu entries, %s free in '%s'", need_s,
		   (unsigned long long)entries, avail_s, r->opts.tmpdir);
	/* snapshot mode reads the snapshots: the tmpdir is not written */
	if (need > avail && !r->keep && !reads_snapshots(r))
		return cb_error("not enough space in tmpdir '%s': need %s, %s available",
				r->opts.tmpdir, need_s, avail_s);
	return r->opts.to_stdout ? 0 : check_dump_space(r, need);
}

/* Two cbackups never back up one guest at once: not on this host (a local
 * lock) and not from two hosts sharing the storage (a lock file there). */
static int lock_guest(struct guest_run *r)
{
	int ret = cb_lock_guest(&r->guest_lock, r->opts.to_stdout ? NULL : &r->store_lock,
				r->opts.dumpdir, cb_guest_type_name(r->opts.type), r->opts.id);

	if (ret == 1)
		ret = cb_error("%s %s is locked by another cbackup on this host", type_upper(r), r->opts.id);
	if (ret == 2) {
		char held[1024];
		snprintf(held, sizeof(held), "%s", cb_last_error());
		ret = cb_error("%s %s is being backed up to this storage by another host (%s)",
			       type_upper(r), r->opts.id, held);
	}
	return ret;
}

static int check_source(const struct guest_run *r)
{
	if (r->opts.type == CB_GUEST_CT) {
		if (!r->opts.root)
			return cb_error("no root directory configured for CT %s", r->opts.id);
		for (size_t i = 0; i < r->n_mps; i++)
			if (check_dir("mount point source", r->mps[i].source, 0) < 0)
				return -1;
		return check_dir("root", r->opts.root, 0);
	}
	if (r->n_mps)
		return cb_error("mp is for containers: VM %s has disks (disk = FILE)", r->opts.id);
	if (!r->opts.disks.n)
		return cb_error("no disk image configured for VM %s (disk = FILE)", r->opts.id);
	for (size_t i = 0; i < r->opts.disks.n; i++)
		if (access(r->opts.disks.v[i], R_OK) < 0)
			return cb_error_errno("disk image '%s'", r->opts.disks.v[i]);
	return 0;
}

/* A run killed with SIGKILL leaves its NAME.tmp and NAME.log; with the
 * guest's locks held nobody else writes this guest here, so the next run
 * removes them. */
static void remove_stale_tmp(struct guest_run *r)
{
	const char *own = r->log_path ? strrchr(r->log_path, '/') + 1 : NULL;

	cb_leftovers_remove(r->opts.dumpdir, r->opts.type, r->opts.id, own, 0, r->log);
}

/* A Proxmox container's config is read again for the archive: what it
 * cannot give (an lxc.idmap line not understood) fails before any copy. */
static int check_pve_config(const struct guest_run *r)
{
	struct cb_pvect_conf pc;
	int ret = 0;

	if (r->opts.type == CB_GUEST_CT && r->opts.guest_config)
		ret = cb_pvect_load(r->opts.guest_config, r->opts.id, &pc);
	if (ret > 0)
		cb_pvect_release(&pc);
	return ret < 0 ? -1 : 0;
}

static int preflight(struct guest_run *r)
{
	if (check_source(r) < 0 || check_dir("tmpdir", r->opts.tmpdir, 1) < 0 ||
	    (!r->opts.to_stdout && check_dir("dumpdir", r->opts.dumpdir, 1) < 0))
		return -1;
	if (r->opts.to_stdout && isatty(STDOUT_FILENO))
		return cb_error("refusing to write an archive to a terminal (redirect --stdout)");
	if (r->opts.guest_config && access(r->opts.guest_config, R_OK) < 0)
		return cb_error_errno("guest config '%s'", r->opts.guest_config);
	if (check_pve_config(r) < 0)
		return -1;
	if (!r->stopped && cb_guest_init(&r->guest, &r->opts) < 0)
		return -1;
	if (lock_guest(r) < 0)
		return -1;
	if (!r->opts.to_stdout && !r->opts.dry_run)
		remove_stale_tmp(r);
	return check_space(r);
}

/* The final sync in words: rsync's counters would say "Number of files: 1,
 * Total file size: 0 bytes" for a tracked pass that looked at one changed
 * directory, which reads as an empty guest. */
static void log_final_stats(struct guest_run *r, const struct cb_stage_stats *s, int tracked)
{
	char copied[32];

	cb_fmt_bytes(copied, sizeof(copied), s->transferred_size);
	cb_info(r->log, "final sync: %s %llu %s%s; copied %llu changed file(s) (%s), removed %llu",
		tracked ? "checked" : "compared all", (unsigned long long)s->files,
		s->files == 1 ? "entry" : "entries",
		tracked ? " in the directories that changed since the first sync"
			: " with the first sync's copy",
		(unsigned long long)s->files_transferred, copied, (unsigned long long)s->deleted);
	cb_info(r->log, "final sync finished (%.2f seconds)", s->seconds);
	cb_verbose(r->log, "final sync took %.1f ms", s->seconds * 1000);
}

static void log_sync_stats(struct guest_run *r, const char *which, const struct cb_stage_stats *s)
{
	cb_info(r->log, "Number of files: %llu", (unsigned long long)s->files);
	cb_info(r->log, "Number of files transferred: %llu", (unsigned long long)s->files_transferred);
	if (s->deleted)
		cb_info(r->log, "Number of deleted files: %llu", (unsigned long long)s->deleted);
	cb_info(r->log, "Total file size: %llu bytes", (unsigned long long)s->total_size);
	cb_info(r->log, "Total transferred file size: %llu bytes",
		(unsigned long long)s->transferred_size);
	cb_info(r->log, "%s sync finished (%.2f seconds)", which, s->seconds);
	/* the frozen pass is often under 10 ms: the benchmarks read this */
	cb_verbose(r->log, "%s sync took %.1f ms", which, s->seconds * 1000);
}

static int remove_stale_stage(struct guest_run *r, const char *dir)
{
	struct stat st;

	if (r->keep || lstat(dir, &st) < 0)
		return 0;
	cb_verbose(r->log, "removing stale staging directory '%s'", dir);
	return cb_remove_tree(dir);
}

static void add_own(struct guest_run *r, const char *path, char *what, int warn)
{
	struct stat st;

	if (stat(path, &st) < 0 || r->n_own == sizeof(r->own) / sizeof(r->own[0])) {
		free(what);
		return;
	}
	r->own[r->n_own++] = (struct cb_stage_skip){ st.st_dev, st.st_ino, what, warn };
}

/* Where cbackup writes, which a guest's walk must never meet: the private
 * directory that holds the staging copies (a tmpdir inside the guest) and
 * the dump directory (inside the guest). By device and inode, as the walk
 * meets them: a bind mount of either into the guest is found too. */
static void find_own_dirs(struct guest_run *r)
{
	char *priv = cb_xstrdup(r->stage_dir), *slash = strrchr(priv, '/');

	if (slash && slash != priv) {
		*slash = '\0';
		add_own(r, priv, cb_xasprintf("cbackup's own directory in tmpdir '%s'", r->opts.tmpdir), 0);
	}
	free(priv);
	if (!r->opts.to_stdout && r->opts.dumpdir)
		add_own(r, r->opts.dumpdir, cb_xasprintf("it is the dump directory '%s' (its archives "
			"are not archived again; guest files in it are not backed up)",
			r->opts.dumpdir), 1);
}

/* Suspend and stop mode stage each mount point beside the root's copy
 * (not inside it: the root's passes own their tree); the archive puts it
 * at its target. The same excludes apply, anchored at the volume. */
static int open_mp_stages(struct guest_run *r)
{
	for (size_t i = 0; i < r->n_mps; i++) {
		struct mount_point *mp = &r->mps[i];
		/* beside the root's copy, in the same private directory */
		mp->stage_dir = cb_xasprintf("%s.mp%zu", r->stage_dir, i + 1);
		struct cb_stage_opts so = {
			.src = mp->source, .dst = mp->stage_dir, .excludes = &r->excludes,
			.bwlimit = r->opts.bwlimit, .progress = &r->progress,
			.workers = r->opts.stage_workers, .skip = r->own, .n_skip = r->n_own,
		};
		if (remove_stale_stage(r, mp->stage_dir) < 0 || cb_stage_new(&mp->stage, &so, r->log) < 0)
			return -1;
	}
	return 0;
}

static int open_stage(struct guest_run *r)
{
	struct cb_stage_opts so = {
		.src = r->opts.root, .dst = r->stage_dir, .excludes = &r->excludes,
		.bwlimit = r->opts.bwlimit, .progress = &r->progress,
		.keep = r->keep, .workers = r->opts.stage_workers,
		.keep_auto = r->opts.keep_staging == CB_KEEP_AUTO,
	};
	int reused;

	if (cb_stage_dir_prepare(r->opts.tmpdir, r->opts.id, r->keep, &r->stage_dir,
				 &reused) < 0)
		return -1;
	so.dst = r->stage_dir;
	find_own_dirs(r);
	so.skip = r->own;
	so.n_skip = r->n_own;
	if (reused)
		cb_verbose(r->log, "reusing the staging copy '%s' (keep-staging)", r->stage_dir);
	r->stage_created = 1;
	if (r->opts.type == CB_GUEST_VM)
		return cb_imgstage_new(&r->images, &r->opts.disks, r->stage_dir, r->opts.bwlimit,
				       &r->progress, r->log);
	if (cb_stage_new(&r->stage, &so, r->log) < 0)
		return -1;
	return open_mp_stages(r);
}

static void log_cloned(struct guest_run *r, int final, const struct cb_stage_stats *s)
{
	if (!final && s->cloned_files)
		cb_info(r->log, "first sync: data cloned (reflink)");
}

/* What a first sync's tree needs on the dump disk: its file bytes and a
 * tar header for each entry. */
static uint64_t synced_bytes(const struct cb_stage_stats *s)
{
	return s->total_size + 512 * s->files;
}

static int sync_mps(struct guest_run *r, int final)
{
	const char *which = final ? "final" : "first";

	for (size_t i = 0; i < r->n_mps; i++) {
		struct cb_stage_stats stats = { 0 };
		struct mount_point *mp = &r->mps[i];
		int ret;
		cb_info(r->log, "starting %s sync %s/ to %s (mount point %s)", which, mp->source,
			mp->stage_dir, mp->target + 1);
		cb_progress_start(&r->progress, !r->opts.quiet && !final, "first sync", 0);
		ret = final ? cb_stage_pass2(mp->stage, &stats) : cb_stage_pass1(mp->stage, &stats);
		if (!final)
			r->first_bytes += synced_bytes(&stats);
		cb_progress_end(&r->progress);
		if (ret < 0)
			return cb_error_prefix("%s sync of '%s'", which, mp->source);
		if (final)
			log_final_stats(r, &stats, 0);
		else
			log_sync_stats(r, which, &stats);
		log_cloned(r, final, &stats);
	}
	return 0;
}

static int sync_pass(struct guest_run *r, int final, int tracked)
{
	struct cb_stage_stats stats = { 0 };
	int ret;

	if (r->opts.type == CB_GUEST_VM)
		cb_info(r->log, "starting %s sync of %zu disk image(s) to %s", final ? "final" : "first",
			r->opts.disks.n, r->stage_dir);
	else
		cb_info(r->log, "starting %s sync %s/ to %s", final ? "final" : "first", r->opts.root,
			r->stage_dir);
	/* a container's counts the file bytes it copies, not the blocks
	 * the space check needs (4 KiB for every small file and directory) */
	cb_progress_start(&r->progress, !r->opts.quiet && !final, "first sync",
			  r->opts.type == CB_GUEST_VM ? r->estimate : r->sync_total);
	if (r->images)
		ret = final ? cb_imgstage_pass2(r->images, &stats) : cb_imgstage_pass1(r->images, &stats);
	else
		ret = final ? cb_stage_pass2(r->stage, &stats) : cb_stage_pass1(r->stage, &stats);
	cb_progress_end(&r->progress);
	if (ret < 0)
		return cb_error_prefix("%s sync", final ? "final" : "first");
	if (final)
		log_final_stats(r, &stats, tracked);
	else
		log_sync_stats(r, "first", &stats);
	*(final ? &r->res->final_sync : &r->res->first_sync) = stats.seconds;
	log_cloned(r, final, &stats);
	if (!final)
		r->first_bytes = synced_bytes(&stats);
	if (sync_mps(r, final) < 0)
		return -1;
	if (final || !r->estimate_after_sync)
		return 0;
	r->estimate_after_sync = 0;
	r->estimate = r->first_bytes;
	return r->opts.to_stdout ? 0 : check_dump_space(r, r->estimate);
}

/* max_ms: the deadline of the frozen time (0 = none, stop mode). */
static int freeze(struct guest_run *r, int max_ms)
{
	if (guest_hook(r, "pre-stop") < 0)
		return -1;
	if (r->guest.kind == CB_FREEZER_NONE)
		return 0;
	cb_info(r->log, "%s guest (%s)", r->mode == CB_MODE_STOP ? "stopping" : "suspending",
		cb_guest_kind_name(r->guest.kind));
	r->guest.log = r->log;
	if (cb_guest_freeze(&r->guest, r->opts.freeze_wait * 1000, max_ms) < 0)
		return cb_error_prefix("freeze");
	if (r->guest.kept_paused)
		cb_info(r->log, "VM was paused already: backed up as it is, it stays paused");
	return 0;
}

/* What is left of the frozen time for the pre-restart hook (0 = no limit),
 * at least HOOK_MIN_MS. */
#define HOOK_MIN_MS 2000
static int frozen_time_left_ms(const struct guest_run *r, int max_ms)
{
	double left = r->guest.frozen_since + max_ms / 1000.0 - cb_now();

	if (!max_ms || r->guest.kind == CB_FREEZER_NONE || r->guest.kept_paused)
		return 0;
	/* past the deadline the watchdog has thawed: the hook may still run
	 * (it can no longer hold the guest), briefly */
	return left * 1000 > HOOK_MIN_MS ? (int)(left * 1000) : HOOK_MIN_MS;
}

/* Thaws even when the pre-restart hook fails: the guest must run again. */
static int thaw(struct guest_run *r, int max_ms)
{
	int ret = guest_hook_bounded(r, "pre-restart", frozen_time_left_ms(r, max_ms));

	if (r->guest.kind != CB_FREEZER_NONE && !r->guest.kept_paused) {
		cb_info(r->log, "resuming guest");
		if (cb_guest_thaw(&r->guest) < 0)
			return cb_error_prefix("thaw");
		/* from the freeze request to the thaw: not the pre-stop hook
		 * (the guest runs during it); the pre-restart hook, which runs
		 * frozen, is in */
		r->res->freeze = cb_now() - r->guest.frozen_since;
		cb_info(r->log, "guest is online again after %.2f seconds", r->res->freeze);
	}
	if (guest_hook(r, "post-restart") < 0)
		ret = -1;
	return ret;
}

/* Thaw after the frozen part; the first error is the one reported. */
static int finish_freeze(struct guest_run *r, int max_ms, int ret)
{
	char first[2048];

	snprintf(first, sizeof(first), "%s", cb_last_error());
	if (thaw(r, max_ms) < 0)
		return ret < 0 ? cb_error("%s", first) : -1;
	return ret;
}

static void warn_no_freezer(struct guest_run *r, const char *what)
{
	if (r->guest.kind == CB_FREEZER_NONE && !r->stopped)
		cb_warn(r->log, "no freeze control configured for %s %s: %s "
			"(set freeze-cgroup, freeze-pid, freeze-cmd or qmp)", type_upper(r), r->opts.id,
			what);
}

/* The frozen part of suspend and snapshot mode: freeze, WORK under the
 * max-freeze deadline (the watchdog thaws at it; the clock check stops the
 * work there too), thaw. */
static int frozen_section(struct guest_run *r, int (*work)(struct guest_run *))
{
	char why[128];
	int max_ms = r->opts.max_freeze * 1000, ret;

	if (freeze(r, max_ms) < 0)
		return -1;
	snprintf(why, sizeof(why), "took longer than max-freeze (%d s): guest thawed",
		 r->opts.max_freeze);
	if (r->guest.kind != CB_FREEZER_NONE)
		cb_cleanup_deadline(r->guest.frozen_since + r->opts.max_freeze, why);
	ret = work(r);
	cb_cleanup_deadline(0, NULL);
	return finish_freeze(r, max_ms, ret);
}

static int final_sync(struct guest_run *r)
{
	int tracked = r->track != NULL;

	/* frozen now: what tracking saw is complete (cb_track.h) */
	if (r->track) {
		/* frozen: a change with an earlier ctime has its event queued */
		clock_gettime(CLOCK_REALTIME, &r->track_end);
		cb_stage_set_dir_hook(r->stage, NULL, NULL);
		cb_stage_set_changes(r->stage, cb_track_finish(r->track, cb_guest_cgroup(&r->guest)));
	}
	r->track = NULL;
	return sync_pass(r, 1, tracked);
}

/* A flag that cannot be read is taken as set: the walk is never wrong. */
static int fullsync_pending(struct guest_run *r)
{
	int ret = cb_fullsync_pending(r->opts.tmpdir, r->opts.id);

	if (ret < 0)
		cb_warn(r->log, "%s", cb_last_error());
	return ret != 0;
}

/* Before pass 1: changes from now on are tracked (containers only). */
static void start_tracking(struct guest_run *r)
{
	if (r->opts.change_tracking == CB_TRACKING_OFF)
		cb_info(r->log, "change tracking is off: the final sync walks the whole tree");
	else if (r->stage && (r->fullsync_pending = fullsync_pending(r)))
		cb_info(r->log, "the last tracking audit found changes tracking missed: this final "
			"sync walks the whole tree");
	else if (r->stage && r->vols)   /* fanotify marks by path: not across namespaces */
		cb_info(r->log, "change tracking: not for a volume read through the container: the "
			"final sync walks the whole tree");
	else if (r->stage && (r->track = cb_track_start(r->opts.root, r->log)))
		cb_stage_set_dir_hook(r->stage, cb_track_ignore_dir, r->track);
}

/* stop-cmd / start-cmd through the shell, bounded (0: no limit). */
static int guest_cmd(const char *key, const char *cmd, int timeout_ms)
{
	char what[512];
	struct cb_run run = { .what = what, .timeout_ms = timeout_ms };

	snprintf(what, sizeof(what), "%s '%s'", key, cmd);
	return cb_run_sh(&run, cmd);
}

/* Starts the guest again whatever happened to the copy (ret): the first
 * error is the one reported. */
static int restart_guest(struct guest_run *r, double stopped_at, int ret)
{
	char first[2048] = "";

	if (ret < 0)
		snprintf(first, sizeof(first), "%s", cb_last_error());
	if (guest_hook(r, "pre-restart") < 0 && ret == 0) {
		ret = -1;
		snprintf(first, sizeof(first), "%s", cb_last_error());
	}
	cb_info(r->log, "restarting guest");
	if (guest_cmd("start-cmd", r->start_cmd, 0) < 0)
		return ret < 0 ? cb_error("%s; %s", first, cb_last_error()) : -1;
	r->res->freeze = cb_now() - stopped_at;
	cb_info(r->log, "guest is online again after %.2f seconds", r->res->freeze);
	if (guest_hook(r, "post-restart") < 0 && ret == 0)
		return -1;
	return ret < 0 ? cb_error("%s", first) : 0;
}

/* Whether the guest runs now, as far as its freezer (and, when that says
 * stopped, its manager or the processes in its root) can tell. */
static int guest_runs(const struct guest_run *r, char *why, size_t len)
{
	int st = cb_guest_status(&r->opts, why, len);

	if (st == 0)
		return cb_guest_check_stopped(&r->opts, why) < 0;
	return r->opts.freeze_cgroup || r->opts.freeze_pid || r->opts.qmp;
}

/* vzdump's stop mode: the guest is shut down (stop-cmd, at most stopwait
 * minutes), copied in one pass while nothing runs, and started again. It
 * is never frozen for the copy. */
static int stop_mode_copy(struct guest_run *r)
{
	double stopped_at = cb_now();
	char why[256];

	if (guest_hook(r, "pre-stop") < 0)
		return -1;
	cb_info(r->log, "stopping virtual guest");
	if (guest_cmd("stop-cmd", r->stop_cmd, r->opts.stopwait * 60000) < 0)
		return restart_guest(r, stopped_at, cb_error_prefix("stop"));
	if (guest_runs(r, why, sizeof(why)))
		return restart_guest(r, stopped_at, cb_error("stop-cmd succeeded, but the guest "
								"still runs"));
	return restart_guest(r, stopped_at, sync_pass(r, 0, 0));
}

static int vm_hook(void *arg, const char *phase)
{
	return guest_hook(arg, phase);
}

/* VM disks read from QEMU's copy-before-write snapshot (cb_vmcbw.h). 1:
 * not so (no qmp, mode stop, vm-method stage, QEMU older than 7.1). */
static int stage_vm_cbw(struct guest_run *r)
{
	int reused, rc;

	if (r->opts.type != CB_GUEST_VM || !r->opts.qmp || r->mode == CB_MODE_STOP ||
	    r->opts.vm_method == CB_VM_STAGE)
		return 1;
	r->vm_opts = (struct cb_vmcbw_opts){
		.qmp = r->opts.qmp, .qga = r->opts.qga, .method = r->opts.vm_method,
		.id = r->opts.id, .disks = &r->opts.disks,
		.max_freeze = r->opts.max_freeze, .cbw_timeout = 60, .bwlimit = r->opts.bwlimit,
		.keep_staging = r->keep, .progress = &r->progress,
		.show_progress = !r->opts.quiet, .log = r->log,
		.hook = vm_hook, .hook_arg = r,
	};
	if ((rc = cb_vmcbw_open(&r->vm, &r->vm_opts)) != 0)
		return rc;
	if (cb_stage_dir_prepare(r->opts.tmpdir, r->opts.id, r->keep, &r->stage_dir,
				 &reused) < 0)
		return -1;
	r->stage_created = 1;
	if (cb_vmcbw_run(r->vm, r->stage_dir, reused, &r->res->freeze) < 0)
		return -1;
	rc = cb_vmcbw_close(r->vm);
	r->vm = NULL;
	return rc;
}

/* A stopped guest is copied in one pass while nothing runs it. vzdump
 * locks it meanwhile (pct start refuses a locked CT); cbackup cannot take
 * Proxmox's cluster lock, so it asks again after the copy: a guest started
 * during it may have changed its files under the copy (half old, half
 * new), and the backup fails with nothing archived. Started after the
 * copy it harms nothing: the archive is written from the copy. */
static int copy_stopped(struct guest_run *r)
{
	char why[512];

	if (sync_pass(r, 0, 0) < 0)
		return -1;
	if (!guest_runs(r, why, sizeof(why)))
		return 0;
	return cb_error("%s %s was started during the copy of it while stopped: the copy may "
			"hold its files half changed, nothing is archived (the next backup freezes "
			"it for its final sync)", type_upper(r), r->opts.id);
}

/* Copy the guest into staging; the guest is frozen only for what must be. */
static int stage_guest(struct guest_run *r)
{
	int rc;

	if ((rc = stage_vm_cbw(r)) != 1)
		return rc;
	if (r->mode == CB_MODE_SNAPSHOT) {   /* a VM on a QEMU older than 4.2 */
		snprintf(r->mode_why, sizeof(r->mode_why), "QEMU older than 4.2 has no live backup "
			 "cbackup can use");
		cb_info(r->log, "snapshot not possible: %s", r->mode_why);
		cb_info(r->log, "trying 'suspend' mode instead");
		r->mode = CB_MODE_SUSPEND;
	}
	if (!r->stopped && r->mode != CB_MODE_STOP)
		warn_no_freezer(r, "backing up while it runs");
	if (open_stage(r) < 0)
		return -1;
	if (r->stopped)   /* nothing runs: one pass is the whole copy */
		return copy_stopped(r);
	if (r->mode == CB_MODE_STOP)
		return stop_mode_copy(r);
	start_tracking(r);
	if (sync_pass(r, 0, 0) < 0)
		return -1;
	if (r->track)
		cb_stage_note_inodes(r->stage);
	return frozen_section(r, final_sync);
}

/* ---- snapshot mode ---- */

static const char *volume_path(const struct guest_run *r, size_t i)
{
	return i ? r->mps[i - 1].source : r->opts.root;
}

/* Every volume must take a snapshot, or the whole guest falls back: a
 * guest archived half from a snapshot and half live is neither. */
/* A subvolume has a device number of its own: a dump directory with the
 * volume's is in it (by a bind mount too), and a snapshot would hold its
 * archives, which the archive cannot leave out as the staging walk does. */
static int dump_in_volume(struct guest_run *r, size_t i)
{
	struct stat d, v;

	if (r->opts.to_stdout || !r->opts.dumpdir || stat(r->opts.dumpdir, &d) < 0 ||
	    stat(volume_path(r, i), &v) < 0 || d.st_dev != v.st_dev)
		return 0;
	snprintf(r->mode_why, sizeof(r->mode_why), "the dump directory '%s' is in the volume '%s' "
		 "(its snapshot would hold the archives)", r->opts.dumpdir, volume_path(r, i));
	return 1;
}

static int detect_snapshots(struct guest_run *r)
{
	if (r->opts.type == CB_GUEST_VM && (!r->opts.qmp || r->opts.vm_method == CB_VM_STAGE)) {
		snprintf(r->mode_why, sizeof(r->mode_why), "a VM's snapshot is QEMU's own live backup, "
			 "which needs a qmp socket and vm-method auto or blockdev-backup");
		return 0;
	}
	if (r->opts.type == CB_GUEST_VM) {   /* vzdump's snapshot mode of a VM */
		snprintf(r->mode_why, sizeof(r->mode_why), "QEMU's own live backup (a copy-before-write "
			 "snapshot on QEMU 7.1 or later, blockdev-backup jobs on 4.2 to 7.0): the VM "
			 "runs on while its disks are read");
		return 1;
	}
	if (r->vols) {
		snprintf(r->mode_why, sizeof(r->mode_why), "a volume is a disk image or a block "
			 "device (cbackup takes no LVM-thin or image snapshot yet)");
		return 0;
	}
	r->snap_be = cb_xcalloc(r->n_mps + 1, sizeof(*r->snap_be));
	for (size_t i = 0; i <= r->n_mps; i++)
		if (!cb_snapshot_detect(volume_path(r, i), &r->snap_be[i], r->mode_why,
					sizeof(r->mode_why)) || dump_in_volume(r, i))
			return 0;
	snprintf(r->mode_why, sizeof(r->mode_why), "%zu volume(s), each a %s subvolume",
		 r->n_mps + 1, r->snap_be[0]->name);
	return 1;
}

/* An executable NAME on PATH. */
static int on_path(const char *name)
{
	char *p = cb_find_on_path(name);

	free(p);
	return p != NULL;
}

static int file_exists(char *path)
{
	int ok = access(path, F_OK) == 0;

	free(path);
	return ok;
}

/* S in single quotes for sh (each ' as '\''). Malloc'ed. */
static char *sh_quote(const char *s)
{
	size_t n = 3;
	char *q, *p;

	for (const char *c = s; *c; c++)
		n += *c == '\'' ? 4 : 1;
	p = q = cb_xmalloc(n);
	*p++ = '\'';
	for (const char *c = s; *c; c++) {
		if (*c == '\'') {
			memcpy(p, "'\\''", 4);
			p += 4;
		} else {
			*p++ = *c;
		}
	}
	*p++ = '\'';
	*p = '\0';
	return q;
}

/* How mode stop stops and starts this guest: stop-cmd/start-cmd, else pct
 * for a Proxmox container, lxc-stop/lxc-start for an LXC one (in the LXC
 * directory discovery reads, cb_lxc_dir); 0 if none. */
static int find_stop_method(struct guest_run *r)
{
	const char *lxc = cb_lxc_dir();
	char *lxcpath;
	int secs = r->opts.stopwait * 60;

	if (r->opts.stop_cmd && r->opts.start_cmd) {
		r->stop_cmd = cb_xstrdup(r->opts.stop_cmd);
		r->start_cmd = cb_xstrdup(r->opts.start_cmd);
	} else if (r->opts.type == CB_GUEST_CT && on_path("pct") &&
		   file_exists(cb_xasprintf("%s/lxc/%s.conf", cb_pve_dir(), r->opts.id))) {
		r->stop_cmd = cb_xasprintf("pct shutdown %s --timeout %d", r->opts.id, secs);
		r->start_cmd = cb_xasprintf("pct start %s", r->opts.id);
	} else if (r->opts.type == CB_GUEST_CT && on_path("lxc-stop") &&
		   file_exists(cb_xasprintf("%s/%s/config", lxc, r->opts.id))) {
		lxcpath = sh_quote(lxc);
		r->stop_cmd = cb_xasprintf("lxc-stop -P %s -n %s -t %d", lxcpath, r->opts.id, secs);
		r->start_cmd = cb_xasprintf("lxc-start -P %s -n %s", lxcpath, r->opts.id);
		free(lxcpath);
	}
	return r->stop_cmd != NULL;
}

/* vzdump's wording when a snapshot cannot be taken, then suspend mode;
 * mode stop without a way to stop the guest falls back the same way (it
 * is never frozen for a whole copy). */
static void choose_mode(struct guest_run *r)
{
	r->mode = r->stopped ? CB_MODE_STOP : r->opts.mode;
	if (r->mode == CB_MODE_STOP && !r->stopped && r->vols) {
		/* it is reached through the running container: stopped, it is not */
		snprintf(r->mode_why, sizeof(r->mode_why), "a volume of %s %s is a disk image, "
			 "read through the running container", type_upper(r), r->opts.id);
		cb_info(r->log, "stop mode not possible: %s", r->mode_why);
		cb_info(r->log, "trying 'suspend' mode instead");
		r->mode = CB_MODE_SUSPEND;
		return;
	}
	if (r->mode == CB_MODE_STOP && !r->stopped && !find_stop_method(r)) {
		snprintf(r->mode_why, sizeof(r->mode_why), "no way to stop %s %s (set stop-cmd and "
			 "start-cmd; no pct or lxc-stop container of that ID)", type_upper(r),
			 r->opts.id);
		cb_info(r->log, "stop mode not possible: %s", r->mode_why);
		cb_info(r->log, "trying 'suspend' mode instead");
		r->mode = CB_MODE_SUSPEND;
		return;
	}
	if (r->mode != CB_MODE_SNAPSHOT)
		return;
	if (detect_snapshots(r)) {
		if (r->opts.type == CB_GUEST_VM)
			cb_info(r->log, "snapshot mode: %s", r->mode_why);
		return;
	}
	cb_info(r->log, "snapshot not possible: %s", r->mode_why);
	cb_info(r->log, "mode failure - some volumes do not support snapshots");
	cb_info(r->log, "trying 'suspend' mode instead");
	r->mode = CB_MODE_SUSPEND;
}

static int prepare_snapshots(struct guest_run *r)
{
	r->snaps = cb_xcalloc(r->n_mps + 1, sizeof(*r->snaps));
	for (size_t i = 0; i <= r->n_mps; i++)
		if (cb_snapshot_prepare(&r->snaps[i], r->snap_be[i], volume_path(r, i), r->opts.id,
					(unsigned)i, r->log) < 0)
			return -1;
	return 0;
}

static int take_snapshots(struct guest_run *r)
{
	for (size_t i = 0; i <= r->n_mps; i++) {
		cb_info(r->log, "create snapshot '%s'", cb_snapshot_path(&r->snaps[i]));
		if (cb_snapshot_create(&r->snaps[i]) < 0)
			return cb_error_prefix("snapshot");
	}
	return 0;
}

/* Snapshot mode: the guest is frozen only while every volume's snapshot
 * is taken (one freeze for all: they are consistent with each other). */
static int snapshot_guest(struct guest_run *r)
{
	warn_no_freezer(r, "snapshots of a running guest");
	if (prepare_snapshots(r) < 0)
		return cb_error_prefix("snapshot");
	return frozen_section(r, take_snapshots);
}

/* On every path (the cleanup stack covers signals, the next run a kill). */
static void remove_snapshots(struct guest_run *r)
{
	for (size_t i = 0; r->snaps && i <= r->n_mps; i++) {
		struct cb_snapshot *s = &r->snaps[i];
		if (s->exists)
			cb_info(r->log, "removing snapshot '%s'", s->path);
		if (s->be && cb_snapshot_remove(s) < 0)
			cb_warn(r->log, "%s", cb_last_error());
		cb_snapshot_release(s);
	}
	free(r->snaps);
	r->snaps = NULL;
}

/* The tree the archive reads (staging copy or snapshot) and where each
 * mount point's tree goes in it. A snapshot is given by the fd opened when
 * it was taken: its path (beside the volume, in a directory whose parent
 * other users may write) is never looked up again. */
static void archive_tree(const struct guest_run *r, struct cb_archive_graft *root,
			 struct cb_archive_graft *grafts)
{
	for (size_t i = 0; i <= r->n_mps; i++) {
		struct cb_archive_graft *g = i ? &grafts[i - 1] : root;

		g->name = i ? r->mps[i - 1].target : "./";
		g->tree = r->snaps ? cb_snapshot_path(&r->snaps[i])
				   : i ? r->mps[i - 1].stage_dir : r->stage_dir;
		g->by_fd = r->snaps != NULL;
		g->fd = r->snaps ? cb_snapshot_fd(&r->snaps[i]) : -1;
		g->staged = r->snaps == NULL;
	}
}

/* Every snapshot directory is still the one cbackup made. */
static int snapshots_intact(const struct guest_run *r)
{
	for (size_t i = 0; r->snaps && i <= r->n_mps; i++)
		if (cb_snapshot_check(&r->snaps[i]) < 0)
			return -1;
	return 0;
}

static void log_archive_stats(struct guest_run *r, const struct cb_archive_stats *as,
			      const struct cb_codec_writer *codec, const struct cb_sink *sink)
{
	struct cb_codec_stats cs;
	char total[32], rate[32], size[32], rr[32], cr[32], wr[32];
	double secs = as->seconds > 0 ? as->seconds : 1e-9;
	double read_rate, comp_rate, write_rate, wsecs = cb_sink_write_seconds(sink);
	const char *slowest;

	cb_codec_writer_stats(codec, &cs);
	cb_fmt_bytes(total, sizeof(total), as->tar_bytes);
	cb_fmt_bytes(rate, sizeof(rate), (uint64_t)(as->tar_bytes / secs));
	cb_info(r->log, "Total bytes written: %llu (%s, %s/s)", (unsigned long long)as->tar_bytes,
		total, rate);
	if (cs.bytes_stored) {
		char summary[256];
		cb_codec_stats_summary(&cs, summary, sizeof(summary));
		cb_info(r->log, "stored raw (incompressible): %s", summary);
	}
	read_rate = as->tar_bytes / (as->read_seconds > 1e-6 ? as->read_seconds : 1e-6);
	comp_rate = cs.bytes_in / (cs.compress_seconds > 1e-6 ? cs.compress_seconds : 1e-6);
	write_rate = cs.bytes_out / (wsecs > 1e-6 ? wsecs : 1e-6);
	slowest = read_rate <= comp_rate && read_rate <= write_rate ? "read"
		  : comp_rate <= write_rate ? "compress" : "write";
	cb_fmt_bytes(rr, sizeof(rr), (uint64_t)read_rate);
	cb_fmt_bytes(cr, sizeof(cr), (uint64_t)comp_rate);
	cb_fmt_bytes(wr, sizeof(wr), (uint64_t)write_rate);
	/* the sink held back by bwlimit for a quarter of the run or more: the
	 * limit set the pace, not one of the stages */
	if (r->opts.bwlimit && cb_sink_throttled_seconds(sink) >= secs / 4)
		cb_info(r->log, "stage rates: read %s/s, compress %s/s, write %s/s - limited by bwlimit "
			"(%ld KB/s)", rr, cr, wr, r->opts.bwlimit);
	else
		cb_info(r->log, "stage rates: read %s/s, compress %s/s, write %s/s - slowest: %s", rr,
			cr, wr, slowest);
	cb_fmt_vzsize(size, sizeof(size), cb_sink_bytes(sink));
	cb_info(r->log, "archive file size: %s", size);
	r->res->stored_raw = cs.bytes_stored;
	r->res->size = cb_sink_bytes(sink);
	snprintf(r->res->sha256, sizeof(r->res->sha256), "%s", cb_sink_sha256(sink));
}

/* DUMPDIR/NAME.sha256 for `sha256sum -c` (run from dumpdir), via .tmp +
 * rename; the catalog NAME.idx on a second line when there is one. */
static int write_checksum(struct guest_run *r, const char *hex, const char *idx_hex)
{
	const char *name = strrchr(r->archive_path, '/') + 1;
	char *path = cb_xasprintf("%s.sha256", r->archive_path);
	char *text = *idx_hex ? cb_xasprintf("%s  %s\n%s  %s.idx\n", hex, name, idx_hex, name)
			      : cb_xasprintf("%s  %s\n", hex, name);
	int ret = cb_write_file_replace(path, text, 0644);

	if (ret < 0)
		cb_error_prefix("cannot write checksum file");
	free(path);
	free(text);
	return ret;
}

static void remove_checksum(struct guest_run *r)
{
	char *path = cb_xasprintf("%s.sha256", r->archive_path);
	unlink(path);
	free(path);
	path = cb_xasprintf("%s.idx", r->archive_path);
	unlink(path);
	free(path);
}

/* NAME.idx, the catalog (cb_index.h), before the .sha256 that lists it. One
 * that cannot be made is a warning: the archive is whole without it (and
 * `cbackup index` makes it later). idx_hex stays "" then. */
static void write_catalog(struct guest_run *r, struct cb_tarscan *scan,
			  const struct cb_codec_writer *codec, const struct cb_sink *sink,
			  char *idx_hex)
{
	char *path = cb_xasprintf("%s.idx", r->archive_path);

	if (cb_tarscan_end(scan) < 0 ||
	    cb_idx_write_scan(path, scan, cb_codec_writer_units(codec),
			      r->opts.reuse ? cb_codec_writer_segs(codec) : NULL, r->opts.compress,
			      cb_sink_bytes(sink), idx_hex) < 0) {
		idx_hex[0] = '\0';
		cb_warn(r->log, "no catalog '%s': %s", path, cb_last_error());
	}
	free(path);
}

/* Memory goes by entries twice: the staging index and the archive's
 * catalog. The index is done once saved, so it goes before the catalog
 * grows (and the heap it leaves is given back). */
static void release_indexes(struct guest_run *r)
{
	cb_stage_release_index(r->stage);
	for (size_t i = 0; i < r->n_mps; i++)
		cb_stage_release_index(r->mps[i].stage);
	malloc_trim(0);
}

/* The previous archive of the guest to copy unchanged units from (reuse =
 * 1, a storage file): said in the log when there is one that cannot serve. */
static struct cb_reuse *open_reuse(struct guest_run *r, struct cb_codec_writer *codec)
{
	struct cb_reuse *reuse;
	const char *why;

	if (!r->opts.reuse || r->opts.to_stdout)
		return NULL;
	reuse = cb_reuse_open(r->opts.dumpdir, r->opts.type, r->opts.id, r->opts.compress, &why);
	if (reuse)
		cb_reuse_attach(reuse, codec);
	else if (why[0])
		cb_info(r->log, "no units reused from the previous archive: %s", why);
	return reuse;
}

/* Trust (cb_reuse_trust.h): with a kept staging copy, the writer records
 * trust keys for the next night's map, and takes segments on trust when
 * the map kept with the copy names the previous archive. */
static char *trust_path(const struct guest_run *r)
{
	if (!r->opts.reuse || !r->keep || r->opts.to_stdout || r->snaps ||
	    !r->stage_dir || r->opts.compress == CB_COMPRESS_NONE)
		return NULL;
	return cb_xasprintf("%s.trust", r->stage_dir);
}

static struct cb_trust_map *open_trust(struct guest_run *r, struct cb_codec_writer *codec,
				       struct cb_sink *sink, const struct cb_reuse *reuse)
{
	char *path = trust_path(r);
	struct cb_trust_map *m = NULL;
	const char *why = "there is no previous archive";
	const struct cb_sink_state *states;
	size_t n;

	if (!path)
		return NULL;
	cb_codec_set_trust(codec, NULL, NULL);
	if (reuse)
		m = cb_trust_map_load(path, cb_reuse_name(reuse), cb_reuse_idx_sha256(reuse), &why);
	if (m) {
		cb_trust_map_attach(m, codec);
		/* the .sha256 of a start copied unchanged resumes from its state */
		states = cb_trust_map_states(m, &n);
		cb_sink_resume(sink, cb_reuse_fd(reuse), states, n);
	} else
		cb_verbose(r->log, "nothing taken on trust: %s", why[0] ? why : "no trust map");
	free(path);
	return m;
}

/* The map for the next night, naming this archive; a failure is a
 * warning (the next night reads the staged data). */
static void save_trust(struct guest_run *r, const struct cb_codec_writer *codec,
		       const struct cb_sink *sink, const char *idx_hex)
{
	char *path = trust_path(r);
	const char *base = strrchr(r->archive_path, '/');
	size_t n, n_states;
	const struct cb_codec_trust *v = cb_codec_writer_trust(codec, &n);
	const struct cb_sink_state *states = cb_sink_states(sink, &n_states);

	if (!path)
		return;
	unlink(path);
	if (idx_hex[0] && cb_trust_map_save(path, base ? base + 1 : r->archive_path, idx_hex, v, n,
					    states, n_states) < 0)
		cb_warn(r->log, "no trust map for the next backup: %s", cb_last_error());
	free(path);
}

/* "reused N units (X) from ARCHIVE, compressed M units (Y)": tar bytes. */
static void log_reuse(struct guest_run *r, const struct cb_codec_writer *codec,
		      const struct cb_reuse *reuse)
{
	struct cb_codec_stats cs;
	char x[32], y[32];
	const char *note = cb_codec_reuse_note(codec);

	cb_codec_writer_stats(codec, &cs);
	if (note)
		cb_warn(r->log, "%s", note);
	r->res->reused_units = cs.segs_reused;
	r->res->reused_bytes = cs.segs_reused_bytes;
	r->res->compressed_units = cs.segs_compressed;
	r->res->compressed_bytes = cs.segs_compressed_bytes;
	r->res->trusted_units = cs.segs_trusted;
	r->res->trusted_unread_bytes = cs.trusted_unread_bytes;
	if (!r->opts.reuse || r->opts.compress == CB_COMPRESS_NONE)
		return;
	free(r->res->reused_from);
	r->res->reused_from = reuse ? cb_xstrdup(cb_reuse_name(reuse)) : NULL;
	cb_fmt_bytes(x, sizeof(x), cs.segs_reused_bytes);
	cb_fmt_bytes(y, sizeof(y), cs.segs_compressed_bytes);
	cb_info(r->log, "reused %llu units (%s) from %s, compressed %llu units (%s)",
		(unsigned long long)cs.segs_reused, x, reuse ? cb_reuse_name(reuse) : "no previous archive",
		(unsigned long long)cs.segs_compressed, y);
	cb_fmt_bytes(x, sizeof(x), cs.trusted_unread_bytes);
	cb_verbose(r->log, "taken on trust: %llu units, %s of staged data not read",
		   (unsigned long long)cs.segs_trusted, x);
	if (cs.segs_reused)
		cb_verbose(r->log, "reused units checked: %llu by the catalog's unit CRC-32s, %llu by "
			   "their SHA-256", (unsigned long long)cs.segs_checked_crc,
			   (unsigned long long)(cs.segs_reused - cs.segs_checked_crc));
}

/* What the archive pass's progress counts toward: the tar stream's bytes.
 * A container's, from the estimate's walk, falls short only by pax
 * headers and tar's end (the bar then waits at 99%), never overshoots as
 * the space estimate's blocks did; without that walk (a kept staging copy)
 * the first sync's file bytes and headers. */
static uint64_t archive_total(const struct guest_run *r)
{
	if (r->opts.type == CB_GUEST_VM)
		return r->estimate;
	return r->archive_total ? r->archive_total : r->first_bytes;
}

/*
 * The guest's config in the archive: a Proxmox container's where vzdump
 * puts it and pct restore looks (./etc/vzdump/pct.conf, stripped, and
 * pct.fw, empty when the guest has no firewall file) before the tree;
 * any other at ./etc/cbackup/guest.conf (a VM's ./guest.conf) after it.
 * Returns the number of extras, or -1.
 */
static int guest_extras(struct guest_run *r, struct cb_archive_extra *x, struct cb_pvect_conf *pc)
{
	int pve = 0;

	if (!r->opts.guest_config)
		return 0;
	if (r->opts.type == CB_GUEST_CT &&
	    (pve = cb_pvect_load(r->opts.guest_config, r->opts.id, pc)) < 0)
		return -1;
	if (!pve) {
		x[0] = (struct cb_archive_extra){
			r->opts.type == CB_GUEST_VM ? "./guest.conf" : "./etc/cbackup/guest.conf",
			r->opts.guest_config, NULL, 0, 0, 0 };
		return 1;
	}
	x[0] = (struct cb_archive_extra){ "./etc/vzdump/pct.conf", NULL, pc->text, pc->len,
					  pc->mtime, 1 };
	if (pc->fw_path)
		x[1] = (struct cb_archive_extra){ "./etc/vzdump/pct.fw", pc->fw_path, NULL, 0, 0, 1 };
	else
		x[1] = (struct cb_archive_extra){ "./etc/vzdump/pct.fw", NULL, "", 0, pc->mtime, 1 };
	return 2;
}

/* vzdump's tar runs in the container's user namespace: its IDs are
 * archived as the container sees them, and so are cbackup's. */
static void log_idmap(struct guest_run *r, const struct cb_idmap *m)
{
	char text[256] = "";
	size_t at = 0;

	for (size_t i = 0; i < m->n && at < sizeof(text); i++)
		at += (size_t)snprintf(text + at, sizeof(text) - at, "%s%c %lu %lu %lu", i ? ", " : "",
				       m->v[i].type, m->v[i].ct, m->v[i].host, m->v[i].len);
	cb_info(r->log, "unprivileged container: IDs archived as it sees them (ID map %s)", text);
}

static int write_archive(struct guest_run *r)
{
	struct cb_codec_params cp;
	struct cb_archive_extra extras[2];
	struct cb_pvect_conf pc = { 0 };
	int n_extras = guest_extras(r, extras, &pc);
	struct cb_archive_stats as = { 0 };
	struct cb_archive_graft *grafts = cb_xcalloc(r->n_mps + 1, sizeof(*grafts)), root;
	struct cb_codec_writer *codec = NULL;
	struct cb_sink *sink = NULL;
	struct cb_reuse *reuse = NULL;
	struct cb_trust_map *trust = NULL;
	struct cb_tarscan *scan = r->opts.to_stdout ? NULL : cb_tarscan_new();
	char idx_hex[65] = "";
	double started = cb_now();
	int ret = -1;

	archive_tree(r, &root, grafts);
	root.idmap = pc.map.n ? &pc.map : NULL;
	if (n_extras < 0 || snapshots_intact(r) < 0)
		goto out;
	if (root.idmap)
		log_idmap(r, &pc.map);
	cb_codec_params_for(&r->opts, r->opts.compress, &cp);
	/* vzdump's words: PVE's task log and log parsers know them */
	cb_info(r->log, "creating %sarchive '%s'", r->opts.type == CB_GUEST_CT ? "vzdump " : "",
		r->archive_path);
	if ((r->opts.to_stdout ? cb_sink_open_fd(&sink, STDOUT_FILENO, "standard output")
			       : cb_sink_open_file(&sink, r->archive_path)) < 0)
		goto out;
	cb_sink_set_bwlimit(sink, r->opts.bwlimit);
	if (cb_codec_writer_new(&codec, &cp, sink) < 0)
		goto out;
	reuse = open_reuse(r, codec);
	trust = open_trust(r, codec, sink, reuse);
	cb_progress_start(&r->progress, !r->opts.quiet, "archive", archive_total(r));
	cb_codec_set_progress(codec, &r->progress);
	if (scan)
		cb_codec_set_tap(codec, cb_tarscan_feed, scan);
	ret = cb_archive_write_grafted(root.tree ? &root : NULL, grafts, r->n_mps, extras, (size_t)n_extras,
				       codec, r->log, &as);
	cb_progress_end(&r->progress);
	if (ret < 0 || snapshots_intact(r) < 0 || cb_codec_finish(codec) < 0 ||
	    cb_sink_prepare(sink) < 0) {
		ret = -1;
		goto out;
	}
	if (scan)
		write_catalog(r, scan, codec, sink, idx_hex);
	/* the .sha256 first: an archive under its final name always has one */
	if (!r->opts.to_stdout && write_checksum(r, cb_sink_sha256(sink), idx_hex) < 0) {
		remove_checksum(r);
		ret = -1;
		goto out;
	}
	if (cb_sink_commit(sink) < 0) {
		remove_checksum(r);
		ret = -1;
		goto out;
	}
	log_archive_stats(r, &as, codec, sink);
	log_reuse(r, codec, reuse);
	if (cb_sink_resumed_bytes(sink) > 0)
		cb_verbose(r->log, "archive SHA-256: the first %llu bytes (copied unchanged) taken "
			   "from the previous archive's state there, not hashed again",
			   (unsigned long long)cb_sink_resumed_bytes(sink));
	if (cb_sink_copies_fixed(sink) > 0)
		cb_warn(r->log, "%llu units changed in the previous archive while being copied: "
			"written from the bytes read and checked before",
			(unsigned long long)cb_sink_copies_fixed(sink));
	save_trust(r, codec, sink, idx_hex);
	r->res->archive_seconds = cb_now() - started;
out:
	/* a signal's cleanup removed the snapshots under the walk: the signal,
	 * not the file that vanished next, is the cause */
	if (ret < 0 && r->snaps && cb_interrupted())
		cb_check_interrupt();
	if (ret < 0)
		cb_error_prefix("archive");
	cb_codec_writer_free(codec);
	cb_reuse_free(reuse);
	cb_trust_map_free(trust);
	cb_sink_free(sink);
	cb_tarscan_free(scan);
	cb_pvect_release(&pc);
	free(grafts);
	return ret;
}

/* After a successful backup (remove = 1): retention. A failure here is a
 * warning: the new backup is good. */
static void prune_old(struct guest_run *r)
{
	unsigned removed = 0;

	if (!r->opts.remove || !r->opts.prune_backups || r->opts.to_stdout)
		return;
	cb_info(r->log, "prune older backups with retention: %s", r->opts.prune_backups);
	if (cb_prune_guest(r->opts.dumpdir, r->opts.type, r->opts.id, r->opts.prune_backups,
			   strrchr(r->archive_path, '/') + 1, 0, r->log, &removed) < 0)
		cb_warn(r->log, "prune: %s", cb_last_error());
	cb_info(r->log, "pruned %u backup(s)", removed);
}

/* NAME (ARCHIVE.notes, ARCHIVE.protected) beside the archive, created as
 * safely as the archive itself. */
static int create_beside(struct guest_run *r, const char *suffix, const char *text)
{
	char *name = cb_xasprintf("%s%s", strrchr(r->archive_path, '/') + 1, suffix);
	int dfd = open(r->opts.dumpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret;

	ret = dfd < 0 ? cb_error_errno("dumpdir '%s'", r->opts.dumpdir)
		      : cb_create_file_at(dfd, name, text, strlen(text));
	if (dfd >= 0)
		close(dfd);
	free(name);
	return ret;
}

/* notes-template and protected. A note that cannot be written is a
 * warning; a backup that should be protected and is not fails (prune
 * would treat it as any other). */
static int mark_archive(struct guest_run *r)
{
	char node[256];

	if (r->opts.to_stdout)
		return 0;
	if (r->opts.notes_template) {
		cb_node_name(node, sizeof(node));
		struct cb_notes_vars v = { node, r->hostname, node, r->opts.id,
					   cb_guest_type_name(r->opts.type) };
		char *text = cb_notes_render(r->opts.notes_template, &v);
		if (create_beside(r, ".notes", text) < 0)
			cb_warn(r->log, "notes: %s", cb_last_error());
		free(text);
	}
	if (r->opts.protected_ && create_beside(r, ".protected", "") < 0)
		return cb_error_prefix("protected");
	if (r->opts.protected_)
		cb_info(r->log, "marked protected: '%s.protected'", r->archive_path);
	return 0;
}

/* What the real run would use, resolved: where, under which name, with
 * which excludes and hook; then the verdict of the checks. */
static void log_dry_run(struct guest_run *r)
{
	char need[32];

	cb_info(r->log, "dry run: dumpdir '%s'%s%s%s", r->opts.to_stdout ? "-" : r->opts.dumpdir,
		r->opts.storage ? " (storage '" : "", r->opts.storage ? r->opts.storage : "",
		r->opts.storage ? "')" : "");
	cb_info(r->log, "dry run: archive '%s'", r->archive_path);
	cb_info(r->log, "dry run: tmpdir '%s'", r->opts.tmpdir);
	for (size_t i = 0; i < r->excludes.n; i++)
		cb_info(r->log, "dry run: exclude '%s'", r->excludes.v[i]);
	if (!r->excludes.n)
		cb_info(r->log, "dry run: no excludes");
	cb_info(r->log, "dry run: hook script %s%s%s", r->opts.script ? "'" : "none",
		r->opts.script ? r->opts.script : "", r->opts.script ? "' (executable)" : "");
	cb_fmt_bytes(need, sizeof(need), r->estimate);
	cb_info(r->log, "dry run: estimate %s to stage; checks passed%s; nothing copied", need,
		r->log->warnings ? " with warnings (see WARN above)" : "");
}

/* The missed entries in the log (at most CB_AUDIT_NAMES) and the report. */
static void audit_report(struct guest_run *r, struct cb_audit *a)
{
	struct cb_guest_result *res = r->res;

	cb_warn(r->log, "tracking audit: %llu change(s) made before the freeze were missed by "
		"change tracking: the archive may hold them as they were in the first sync; the "
		"next backup of %s %s walks the whole tree in its final sync",
		(unsigned long long)a->missed, type_upper(r), r->opts.id);
	for (size_t i = 0; i < a->n_names; i++)
		cb_warn(r->log, "tracking audit: missed '%s' (%s)", a->paths[i], a->whats[i]);
	if (a->missed > a->n_names)
		cb_warn(r->log, "tracking audit: ... and %llu more",
			(unsigned long long)(a->missed - a->n_names));
	res->audit_paths = a->paths;
	res->audit_whats = a->whats;
	res->n_audit_names = a->n_names;
	a->paths = NULL;
	a->whats = NULL;
	a->n_names = 0;
	if (cb_fullsync_set(r->opts.tmpdir, r->opts.id, "the tracking audit found changes "
			    "change tracking missed") < 0)
		cb_warn(r->log, "%s", cb_last_error());
}

/* After a tracked final sync, the guest running again: what tracking
 * missed (cb_audit.h). Its own failure is a warning: the archive is not
 * worse for it. */
static void audit_guest(struct guest_run *r)
{
	struct cb_audit a;

	if (!r->opts.tracking_audit || !r->stage || !cb_stage_final_tracked(r->stage) ||
	    r->guest.kind == CB_FREEZER_NONE || !r->track_end.tv_sec)
		return;
	cb_info(r->log, "tracking audit: comparing the running guest with the staging index");
	if (cb_audit_run(r->stage, &r->track_end, &a) < 0)
		cb_warn(r->log, "tracking audit not done: %s", cb_last_error());
	r->res->audited = 1;
	r->res->audit_checked = a.checked;
	r->res->audit_missed = a.missed;
	r->res->audit_seconds = a.seconds;
	cb_info(r->log, "tracking audit: %llu entries checked in %.2f s, %llu missed",
		(unsigned long long)a.checked, a.seconds, (unsigned long long)a.missed);
	if (a.in_flight)
		cb_info(r->log, "tracking audit: %llu entries looked changed before the freeze but "
			"were being changed by the running guest (a second look found them changed "
			"after it, or as archived)", (unsigned long long)a.in_flight);
	if (a.missed)
		audit_report(r, &a);
	cb_audit_release(&a);
}

/* A root or mp that is a disk image or a block device (Proxmox's default
 * rootfs): reached through the running container's init, or mounted
 * read-only while it is stopped (cb_ctvol); the passes then read it by
 * the held fd's name. */
static int attach_volumes(struct guest_run *r)
{
	struct cb_ctvol *v = r->vols;

	if (!v)
		return 0;
	if (cb_ctvol_attach(v, r->n_mps + 1, r->opts.id, r->opts.freeze_cgroup, !r->stopped,
			    r->log) < 0)
		return cb_error_prefix("%s %s", r->stopped ? "stopped container's volume"
				       : "running container's volume", r->opts.id);
	for (size_t i = 0; i <= r->n_mps; i++) {
		char **src = i ? &r->mps[i - 1].source : &r->opts.root;
		v[i].src = NULL;   /* freed now */
		if (v[i].path) {
			free(*src);
			*src = cb_xstrdup(v[i].path);
		}
	}
	return 0;
}

static int run_guest_phases(struct guest_run *r)
{
	warn_unimplemented(r);
	if (attach_volumes(r) < 0)
		return -1;
	if (preflight(r) < 0)
		return cb_error_prefix("preflight");
	if (r->opts.dry_run) {
		if (r->mode == CB_MODE_SNAPSHOT || r->mode_why[0])
			cb_info(r->log, "dry run: mode %s: %s%s", cb_mode_name(r->mode),
				r->mode == CB_MODE_SNAPSHOT ? "" : "snapshot not possible: ",
				r->mode_why);
		else if (r->stopped)
			cb_info(r->log, "dry run: mode stop: the guest is stopped, backed up as it is "
				"without a freeze (%s configured)", cb_mode_name(r->opts.mode));
		else
			cb_info(r->log, "dry run: mode %s, as configured", cb_mode_name(r->mode));
		log_dry_run(r);
		return 0;
	}
	if (guest_hook(r, "backup-start") < 0 ||
	    (reads_snapshots(r) ? snapshot_guest(r) : stage_guest(r)) < 0 ||
	    (r->stage && cb_stage_save_index(r->stage) < 0))
		return -1;
	audit_guest(r);
	release_indexes(r);
	if (write_archive(r) < 0 || mark_archive(r) < 0)
		return -1;
	/* the walk the last audit asked for is done */
	if (r->fullsync_pending && !cb_stage_final_tracked(r->stage) &&
	    cb_fullsync_clear(r->opts.tmpdir, r->opts.id) < 0)
		cb_warn(r->log, "%s", cb_last_error());
	prune_old(r);
	return guest_hook(r, "backup-end");
}

static void cleanup_mps(struct guest_run *r, int remove)
{
	for (size_t i = 0; i < r->n_mps; i++) {
		struct mount_point *mp = &r->mps[i];
		cb_stage_free(mp->stage);
		mp->stage = NULL;
		if (remove && mp->stage_dir && cb_remove_tree(mp->stage_dir) < 0)
			cb_warn(r->log, "%s", cb_last_error());
	}
}

/* keep-staging 0: the copy (mount points' too) is moved aside and removed
 * by stage-workers threads while the run logs its result and the job goes
 * on; the job waits for it after its last line. */
static void remove_stage(struct guest_run *r)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int workers = r->opts.stage_workers ? r->opts.stage_workers : cores > 0 ? (int)cores : 1;

	if (cb_stage_dir_trash(r->stage_dir, workers, &r->res->trash) == 0) {
		cleanup_mps(r, 0);
		return;
	}
	cb_warn(r->log, "%s", cb_last_error());
	cleanup_mps(r, 1);   /* first: the private directory goes when it is empty */
	if (cb_stage_dir_remove(r->stage_dir) < 0)
		cb_warn(r->log, "%s", cb_last_error());
}

static void cleanup_run(struct guest_run *r)
{
	cb_guest_release(&r->guest);   /* thaws if an error left it frozen */
	if (cb_vmcbw_close(r->vm) < 0)   /* the VM's graph as it was */
		cb_warn(r->log, "%s", cb_last_error());
	r->vm = NULL;
	remove_snapshots(r);
	cb_track_free(r->track);
	cb_stage_free(r->stage);
	cb_imgstage_free(r->images);
	if (r->stage_created && (!r->keep || r->drop_kept))
		remove_stage(r);
	else
		cleanup_mps(r, 0);
	if (r->stage_created && r->keep && !r->drop_kept && cb_stage_dir_record(r->stage_dir) < 0)
		cb_warn(r->log, "%s", cb_last_error());
	cb_ctvol_detach(r->vols, r->n_mps + 1);
	cb_lock_release(&r->store_lock);
	cb_lock_release(&r->guest_lock);
}

static void release_run(struct guest_run *r)
{
	for (size_t i = 0; i < r->n_mps; i++) {
		free(r->mps[i].source);
		free(r->mps[i].target);
		free(r->mps[i].stage_dir);
	}
	free(r->mps);
	free(r->vols);
	free(r->snap_be);
	free(r->stop_cmd);
	free(r->start_cmd);
	for (size_t i = 0; i < r->n_own; i++)
		free((char *)r->own[i].what);
	cb_strvec_clear(&r->excludes);
	free(r->stage_dir);
	free(r->archive_path);
	free(r->log_path);
	cb_opts_release(&r->opts);
}

static void prepare_paths(struct guest_run *r, time_t when)
{
	char *name = cb_backup_archive_name(r->opts.type, r->opts.id, when, r->opts.compress,
					    r->opts.archive_name);

	free(r->archive_path);
	free(r->log_path);
	r->log_path = NULL;
	if (r->opts.to_stdout) {
		r->archive_path = cb_xstrdup("-");   /* vzdump's name for stdout */
	} else {
		r->archive_path = cb_xasprintf("%s/%s", r->opts.dumpdir, name);
		if (!r->opts.dry_run) {   /* a dry run writes no log file */
			/* the same rule prune uses to find the .log beside an archive */
			char *base = cb_catalog_base(r->archive_path);
			r->log_path = cb_xasprintf("%s.log", base);
			free(base);
		}
	}
	free(name);
}

/* The archive's name is taken when nothing of that name exists (archive,
 * .tmp, .log: a planted symlink too) and its .log was created O_EXCL. */
static int name_is_free(const char *path)
{
	char *tmp = cb_xasprintf("%s.tmp", path);
	struct stat st;
	int is_free = lstat(path, &st) < 0 && errno == ENOENT && lstat(tmp, &st) < 0 &&
		      errno == ENOENT;

	free(tmp);
	return is_free;
}

/*
 * Names are unique to the second: when the name of this second is taken
 * (two backups of a guest in one second, or a planted file), wait for the
 * next second rather than replace or invent a suffix. Gives up after
 * MAX_NAME_TRIES seconds, then runs without a log file (the archive's
 * commit refuses to replace a name all the same).
 */
#define MAX_NAME_TRIES 10
static void reserve_name(struct guest_run *r)
{
	time_t when = r->started_wall;

	for (int i = 0; i < MAX_NAME_TRIES; i++) {
		prepare_paths(r, when);
		if (!r->log_path)
			return;
		if (name_is_free(r->archive_path)) {
			if (cb_log_attach(r->log, r->log_path) == 0)
				return;
			if (errno != EEXIST) {   /* no dumpdir: preflight says why */
				if (access(r->opts.dumpdir, W_OK) == 0)
					cb_warn(r->log, "%s", cb_last_error());
				return;
			}
		}
		while (time(NULL) <= when)
			usleep(50 * 1000);
		when = time(NULL);
	}
	cb_warn(r->log, "no free archive name for %s %s in %d seconds", type_upper(r), r->opts.id,
		MAX_NAME_TRIES);
}

/* The mp values were checked when they were set. */
static void parse_mps(struct guest_run *r)
{
	r->n_mps = r->opts.mps.n;
	r->mps = cb_xcalloc(r->n_mps + 1, sizeof(*r->mps));
	for (size_t i = 0; i < r->n_mps; i++) {
		struct mount_point *mp = &r->mps[i];
		if (cb_mp_split(r->opts.mps.v[i], &mp->source, &mp->target) < 0)
			abort();
	}
	if (r->opts.type != CB_GUEST_CT || !r->opts.root)
		return;
	r->vols = cb_xcalloc(r->n_mps + 1, sizeof(*r->vols));
	for (size_t i = 0; i <= r->n_mps; i++) {
		r->vols[i].src = i ? r->mps[i - 1].source : r->opts.root;
		r->vols[i].target = i ? r->mps[i - 1].target : "./";
		r->vols[i].fd = -1;
	}
	if (!cb_ctvol_any(r->vols, r->n_mps + 1)) {
		free(r->vols);
		r->vols = NULL;
	}
}

/* vzdump's ionice: 8 = idle class, 0-7 = best-effort level. Set before any
 * worker thread starts, since threads inherit it. */
static void apply_ionice(struct guest_run *r)
{
	enum { WHO_PROCESS = 1, CLASS_BE = 2, CLASS_IDLE = 3, CLASS_SHIFT = 13 };
	int prio = r->opts.ionice;
	int value = prio == 8 ? CLASS_IDLE << CLASS_SHIFT : (CLASS_BE << CLASS_SHIFT) | prio;

	if (syscall(SYS_ioprio_set, WHO_PROCESS, 0, value) < 0)
		cb_warn(r->log, "cannot set ionice priority %d: %s", prio, strerror(errno));
	else
		cb_info(r->log, "ionice priority: %d", prio);
}

/* vzdump's "status = running|stopped"; a stopped guest is copied as it
 * is, in one pass, never frozen (whatever its freezer). Stopped must be
 * known: a guest its freezer calls stopped that runs all the same fails
 * (-1), never copied unfrozen. */
static int log_status(struct guest_run *r)
{
	char why[512];

	r->stopped = cb_guest_status(&r->opts, why, sizeof(why)) == 0;
	if (r->stopped && cb_guest_check_stopped(&r->opts, why) < 0)
		return -1;
	if (r->stopped)
		cb_info(r->log, "status = stopped (%s)", why);
	else
		cb_info(r->log, "status = running");
	return 0;
}

/* vzdump's guest type in its summary lines: lxc or qemu */
static const char *vz_type(const struct guest_run *r)
{
	return r->opts.type == CB_GUEST_VM ? "qemu" : "lxc";
}

static int start_guest_log(struct guest_run *r)
{
	reserve_name(r);
	/* vzdump's words, which alert rules match: every guest is a "VM" */
	cb_info(r->log, "Starting Backup of VM %s (%s)", r->opts.id, vz_type(r));
	if (log_status(r) < 0)
		return -1;
	choose_mode(r);
	cb_info(r->log, "backup mode: %s", cb_mode_name(r->mode));
	if (r->opts.bwlimit)
		cb_info(r->log, "bandwidth limit: %ld KB/s", r->opts.bwlimit);
	apply_ionice(r);
	return 0;
}

/* The hooks after the end (their failure is only a warning, as vzdump's). */
static void end_hook(struct guest_run *r, const char *phase)
{
	if (guest_hook(r, phase) < 0)
		cb_warn(r->log, "%s", cb_last_error());
}

/* vzdump's failure line (and syslog's); a reader that closed standard
 * output (--stdout into `| head`) is no error to shout about. */
static void log_failure(struct guest_run *r)
{
	if (r->opts.to_stdout && cb_stdout_gone()) {
		cb_info(r->log, "Backup of VM %s stopped - standard output closed by its reader",
			r->opts.id);
	} else {
		cb_err(r->log, "Backup of VM %s failed - %s", r->opts.id, cb_last_error());
		cb_log_syslog(LOG_ERR, "Backup of VM %s (%s) failed - %s", r->opts.id, vz_type(r),
			      cb_last_error());
	}
	end_hook(r, "backup-abort");
}

/* The guest's part of the job's report. */
static void report_result(struct guest_run *r, int ret)
{
	struct cb_guest_result *res = r->res;

	res->result = ret < 0 ? CB_RESULT_FAILED : res->audit_missed ? CB_RESULT_WARNING : CB_RESULT_OK;
	res->error = ret < 0 ? cb_xstrdup(cb_last_error()) : NULL;
	res->name = cb_xstrdup(r->hostname);
	res->archive = r->opts.dry_run ? NULL : cb_xstrdup(r->archive_path);
	res->log_path = r->log_path ? cb_xstrdup(r->log_path) : NULL;
	res->seconds = cb_now() - r->started;
}

int cb_backup_guest(struct cb_opts *resolved, const char *config_error, struct cb_log *log,
		    struct cb_guest_result *res)
{
	struct guest_run r;
	char hms[16];
	int ret;

	memset(&r, 0, sizeof(r));
	r.opts = *resolved;          /* takes ownership */
	memset(resolved, 0, sizeof(*resolved));
	r.log = log;
	r.res = res;
	r.started = cb_now();
	r.started_wall = time(NULL);
	r.guest.watchdog_fd = r.guest.report_fd = -1;
	r.guest.cleanup_handle = -1;
	r.guest_lock.fd = r.store_lock.fd = -1;
	parse_mps(&r);
	build_excludes(&r);
	find_hostname(&r);
	ret = start_guest_log(&r);
	if (ret == 0)
		ret = config_error ? cb_error("%s", config_error) : run_guest_phases(&r);
	report_result(&r, ret);
	if (ret < 0)
		log_failure(&r);
	/* auto holds no room it was not sure of: a run may fail for want of it */
	if (ret < 0 && r.opts.keep_staging == CB_KEEP_AUTO)
		r.drop_kept = 1;
	cleanup_run(&r);
	if (ret == 0) {
		cb_fmt_hms(hms, sizeof(hms), cb_now() - r.started);
		cb_info(log, "Finished Backup of VM %s (%s)", r.opts.id, hms);
		cb_log_syslog(LOG_INFO, "Finished Backup of VM %s (%s) (%s): %s", r.opts.id, vz_type(&r),
			      hms, r.archive_path);
	}
	cb_log_detach(log);
	end_hook(&r, "log-end");
	release_run(&r);
	return ret;
}
