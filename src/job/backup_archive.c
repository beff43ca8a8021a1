/*
 * Writing the archive from the staged tree (or the snapshots): the tar
 * stream through the codec to the sink, units copied from the previous
 * archive and taken on trust, the catalog, the .sha256, the guest's config
 * members and its ID map (write_archive).
 */
#include "backup_int.h"

/* The tree the archive reads (staging copy or snapshot) and where each
 * mount point's tree goes in it. A snapshot is given by the fd opened when
 * it was taken: its path (beside the volume, in a directory whose parent
 * other users may write) is never looked up again. */
static void archive_tree(const struct guest_run *r, struct cb_archive_graft *root,
			 struct cb_archive_graft *grafts)
{
	for (size_t i = 0; i <= r->n_mps; i++) {
		struct cb_archive_graft *g = i ? &grafts[i - 1] : root;

		g->name = i ? r->mps[i - 1].target : "./";
		g->tree = r->snaps ? cb_snapshot_path(&r->snaps[i])
				   : i ? r->mps[i - 1].stage_dir : r->stage_dir;
		g->by_fd = r->snaps != NULL;
		g->fd = r->snaps ? cb_snapshot_fd(&r->snaps[i]) : -1;
		g->staged = r->snaps == NULL;
	}
}

/* Every snapshot directory is still the one cbackup made. */
static int snapshots_intact(const struct guest_run *r)
{
	for (size_t i = 0; r->snaps && i <= r->n_mps; i++)
		if (cb_snapshot_check(&r->snaps[i]) < 0)
			return -1;
	return 0;
}

static void log_archive_stats(struct guest_run *r, const struct cb_archive_stats *as,
			      const struct cb_codec_writer *codec, const struct cb_sink *sink)
{
	struct cb_codec_stats cs;
	char total[32], rate[32], size[32], rr[32], cr[32], wr[32];
	double secs = as->seconds > 0 ? as->seconds : 1e-9;
	double read_rate, comp_rate, write_rate, wsecs = cb_sink_write_seconds(sink);
	const char *slowest;

	cb_codec_writer_stats(codec, &cs);
	cb_fmt_bytes(total, sizeof(total), as->tar_bytes);
	cb_fmt_bytes(rate, sizeof(rate), (uint64_t)(as->tar_bytes / secs));
	cb_info(r->log, "Total bytes written: %llu (%s, %s/s)", (unsigned long long)as->tar_bytes,
		total, rate);
	if (cs.bytes_stored) {
		char summary[256];
		cb_codec_stats_summary(&cs, summary, sizeof(summary));
		cb_info(r->log, "stored raw (incompressible): %s", summary);
	}
	read_rate = as->tar_bytes / (as->read_seconds > 1e-6 ? as->read_seconds : 1e-6);
	comp_rate = cs.bytes_in / (cs.compress_seconds > 1e-6 ? cs.compress_seconds : 1e-6);
	write_rate = cs.bytes_out / (wsecs > 1e-6 ? wsecs : 1e-6);
	slowest = read_rate <= comp_rate && read_rate <= write_rate ? "read"
		  : comp_rate <= write_rate ? "compress" : "write";
	cb_fmt_bytes(rr, sizeof(rr), (uint64_t)read_rate);
	cb_fmt_bytes(cr, sizeof(cr), (uint64_t)comp_rate);
	cb_fmt_bytes(wr, sizeof(wr), (uint64_t)write_rate);
	/* the sink held back by bwlimit for a quarter of the run or more: the
	 * limit set the pace, not one of the stages */
	if (r->opts.bwlimit && cb_sink_throttled_seconds(sink) >= secs / 4)
		cb_info(r->log, "stage rates: read %s/s, compress %s/s, write %s/s - limited by bwlimit "
			"(%ld KB/s)", rr, cr, wr, r->opts.bwlimit);
	else
		cb_info(r->log, "stage rates: read %s/s, compress %s/s, write %s/s - slowest: %s", rr,
			cr, wr, slowest);
	cb_fmt_vzsize(size, sizeof(size), cb_sink_bytes(sink));
	cb_info(r->log, "archive file size: %s", size);
	r->res->stored_raw = cs.bytes_stored;
	r->res->size = cb_sink_bytes(sink);
	snprintf(r->res->sha256, sizeof(r->res->sha256), "%s", cb_sink_sha256(sink));
}

