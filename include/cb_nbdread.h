/*
 * cb_nbdread: copy an NBD export (QEMU's snapshot-access node of a VM disk)
 * into a sparse raw file with libnbd.
 *
 * The allocation map (NBD "base:allocation" block status) drives the read:
 * holes and zero extents are never read and stay holes in the file; data
 * blocks that read back all zero become holes too. With a dirty bitmap
 * context ("qemu:dirty-bitmap:NAME", incrementals) only the dirty extents
 * are read and written into the file kept from the last run, where they
 * overwrite data or punch holes.
 */
#ifndef CB_NBDREAD_H
#define CB_NBDREAD_H

#include <stdint.h>
#include "cb_progress.h"

struct cb_nbdread_opts {
	const char *socket;         /* unix socket of QEMU's NBD server */
	const char *export_name;
	int dir_fd;                 /* the private staging directory */
	const char *file;           /* name in dir_fd: created, or updated (bitmap) */
	const char *bitmap;         /* NULL: full read; else the dirty bitmap's name */
	long bwlimit;               /* KiB/s, 0 = none */
	struct cb_progress *progress;
};

struct cb_nbdread_stats {
	uint64_t size;              /* the disk's virtual size */
	uint64_t read;              /* bytes read over NBD */
	uint64_t written;           /* bytes written to the file */
	uint64_t dirty;             /* bitmap mode: bytes the bitmap marked */
	double seconds;
};

/* 0, or -1 with cb_error set. A bitmap the export does not offer is an
 * error the caller can tell by *no_bitmap = 1 (then nothing was written). */
int cb_nbdread(const struct cb_nbdread_opts *o, struct cb_nbdread_stats *st, int *no_bitmap);

#endif
