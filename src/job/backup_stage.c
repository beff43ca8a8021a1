/*
 * Staging and the freeze: the staging copies (root and mp volumes), the
 * first sync while the guest runs, the freeze, the final sync, the thaw;
 * stop mode, a stopped guest's one-pass copy, a VM's copy-before-write
 * snapshot (stage_guest).
 */
#include "backup_int.h"

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
	if (backup_uses_dumpdir(r) && r->opts.dumpdir)
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
	return r->opts.to_stdout ? 0 : backup_check_dump_space(r, r->estimate);
}

/* max_ms: the deadline of the frozen time (0 = none, stop mode). */
static int freeze(struct guest_run *r, int max_ms)
{
	if (backup_guest_hook(r, "pre-stop") < 0)
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
	int ret = backup_guest_hook_bounded(r, "pre-restart", frozen_time_left_ms(r, max_ms));

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
	if (backup_guest_hook(r, "post-restart") < 0)
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

void backup_warn_no_freezer(struct guest_run *r, const char *what)
{
	if (r->guest.kind == CB_FREEZER_NONE && !r->stopped)
		cb_warn(r->log, "no freeze control configured for %s %s: %s "
			"(set freeze-cgroup, freeze-pid, freeze-cmd or qmp)", backup_type_upper(r), r->opts.id,
			what);
}

/* The frozen part of suspend and snapshot mode: freeze, WORK under the
 * max-freeze deadline (the watchdog thaws at it; the clock check stops the
 * work there too), thaw. */
int backup_frozen_section(struct guest_run *r, int (*work)(struct guest_run *))
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
	if (backup_guest_hook(r, "pre-restart") < 0 && ret == 0) {
		ret = -1;
		snprintf(first, sizeof(first), "%s", cb_last_error());
	}
	cb_info(r->log, "restarting guest");
	if (guest_cmd("start-cmd", r->start_cmd, 0) < 0)
		return ret < 0 ? cb_error("%s; %s", first, cb_last_error()) : -1;
	r->res->freeze = cb_now() - stopped_at;
	cb_info(r->log, "guest is online again after %.2f seconds", r->res->freeze);
	if (backup_guest_hook(r, "post-restart") < 0 && ret == 0)
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

	if (backup_guest_hook(r, "pre-stop") < 0)
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
	return backup_guest_hook(arg, phase);
}

/* VM disks read from QEMU's copy-before-write snapshot (cb_vmsnap.h). 1:
 * not so (no qmp, mode stop, vm-method stage, QEMU older than 7.1). */
static int stage_vm_cbw(struct guest_run *r)
{
	int reused, rc;

	if (r->opts.type != CB_GUEST_VM || !r->opts.qmp || r->mode == CB_MODE_STOP ||
	    r->opts.vm_method == CB_VM_STAGE)
		return 1;
	r->vm_opts = (struct cb_vmsnap_opts){
		.qmp = r->opts.qmp, .qga = r->opts.qga, .method = r->opts.vm_method,
		.id = r->opts.id, .disks = &r->opts.disks,
		.max_freeze = r->opts.max_freeze, .cbw_timeout = 60, .bwlimit = r->opts.bwlimit,
		.keep_staging = r->keep, .progress = &r->progress,
		.show_progress = !r->opts.quiet, .log = r->log,
		.hook = vm_hook, .hook_arg = r,
	};
	if ((rc = cb_vmsnap_open(&r->vm, &r->vm_opts)) != 0)
		return rc;
	if (cb_stage_dir_prepare(r->opts.tmpdir, r->opts.id, r->keep, &r->stage_dir,
				 &reused) < 0)
		return -1;
	r->stage_created = 1;
	if (cb_vmsnap_run(r->vm, r->stage_dir, reused, &r->res->freeze) < 0)
		return -1;
	rc = cb_vmsnap_close(r->vm);
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
			"it for its final sync)", backup_type_upper(r), r->opts.id);
}

/* Copy the guest into staging; the guest is frozen only for what must be. */
int backup_stage_guest(struct guest_run *r)
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
		backup_warn_no_freezer(r, "backing up while it runs");
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
	return backup_frozen_section(r, final_sync);
}
