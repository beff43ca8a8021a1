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
#include "cb_cli.h"
#include "cb_config.h"
#include "cb_log.h"

/* Runs the job; returns the exit status (enum cb_exit). */
int cb_backup_job(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);

/* "cbackup-ct-101-2026_12_02-10_14_07.tar.zst" (local time). */
char *cb_backup_archive_name(enum cb_guest_type type, const char *id, time_t when,
			     enum cb_compress compress);
/* vzdump's size format: "572MB", "1.23GB". */
void cb_fmt_vzsize(char *buf, size_t len, uint64_t bytes);

#endif
