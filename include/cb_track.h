/*
 * cb_track: the freeze window tracks what changed (DESIGN §7).
 *
 * cb_track_start() marks the file system that holds the guest root with
 * fanotify (FAN_MARK_FILESYSTEM, FAN_REPORT_DFID_NAME) before pass 1; a
 * thread reads the events into a bounded set of the directories (as file
 * handles) under the root in which something changed. After the freeze is
 * confirmed, cb_track_finish() stops the thread, reads what the queue
 * holds at that moment (every write of a frozen guest has returned, and
 * fsnotify queues its event before the write returns; the rest of the
 * host's events after it are not waited for), adds what events do not
 * show, and
 * hands pass 2 the changed directories as paths, each with the names of
 * the entries that changed in it where the events allow (only content and
 * attribute changes of entries that are not directories):
 *
 *   - files the guest's processes hold open for writing or map shared and
 *     writable (writes through a mapping raise no event): read from
 *     /proc/PID/fd, fdinfo and maps of the processes in the guest's cgroup
 *     (every process of the host for the other freezer kinds);
 *   - inodes linked from outside the root after pass 1 read them (their
 *     changes are reported under the other name): the reader stats the
 *     names outside the root that events report on the same file system and
 *     keeps the inode numbers of those with several links; pass 2 finds
 *     them in its index. Inodes that already had several links in pass 1
 *     are re-checked by pass 2 itself.
 *
 * Whatever makes this inexact (a queue overflow, the set over its cap,
 * fanotify unavailable) makes cb_track_start/finish return NULL with a WARN
 * that says why: pass 2 then walks the whole tree.
 */
#ifndef CB_TRACK_H
#define CB_TRACK_H

#include <stddef.h>
#include <stdint.h>
#include "cb_changes.h"
#include "cb_log.h"

/* At most this many changed directories and outside-linked inodes are
 * kept (about 100 bytes each); more means the full walk. The environment
 * variable CB_TRACK_MAX (tests) lowers it. */
#define CB_TRACK_MAX 262144

struct cb_track;

/* At most this many names are kept per directory, and this many in all;
 * past either, the directory is listed whole. The environment variable
 * CB_TRACK_NAMES (tests) lowers the second. */
#define CB_TRACK_DIR_NAMES 32
#define CB_TRACK_NAMES 65536

/* NULL (with a WARN why) if tracking is not possible for root. */
struct cb_track *cb_track_start(const char *root, struct cb_log *log);
/* Events in the directory at fd and of its entries are not the guest's
 * (the staging copy's own, on the same file system): ignored from now on,
 * by an ignore mark (FAN_MARK_IGNORE, Linux 6.0), for up to
 * CB_TRACK_IGNORED directories. Matches cb_stage_set_dir_hook's fn. */
void cb_track_ignore_dir(void *t, int fd);
#define CB_TRACK_IGNORED 65536
/* Call with the guest frozen. cgroup: the guest's freeze cgroup, whose
 * processes' open and mapped files are checked (NULL: every process on the
 * host is). NULL (with a WARN why) if what was tracked is not exact; frees
 * t either way. */
struct cb_changes *cb_track_finish(struct cb_track *t, const char *cgroup);
void cb_track_free(struct cb_track *t);

#endif
