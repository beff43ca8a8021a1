/*
 * cb_discover: the guests this host has, found where LXC and Proxmox VE
 * keep them, so that --all backs up a container created last week without
 * anyone writing a section for it (as vzdump --all does).
 *
 *   LXC         $CBACKUP_LXC_DIR (/var/lib/lxc)/NAME/config: lxc.rootfs.path
 *               (dir: or btrfs:), the cgroup lxc puts the container in
 *               (lxc.payload.NAME, or lxc.cgroup.dir[.container]), the
 *               read-write lxc.mount.entry binds of host directories.
 *   Proxmox CT  $CBACKUP_PVE_DIR (/etc/pve)/lxc/ID.conf: rootfs and the mpN
 *               volumes with backup=1, through storage.cfg (cb_pve); cgroup
 *               lxc/ID. Templates are skipped.
 *   Proxmox VM  $CBACKUP_PVE_DIR/qemu-server/ID.conf: its disks (not CD-ROMs,
 *               not backup=0) and $CBACKUP_QEMU_RUN_DIR (/var/run/qemu-server)
 *               /ID.qmp.
 *
 * Cgroups are named relative to the cgroup mount, or under
 * $CBACKUP_CGROUP_DIR when it is set (tests make real cgroups there).
 * A guest found is a list of cbackup keys (root, config, freeze-cgroup, mp,
 * disk, qmp) each with the file:line it comes from; a [ct ID]/[vm ID]
 * section and the command line override them (cb_config_resolve). What
 * cannot be resolved is that guest's error, naming file and line: the
 * other guests are still backed up.
 */
#ifndef CB_DISCOVER_H
#define CB_DISCOVER_H

#include <stddef.h>
#include "cb_util.h"

struct cb_found_key {
	char *key, *value;        /* a cbackup key: "root", "mp", "disk", ... */
	char *src;                /* "FILE:LINE" it was read from */
};

struct cb_found {
	char *id;
	int is_vm;
	char *file;               /* the guest's configuration file */
	struct cb_found_key *keys;
	size_t n_keys;
	char *skip;               /* why it is not backed up (a template), or NULL */
	char *error;              /* "FILE:LINE: ..." it cannot be backed up, or NULL */
	char *error_key;          /* the key the error is about: a section setting it mends it */
	struct cb_strvec notes;   /* what of it is left out, and why */
};

struct cb_found_list {
	struct cb_found *v;
	size_t n;
	struct cb_strvec warnings; /* a directory that could not be read */
};

/* Scan the three places (a place that does not exist is no guest). */
void cb_discover(struct cb_found_list *list);
void cb_found_list_release(struct cb_found_list *list);

/* The guest found with this ID (the first place wins), or NULL. */
const struct cb_found *cb_found_get(const struct cb_found_list *list, const char *id);
/* The last value of KEY found for the guest, or NULL; its origin in *src. */
const char *cb_found_value(const struct cb_found *f, const char *key, const char **src);

const char *cb_lxc_dir(void);        /* /var/lib/lxc, or $CBACKUP_LXC_DIR */
const char *cb_qemu_run_dir(void);   /* /var/run/qemu-server, or $CBACKUP_QEMU_RUN_DIR */

#endif
