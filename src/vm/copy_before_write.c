/* cb_vmsnap: VM disks through QEMU's copy-before-write filter. See include/cb_vmsnap.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cb_json.h"
#include "cb_nbdread.h"
#include "cb_private.h"
#include "cb_qmp_session.h"
#include "cb_rmtree.h"
#include "cb_vmsnap.h"
#include "vmsnap_int.h"

/* ---- open: version, disks, leftovers ---------------------------------- */

char *cb_vmsnap_archive_name(const char *disk)
{
	const char *base = strrchr(disk, '/') ? strrchr(disk, '/') + 1 : disk;
	const char *dot = strrchr(base, '.');
	size_t n = dot && dot != base ? (size_t)(dot - base) : strlen(base);

	return cb_xasprintf("%.*s.raw", (int)n, base);
}

static int same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	return a && b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

/* The bytes the image and its backing files hold, at most the disk's size:
 * what a full copy of its content may take. */
static uint64_t allocated(const struct cb_json *image, uint64_t size)
{
	uint64_t sum = 0;

	for (int depth = 0; image && depth < 64; depth++) {
		sum += (uint64_t)cb_json_int(image, "actual-size", (long long)size);
		image = cb_json_get(image, "backing-image");
	}
	return sum < size ? sum : size;
}

/* The query-block entry of configured disk PATH, or why there is none. */
static int map_disk(const struct cb_json *list, struct vmdisk *d)
{
	const struct cb_json *hit = NULL;
	const char *node, *qdev, *drv;

	for (size_t i = 0; list && i < list->n && !hit; i++)
		if (same_file(d->path, cb_json_str(list->items[i], "inserted.file")) ||
		    same_file(d->path, cb_json_str(list->items[i], "inserted.image.filename")))
			hit = list->items[i];
	if (!hit)
		return cb_error("disk '%s': no drive of the VM has it open (query-block)", d->path);
	node = cb_json_str(hit, "inserted.node-name");
	qdev = cb_json_str(hit, "qdev");
	drv = cb_json_str(hit, "inserted.drv");
	d->device = cb_xstrdup(cb_json_str(hit, "device") ? cb_json_str(hit, "device") : "");
	if (!qdev || !*qdev)
		return cb_error("disk '%s' (drive '%s'): not attached to a guest device: "
				"no filter can be put in front of it", d->path, d->device);
	if (!node || !*node)
		return cb_error("disk '%s' (drive '%s'): its format node has no name", d->path,
				d->device);
	if (drv && (!strcmp(drv, "copy-before-write") || !strncmp(node, PREFIX, strlen(PREFIX))))
		return cb_error("disk '%s' (drive '%s'): a copy-before-write filter (%s) is there "
				"already: another backup runs", d->path, d->device, node);
	d->qdev = cb_xstrdup(qdev);
	d->node = cb_xstrdup(node);
	d->size = (uint64_t)cb_json_int(hit, "inserted.image.virtual-size", 0);
	d->alloc = allocated(cb_json_get(hit, "inserted.image"), d->size);
	d->name = cb_vmsnap_archive_name(d->path);
	d->drv = cb_xstrdup(drv ? drv : "");
	return 0;
}

static int map_disks(struct cb_vmsnap *v)
{
	struct cb_json *blocks = NULL;
	int rc = 0;

	if (cb_qmp_session_exec(&v->s, "query-block", NULL, &blocks) < 0)
		return -1;
	v->n = v->o->disks->n;
	v->d = cb_xcalloc(v->n, sizeof(*v->d));
	for (size_t i = 0; i < v->n && rc == 0; i++) {
		v->d[i].path = v->o->disks->v[i];
		rc = map_disk(cb_json_get(blocks, "return"), &v->d[i]);
		for (size_t k = 0; k < i && rc == 0; k++)
			if (!strcmp(v->d[k].node, v->d[i].node) || !strcmp(v->d[k].name, v->d[i].name))
				rc = cb_error("disks '%s' and '%s': %s", v->d[k].path, v->d[i].path,
					      strcmp(v->d[k].node, v->d[i].node)
						      ? "the same archive name: rename one"
						      : "the same drive");
	}
	cb_json_free(blocks);
	return rc;
}

