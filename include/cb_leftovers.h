/*
 * cb_leftovers: what an interrupted run of a guest left in a dump
 * directory, and its removal.
 *
 * A run killed with SIGKILL (or a lost power) leaves NAME.tmp (the
 * archive being written), NAME.sha256.tmp, a NAME.sha256 whose archive never
 * got its name, and NAME.log without an archive beside it and without the
 * end line every run that ended writes ("Finished Backup of" or "Backup of
 * ... failed"): logs of failed runs stay. Another tool that removes an
 * archive (Proxmox VE's prune deletes the archive, its .log and .notes)
 * leaves cbackup's NAME.sha256, NAME.idx and NAME.verified: side files
 * whose archive is gone are leftovers too. Names are parsed as archive
 * names (cb_catalog), so guest "web" never claims "web-1"'s files.
 *
 * Call only while holding the guest's locks (cb_lock_guest): then no run
 * of that guest is writing there, on this host or another.
 */
#ifndef CB_LEFTOVERS_H
#define CB_LEFTOVERS_H

#include "cb_log.h"
#include "cb_opts.h"

/* Remove them (dry_run: only say which), each with an INFO line; own_log
 * (a file name in DUMPDIR, the caller's own log) is never one. Returns how
 * many there were. */
unsigned cb_leftovers_remove(const char *dumpdir, enum cb_guest_type type, const char *id,
			     const char *own_log, int dry_run, struct cb_log *log);

struct cb_guest_ref {
	enum cb_guest_type type;
	char *id;
};

/* The guests (only ID's, when not NULL) with a side file whose archive is
 * gone, each once, in *out (free with cb_leftovers_guests_free): those a
 * listing of the archives would not name. Returns how many. */
size_t cb_leftovers_guests(const char *dumpdir, const char *id, struct cb_guest_ref **out);
void cb_leftovers_guests_free(struct cb_guest_ref *v, size_t n);

#endif
