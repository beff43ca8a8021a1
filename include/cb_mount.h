/*
 * cb_mount: `cbackup mount ARCHIVE MOUNTPOINT`, a read-only FUSE file system
 * over an archive (libfuse3), from its catalog; file reads decode only the
 * units they touch. Returns once mounted (the file system runs on in the
 * background until `fusermount3 -u MOUNTPOINT`).
 */
#ifndef CB_MOUNT_H
#define CB_MOUNT_H

#include "cb_log.h"

int cb_mount_run(const char *archive, const char *mountpoint, struct cb_log *log);

#endif
