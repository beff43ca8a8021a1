/*
 * cb_backup: the phase sequence of one backup job (DESIGN §1):
 * for each guest: preflight -> first sync -> freeze -> final sync -> thaw
 * -> archive (staging -> tar -> codec -> sink) -> finish.
 * A guest that fails is reported once ("ERROR: Backup of CT 101 failed -
 * <phase>: <cause>") and the job goes on with the next guest.
 */
#ifndef CB_BACKUP_H
#define CB_BACKUP_H

#include <stdint.h>
#include <time.h>
#include "cb_opts.h"
#include "cb_log.h"

struct cb_guest_result;

/* Backs up one guest; takes ownership of *resolved (left zeroed) and fills
 * *res (timings, archive, size, checksum, error) for the job's report.
 * Returns 0, or -1 after the ERROR line was logged. */
int cb_backup_guest(struct cb_opts *resolved, const char *config_error, struct cb_log *log,
		    struct cb_guest_result *res);

/* "vzdump-lxc-101-2026_12_02-10_14_07.tar.zst" (local time, as vzdump),
 * "cbackup-ct-web-…" for an ID Proxmox VE cannot hold or with
 * archive-name = cbackup, "cbackup-vm-…" for a VM. */
char *cb_backup_archive_name(enum cb_guest_type type, const char *id, time_t when,
			     enum cb_compress compress, enum cb_archive_name naming);

#endif
