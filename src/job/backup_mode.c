/*
 * The mode a guest is backed up in: snapshot mode where every volume can
 * be snapshotted (its snapshots taken and removed here), stop mode's way
 * of stopping the guest, suspend otherwise (choose_mode).
 */
#include "backup_int.h"

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
void backup_choose_mode(struct guest_run *r)
{
	r->mode = r->stopped ? CB_MODE_STOP : r->opts.mode;
	if (r->mode == CB_MODE_STOP && !r->stopped && r->vols) {
		/* it is reached through the running container: stopped, it is not */
		snprintf(r->mode_why, sizeof(r->mode_why), "a volume of %s %s is a disk image, "
			 "read through the running container", backup_type_upper(r), r->opts.id);
		cb_info(r->log, "stop mode not possible: %s", r->mode_why);
		cb_info(r->log, "trying 'suspend' mode instead");
		r->mode = CB_MODE_SUSPEND;
		return;
	}
	if (r->mode == CB_MODE_STOP && !r->stopped && !find_stop_method(r)) {
		snprintf(r->mode_why, sizeof(r->mode_why), "no way to stop %s %s (set stop-cmd and "
			 "start-cmd; no pct or lxc-stop container of that ID)", backup_type_upper(r),
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
int backup_snapshot_guest(struct guest_run *r)
{
	backup_warn_no_freezer(r, "snapshots of a running guest");
	if (prepare_snapshots(r) < 0)
		return cb_error_prefix("snapshot");
	return backup_frozen_section(r, take_snapshots);
}

/* On every path (the cleanup stack covers signals, the next run a kill). */
void backup_remove_snapshots(struct guest_run *r)
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
