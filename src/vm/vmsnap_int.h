/* Internals shared by the two QEMU paths of cb_vmsnap: copy_before_write.c (the
 * session, the graph, copy-before-write) and vmbackup.c (blockdev-backup
 * jobs, QEMU 4.2 to 7.0). */
#ifndef CB_VMSNAP_INT_H
#define CB_VMSNAP_INT_H

#include <stdint.h>
#include <sys/types.h>

#include "cb_qga.h"
#include "cb_qmp_session.h"
#include "cb_vmsnap.h"

#define PREFIX "cbackup-"
#define QMP_TIMEOUT_MS 30000

struct vmdisk {
	const char *path;           /* as configured */
	char *device, *qdev, *node; /* query-block: device, qdev path, format node */
	char *name;                 /* archived file name */
	uint64_t size;              /* virtual size */
	char *drv;                  /* format driver (persistent bitmaps: qcow2) */
	char *snap_bm;              /* incremental: the kept copy's bitmap, read */
	int incremental;            /* this run reads only the dirty extents */
	uint64_t alloc;             /* allocated bytes, backing chain included */
};

#define VM_GEN_LEN 16          /* hex digits of a bitmap generation */

struct cb_vmsnap {
	const struct cb_vmsnap_opts *o;
	struct cb_qmp_session s;
	struct vmdisk *d;
	size_t n;
	int major, minor, micro;
	enum cb_vm_path path;       /* copy-before-write or blockdev-backup */
	struct cb_qga qga;          /* fsfreeze: fd -1 when not connected */
	int fs_freeze_tried;        /* a thaw is owed */
	int was_paused;             /* paused before cbackup came: not resumed */
	char *work_dir;             /* TMPDIR/cbackup/cbackup-ID.cbw: fleecing, socket */
	char *bitmap;               /* keep-staging: cbackup-ID, else NULL */
	char gen[VM_GEN_LEN + 1];   /* this run's bitmap: BITMAP@GEN */
	pid_t wd_pid;
	int wd_fd;                  /* commands to the watchdog, -1 when none */
	int nbd_on;                 /* cbackup's NBD server runs in QEMU */
};

/* copy_before_write.c */
/* A new sparse file NAME in DFD (a private directory; O_EXCL) of SIZE bytes,
 * PATH by name, as raw node cbackup-KIND<I> in QEMU. */
int cb_vmsnap_add_image(struct cb_vmsnap *v, int dfd, const char *name, const char *path,
		       uint64_t size, const char *kind, size_t i);
int cb_vmsnap_hook(struct cb_vmsnap *v, const char *phase);
void cb_vmsnap_fs_freeze(struct cb_vmsnap *v);
void cb_vmsnap_fs_thaw(struct cb_vmsnap *v);
/* Why a disk could not be read to the end when QEMU is the reason: the VM
 * shut down, quit or started migrating (then -1 with that error), else 0. */
int cb_vmsnap_vm_gone(struct cb_vmsnap *v, const char *what);

/* vmbitmap.c: keep-staging's dirty bitmaps, BITMAP@GEN on each disk */
void cb_vmbm_new_gen(char gen[VM_GEN_LEN + 1]);
/* Bitmaps named PREFIX... that do not record (a snapshot of an unfinished
 * run) removed from every node; PREFIX NULL: nothing. */
int cb_vmbm_sweep(struct cb_qmp_session *s, const char *prefix, int *count);
/* Before the pause: each disk incremental (snap_bm set) or read in full,
 * with a line saying why when a kept image was there (REUSED); this
 * guest's other bitmaps removed. */
int cb_vmbm_choose(struct cb_vmsnap *v, int dfd, int reused);
int cb_vmbm_at_pause(struct cb_vmsnap *v, const struct vmdisk *d);
/* After a complete read of disk D: its kept image recorded as of GEN. */
void cb_vmbm_state_write(struct cb_vmsnap *v, const struct vmdisk *d);
/* After every disk was read completely: the snapshot bitmaps go. */
int cb_vmbm_hand_over(struct cb_vmsnap *v);

/* vmbackup.c: the blockdev-backup jobs into STAGE_DIR (dfd). */
int cb_vmsnap_backup_run(struct cb_vmsnap *v, const char *stage_dir, int dfd);

/* cbw_sweep.c: the graph's cbackup-* leftovers taken out */
int cbw_del_exports(struct cb_qmp_session *s, int nbd, int *count);
int cbw_sweep(struct cb_qmp_session *s, const char *bitmap, int nbd, int *count);

/* cbw_watchdog.c: the VM watchdog */
int cbw_watchdog_start(struct cb_vmsnap *v);
int cbw_watchdog_ask(struct cb_vmsnap *v, char c);
void cbw_watchdog_note(struct cb_vmsnap *v, char c);
const char *cbw_watchdog_lost(int answer);
void cbw_watchdog_reap(struct cb_vmsnap *v, int kill_it);
void cbw_watchdog_stop(struct cb_vmsnap *v);

#endif