/* DUMPDIR/NAME.sha256 for `sha256sum -c` (run from dumpdir), via .tmp +
 * rename; the catalog NAME.idx on a second line when there is one. */
static int write_checksum(struct guest_run *r, const char *hex, const char *idx_hex)
{
	const char *name = strrchr(r->archive_path, '/') + 1;
	char *path = cb_xasprintf("%s.sha256", r->archive_path);
	/* an encrypted archive's plain stream has no SHA-256 (its frames have
	 * tags): the catalog's line only, sealed into the encrypted catalog */
	char *text = !*hex ? cb_xasprintf("%s  %s.idx\n", idx_hex, name)
		     : *idx_hex ? cb_xasprintf("%s  %s\n%s  %s.idx\n", hex, name, idx_hex, name)
				: cb_xasprintf("%s  %s\n", hex, name);
	int ret = cb_write_file_replace(path, text, 0644);

	if (ret < 0)
		cb_error_prefix("cannot write checksum file");
	free(path);
	free(text);
	return ret;
}

static void remove_checksum(struct guest_run *r)
{
	char *path = cb_xasprintf("%s.sha256", r->archive_path);
	unlink(path);
	free(path);
	path = cb_xasprintf("%s.idx", r->archive_path);
	unlink(path);
	free(path);
}

/* NAME.idx, the catalog (cb_index.h), before the .sha256 that lists it. One
 * that cannot be made is a warning: the archive is whole without it (and
 * `cbackup index` makes it later). idx_hex stays "" then. */
static void write_catalog(struct guest_run *r, const char *path, struct cb_tarscan *scan,
			  const struct cb_codec_writer *codec, const struct cb_sink *sink,
			  char *idx_hex)
{
	if (!path || cb_tarscan_end(scan) < 0 ||
	    cb_idx_write_scan(path, scan, cb_codec_writer_units(codec),
			      r->opts.reuse ? cb_codec_writer_segs(codec) : NULL, r->opts.compress,
			      cb_sink_bytes(sink), idx_hex) < 0) {
		idx_hex[0] = '\0';
		cb_warn(r->log, "no catalog '%s': %s", path ? path : "", cb_last_error());
	}
}

/* The .sha256 first: an archive under its final name always has one. */
static int commit_file(struct guest_run *r, struct cb_sink *sink, const char *idx_hex)
{
	if ((!r->opts.to_stdout && write_checksum(r, cb_sink_sha256(sink), idx_hex) < 0) ||
	    cb_sink_commit(sink) < 0) {
		remove_checksum(r);
		return -1;
	}
	return 0;
}

/* The manifest in the place of the .sha256 and the rename; the catalog
 * is in the store then, not in the tmpdir. */
static int commit_store(struct guest_run *r, const char *idx_path, const char *idx_hex)
{
	int ret = backup_store_commit(r, idx_path, idx_hex);

	if (idx_path)
		unlink(idx_path);
	if (ret == 0)
		backup_store_log(r);
	return ret;
}

/* Memory goes by entries twice: the staging index and the archive's
 * catalog. The index is done once saved, so it goes before the catalog
 * grows (and the heap it leaves is given back). */
void backup_release_indexes(struct guest_run *r)
{
	cb_stage_release_index(r->stage);
	for (size_t i = 0; i < r->n_mps; i++)
		cb_stage_release_index(r->mps[i].stage);
	malloc_trim(0);
}

/* The previous archive of the guest to copy unchanged units from (reuse =
 * 1, a storage file): said in the log when there is one that cannot serve. */
static struct cb_reuse *open_reuse(struct guest_run *r, struct cb_codec_writer *codec)
{
	struct cb_reuse *reuse;
	const char *why;

	if (!r->opts.reuse || r->opts.to_stdout)
		return NULL;
	reuse = cb_reuse_open(r->opts.dumpdir, r->opts.type, r->opts.id, r->opts.compress, &why);
	if (reuse)
		cb_reuse_attach(reuse, codec);
	else if (why[0])
		cb_info(r->log, "no units reused from the previous archive: %s", why);
	return reuse;
}

/* Trust (cb_reuse_trust.h): with a kept staging copy, the writer records
 * trust keys for the next night's map, and takes segments on trust when
 * the map kept with the copy names the previous archive. */
