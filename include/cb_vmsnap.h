/*
 * cb_vmsnap: a VM's disks at one point in time (its snapshot), taken
 * through QEMU's copy-before-write filter: the VM is paused only while the
 * filters go in, whatever the size of its disks.
 *
 * One QMP session (cb_qmp_session) for the whole backup:
 *   open:  query-version (QEMU >= 7.1 has copy-before-write with
 *          on-cbw-error and snapshot-access; older: the caller stages the
 *          images itself and warns), query-block maps every configured disk
 *          to its device and format node, anything that cannot be backed up
 *          so is refused with the reason, and leftovers of a killed run
 *          (exports, nodes named cbackup-*) are removed;
 *   run:   per disk a fleecing image (a sparse raw file in a private
 *          directory beside the staging copy) as a node; stop; per disk a
 *          copy-before-write filter over the format node (target: the
 *          fleecing node, on-cbw-error=break-snapshot, cbw-timeout), put in
 *          front of the device with qom-set; cont. The pause is QEMU's own
 *          STOP to RESUME (its events' timestamps). Then per disk a
 *          snapshot-access node exported over NBD (a unix socket in the
 *          same private directory), read with libnbd (cb_nbdread) into a
 *          sparse raw file in the staging directory, which is archived like
 *          any staged image;
 *   close: exports, NBD server, snapshot-access nodes, the device back on
 *          its format node, filters, fleecing nodes and files, in that order.
 *
 * A watchdog (a child in its own session holding a copy of the QMP socket)
 * resumes the VM at max-freeze and, if cbackup dies without saying it is
 * done, tears the graph down itself.
 */
#ifndef CB_VMSNAP_H
#define CB_VMSNAP_H

#include "cb_log.h"
#include "cb_opts.h"
#include "cb_progress.h"
#include "cb_util.h"

/* How a VM's disks are read, by what its QEMU can do. */
enum cb_vm_path {
	CB_VMPATH_CBW,      /* 7.1+: copy-before-write filter, snapshot-access over NBD */
	CB_VMPATH_BACKUP,   /* 4.2+: blockdev-backup sync=full jobs in one transaction */
	CB_VMPATH_STAGE,    /* older: the image files staged, the VM paused for pass 2 */
};

/* The one place the QEMU version decides (unit-tested): what METHOD
 * (vm-method) asks for on QEMU MAJOR.MINOR. */
enum cb_vm_path cb_vm_path_choose(enum cb_vm_method method, int major, int minor);

struct cb_vmsnap_opts {
	const char *qmp;             /* QMP socket */
	const char *qga;             /* guest agent socket (fsfreeze), or NULL */
	enum cb_vm_method method;    /* vm-method: auto or blockdev-backup */
	const char *id;              /* guest ID (bitmaps cbackup-ID@GEN) */
	const struct cb_strvec *disks;
	int max_freeze;              /* seconds the pause may last */
	int cbw_timeout;             /* seconds a guest write may wait for its copy */
	long bwlimit;                /* KiB/s */
	int keep_staging;            /* incrementals: read only dirty extents */
	struct cb_progress *progress;
	int show_progress;           /* not quiet */
	struct cb_log *log;
	/* hooks around the pause (vzdump's pre-stop / pre-restart), may be NULL */
	int (*hook)(void *arg, const char *phase);
	void *hook_arg;
};

struct cb_vmsnap;

/* 0: ready (*out set; the path cb_vm_path_choose took is logged); 1: QEMU
 * is older than 4.2 (a WARN logged naming its version; *out NULL, the
 * caller stages the images instead); -1 error. */
int cb_vmsnap_open(struct cb_vmsnap **out, const struct cb_vmsnap_opts *o);
/* The pause, the filters, the read into STAGE_DIR (or the blockdev-backup
 * jobs into it). *pause_s: QEMU's pause (0: none). */
int cb_vmsnap_run(struct cb_vmsnap *v, const char *stage_dir, int reused, double *pause_s);
/* Tears down whatever is left (also after a failed run); NULL is fine.
 * -1 if the graph could not be restored (the VM still runs). */
int cb_vmsnap_close(struct cb_vmsnap *v);

/* The archived file name of a disk image: its base name with the
 * extension replaced by ".raw" (what the archive holds is raw). */
char *cb_vmsnap_archive_name(const char *disk);

#endif
