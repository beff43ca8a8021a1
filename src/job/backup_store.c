/*
 * A night to a unit store (layout = store, include/cb_store.h): the codec
 * writes into the night's sink instead of a file; the catalog, the log so
 * far and the notes go into the store with the units, and the manifest
 * last, in the place of the .sha256 and the rename.
 */
#include "backup_int.h"
#include "cb_objstore_lock.h"

/* Threads that write a night's units: a directory's fsyncs, an object
 * store's round trips overlap the codec's work. */
#define STORE_WRITERS 4

/* An S3 storage is shared by hosts that share no lock file (a directory
 * store has the dump directory's, as a classic one): the guest's lock
 * object, taken before any unit is written, renewed while the night runs. */
static int lock_store(struct guest_run *r)
{
	int rc;

	if (r->opts.storage_type != CB_STORAGE_S3)
		return 0;
	rc = cb_objstore_lock_take(r->store, cb_guest_type_name(r->opts.type), r->opts.id, 0, NULL,
				   &r->object_lock);
	if (rc != 0)
		return -1;
	if (cb_objstore_lock_note(r->object_lock))
		cb_info(r->log, "%s", cb_objstore_lock_note(r->object_lock));
	return 0;
}

/* With a key, units and manifest are sealed (cb_store.h, store_enc.c). */
static int use_key(struct guest_run *r)
{
	char fp[CB_ENC_FP_HEX];

	if (cb_store_use_key(r->store, r->opts.encryption_key) < 0)
		return -1;
	if (!cb_store_key(r->store))
		return 0;
	cb_enckey_fp_hex(cb_store_key(r->store)->fp, fp);
	cb_info(r->log, "unit store '%s': encrypted with key %s", r->store->label, fp);
	return 0;
}

/* The night's units kept beside a kept staging copy (and gone with it):
 * the next night reads those it copies from there, not from the store. */
static void open_cache(struct guest_run *r)
{
	char *dir;

	if (!r->keep || r->drop_kept || !r->stage_dir || r->snaps)
		return;
	dir = cb_xasprintf("%s.units", r->stage_dir);
	if (cb_store_night_cache(r->night, dir) < 0)
		cb_warn(r->log, "no local unit cache: %s", cb_last_error());
	free(dir);
}

/* The storage's upload-parallel: the night's writers. */
static unsigned store_writers(const struct guest_run *r)
{
	return r->opts.upload_parallel > 0 ? (unsigned)r->opts.upload_parallel : STORE_WRITERS;
}

int backup_store_open(struct guest_run *r, struct cb_sink **sink)
{
	const char *name = strrchr(r->archive_path, '/') + 1, *why = "";

	/* r->store is the caller's (backup_write_archive opened it for the
	 * night's label): opening it again here left that handle open, one a
	 * guest of the job */
	if (r->store->ops->check(r->store) < 0 ||
	    use_key(r) < 0 || lock_store(r) < 0 ||
	    cb_store_night_open(&r->night, r->store, name, r->opts.type, r->opts.id, r->opts.compress,
				r->opts.lockwait * 60, store_writers(r), &why) < 0)
		return -1;
	if (why[0])
		cb_info(r->log, "no units reused from the previous night: %s", why);
	open_cache(r);
	*sink = cb_store_night_sink(r->night);
	return 0;
}

void backup_store_attach(struct guest_run *r, struct cb_codec_writer *codec)
{
	cb_store_night_attach(r->night, codec);
}

/* The catalog waits in the private tmpdir until it goes into the store. */
char *backup_store_idx_path(const struct guest_run *r)
{
	char *dir = cb_xasprintf("%s/cbackup", r->opts.tmpdir), *path = NULL;
	int fd = cb_private_dir_open(dir);

	if (fd >= 0) {
		path = cb_xasprintf("%s/%s.idx", dir, strrchr(r->archive_path, '/') + 1);
		unlink(path);
		close(fd);
	}
	free(dir);
	return path;
}

static char *render_notes(struct guest_run *r)
{
	char node[256];

	if (!r->opts.notes_template)
		return NULL;
	cb_info(r->log, "adding notes to backup");
	cb_node_name(node, sizeof(node));
	struct cb_notes_vars v = { node, r->hostname, node, r->opts.id, cb_guest_type_name(r->opts.type) };
	return cb_notes_render(r->opts.notes_template, &v);
}

int backup_store_commit(struct guest_run *r, const char *idx_path, const char *idx_hex)
{
	char *notes = render_notes(r);
	int ret;

	if (r->opts.protected_)
		cb_info(r->log, "marking backup as protected");
	/* another host took the guest over (our lock expired unrenewed): its
	 * night, not this one, is the guest's */
	if (r->object_lock && cb_objstore_lock_lost(r->object_lock)) {
		free(notes);
		return cb_error("the lock of CT/VM %s on '%s' was lost while the night ran: not committed",
				r->opts.id, r->store->label);
	}
	ret = cb_store_night_commit(r->night, idx_hex[0] ? idx_path : NULL, r->log_path, notes,
				    r->opts.protected_);
	free(notes);
	return ret;
}

void backup_store_log(struct guest_run *r)
{
	struct cb_store_night_stats st;
	char w[32], p[32];

	cb_store_night_stats(r->night, &st);
	cb_fmt_bytes(w, sizeof(w), st.written_bytes);
	cb_fmt_bytes(p, sizeof(p), st.present_bytes);
	cb_info(r->log, "unit store '%s': %llu units, %llu new written (%s), %llu already stored (%s), "
		"%llu of them copied, not compressed again (%llu read from the local unit cache)",
		r->store->label, (unsigned long long)st.units, (unsigned long long)st.written_units, w,
		(unsigned long long)st.present_units, p, (unsigned long long)st.copied_units,
		(unsigned long long)st.cached_units);
	cb_debug(r->log, "unit store '%s': %.2f s opening (mark, listing), the codec waited %.2f s "
		 "for the uploads (%u at once), %.2f s for the last ones, %.2f s catalog, log and "
		 "manifest", r->store->label, st.open_s, st.wait_s, store_writers(r), st.drain_s,
		 st.commit_s);
}

void backup_store_end_night(struct guest_run *r)
{
	cb_store_night_free(r->night);
	r->night = NULL;
	if (r->object_lock && cb_objstore_lock_release(r->object_lock) < 0)
		cb_warn(r->log, "%s", cb_last_error());
	r->object_lock = NULL;
}

int backup_uses_dumpdir(const struct guest_run *r)
{
	return !r->opts.to_stdout && r->opts.storage_type != CB_STORAGE_S3;
}

const char *backup_target(const struct guest_run *r)
{
	return r->archive_label ? r->archive_label : r->archive_path;
}

/* vzdump's way for a backup server (/var/log/vzdump/lxc-ID.log): one log
 * a guest, replaced by its next run. For an S3 night (its own log is in
 * the store) and an encrypted archive (a log beside it would name the
 * guest's files in clear: a warning, a hook's output). */
char *backup_host_log_path(const struct guest_run *r)
{
	char *dir = cb_xasprintf("%s/cbackup", r->opts.tmpdir), *path = NULL;
	int fd = cb_private_dir_open(dir);

	if (fd >= 0) {
		path = cb_xasprintf("%s/%s-%s.log", dir, cb_guest_type_name(r->opts.type), r->opts.id);
		unlink(path);
		close(fd);
	}
	free(dir);
	return path;
}

void backup_store_close(struct guest_run *r)
{
	backup_store_end_night(r);
	cb_objstore_close(r->store);
	r->store = NULL;
}