static char *trust_path(const struct guest_run *r)
{
	if (!r->opts.reuse || !r->keep || r->opts.to_stdout || r->snaps ||
	    !r->stage_dir || r->opts.compress == CB_COMPRESS_NONE)
		return NULL;
	return cb_xasprintf("%s.trust", r->stage_dir);
}

/* The encrypted archive's SHA-256 states, kept beside the trust map. */
static char *enc_trust_path(const struct guest_run *r)
{
	char *path = trust_path(r);

	free(path);
	return path ? cb_xasprintf("%s.enctrust", r->stage_dir) : NULL;
}

static struct cb_trust_map *open_trust(struct guest_run *r, struct cb_codec_writer *codec,
				       struct cb_sink *sink, const struct cb_reuse *reuse,
				       struct backup_enc *enc)
{
	char *path = trust_path(r), *enc_path = enc_trust_path(r);
	struct cb_trust_map *m = NULL;
	const char *why = "there is no previous archive";
	const struct cb_sink_state *states;
	size_t n;

	if (!path)
		return NULL;
	cb_codec_set_trust(codec, NULL, NULL);
	/* a store's: the guest's previous night, by its name and catalog; an
	 * encrypted one's: its plain catalog */
	if (r->store)
		reuse = cb_store_night_own_prev(r->night);
	else if (enc)
		reuse = backup_enc_prev(enc);
	if (reuse)
		m = cb_trust_map_load(path, cb_reuse_name(reuse), cb_reuse_idx_sha256(reuse), &why);
	if (m) {
		cb_trust_map_attach(m, codec);
		/* the .sha256 of a start copied unchanged resumes from its state
		 * (a file's: a store's night has none to read a prefix from) */
		states = cb_trust_map_states(m, &n);
		if (!r->store && !enc)
			cb_sink_resume(sink, cb_reuse_fd(reuse), states, n);
	} else
		cb_verbose(r->log, "nothing taken on trust: %s", why[0] ? why : "no trust map");
	if (enc)
		backup_enc_resume(enc, enc_path);
	free(path);
	free(enc_path);
	return m;
}

/* The map for the next night, naming this archive; a failure is a
 * warning (the next night reads the staged data). */
static void save_trust(struct guest_run *r, const struct cb_codec_writer *codec,
		       const struct cb_sink *sink, const char *idx_hex)
{
	char *path = trust_path(r);
	const char *base = strrchr(r->archive_path, '/');
	size_t n, n_states;
	const struct cb_codec_trust *v = cb_codec_writer_trust(codec, &n);
	const struct cb_sink_state *states = cb_sink_states(sink, &n_states);

	if (!path)
		return;
	unlink(path);
	if (idx_hex[0] && cb_trust_map_save(path, base ? base + 1 : r->archive_path, idx_hex, v, n,
					    states, n_states) < 0)
		cb_warn(r->log, "no trust map for the next backup: %s", cb_last_error());
	free(path);
}

/* The encrypted archive made whole, its states kept for the next night. */
static int finish_enc(struct guest_run *r, struct backup_enc *enc)
{
	char *path = enc_trust_path(r);
	int ret = backup_enc_finish(r, enc, path);

	free(path);
	return ret;
}

/* "reused N units (X) from ARCHIVE, compressed M units (Y)": tar bytes. */
static void log_reuse(struct guest_run *r, const struct cb_codec_writer *codec, const char *from)
{
	struct cb_codec_stats cs;
	char x[32], y[32];
	const char *note = cb_codec_reuse_note(codec);

	cb_codec_writer_stats(codec, &cs);
	if (note)
		cb_warn(r->log, "%s", note);
	r->res->reused_units = cs.segs_reused;
	r->res->reused_bytes = cs.segs_reused_bytes;
	r->res->compressed_units = cs.segs_compressed;
	r->res->compressed_bytes = cs.segs_compressed_bytes;
	r->res->trusted_units = cs.segs_trusted;
	r->res->trusted_unread_bytes = cs.trusted_unread_bytes;
	if (!r->opts.reuse || r->opts.compress == CB_COMPRESS_NONE)
		return;
	free(r->res->reused_from);
	r->res->reused_from = from ? cb_xstrdup(from) : NULL;
	cb_fmt_bytes(x, sizeof(x), cs.segs_reused_bytes);
	cb_fmt_bytes(y, sizeof(y), cs.segs_compressed_bytes);
	cb_info(r->log, "reused %llu units (%s) from %s, compressed %llu units (%s)",
		(unsigned long long)cs.segs_reused, x, from ? from : "no previous archive",
		(unsigned long long)cs.segs_compressed, y);
	cb_fmt_bytes(x, sizeof(x), cs.trusted_unread_bytes);
	cb_verbose(r->log, "taken on trust: %llu units, %s of staged data not read",
		   (unsigned long long)cs.segs_trusted, x);
	if (cs.segs_reused)
		cb_verbose(r->log, "reused units checked: %llu by the catalog's unit CRC-32s, %llu by "
			   "their SHA-256", (unsigned long long)cs.segs_checked_crc,
			   (unsigned long long)(cs.segs_reused - cs.segs_checked_crc));
}

