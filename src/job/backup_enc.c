/*
 * Encryption at rest for one guest's archive (cb_encarchive.h): the codec
 * writes into the sealing writer, which makes each segment a frame of the
 * archive in the dump directory, and copies the unchanged ones from the
 * previous encrypted archive of the guest, under the same key only, as
 * frames (never decrypted to a file). The plain catalog and .sha256 wait
 * in a private directory on the tmpdir until they are sealed into the
 * encrypted catalog.
 */
#include "backup_int.h"
#include "cb_rmtree.h"

struct backup_enc {
	struct cb_enckey k;
	char *dir;            /* private: TMPDIR/cbackup-enc-ID.XXXXXX */
	char *final_path;     /* the .cbenc archive in the dump directory */
	struct cb_enc_writer *w;
};

int backup_encrypts(const struct guest_run *r)
{
	/* a unit store seals its own objects (backup_store.c) */
	if (r->opts.layout == CB_LAYOUT_STORE || r->opts.storage_type == CB_STORAGE_S3)
		return 0;
	return r->opts.encryption_key && strcmp(r->opts.encryption_key, "none");
}

/* The previous archive under this key, to copy frames from; any other is
 * said and left alone (never a unit of another key). */
static char *find_prev(struct guest_run *r, struct backup_enc *e)
{
	char *prev = cb_enc_prev_archive(r->opts.dumpdir, r->opts.type, r->opts.id, r->opts.compress);

	if (!prev || !r->opts.reuse) {
		free(prev);
		return NULL;
	}
	if (cb_enc_check_key(prev, &e->k) < 0) {
		cb_info(r->log, "no units reused from '%s': %s", strrchr(prev, '/') + 1, cb_last_error());
		free(prev);
		return NULL;
	}
	return prev;
}

static int open_writer(struct guest_run *r, struct backup_enc *e)
{
	char *prev = find_prev(r, e);
	const char *why = "";
	int ret = cb_enc_writer_open(&e->k, r->archive_path, prev, r->opts.compress, &e->w, &why);

	if (ret == 0 && prev && why[0])
		cb_info(r->log, "no units reused from '%s': %s", strrchr(prev, '/') + 1, why);
	free(prev);
	return ret;
}

/* A killed run's private directory (a plain catalog in it): removed, with
 * the guest's lock held. Only cbackup-enc-ID.XXXXXX, never another guest's
 * (IDs may hold '.': "web" must not take "web.1"'s). */
static void remove_stale(const struct guest_run *r)
{
	char *prefix = cb_xasprintf("cbackup-enc-%s.", r->opts.id);
	size_t k = strlen(prefix);
	DIR *d = opendir(r->opts.tmpdir);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		struct stat st;
		char *p;
		if (strncmp(de->d_name, prefix, k) || strlen(de->d_name) != k + 6 ||
		    strspn(de->d_name + k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != 6)
			continue;
		p = cb_xasprintf("%s/%s", r->opts.tmpdir, de->d_name);
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid()) {
			cb_info(r->log, "removing '%s', left by an interrupted backup", p);
			cb_remove_tree(p);
		}
		free(p);
	}
	if (d)
		closedir(d);
	free(prefix);
}

int backup_enc_begin(struct guest_run *r, struct backup_enc **out)
{
	struct backup_enc *e;
	const char *name = strrchr(r->archive_path, '/');

	*out = NULL;
	if (!backup_encrypts(r))
		return 0;
	if (r->opts.to_stdout || !name)
		return cb_error("encryption needs a dump directory (not --stdout)");
	e = cb_xcalloc(1, sizeof(*e));
	if (cb_enckey_load(r->opts.encryption_key, &e->k) < 0) {
		free(e);
		return -1;
	}
	remove_stale(r);
	e->dir = cb_xasprintf("%s/cbackup-enc-%s.XXXXXX", r->opts.tmpdir, r->opts.id);
	if (!mkdtemp(e->dir)) {   /* mode 0700, a new name */
		cb_error_errno("cannot create a private directory in '%s'", r->opts.tmpdir);
		free(e->dir);
		cb_enckey_wipe(&e->k);
		free(e);
		return -1;
	}
	*out = e;
	if (open_writer(r, e) < 0)
		return -1;
	e->final_path = r->archive_path;
	r->archive_path = cb_xasprintf("%s/%.*s", e->dir,
				       (int)(strlen(name + 1) - strlen(CB_ENC_SUFFIX)), name + 1);
	return 0;
}

struct cb_sink *backup_enc_sink(struct backup_enc *e)
{
	return cb_enc_writer_sink(e->w);
}

void backup_enc_attach(struct backup_enc *e, struct cb_codec_writer *codec)
{
	cb_enc_writer_attach(e->w, codec);
}

const struct cb_reuse *backup_enc_prev(const struct backup_enc *e)
{
	return cb_enc_writer_prev(e->w);
}

void backup_enc_resume(struct backup_enc *e, const char *path)
{
	cb_enc_writer_resume(e->w, path);
}

/* The dump directory gets its archive name back. */
static void restore_path(struct guest_run *r, struct backup_enc *e)
{
	if (!e->final_path)
		return;
	free(r->archive_path);
	r->archive_path = e->final_path;
	e->final_path = NULL;
}

int backup_enc_finish(struct guest_run *r, struct backup_enc *e, const char *path)
{
	struct cb_enc_seal_stats st;
	char *plain = cb_xstrdup(r->archive_path), size[32], fp[CB_ENC_FP_HEX];
	int ret;

	restore_path(r, e);
	ret = cb_enc_writer_finish(e->w, plain, path, &st);
	free(plain);
	if (ret < 0)
		return cb_error_prefix("encryption");
	cb_enckey_fp_hex(e->k.fp, fp);
	cb_fmt_vzsize(size, sizeof(size), st.bytes);
	cb_info(r->log, "encrypted with key %s: %llu units (%llu copied from the previous archive), "
		"encrypted archive size: %s", fp, (unsigned long long)st.frames,
		(unsigned long long)st.frames_copied, size);
	if (st.resumed)
		cb_verbose(r->log, "encrypted archive SHA-256: the first %llu bytes (copied unchanged) "
			   "taken from the previous archive's state there, not hashed again",
			   (unsigned long long)st.resumed);
	r->res->size = st.bytes;
	snprintf(r->res->sha256, sizeof(r->res->sha256), "%s", st.sha256);
	return 0;
}

void backup_enc_free(struct guest_run *r, struct backup_enc *e)
{
	if (!e)
		return;
	restore_path(r, e);
	cb_enc_writer_free(e->w);
	cb_remove_tree(e->dir);
	cb_enckey_wipe(&e->k);
	free(e->dir);
	free(e);
}

int backup_enc_notes(struct guest_run *r, const char *text)
{
	struct cb_enckey k;
	char *name = cb_xasprintf("%s.notes", strrchr(r->archive_path, '/') + 1);
	int dfd = open(r->opts.dumpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = -1;

	if (dfd < 0)
		cb_error_errno("dumpdir '%s'", r->opts.dumpdir);
	else if (cb_enckey_load(r->opts.encryption_key, &k) == 0) {
		ret = cb_enc_notes_write(&k, dfd, name, text);
		cb_enckey_wipe(&k);
	}
	if (dfd >= 0)
		close(dfd);
	free(name);
	return ret;
}
