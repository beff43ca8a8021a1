/*
 * cb_pvect: a Proxmox VE container's config (/etc/pve/lxc/ID.conf) as
 * vzdump archives it, so that pct restore and the GUI read a cbackup
 * archive as vzdump's: the text without the keys that describe the
 * guest's state on this host (lock, parent) and without the sections after
 * the main one (snapshots, [pve:pending]), and the guest's firewall file
 * (CBACKUP_PVE_DIR/firewall/ID.fw) beside it.
 */
#ifndef CB_PVECT_H
#define CB_PVECT_H

#include <stddef.h>
#include <time.h>

struct cb_pvect_conf {
	char *text;       /* the stripped config (malloc'ed) */
	size_t len;
	time_t mtime;     /* the config file's: the same bytes each night */
	char *fw_path;    /* the firewall file, NULL when the guest has none */
};

/* FILE is a PVE container config ("key: value" lines, a rootfs key):
 * 1 and *c filled; 0 when it is another kind of file (an LXC config);
 * -1 with the error set when it cannot be read. */
int cb_pvect_load(const char *file, const char *id, struct cb_pvect_conf *c);
void cb_pvect_release(struct cb_pvect_conf *c);

#endif