/* What the archive pass's progress counts toward: the tar stream's bytes.
 * A container's, from the estimate's walk, falls short only by pax
 * headers and tar's end (the bar then waits at 99%), never overshoots as
 * the space estimate's blocks did; without that walk (a kept staging copy)
 * the first sync's file bytes and headers. */
static uint64_t archive_total(const struct guest_run *r)
{
	if (r->opts.type == CB_GUEST_VM)
		return r->estimate;
	return r->archive_total ? r->archive_total : r->first_bytes;
}

/*
 * The guest's config in the archive: a Proxmox container's where vzdump
 * puts it and pct restore looks (./etc/vzdump/pct.conf, stripped, and
 * pct.fw, empty when the guest has no firewall file) before the tree;
 * any other at ./etc/cbackup/guest.conf (a VM's ./guest.conf) after it.
 * Returns the number of extras, or -1.
 */
static int guest_extras(struct guest_run *r, struct cb_archive_extra *x, struct cb_pvect_conf *pc)
{
	int pve = 0;

	if (!r->opts.guest_config)
		return 0;
	if (r->opts.type == CB_GUEST_CT &&
	    (pve = cb_pvect_load(r->opts.guest_config, r->opts.id, pc)) < 0)
		return -1;
	if (!pve) {
		x[0] = (struct cb_archive_extra){
			r->opts.type == CB_GUEST_VM ? "./guest.conf" : "./etc/cbackup/guest.conf",
			r->opts.guest_config, NULL, 0, 0, 0 };
		return 1;
	}
	x[0] = (struct cb_archive_extra){ "./etc/vzdump/pct.conf", NULL, pc->text, pc->len,
					  pc->mtime, 1 };
	if (pc->fw_path)
		x[1] = (struct cb_archive_extra){ "./etc/vzdump/pct.fw", pc->fw_path, NULL, 0, 0, 1 };
	else
		x[1] = (struct cb_archive_extra){ "./etc/vzdump/pct.fw", NULL, "", 0, pc->mtime, 1 };
	return 2;
}

/* vzdump's tar runs in the container's user namespace: its IDs are
 * archived as the container sees them, and so are cbackup's. */
static void log_idmap(struct guest_run *r, const struct cb_idmap *m)
{
	char text[256] = "";
	size_t at = 0;

	for (size_t i = 0; i < m->n && at < sizeof(text); i++)
		at += (size_t)snprintf(text + at, sizeof(text) - at, "%s%c %lu %lu %lu", i ? ", " : "",
				       m->v[i].type, m->v[i].ct, m->v[i].host, m->v[i].len);
	cb_info(r->log, "unprivileged container: IDs archived as it sees them (ID map %s)", text);
}