static int query_version(struct cb_vmsnap *v)
{
	struct cb_json *ver = NULL, *st = NULL;
	const char *status;

	if (cb_qmp_session_exec(&v->s, "query-version", NULL, &ver) < 0 ||
	    cb_qmp_session_exec(&v->s, "query-status", NULL, &st) < 0) {
		cb_json_free(ver);
		return -1;
	}
	v->major = (int)cb_json_int(ver, "return.qemu.major", 0);
	v->minor = (int)cb_json_int(ver, "return.qemu.minor", 0);
	v->micro = (int)cb_json_int(ver, "return.qemu.micro", 0);
	status = cb_json_str(st, "return.status");
	v->was_paused = status && strcmp(status, "running");
	cb_json_free(ver);
	cb_json_free(st);
	return 0;
}

enum cb_vm_path cb_vm_path_choose(enum cb_vm_method method, int major, int minor)
{
	int v = major * 1000 + minor;

	if (method == CB_VM_STAGE || v < 4002)   /* 4.2: blockdev-backup's job-id, transactions */
		return CB_VMPATH_STAGE;
	if (method == CB_VM_BACKUP || v < 7001)   /* 7.1: on-cbw-error, snapshot-access */
		return CB_VMPATH_BACKUP;
	return CB_VMPATH_CBW;
}

static void free_disks(struct cb_vmsnap *v)
{
	for (size_t i = 0; i < v->n; i++) {
		free(v->d[i].device);
		free(v->d[i].qdev);
		free(v->d[i].node);
		free(v->d[i].name);
		free(v->d[i].drv);
		free(v->d[i].snap_bm);
	}
	free(v->d);
	v->d = NULL;
	v->n = 0;
}

int cb_vmsnap_open(struct cb_vmsnap **out, const struct cb_vmsnap_opts *o)
{
	struct cb_vmsnap *v = cb_xcalloc(1, sizeof(*v));
	int count;

	*out = NULL;
	v->o = o;
	v->wd_fd = -1;
	v->qga.fd = -1;
	if (o->keep_staging && (!*o->id || strlen(o->id) > 64 ||
				o->id[strspn(o->id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
						"0123456789._-")])) {
		free(v);
		return cb_error("guest ID '%s' cannot name a QEMU dirty bitmap (keep-staging): "
				"letters, digits, '.', '_' and '-' only", o->id);
	}
	v->bitmap = o->keep_staging ? cb_xasprintf(PREFIX "%s", o->id) : NULL;
	cb_vmbm_new_gen(v->gen);
	if (cb_qmp_session_open(&v->s, o->qmp, QMP_TIMEOUT_MS) < 0 || query_version(v) < 0)
		goto fail;
	v->path = cb_vm_path_choose(o->method, v->major, v->minor);
	if (v->path == CB_VMPATH_STAGE) {
		cb_warn(o->log, "QEMU %d.%d.%d has neither a copy-before-write snapshot (7.1 or "
			"later) nor blockdev-backup jobs in a transaction (4.2 or later): the disk "
			"images are staged with the VM paused for the final sync",
			v->major, v->minor, v->micro);
		cb_qmp_session_close(&v->s);
		free(v->bitmap);
		free(v);
		return 1;
	}
	if (v->path == CB_VMPATH_CBW)
		cb_info(o->log, "QEMU %d.%d.%d: copy-before-write snapshot of %zu disk(s)", v->major,
			v->minor, v->micro, o->disks->n);
	else
		cb_info(o->log, "QEMU %d.%d.%d: blockdev-backup of %zu disk(s) into the staging "
			"directory (%s)", v->major, v->minor, v->micro, o->disks->n,
			o->method == CB_VM_BACKUP ? "vm-method blockdev-backup"
						  : "copy-before-write snapshots need QEMU 7.1");
	if (cbw_sweep(&v->s, v->bitmap, 0, &count) < 0)
		goto fail;
	if (count)
		cb_warn(o->log, "removed %d leftover(s) named " PREFIX "* of an earlier run from "
			"the VM's block graph", count);
	if (map_disks(v) < 0 || cbw_watchdog_start(v) < 0)
		goto fail;
	*out = v;
	return 0;
fail:
	free_disks(v);
	cb_qmp_session_close(&v->s);
	free(v->bitmap);
	free(v);
	return -1;
}

/* ---- run: fleecing, the pause, the read --------------------------------- */

/* Everything in DIR but the kept images' .state files (a killed run's
 * fleecing images and socket among them). */
static int clean_work_dir(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!dir) {
		if (fd >= 0)
			close(fd);
		return cb_error_errno("cannot read '%s'", path);
	}
	while ((e = readdir(dir))) {
		size_t n = strlen(e->d_name);
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    (n < 6 || strcmp(e->d_name + n - 6, ".state")))
			unlinkat(dirfd(dir), e->d_name, 0);
	}
	closedir(dir);
	return 0;
}

