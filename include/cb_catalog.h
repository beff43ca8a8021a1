/*
 * cb_catalog: the backups found in a dump directory, parsed from their
 * names (cbackup-<ct|vm>-<ID>-<YYYY_MM_DD-HH_MM_SS>.tar[.zst|.lzo|.gz][.cbenc]);
 * vzdump's own archives (vzdump-lxc-/vzdump-qemu-/vzdump-openvz-) are
 * listed too, so a storage shared with vzdump reads as one. In-progress
 * (.tmp) files, logs and checksums are not backups.
 */
#ifndef CB_CATALOG_H
#define CB_CATALOG_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "cb_opts.h"

struct cb_backup_file {
	char *path;            /* dumpdir/name */
	char *name;
	enum cb_guest_type type;
	char *id;
	time_t when;
	enum cb_compress compress;
	uint64_t size;
	int is_protected;      /* NAME.protected exists */
	int has_checksum;      /* NAME.sha256 exists */
	int verified;          /* NAME.verified exists (written by cbackup verify) */
	int encrypted;         /* NAME ends with .cbenc (cb_encarchive.h) */
	char *notes;           /* NAME.notes (at most 64 KiB of it), or NULL */
};

struct cb_catalog {
	struct cb_backup_file *files;   /* sorted by id, then newest first */
	size_t n;
};

/* id NULL = every guest. A missing dumpdir is an error. */
int cb_catalog_scan(struct cb_catalog *cat, const char *dumpdir, const char *id);
void cb_catalog_release(struct cb_catalog *cat);

/* Parse a backup file name; 0 if it is one (fields filled), -1 if not. */
int cb_catalog_parse_name(const char *name, enum cb_guest_type *type, char **id, time_t *when,
			  enum cb_compress *compress);
/* ID is one Proxmox VE can hold, and so name a backup of (pve-storage's
 * archive_info: 100 to 999999999, no leading zero). */
int cb_catalog_pve_vmid(const char *id);
/* NAME without ".tar[.ext]", for the .log beside it: caller frees. */
char *cb_catalog_base(const char *path);
/* NAME is an archive of guest (type, id) followed by one of the suffixes
 * (a NULL-terminated list, e.g. ".tmp", ".sha256"). */
int cb_catalog_is_guest_file(const char *name, enum cb_guest_type type, const char *id,
			     const char *const *suffixes);

#endif
