/*
 * cb_backup: the phases of one guest's backup, in the order of DESIGN.md
 * section 1 (cb_backup_guest at the end of this file). See
 * include/cb_backup.h; the phases' own files: backup_preflight.c,
 * backup_stage.c (staging and the freeze), backup_mode.c, backup_archive.c,
 * their shared state in backup_int.h.
 * In src/job/, the top floor: it drives the modules below (guest, stage,
 * archive, codec, sink, and ops/'s prune and leftovers).
 *
 * struct guest_run is the mutable state of one guest's backup; the
 * resolved options in it are filled once and then only read.
 */
#include "backup_int.h"

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

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* vzdump's wording of a rule set: "keep-daily=7, keep-last=3" (its keys
 * sorted, joined by ", "), whatever order the config gave. */
static char *keep_rules_text(const char *rules)
{
	char *copy = cb_xstrdup(rules), *save = NULL, *out;
	struct cb_strvec v = CB_STRVEC_INIT;
	size_t len = 1;

	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		t += strspn(t, " ");
		if (*t)
			cb_strvec_push(&v, t);
	}
	if (v.n)
		qsort(v.v, v.n, sizeof(*v.v), cmp_str);
	for (size_t i = 0; i < v.n; i++)
		len += strlen(v.v[i]) + 2;
	out = cb_xmalloc(len);
	out[0] = '\0';
	for (size_t i = 0; i < v.n; i++) {
		if (i)
			strcat(out, ", ");
		strcat(out, v.v[i]);
	}
	cb_strvec_clear(&v);
	free(copy);
	return out;
}

/* After a successful backup (remove = 1): retention. A failure here is a
 * warning: the new backup is good. */
static void prune_old(struct guest_run *r)
{
	unsigned removed = 0;
	char *keep;

	if (!r->opts.remove || !r->opts.prune_backups || r->opts.to_stdout)
		return;
	keep = keep_rules_text(r->opts.prune_backups);
	cb_info(r->log, "prune older backups with retention: %s", keep);
	free(keep);
	if ((r->store ? cb_prune_store_guest(r->store, backup_uses_dumpdir(r) ? r->opts.dumpdir : NULL,
					     r->opts.type, r->opts.id,
					     r->opts.prune_backups, strrchr(r->archive_path, '/') + 1, 0,
					     r->log, &removed)
		      : cb_prune_guest(r->opts.dumpdir, r->opts.type, r->opts.id, r->opts.prune_backups,
				       strrchr(r->archive_path, '/') + 1, 0, r->log, &removed)) < 0)
		cb_warn(r->log, "prune: %s", cb_last_error());
	/* the units only the pruned nights had */
	if (r->store && cb_store_gc(r->store, 0, r->log) < 0)
		cb_warn(r->log, "garbage collection: %s", cb_last_error());
	cb_info(r->log, "pruned %u backup(s)%s", removed,
		removed ? " not covered by keep-retention policy" : "");
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

	/* a store's night has them in its manifest */
	if (r->opts.to_stdout || r->store)
		return 0;
	if (r->opts.notes_template) {
		cb_info(r->log, "adding notes to backup");
		cb_node_name(node, sizeof(node));
		struct cb_notes_vars v = { node, r->hostname, node, r->opts.id,
					   cb_guest_type_name(r->opts.type) };
		char *text = cb_notes_render(r->opts.notes_template, &v);
		if ((backup_encrypts(r) ? backup_enc_notes(r, text) : create_beside(r, ".notes", text)) < 0)
			cb_warn(r->log, "notes: %s", cb_last_error());
		free(text);
	}
	if (r->opts.protected_)
		cb_info(r->log, "marking backup as protected");
	if (r->opts.protected_ && create_beside(r, ".protected", "") < 0)
		return cb_error_prefix("protected");
	return 0;
}

/* What the real run would use, resolved: where, under which name, with
 * which excludes and hook; then the verdict of the checks. */
static void log_dry_run(struct guest_run *r)
{
	char need[32];

	if (r->opts.storage_type == CB_STORAGE_S3 && !r->opts.to_stdout)
		cb_info(r->log, "dry run: storage '%s': S3 bucket '%s' at %s%s%s%s, no dumpdir",
			r->opts.storage, r->opts.s3_bucket, r->opts.s3_endpoint,
			r->opts.s3_prefix ? ", prefix '" : "", r->opts.s3_prefix ? r->opts.s3_prefix : "",
			r->opts.s3_prefix ? "'" : "");
	else
		cb_info(r->log, "dry run: dumpdir '%s'%s%s%s", r->opts.to_stdout ? "-" : r->opts.dumpdir,
			r->opts.storage ? " (storage '" : "", r->opts.storage ? r->opts.storage : "",
			r->opts.storage ? "')" : "");
	cb_info(r->log, "dry run: archive '%s'", backup_target(r));
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
		(unsigned long long)a->missed, backup_type_upper(r), r->opts.id);
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
 * read-only while it is stopped (cb_ct_volume); the passes then read it by
 * the held fd's name. */
