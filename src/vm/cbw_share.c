/* cb_vmsnap: what its two methods share, copy-before-write (copy_before_write.c, which
 * chooses the method) and blockdev-backup (vmbackup.c): a raw image added
 * as a QEMU block node, the hooks, the VM gone, and the guest agent's
 * freeze and thaw. Below both,
 * so that vmbackup.c does not use copy_before_write.c. See include/cb_vmsnap.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cb_json.h"
#include "cb_qmp_session.h"
#include "cb_util.h"
#include "cb_vmsnap.h"
#include "vmsnap_int.h"

int cb_vmsnap_add_image(struct cb_vmsnap *v, int dfd, const char *name, const char *path,
		       uint64_t size, const char *kind, size_t i)
{
	char *q = cb_json_quote(path);
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int rc = -1;

	if (fd < 0 || ftruncate(fd, (off_t)size) < 0)
		cb_error_errno("image '%s'", path);
	else
		rc = cb_qmp_session_execf(&v->s, NULL, "blockdev-add",
				   "{\"driver\":\"raw\",\"node-name\":\"" PREFIX "%s%zu\","
				   "\"file\":{\"driver\":\"file\",\"filename\":%s}}", kind, i, q);
	if (fd >= 0)
		close(fd);
	free(q);
	return rc;
}

/* ---- the guest agent: fsfreeze around the snapshot (as vzdump) ----------- */

#define QGA_SYNC_MS 10000      /* connect and guest-sync-delimited */
#define QGA_FREEZE_MS 60000    /* the guest flushes its file systems */
#define QGA_THAW_MS 10000

/* A freeze that fails is a WARN and the backup goes on (crash-consistent
 * disks, as vzdump); a thaw is owed from the first attempt on. */
void cb_vmsnap_fs_freeze(struct cb_vmsnap *v)
{
	long long n = 0;

	if (!v->o->qga)
		return;
	v->fs_freeze_tried = 1;
	if (cb_qga_open(&v->qga, v->o->qga, QGA_SYNC_MS) < 0 ||
	    cb_qga_exec(&v->qga, "guest-fsfreeze-freeze", QGA_FREEZE_MS, &n) < 0) {
		cb_warn(v->o->log, "guest agent '%s': %s: the disks are backed up without a "
			"file system freeze (crash-consistent)", v->o->qga, cb_last_error());
		cb_qga_close(&v->qga);
		return;
	}
	cb_info(v->o->log, "guest agent: %lld file system(s) frozen", n);
}

/* Always tried after a freeze was tried, on a new connection if the
 * freeze's was lost or timed out (a late reply is skipped by the sync). */
void cb_vmsnap_fs_thaw(struct cb_vmsnap *v)
{
	char saved[1024];
	long long n = 0;

	if (!v->fs_freeze_tried)
		return;
	v->fs_freeze_tried = 0;
	snprintf(saved, sizeof(saved), "%s", cb_last_error());
	if ((v->qga.fd < 0 && cb_qga_open(&v->qga, v->o->qga, QGA_SYNC_MS) < 0) ||
	    cb_qga_exec(&v->qga, "guest-fsfreeze-thaw", QGA_THAW_MS, &n) < 0)
		cb_warn(v->o->log, "guest agent '%s': %s: the guest's file systems may still be "
			"frozen (guest-fsfreeze-status tells)", v->o->qga, cb_last_error());
	else
		cb_info(v->o->log, "guest agent: %lld file system(s) thawed", n);
	cb_qga_close(&v->qga);
	cb_error("%s", saved);   /* the caller's error, if any, stays the one reported */
}

int cb_vmsnap_hook(struct cb_vmsnap *v, const char *phase)
{
	return v->o->hook ? v->o->hook(v->o->hook_arg, phase) : 0;
}

int cb_vmsnap_vm_gone(struct cb_vmsnap *v, const char *what)
{
	if (!v->s.lost)
		cb_qmp_session_drain(&v->s, 200);
	if (v->s.shutdown_seen || v->s.lost)
		return cb_error("the VM shut down or QEMU quit during the backup (%s): %s not "
				"complete", v->s.shutdown_seen ? "SHUTDOWN event" : "QMP connection "
				"closed", what);
	if (v->s.migration_seen)
		return cb_error("the VM began migrating during the backup (MIGRATION event): %s "
				"not complete", what);
	return 0;
}
