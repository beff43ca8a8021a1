/*
 * cb_pvect: a Proxmox VE container's config (/etc/pve/lxc/ID.conf) as
 * vzdump archives it, so that pct restore and the GUI read a cbackup
 * archive as vzdump's: the text without the keys that describe the
 * guest's state on this host (lock, parent) and without the sections after
 * the main one (snapshots, [pve:pending]), and the guest's firewall file
 * (CBACKUP_PVE_DIR/firewall/ID.fw) beside it.
 *
 * An unprivileged container's files carry host IDs (100000 and up); vzdump
 * archives them as the container sees them (tar under lxc-usernsexec) and
 * pct restore maps them back: its ID map is that of pve-container's
 * PVE::LXC::parse_id_maps(), the lxc.idmap lines, else for
 * "unprivileged: 1" u and g 0 100000 65536.
 */
#ifndef CB_PVECT_H
#define CB_PVECT_H

#include <stddef.h>
#include <time.h>

struct cb_idmap_range {
	char type;        /* 'u' or 'g' */
	unsigned long ct, host, len;
};

struct cb_idmap {
	struct cb_idmap_range *v;
	size_t n;         /* 0: IDs are archived as they are */
};

/* The container's view of host ID (type 'u' or 'g') in *ct: 0, or -1 when
 * the map has no place for it. */
int cb_idmap_back(const struct cb_idmap *m, char type, unsigned long host, unsigned long *ct);
/* The host's ID of the container's ID ct: 0, or -1 when the map has no
 * place for it (restore --map-ids). */
int cb_idmap_forward(const struct cb_idmap *m, char type, unsigned long ct, unsigned long *host);

struct cb_pvect_conf {
	char *text;       /* the stripped config (malloc'ed) */
	size_t len;
	time_t mtime;     /* the config file's: the same bytes each night */
	char *fw_path;    /* the firewall file, NULL when the guest has none */
	struct cb_idmap map;
};

/* FILE is a PVE container config ("key: value" lines, a rootfs key):
 * 1 and *c filled; 0 when it is another kind of file (an LXC config);
 * -1 with the error set when it cannot be read or an lxc.idmap line not
 * parsed. */
int cb_pvect_load(const char *file, const char *id, struct cb_pvect_conf *c);
void cb_pvect_release(struct cb_pvect_conf *c);

#endif