int backup_write_archive(struct guest_run *r)
{
	struct cb_codec_params cp;
	struct cb_archive_extra extras[2];
	struct cb_pvect_conf pc = { 0 };
	int n_extras = guest_extras(r, extras, &pc);
	struct cb_archive_stats as = { 0 };
	struct cb_archive_graft *grafts = cb_xcalloc(r->n_mps + 1, sizeof(*grafts)), root;
	struct cb_codec_writer *codec = NULL;
	struct cb_sink *sink = NULL;
	struct cb_reuse *reuse = NULL;
	struct cb_trust_map *trust = NULL;
	struct backup_enc *enc = NULL;
	struct cb_tarscan *scan = r->opts.to_stdout ? NULL : cb_tarscan_new();
	char idx_hex[65] = "", *idx_path = NULL;
	double started = cb_now();
	int ret = -1;

	archive_tree(r, &root, grafts);
	root.idmap = pc.map.n ? &pc.map : NULL;
	if (n_extras < 0 || snapshots_intact(r) < 0)
		goto out;
	if (root.idmap)
		log_idmap(r, &pc.map);
	cb_codec_params_for(&r->opts, r->opts.compress, &cp);
	if (!r->opts.to_stdout && cb_objstore_open_for(&r->opts, &r->store) < 0)
		goto out;
	/* vzdump's words: PVE's task log and log parsers know them */
	cb_info(r->log, "creating %sarchive '%s'", r->opts.type == CB_GUEST_CT ? "vzdump " : "",
		backup_target(r));
	if (backup_enc_begin(r, &enc) < 0)
		goto out;
	if (enc)
		sink = backup_enc_sink(enc);
	else if ((r->store ? backup_store_open(r, &sink)
		  : r->opts.to_stdout ? cb_sink_open_fd(&sink, STDOUT_FILENO, "standard output")
				      : cb_sink_open_file(&sink, r->archive_path)) < 0)
		goto out;
	cb_sink_set_bwlimit(sink, r->opts.bwlimit);
	if (cb_codec_writer_new(&codec, &cp, sink) < 0)
		goto out;
	if (r->store)
		backup_store_attach(r, codec);
	else if (enc)
		backup_enc_attach(enc, codec);
	else
		reuse = open_reuse(r, codec);
	trust = open_trust(r, codec, sink, reuse, enc);
	cb_progress_start(&r->progress, !r->opts.quiet, "archive", archive_total(r));
	cb_codec_set_progress(codec, &r->progress);
	if (scan)
		cb_codec_set_tap(codec, cb_tarscan_feed, scan);
	ret = cb_archive_write_grafted(root.tree ? &root : NULL, grafts, r->n_mps, extras, (size_t)n_extras,
				       codec, r->log, &as);
	cb_progress_end(&r->progress);
	if (ret < 0 || snapshots_intact(r) < 0 || cb_codec_finish(codec) < 0 ||
	    cb_sink_prepare(sink) < 0) {
		ret = -1;
		goto out;
	}
	idx_path = r->store ? backup_store_idx_path(r) : cb_xasprintf("%s.idx", r->archive_path);
	if (scan)
		write_catalog(r, idx_path, scan, codec, sink, idx_hex);
	if ((r->store ? commit_store(r, idx_path, idx_hex) : commit_file(r, sink, idx_hex)) < 0) {
		ret = -1;
		goto out;
	}
	log_archive_stats(r, &as, codec, sink);
	if (enc && backup_enc_prev(enc))
		log_reuse(r, codec, cb_reuse_name(backup_enc_prev(enc)));
	else
		log_reuse(r, codec, r->store ? cb_store_night_prev(r->night)
				    : reuse ? cb_reuse_name(reuse) : NULL);
	if (cb_sink_resumed_bytes(sink) > 0)
		cb_verbose(r->log, "archive SHA-256: the first %llu bytes (copied unchanged) taken "
			   "from the previous archive's state there, not hashed again",
			   (unsigned long long)cb_sink_resumed_bytes(sink));
	if (cb_sink_copies_fixed(sink) > 0)
		cb_warn(r->log, "%llu units changed in the previous archive while being copied: "
			"written from the bytes read and checked before",
			(unsigned long long)cb_sink_copies_fixed(sink));
	save_trust(r, codec, sink, idx_hex);
	if (enc && finish_enc(r, enc) < 0) {
		ret = -1;
		goto out;
	}
	r->res->archive_seconds = cb_now() - started;
out:
	/* a signal's cleanup removed the snapshots under the walk: the signal,
	 * not the file that vanished next, is the cause */
	if (ret < 0 && r->snaps && cb_interrupted())
		cb_check_interrupt();
	if (ret < 0)
		cb_error_prefix("archive");
	cb_codec_writer_free(codec);
	cb_reuse_free(reuse);
	if (!r->night && !enc)   /* an encrypted archive's: the writer's */
		cb_sink_free(sink);
	backup_enc_free(r, enc);
	cb_trust_map_free(trust);
	backup_store_end_night(r);
	free(idx_path);
	cb_tarscan_free(scan);
	cb_pvect_release(&pc);
	free(grafts);
	return ret;
}
