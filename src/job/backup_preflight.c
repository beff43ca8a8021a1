/*
 * Before anything is copied: the guest's hostname and hooks, the
 * excludes, the checks of the source, tmpdir and dump dir, the space
 * estimate and keep-staging auto's choice, the guest's lock (preflight).
 */
#include "backup_int.h"

static const char *const std_excludes[] = { "/tmp/?*", "/var/tmp/?*", "/var/run/?*.pid", NULL };

const char *backup_type_upper(const struct guest_run *r)
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
void backup_find_hostname(struct guest_run *r)
{
	if (hostname_from_config(r->opts.guest_config, r->hostname, sizeof(r->hostname))) {
		r->hostname_configured = 1;
		return;
	}
	if (r->opts.root) {
		char *etc = cb_xasprintf("%s/etc/hostname", r->opts.root);
		first_word(etc, r->hostname, sizeof(r->hostname));
		free(etc);
	}
	if (!r->hostname[0])
		snprintf(r->hostname, sizeof(r->hostname), "%s%s", backup_type_upper(r), r->opts.id);
}

/* timeout_ms: 0 for none; a hook run while the guest is frozen gets what is
 * left of max-freeze (the watchdog thaws at that deadline anyway). */
int backup_guest_hook_bounded(struct guest_run *r, const char *phase, int timeout_ms)
{
	struct cb_hook_env env = {
		.dumpdir = cb_objstore_dumpdir_for(&r->opts),
		.storeid = r->opts.storage, .vmtype = r->opts.type == CB_GUEST_VM ? "qemu" : "lxc",
		.target = backup_target(r), .logfile = r->log_path, .hostname = r->hostname,
		.timeout_ms = timeout_ms,
	};

	if (r->opts.dry_run)
		return 0;   /* a dry run runs nothing */
	return cb_hook_run(r->opts.script, phase, cb_mode_name(r->mode), r->opts.id, &env, r->log);
}

int backup_guest_hook(struct guest_run *r, const char *phase)
{
	return backup_guest_hook_bounded(r, phase, 0);
}

/* Options whose feature is not built yet: say so once per guest. */
void backup_warn_unimplemented(struct guest_run *r)
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

void backup_build_excludes(struct guest_run *r)
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
 * directory (cb_vmsnap.h). */
int backup_reads_snapshots(const struct guest_run *r)
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
int backup_check_dump_space(struct guest_run *r, uint64_t need)
{
	struct statvfs vfs;
	char need_s[32], avail_s[32];
	uint64_t avail;

	if (!backup_uses_dumpdir(r))
		return 0;
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
	       !backup_reads_snapshots(r) && cb_stage_dir_kept(r->opts.tmpdir, r->opts.id);
}

/* keep-staging auto decides for a container's staging copy: VM disks
 * and snapshot mode keep nothing. KEPT: a copy is kept there already (it
 * takes its room now; one that is not to be kept is still the cheaper
 * source of this run's first sync, and is removed after it), else NEED is
 * what the copy will take. -1 when statvfs fails. */
/* dir is root or lies below it (by device and inode, each ancestor of its
 * real path): a staging copy kept there would be inside the guest. */
static int lies_inside(const char *root, const char *dir)
{
	struct stat rs, st;
	char *p = realpath(dir, NULL), *slash;
	int inside = 0;

	if (!p || stat(root, &rs) < 0) {
		free(p);
		return 0;
	}
	for (;;) {
		if (stat(p, &st) == 0 && st.st_dev == rs.st_dev && st.st_ino == rs.st_ino) {
			inside = 1;
			break;
		}
		slash = strrchr(p, '/');
		if (!slash || slash == p)
			break;
		*slash = '\0';
	}
	free(p);
	return inside;
}

static int keep_auto(struct guest_run *r, int kept, uint64_t need)
{
	char why[256];
	int keep;

	if (r->opts.keep_staging != CB_KEEP_AUTO || r->opts.type != CB_GUEST_CT || backup_reads_snapshots(r))
		return 0;
	if (r->opts.root && lies_inside(r->opts.root, r->opts.tmpdir)) {
		cb_info(r->log, "keep-staging auto: not kept: the tmpdir '%s' is inside the guest's "
			"root (the copy would be left in the guest)", r->opts.tmpdir);
		r->keep = kept;   /* a copy kept before is still this run's source */
		r->drop_kept = kept;
		return 0;
	}
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
	if (need > avail && !r->keep && !backup_reads_snapshots(r))
		return cb_error("not enough space in tmpdir '%s': need %s, %s available",
				r->opts.tmpdir, need_s, avail_s);
	return r->opts.to_stdout ? 0 : backup_check_dump_space(r, need);
}

/* Two cbackups never back up one guest at once: not on this host (a local
 * lock) and not from two hosts sharing the storage (a lock file there). */
static int lock_guest(struct guest_run *r)
{
	int ret = cb_lock_guest(&r->guest_lock, backup_uses_dumpdir(r) ? &r->store_lock : NULL,
				r->opts.dumpdir, cb_guest_type_name(r->opts.type), r->opts.id);

	if (ret == 1)
		ret = cb_error("%s %s is locked by another cbackup on this host", backup_type_upper(r), r->opts.id);
	if (ret == 2) {
		char held[1024];
		snprintf(held, sizeof(held), "%s", cb_last_error());
		ret = cb_error("%s %s is being backed up to this storage by another host (%s)",
			       backup_type_upper(r), r->opts.id, held);
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

	if (r->opts.storage_type != CB_STORAGE_S3)   /* an S3 night leaves none there */
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

int backup_preflight(struct guest_run *r)
{
	if (check_source(r) < 0 || check_dir("tmpdir", r->opts.tmpdir, 1) < 0 ||
	    (backup_uses_dumpdir(r) && check_dir("dumpdir", r->opts.dumpdir, 1) < 0))
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