/* TMPDIR/cbackup/cbackup-ID.cbw: private, cleaned. */
static int open_work_dir(struct cb_vmsnap *v, const char *stage_dir)
{
	char *copy = cb_xstrdup(stage_dir);
	int fd;

	v->work_dir = cb_xasprintf("%s/" PREFIX "%s.cbw", dirname(copy), v->o->id);
	free(copy);
	if ((fd = cb_private_dir_open(v->work_dir)) < 0)
		return -1;
	close(fd);
	return clean_work_dir(v->work_dir);
}

/* The fleecing image, the filter's target: it holds only what the guest
 * overwrites while the backup reads. */
static int add_fleecing(struct cb_vmsnap *v, size_t i)
{
	char name[64], *path;
	int dfd = open(v->work_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), rc;

	if (dfd < 0)
		return cb_error_errno("cannot open '%s'", v->work_dir);
	snprintf(name, sizeof(name), "fleece-%zu.raw", i);
	path = cb_xasprintf("%s/%s", v->work_dir, name);
	rc = cb_vmsnap_add_image(v, dfd, name, path, v->d[i].size, "fl", i);
	free(path);
	close(dfd);
	return rc;
}

/* While paused: filter over the format node, device on the filter. */
static int insert_filter(struct cb_vmsnap *v, size_t i)
{
	char *node = cb_json_quote(v->d[i].node), *qdev = cb_json_quote(v->d[i].qdev);
	int rc = cb_qmp_session_execf(&v->s, NULL, "blockdev-add",
			       "{\"driver\":\"copy-before-write\",\"node-name\":\"" PREFIX "cbw%zu\","
			       "\"file\":%s,\"target\":\"" PREFIX "fl%zu\","
			       "\"on-cbw-error\":\"break-snapshot\",\"cbw-timeout\":%d}",
			       i, node, i, v->o->cbw_timeout);

	if (rc == 0)
		rc = cb_qmp_session_execf(&v->s, NULL, "qom-set",
				   "{\"path\":%s,\"property\":\"drive\",\"value\":\"" PREFIX "cbw%zu\"}",
				   qdev, i);
	free(node);
	free(qdev);
	return rc;
}

/* After a complete read: the snapshot bitmaps go; the exports first, they
 * hold them. */
static int hand_over(struct cb_vmsnap *v)
{
	int count, nbd = v->nbd_on;

	v->nbd_on = 0;
	return cbw_del_exports(&v->s, nbd, &count) < 0 ? -1 : cb_vmbm_hand_over(v);
}

/* The VM runs again. Past max-freeze the watchdog has resumed it already,
 * maybe before every filter was in: the disks would not be of one instant,
 * the backup fails. A watchdog that does not answer is killed and cbackup
 * resumes the VM itself; the backup fails too (nothing would watch the
 * rest of the run). */
static int resume(struct cb_vmsnap *v)
{
	int answer = cbw_watchdog_ask(v, 'R'), rc;

	if (answer == 'f')
		return cb_error("max-freeze (%d s) exceeded while the copy-before-write filters went "
				"in: the watchdog resumed the VM, the disks would not be of one "
				"instant", v->o->max_freeze);
	rc = cb_qmp_session_exec(&v->s, "cont", NULL, NULL);
	if (answer == 'r')
		return rc;
	cbw_watchdog_reap(v, 1);
	return cb_error("the VM watchdog (pid %d) %s: cbackup resumed the VM itself%s%s",
			(int)v->wd_pid, cbw_watchdog_lost(answer), rc < 0 ? " and failed: " : "",
			rc < 0 ? cb_last_error() : "");
}

/* stop, the filters, cont: the VM's only pause, and only with the watchdog
 * armed. A failure in between takes the filters out again before the VM
 * runs on. */
static int pause_and_insert(struct cb_vmsnap *v, double *pause_s)
{
	int rc = 0, count;

	v->s.stop_ts = v->s.resume_ts = 0;
	if (!v->was_paused) {
		int answer = cbw_watchdog_ask(v, 'P');
		if (answer != 'p') {
			cbw_watchdog_reap(v, 1);
			return cb_error("the VM watchdog (pid %d) %s: the VM was not paused",
					(int)v->wd_pid, cbw_watchdog_lost(answer));
		}
		if (cb_qmp_session_exec(&v->s, "stop", NULL, NULL) < 0) {
			resume(v);
			return -1;
		}
	}
	for (size_t i = 0; i < v->n && rc == 0; i++)
		rc = insert_filter(v, i);
	for (size_t i = 0; v->bitmap && i < v->n && rc == 0; i++)
		rc = cb_vmbm_at_pause(v, &v->d[i]);
	if (rc < 0) {
		char why[1024];
		snprintf(why, sizeof(why), "%s", cb_last_error());
		cbw_sweep(&v->s, v->bitmap, 0, &count);
		cb_error("%s", why);
	}
	if (v->was_paused) {
		*pause_s = 0;   /* cbackup paused nothing */
		return rc;
	}
	if (resume(v) < 0)   /* its error outweighs a filter's */
		return -1;
	for (int t = 0; t < 20 && !v->s.resume_ts; t++)
		cb_qmp_session_drain(&v->s, 50);
	*pause_s = v->s.resume_ts && v->s.stop_ts ? v->s.resume_ts - v->s.stop_ts : -1;
	return rc;
}