static int attach_volumes(struct guest_run *r)
{
	struct cb_ct_volume *v = r->vols;

	if (!v)
		return 0;
	if (cb_ct_volume_attach(v, r->n_mps + 1, r->opts.id, r->opts.freeze_cgroup, !r->stopped,
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
	backup_warn_unimplemented(r);
	if (attach_volumes(r) < 0)
		return -1;
	if (backup_preflight(r) < 0)
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
	if (backup_guest_hook(r, "backup-start") < 0 ||
	    (backup_reads_snapshots(r) ? backup_snapshot_guest(r) : backup_stage_guest(r)) < 0 ||
	    (r->stage && cb_stage_save_index(r->stage) < 0))
		return -1;
	audit_guest(r);
	backup_release_indexes(r);
	if (backup_write_archive(r) < 0 || mark_archive(r) < 0)
		return -1;
	/* the walk the last audit asked for is done */
	if (r->fullsync_pending && !cb_stage_final_tracked(r->stage) &&
	    cb_fullsync_clear(r->opts.tmpdir, r->opts.id) < 0)
		cb_warn(r->log, "%s", cb_last_error());
	prune_old(r);
	return backup_guest_hook(r, "backup-end");
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
	if (cb_vmsnap_close(r->vm) < 0)   /* the VM's graph as it was */
		cb_warn(r->log, "%s", cb_last_error());
	r->vm = NULL;
	backup_remove_snapshots(r);
	cb_track_free(r->track);
	cb_stage_free(r->stage);
	cb_imgstage_free(r->images);
	if (r->stage_created && (!r->keep || r->drop_kept))
		remove_stage(r);
	else
		cleanup_mps(r, 0);
	if (r->stage_created && r->keep && !r->drop_kept && cb_stage_dir_record(r->stage_dir) < 0)
		cb_warn(r->log, "%s", cb_last_error());
	cb_ct_volume_detach(r->vols, r->n_mps + 1);
	cb_lock_release(&r->store_lock);
	cb_lock_release(&r->guest_lock);
}

static void release_run(struct guest_run *r)
{
	backup_store_close(r);
	free(r->archive_label);
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

	if (backup_encrypts(r)) {
		char *enc = cb_xasprintf("%s%s", name, CB_ENC_SUFFIX);
		free(name);
		name = enc;
	}

	free(r->archive_path);
	free(r->archive_label);
	free(r->log_path);
	r->log_path = NULL;
	r->archive_label = NULL;
	if (r->opts.to_stdout) {
		r->archive_path = cb_xstrdup("-");   /* vzdump's name for stdout */
	} else {
		const char *store = cb_objstore_label_for(&r->opts);

		/* a store's night is no file there: restore and the
		 * others take it as STORE:NAME */
		if (store)
			r->archive_label = cb_xasprintf("%s:%s", store, name);
		r->archive_path = cb_xasprintf("%s/%s", r->opts.dumpdir, name);
		/* an S3 night's log is in the store; an encrypted archive's
		 * would name the guest's files in clear beside it: both on the
		 * host, TMPDIR/cbackup/TYPE-ID.log */
		if (!r->opts.dry_run && (!backup_uses_dumpdir(r) || backup_encrypts(r))) {
			r->log_path = backup_host_log_path(r);
		} else if (!r->opts.dry_run) {   /* a dry run writes no log file */
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
	cb_warn(r->log, "no free archive name for %s %s in %d seconds", backup_type_upper(r), r->opts.id,
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
	if (!cb_ct_volume_any(r->vols, r->n_mps + 1)) {
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
	if (r->opts.type == CB_GUEST_CT && r->hostname_configured)
		cb_info(r->log, "CT Name: %s", r->hostname);
	return 0;
}

/* vzdump's "Backup started at 2026-12-06 03:00:01" (local time) */
static void log_clock(struct guest_run *r, const char *what)
{
	char when[32];
	time_t now = time(NULL);
	struct tm tm;

	strftime(when, sizeof(when), "%F %H:%M:%S", localtime_r(&now, &tm));
	cb_info(r->log, "%s %s", what, when);
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
	log_clock(r, "Backup started at");
	if (log_status(r) < 0)
		return -1;
	backup_choose_mode(r);
	cb_info(r->log, "backup mode: %s", cb_mode_name(r->mode));
	if (r->opts.bwlimit)
		cb_info(r->log, "bandwidth limit: %ld KB/s", r->opts.bwlimit);
	apply_ionice(r);
	return 0;
}

/* The hooks after the end (their failure is only a warning, as vzdump's). */
static void end_hook(struct guest_run *r, const char *phase)
{
	if (backup_guest_hook(r, phase) < 0)
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
		log_clock(r, "Failed at");
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
	res->archive = r->opts.dry_run ? NULL : cb_xstrdup(backup_target(r));
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
	backup_build_excludes(&r);
	backup_find_hostname(&r);
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
			      hms, backup_target(&r));
		log_clock(&r, "Backup finished at");
	}
	cb_log_detach(log);
	end_hook(&r, "log-end");
	release_run(&r);
	return ret;
}
