/*
 * cb_objstore_lock: a guest's backup to a store, locked across hosts. Two
 * hosts that back up the same guest to one store (a cluster after a
 * migration, a copied cron line) would write two nights at once; a local
 * lock file cannot see the other host, so the lock is an object of the
 * store itself: locks/<type>-<id>, created only if absent (cb_objstore.h's
 * put with if_absent), holding its owner (host, pid, boot id), since when,
 * a random token and an expiry. The holder renews it (a thread, every
 * third of its lifetime, on a handle of its own); another host sees the
 * owner in the error and waits for the expiry. A lock is stale, and taken
 * over, once expired, or at once when its owner was on this host and that
 * process is gone (same boot id, no such pid) or the host rebooted since
 * (another boot id). Release deletes it only while it is still ours.
 *
 * What it does not cover: clocks of the hosts far apart (the expiry is the
 * writer's clock: keep NTP), and, on a store that ignores If-None-Match
 * (RGW on versioned or object-lock buckets; the S3 backend then looks the
 * name up before and reads the object back after), two hosts whose
 * lookups both come before either's write.
 */
#ifndef CB_OBJSTORE_LOCK_H
#define CB_OBJSTORE_LOCK_H

#include <sys/types.h>
#include <time.h>

#include "cb_objstore.h"

#define CB_OBJSTORE_LOCK_TTL 900   /* seconds a lock lives unless renewed */

struct cb_objstore_owner {
	char host[256];
	long pid;
	char boot_id[64];
	time_t since;
};

/* This process: hostname, pid, /proc/sys/kernel/random/boot_id, now. */
void cb_objstore_owner_self(struct cb_objstore_owner *me);

struct cb_objstore_lock;

/*
 * Lock guest TYPE ("ct", "vm") ID on store s for `me` (NULL: this
 * process) for ttl_s seconds (0: CB_OBJSTORE_LOCK_TTL), renewed until
 * released. 0 taken (*out set); 1 another owner holds it (cb_error: "CT
 * 101 is being backed up to offsite by host X pid N since ..."); -1
 * failed (cb_error names the storage and the lock). A stale lock replaced
 * is said by cb_objstore_lock_note.
 */
int cb_objstore_lock_take(struct cb_objstore *s, const char *type, const char *id, unsigned ttl_s,
			  const struct cb_objstore_owner *me, struct cb_objstore_lock **out);
/* "removed the stale lock of host X pid N (expired ...)" or NULL. */
const char *cb_objstore_lock_note(const struct cb_objstore_lock *l);
/* Renew now (the thread does it every ttl/3): 0; -1 failed or lost, that
 * is, the object is no longer ours (cb_error says whose it is now). */
int cb_objstore_lock_renew(struct cb_objstore_lock *l);
/* 1 once a renewal found the lock lost, or the thread could not renew it
 * before it expired (a store unreachable for ttl/3 and more): the night
 * must not be committed. */
int cb_objstore_lock_lost(struct cb_objstore_lock *l);
/* Stop renewing; delete the object if it is still ours. 0, -1 failed
 * (cb_error set). NULL is fine. */
int cb_objstore_lock_release(struct cb_objstore_lock *l);

#endif