static int export_disks(struct cb_vmsnap *v, char **sock)
{
	char *q;
	int rc;

	*sock = cb_xasprintf("%s/nbd.sock", v->work_dir);
	if (strlen(*sock) >= 108)
		return cb_error("NBD socket path '%s' too long for a unix socket: use a shorter "
				"tmpdir", *sock);
	for (size_t i = 0; i < v->n; i++)
		if (cb_qmp_session_execf(&v->s, NULL, "blockdev-add",
				  "{\"driver\":\"snapshot-access\",\"node-name\":\"" PREFIX "acc%zu\","
				  "\"file\":\"" PREFIX "cbw%zu\"}", i, i) < 0)
			return -1;
	/* told first: killed between this and the first export, cbackup would
	 * leave a server that no export marks as its own; one that would not
	 * start (another's runs) is not */
	cbw_watchdog_note(v, 'N');
	q = cb_json_quote(*sock);
	rc = cb_qmp_session_execf(&v->s, NULL, "nbd-server-start",
			   "{\"addr\":{\"type\":\"unix\",\"data\":{\"path\":%s}}}", q);
	free(q);
	v->nbd_on = rc == 0;
	if (rc < 0)
		cbw_watchdog_note(v, 'n');
	for (size_t i = 0; i < v->n && rc == 0; i++) {
		char *bm = NULL, *qn = cb_json_quote(v->d[i].node), *qs = NULL;
		if (v->d[i].snap_bm) {
			qs = cb_json_quote(v->d[i].snap_bm);
			bm = cb_xasprintf(",\"bitmaps\":[{\"node\":%s,\"name\":%s}]", qn, qs);
		}
		rc = cb_qmp_session_execf(&v->s, NULL, "block-export-add",
				   "{\"type\":\"nbd\",\"id\":\"" PREFIX "exp%zu\",\"node-name\":\""
				   PREFIX "acc%zu\",\"name\":\"" PREFIX "%zu\",\"writable\":false%s}",
				   i, i, i, bm ? bm : "");
		free(bm);
		free(qn);
		free(qs);
	}
	return rc;
}

/* Files in the staging directory that are not this run's images (a kept
 * copy of the staging path, a disk no longer configured) would be
 * archived: they go. */
static int prune_stage(struct cb_vmsnap *v, int dfd)
{
	int fd = dup(dfd);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!dir)
		return cb_error_errno("cannot read the staging directory");
	while ((e = readdir(dir))) {
		int ours = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
		for (size_t i = 0; i < v->n && !ours; i++)
			ours = !strcmp(e->d_name, v->d[i].name);
		if (!ours && unlinkat(dirfd(dir), e->d_name, 0) < 0 && errno != ENOENT) {
			closedir(dir);
			return cb_error_errno("cannot remove '%s' from the staging directory", e->d_name);
		}
	}
	closedir(dir);
	return 0;
}

static int read_disks(struct cb_vmsnap *v, int dfd, const char *sock)
{
	for (size_t i = 0; i < v->n; i++) {
		char exp[64], got[32], size[32];
		struct cb_nbdread_stats st;
		int no_bitmap;
		struct cb_nbdread_opts no = {
			.socket = sock, .export_name = exp, .dir_fd = dfd, .file = v->d[i].name,
			.bwlimit = v->o->bwlimit, .progress = v->o->progress, .bitmap = v->d[i].snap_bm,
		};
		snprintf(exp, sizeof(exp), PREFIX "%zu", i);
		cb_progress_start(v->o->progress, v->o->show_progress, "reading disk", v->d[i].size);
		int rc = cb_nbdread(&no, &st, &no_bitmap);
		cb_progress_end(v->o->progress);
		if (rc < 0) {
			char what[PATH_MAX + 64];
			snprintf(what, sizeof(what), "disk '%s' read", v->d[i].path);
			if (cb_vmsnap_vm_gone(v, what) < 0)
				return -1;
			return cb_error_prefix("reading the snapshot of disk '%s' (drive '%s'; a failed "
					       "copy-before-write, such as a full tmpdir, breaks it)",
					       v->d[i].path, v->d[i].device);
		}
		cb_fmt_bytes(got, sizeof(got), st.read);
		cb_fmt_bytes(size, sizeof(size), st.size);
		cb_info(v->o->log, "disk '%s' (drive '%s'): %s of %s read in %.2f s into '%s'",
			v->d[i].path, v->d[i].device, got, size, st.seconds, v->d[i].name);
		if (v->d[i].incremental)   /* exact counts: what the bitmap saved */
			cb_info(v->o->log, "disk '%s': read %llu bytes of %llu dirty since the last "
				"backup", v->d[i].path, (unsigned long long)st.read,
				(unsigned long long)st.dirty);
		if (v->bitmap)
			cb_vmbm_state_write(v, &v->d[i]);
	}
	return 0;
}

