/*
 * cb_fullsync: a guest whose next final sync must walk the whole tree.
 *
 * Set when the tracking audit (cb_audit.h) found a change that change
 * tracking missed: whatever blinded the tracker may still be there (a
 * loop device, a mapping, a bind mount), so the guest's next run does not
 * trust it. A flag file, TMPDIR/cbackup/cbackup-ID.full-sync, in the
 * root-only private directory of the staging copies (cb_private.h: created
 * 0700, checked with fstat), so that no other user can plant or remove
 * it; it holds a line saying why and when, for the admin. It persists
 * across reboots; a run with another tmpdir does not see it. Cleared by
 * the first run of the guest that succeeds without a tracked final sync.
 */
#ifndef CB_FULLSYNC_H
#define CB_FULLSYNC_H

/* 0, or -1 (error set). */
int cb_fullsync_set(const char *tmpdir, const char *id, const char *why);
/* 1 if set (anything under that name counts), 0 if not, -1 (error set). */
int cb_fullsync_pending(const char *tmpdir, const char *id);
/* 0 (also when it was not set), or -1 (error set). */
int cb_fullsync_clear(const char *tmpdir, const char *id);

#endif
