/*
 * cb_pve: what a Proxmox VE host says about its storages, for an
 * unchanged vzdump.conf whose "storage: local" names one of them.
 *
 * /etc/pve/storage.cfg (CBACKUP_PVE_DIR overrides /etc/pve, for tests and
 * chroots) holds stanzas "TYPE: NAME" followed by indented "key value"
 * lines. A storage of a file-system type (dir, nfs, cifs, cephfs,
 * glusterfs, btrfs) keeps its backups in PATH/dump, as vzdump does; a
 * Proxmox Backup Server (pbs) or a block storage has no directory for
 * cbackup's files: an error that says so and what to set instead.
 */
#ifndef CB_PVE_H
#define CB_PVE_H

/* "/etc/pve", or $CBACKUP_PVE_DIR. */
const char *cb_pve_dir(void);

/* The dump directory of Proxmox storage NAME in *dumpdir (malloc'ed): 0;
 * 1 when the host has no storage.cfg (not a Proxmox host: nothing set);
 * -1 with the error set (not defined there, no backup content, pbs, a
 * block storage, unreadable). */
int cb_pve_storage_dumpdir(const char *name, char **dumpdir);

/* The file, directory or device of a guest's volume "STORAGE:VOLNAME"
 * (from a guest's rootfs, mpN or disk line) in *path (malloc'ed): 0, or -1
 * with the error set (storage not defined, of an unknown type, no
 * storage.cfg). File system storages keep it at PATH/images/VOLNAME, a
 * zfspool's container datasets at MOUNTPOINT/VOLNAME; block storages as
 * Proxmox names the device: lvm/lvmthin /dev/VGNAME/VOLNAME, a zfspool's
 * zvol /dev/zvol/POOL/VOLNAME, rbd /dev/rbd/POOL/VOLNAME. */
int cb_pve_volume_path(const char *volid, char **path);

#endif