/* pre-stop hook, fsfreeze, the pause with the filters, thaw, pre-restart
 * and post-restart hooks. The pause is QEMU's (its STOP and RESUME
 * events' timestamps): the hooks and the agent are outside it. */
static int snapshot_cbw(struct cb_vmsnap *v, double *pause_s)
{
	int rc;

	if (cb_vmsnap_hook(v, "pre-stop") < 0)
		return -1;
	cb_vmsnap_fs_freeze(v);
	rc = pause_and_insert(v, pause_s);
	cb_vmsnap_fs_thaw(v);
	if (rc < 0)
		return -1;
	if (v->was_paused)
		cb_info(v->o->log, "VM was paused already: filters inserted, it stays paused");
	else if (*pause_s >= 0)
		cb_info(v->o->log, "VM paused %.1f ms (QEMU's STOP at %.6f to RESUME at %.6f) to "
			"insert %zu copy-before-write filter(s)", *pause_s * 1000, v->s.stop_ts,
			v->s.resume_ts, v->n);
	else
		cb_warn(v->o->log, "VM paused to insert %zu copy-before-write filter(s); QEMU's STOP "
			"and RESUME events did not come: the pause is unknown", v->n);
	return cb_vmsnap_hook(v, "pre-restart") < 0 || cb_vmsnap_hook(v, "post-restart") < 0 ? -1 : 0;
}

int cb_vmsnap_run(struct cb_vmsnap *v, const char *stage_dir, int reused, double *pause_s)
{
	char *sock = NULL;
	int dfd = -1, rc = -1;

	*pause_s = -1;
	if (open_work_dir(v, stage_dir) < 0)
		return -1;
	dfd = open(stage_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		cb_error_errno("cannot open the staging directory '%s'", stage_dir);
		goto out;
	}
	if (prune_stage(v, dfd) < 0)
		goto out;
	if (v->path == CB_VMPATH_BACKUP) {
		*pause_s = 0;   /* the jobs start in one transaction: no pause */
		rc = cb_vmsnap_backup_run(v, stage_dir, dfd);
		goto out;
	}
	if (cb_vmbm_choose(v, dfd, reused) < 0)
		goto out;
	for (size_t i = 0; i < v->n; i++)
		if (add_fleecing(v, i) < 0)
			goto out;
	if (snapshot_cbw(v, pause_s) < 0)
		goto out;
	/* a SHUTDOWN or MIGRATION event during a read that still completed
	 * fails the backup as well (as vzdump) */
	if (export_disks(v, &sock) < 0 || read_disks(v, dfd, sock) < 0 ||
	    cb_vmsnap_vm_gone(v, "the backup") < 0 || (v->bitmap && hand_over(v) < 0))
		goto out;
	rc = 0;
out:
	if (dfd >= 0)
		close(dfd);
	free(sock);
	return rc;
}

int cb_vmsnap_close(struct cb_vmsnap *v)
{
	int rc = 0, count;

	if (!v)
		return 0;
	cb_vmsnap_fs_thaw(v);
	if (v->s.fd >= 0 && !v->s.lost && cbw_sweep(&v->s, v->bitmap, v->nbd_on, &count) < 0)
		rc = cb_error_prefix("restoring the VM's block graph");
	cbw_watchdog_stop(v);
	if (v->work_dir && v->bitmap)
		clean_work_dir(v->work_dir);
	else if (v->work_dir && cb_remove_tree(v->work_dir) < 0 && rc == 0)
		rc = -1;
	cb_qmp_session_close(&v->s);
	free_disks(v);
	free(v->work_dir);
	free(v->bitmap);
	free(v);
	return rc;
}
