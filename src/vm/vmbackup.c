/* cb_vmsnap on QEMU 4.2 to 7.0 (or vm-method blockdev-backup): one
 * blockdev-backup sync=full job per disk, all started in one QMP
 * transaction with grouped completion, into a raw image per disk in the
 * private staging directory. QEMU's backup job copies a block before the
 * guest overwrites it, so every image is the disk as it was when the
 * transaction ran, all disks at the same instant; the VM is never paused.
 * See include/cb_vmsnap.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cb_json.h"
#include "cb_progress.h"
#include "cb_util.h"
#include "vmsnap_int.h"

#define JOB_POLL_MS 200

/* The images take at most what the disks hold (allocated bytes, backing
 * files included): refused before a job starts if the tmpdir lacks it. */
static int check_space(struct cb_vmsnap *v, const char *stage_dir, int dfd)
{
	struct statvfs sv;
	uint64_t need = 0, avail;
	char n[32], a[32];

	for (size_t i = 0; i < v->n; i++)
		need += v->d[i].alloc;
	if (fstatvfs(dfd, &sv) < 0)
		return cb_error_errno("cannot read the free space of '%s'", stage_dir);
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (need <= avail)
		return 0;
	cb_fmt_bytes(n, sizeof(n), need);
	cb_fmt_bytes(a, sizeof(a), avail);
	return cb_error("not enough space for the blockdev-backup images in '%s': the disks hold "
			"%s, %s free (set tmpdir elsewhere)", stage_dir, n, a);
}

/* STAGE_DIR/NAME, new and sparse, as node cbackup-tgtI: the job's target. */
static int add_target(struct cb_vmsnap *v, const char *stage_dir, int dfd, size_t i)
{
	const struct vmdisk *d = &v->d[i];
	char *path = cb_xasprintf("%s/%s", stage_dir, d->name);
	int rc = -1;

	if (unlinkat(dfd, d->name, 0) < 0 && errno != ENOENT)   /* a kept image of an earlier run */
		cb_error_errno("cannot replace '%s'", path);
	else
		rc = cb_vmsnap_add_image(v, dfd, d->name, path, d->size, "tgt", i);
	free(path);
	return rc;
}

/* One transaction: every job starts at the same instant or none does. */
static int start_jobs(struct cb_vmsnap *v)
{
	long long speed = v->o->bwlimit > 0 ? v->o->bwlimit * 1024LL / (long long)v->n : 0;
	char *acts = cb_xstrdup("");
	int rc;

	if (v->o->bwlimit > 0 && speed < 1)
		speed = 1;
	for (size_t i = 0; i < v->n; i++) {
		char *q = cb_json_quote(v->d[i].node), *next;
		next = cb_xasprintf("%s%s{\"type\":\"blockdev-backup\",\"data\":{\"job-id\":\""
				    PREFIX "job%zu\",\"device\":%s,\"target\":\"" PREFIX "tgt%zu\","
				    "\"sync\":\"full\",\"speed\":%lld,\"auto-dismiss\":false}}",
				    acts, i ? "," : "", i, q, i, speed);
		free(acts);
		free(q);
		acts = next;
	}
	rc = cb_qmp_session_execf(&v->s, NULL, "transaction",
			   "{\"actions\":[%s],\"properties\":{\"completion-mode\":\"grouped\"}}", acts);
	free(acts);
	return rc;
}

/* The job of disk I in a query-jobs reply. */
static const struct cb_json *job_of(const struct cb_json *jobs, size_t i)
{
	const struct cb_json *list = cb_json_get(jobs, "return");
	char id[64];

	snprintf(id, sizeof(id), PREFIX "job%zu", i);
	for (size_t k = 0; list && k < list->n; k++)
		if (cb_json_str(list->items[k], "id") && !strcmp(cb_json_str(list->items[k], "id"), id))
			return list->items[k];
	return NULL;
}

/* Until every job has concluded; the first job error is the backup's. */
static int wait_jobs(struct cb_vmsnap *v)
{
	uint64_t total = 0;

	for (size_t i = 0; i < v->n; i++)
		total += v->d[i].size;
	cb_progress_start(v->o->progress, v->o->show_progress, "blockdev-backup", total);
	for (;;) {
		struct cb_json *jobs = NULL;
		uint64_t done = 0;
		size_t concluded = 0;
		const char *err = NULL;
		if (cb_vmsnap_vm_gone(v, "blockdev-backup") < 0 ||
		    cb_qmp_session_exec(&v->s, "query-jobs", NULL, &jobs) < 0) {
			cb_progress_end(v->o->progress);
			return v->s.lost ? cb_vmsnap_vm_gone(v, "blockdev-backup") : -1;
		}
		for (size_t i = 0; i < v->n; i++) {
			const struct cb_json *j = job_of(jobs, i);
			const char *st = cb_json_str(j, "status");
			done += (uint64_t)cb_json_int(j, "current-progress", 0);
			concluded += !j || (st && !strcmp(st, "concluded"));
			if (j && !err)
				err = cb_json_str(j, "error");
			if (!j && !err)
				err = "the job is gone";
		}
		cb_progress_update(v->o->progress, done);
		if (concluded == v->n) {
			int rc = err ? cb_error("blockdev-backup: %s", err) : 0;
			cb_json_free(jobs);
			cb_progress_end(v->o->progress);
			return rc;
		}
		cb_json_free(jobs);
		cb_qmp_session_drain(&v->s, JOB_POLL_MS);
	}
}

int cb_vmsnap_backup_run(struct cb_vmsnap *v, const char *stage_dir, int dfd)
{
	double t0;
	int rc;

	if (v->bitmap)
		cb_info(v->o->log, "keep-staging: blockdev-backup copies whole disks (incrementals "
			"need the copy-before-write snapshot of QEMU 7.1)");
	if (check_space(v, stage_dir, dfd) < 0)
		return -1;
	for (size_t i = 0; i < v->n; i++)
		if (add_target(v, stage_dir, dfd, i) < 0)
			return -1;
	if (cb_vmsnap_hook(v, "pre-stop") < 0)
		return -1;
	cb_vmsnap_fs_freeze(v);
	rc = start_jobs(v);
	cb_vmsnap_fs_thaw(v);
	if (rc < 0)
		return -1;
	cb_info(v->o->log, "%zu blockdev-backup job(s) started in one transaction: the VM was not "
		"paused", v->n);
	if (cb_vmsnap_hook(v, "pre-restart") < 0 || cb_vmsnap_hook(v, "post-restart") < 0)
		return -1;
	t0 = cb_now();
	if (wait_jobs(v) < 0)
		return -1;
	for (size_t i = 0; i < v->n; i++) {
		char size[32];
		cb_fmt_bytes(size, sizeof(size), v->d[i].size);
		cb_info(v->o->log, "disk '%s' (drive '%s'): %s copied by blockdev-backup into '%s'",
			v->d[i].path, v->d[i].device, size, v->d[i].name);
	}
	cb_info(v->o->log, "blockdev-backup of %zu disk(s) took %.2f s", v->n, cb_now() - t0);
	return 0;
}
