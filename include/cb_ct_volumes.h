/*
 * cb_ct_volume: a container volume that is no directory of the host, reached
 * as vzdump reaches it. Proxmox's default container rootfs is a raw disk
 * image (local:100/vm-100-disk-0.raw on a dir, NFS or CIFS storage) or a
 * block device (local-lvm:vm-100-disk-0, an LVM-thin or LVM volume):
 *
 *   running CT  through its init's root, /proc/PID/root[/MP] (vzdump's
 *               suspend mode): the volume as the container has it mounted.
 *               The init is what `lxc-info -P LXCPATH -n ID -p` names, else
 *               the one process of the CT's cgroup subtree that is pid 1 of
 *               its own pid namespace. /proc/PID/root is opened ONCE, and
 *               after the open the process is checked to be that init still
 *               (the same start time, in the CT's cgroup, pid 1 of its pid
 *               namespace): a PID that is not the CT's init, or was recycled
 *               in between, is refused, never backed up. A mount point is
 *               opened below that fd with RESOLVE_IN_ROOT (a symlink the
 *               guest planted stays in the guest).
 *   stopped CT  mapped read-only (an image: a loop device configured
 *               READ_ONLY|AUTOCLEAR; a block device as it is) and mounted
 *               read-only (ext4: noload, xfs: norecovery: no journal
 *               replayed) as a DETACHED mount (fsopen/fsmount): attached to
 *               no mount namespace, so nothing shows in any mountinfo, and
 *               when its fd closes (at the end, or when the kernel closes a
 *               killed cbackup's files) the mount goes, and the loop device
 *               with it. Nothing is left for a next run to sweep.
 *
 * Either way the volume is an open directory fd; path-based code is given
 * /proc/self/fd/N, which resolves through this process's fd, never through
 * the PID again.
 */
#ifndef CB_CT_VOLUMES_H
#define CB_CT_VOLUMES_H

#include <stddef.h>
#include <sys/types.h>

#include "cb_log.h"

/* 1: PATH is a disk image or a block device (a volume to reach), 0: not
 * (a directory, or nothing there: the usual checks say so). */
int cb_ct_volume_is_image(const char *path);

/* A container's init, as found: its PID and start time (/proc/PID/stat
 * field 22) and the cgroup directory it was found in. */
struct cb_ctinit {
	pid_t pid;
	unsigned long long start;
	char *cgroup_dir;
	char *source;          /* "lxc-info" or "cgroup" */
};

/* Find the init of container ID whose cgroup is CGROUP (freeze-cgroup's
 * value: relative to the cgroup mount, or absolute). 0, or -1 with the
 * error set. */
int cb_ct_volume_find_init(const char *id, const char *cgroup, struct cb_ctinit *init);
void cb_ctinit_release(struct cb_ctinit *init);

/* 0 when INIT is still what it was found to be (start time, cgroup, pid 1
 * of its namespace), else -1 with the error set. */
int cb_ct_volume_check_init(const struct cb_ctinit *init);

/* /proc/PID/root opened (O_RDONLY|O_DIRECTORY), checked after the open
 * with cb_ct_volume_check_init: the fd, or -1 with the error set. */
int cb_ct_volume_open_root(const struct cb_ctinit *init);

/* The directory TARGET ("/srv/data") below ROOT_FD, resolved as in that
 * root (RESOLVE_IN_ROOT, no magic links): an fd, or -1. */
int cb_ct_volume_open_in(int root_fd, const char *target);

/* IMAGE (a file or block device) mounted read-only and detached: the fd of
 * its root directory, or -1 with the error set. how (len bytes) says
 * "ext4 on /dev/loop3 (read-only loop of IMAGE)". */
int cb_ct_volume_mount_ro(const char *image, char *how, size_t len);

/*
 * A container's volumes: v[0] its root, v[1..n) its mount points (src: the
 * configured source, target: where the guest has it, "./srv/data"). Each
 * that is an image (cb_ct_volume_is_image) is reached (running: through the
 * init's root, stopped: mounted) and gets fd and path "/proc/self/fd/N";
 * the others keep fd -1, path NULL. Says in the log how each was reached.
 */
struct cb_ct_volume {
	const char *src, *target;
	int fd;
	char *path;
};

/* 1 when one of the n volumes is an image. */
int cb_ct_volume_any(const struct cb_ct_volume *v, size_t n);
int cb_ct_volume_attach(struct cb_ct_volume *v, size_t n, const char *id, const char *cgroup,
		    int running, struct cb_log *log);
/* Close them: a detached mount goes with its fd, its loop device with it. */
void cb_ct_volume_detach(struct cb_ct_volume *v, size_t n);

#endif
