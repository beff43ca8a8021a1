/*
 * cb_commands: the subcommand table, and the subcommands other than backup
 * (restore, list, prune, verify, probe): each resolves what it needs from
 * the command line and the configuration, runs its module, and returns an
 * exit status. In src/cli/, the top floor: it calls every command's module.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_browse.h"
#include "cb_commands.h"
#include "cb_config.h"
#include "cb_discover.h"
#include "cb_encarchive.h"
#include "cb_exit.h"
#include "cb_job.h"
#include "cb_leftovers.h"
#include "cb_lock.h"
#include "cb_mount.h"
#include "cb_objstore.h"
#include "cb_store.h"
#include "cb_store_ops.h"
#include "cb_list.h"
#include "cb_private.h"
#include "cb_probe.h"
#include "cb_prune.h"
#include "cb_restore.h"
#include "cb_verify.h"

/* A new subcommand is one line here (and its enum cb_command value).
 * probe measures by writing and mount mounts: neither can do a dry run. */
static const struct cb_command_def commands[] = {
	{ "backup",  CB_CMD_BACKUP,  0, -1, 1, 1, cb_job_run },
	{ "restore", CB_CMD_RESTORE, 2,  2, 0, 1, cb_cmd_restore },
	{ "verify",  CB_CMD_VERIFY,  1, -1, 0, 1, cb_cmd_verify },
	{ "list",    CB_CMD_LIST,    0,  1, 1, 1, cb_cmd_list },
	{ "prune",   CB_CMD_PRUNE,   0,  1, 1, 1, cb_cmd_prune },
	{ "probe",   CB_CMD_PROBE,   0,  0, 1, 0, cb_cmd_probe },
	{ "ls",      CB_CMD_LS,      1, -1, 0, 1, cb_cmd_ls },
	{ "index",   CB_CMD_INDEX,   1,  1, 0, 1, cb_cmd_index },
	{ "mount",   CB_CMD_MOUNT,   2,  2, 0, 0, cb_cmd_mount },
	{ "help",    CB_CMD_HELP,    0,  1, 0, 0, cb_cmd_help },
	{ "guests",  CB_CMD_GUESTS,  0,  0, 1, 0, cb_cmd_guests },
	{ "key",     CB_CMD_KEY,     2,  3, 0, 0, cb_cmd_key },
	{ NULL, 0, 0, 0, 0, 0, NULL }
};

const struct cb_command_def *cb_command_find(const char *name)
{
	for (const struct cb_command_def *c = commands; c->name; c++)
		if (!strcmp(c->name, name))
			return c;
	return NULL;
}

const struct cb_command_def *cb_command_get(enum cb_command id)
{
	for (const struct cb_command_def *c = commands; c->name; c++)
		if (c->id == id)
			return c;
	return NULL;
}

int cb_cmd_help(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log)
{
	(void)cfg;
	if (!cli->args.n) {
		cb_cli_usage(stdout);
		return CB_EXIT_OK;
	}
	if (cb_cli_command_usage(stdout, cli->args.v[0]) < 0) {
		cb_err(log, "%s", cb_last_error());
		return CB_EXIT_USAGE;
	}
	return CB_EXIT_OK;
}

/* --quiet from the command line: restore and verify read no configuration. */
static int cli_quiet(const struct cb_cli *cli)
{
	const char *q = cb_cli_get(cli, "quiet");
	struct cb_opts o;
	int quiet;

	cb_opts_init(&o);
	quiet = q && cb_opts_set(&o, "quiet", q, NULL) == 0 && o.quiet;
	cb_opts_release(&o);
	return quiet;
}

/* The archive argument opened (a store's night fetched): 0, or the exit
 * status after saying why not. */
static int open_archive(const struct cb_cli *cli, const char *what, const char *arg,
			struct cb_archive_arg *a, struct cb_log *log)
{
	/* ls reads the catalog alone, restore --path the units of its paths */
	struct cb_store_fetch f = { !strcmp(what, "ls"), NULL, 0, NULL };
	int usage;

	if (!strcmp(what, "restore")) {
		f.paths = cli->paths.v;
		f.n_paths = cli->paths.n;
		/* a whole restore unpacks the night as its units come */
		if (!cli->paths.n && !cli->salvage && !cli->dry_run)
			f.stream = &a->stream;
	}
	if (cb_archive_arg_open(cli, arg, a) == 0 && cb_archive_arg_fetch(a, &f) == 0)
		return 0;
	cb_err(log, "%s of '%s' failed - %s", what, arg, cb_last_error());
	usage = a->usage;
	cb_archive_arg_close(a);
	return usage ? CB_EXIT_USAGE : CB_EXIT_FAILED;
}

/* open_archive, then the decrypted view of an encrypted one (*archive:
 * the file to read, the view's or the archive's own); on failure nothing
 * stays open. */
static int open_readable(const struct cb_cli *cli, const char *what, struct cb_archive_arg *a,
			 const char **archive, struct cb_enc_view **view, struct cb_log *log)
{
	int status = open_archive(cli, what, cli->args.v[0], a, log);

	if (status)
		return status;
	if ((status = cb_enc_cli_open(cli, a->path, log, archive, view)) != CB_EXIT_OK)
		cb_archive_arg_close(a);
	return status;
}

int cb_cmd_restore(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log)
{
	struct cb_archive_arg a;
	int open_rc = open_archive(cli, "restore", cli->args.v[0], &a, log);
	struct cb_restore_opts ro = { .archive = a.path, .destdir = cli->args.v[1],
				      .force = cli->force, .keep_old = cli->keep_old,
				      .paths = cli->paths.v, .n_paths = cli->paths.n,
				      .dry_run = cli->dry_run, .ignore_checksum = cli->ignore_checksum,
				      .salvage = cli->salvage, .progress = !cli_quiet(cli),
				      .map_ids = cli->map_ids };
	struct cb_restore_stats st = { 0 };
	struct cb_enc_view *view;
	const char *format = cb_cli_get(cli, "output-format");
	int failed, status = CB_EXIT_OK;

	(void)cfg;   /* restore reads no configuration (but a STORAGE:NAME's) */
	if (open_rc)
		return open_rc;
	if (ro.map_ids && cb_restore_check_map_ids(ro.map_ids) < 0) {
		cb_err(log, "%s", cb_last_error());
		cb_archive_arg_close(&a);
		return CB_EXIT_USAGE;
	}
	struct cb_enc_view_opts vo = { ro.paths, ro.n_paths, ro.salvage, log, 0 };
	if ((status = cb_enc_cli_open_for(cli, ro.archive, &vo, log, &ro.archive, &view)) != CB_EXIT_OK) {
		cb_archive_arg_close(&a);
		return status;
	}
	if (a.stream) {
		ro.stream = 1;
		ro.stream_fd = cb_store_stream_fd(a.stream);
		ro.stream_size = cb_store_stream_size(a.stream);
	}
	failed = cb_restore_run(&ro, log, &st) < 0;
	/* a stream that ended short says why (the unit), not the decoder */
	if (a.stream && cb_store_stream_finish(a.stream) < 0)
		failed = 1;
	if (failed || st.n_lost) {
		cb_err(log, "restore of '%s' %s - %s", cli->args.v[0], failed ? "failed" : "incomplete",
		       cb_last_error());
		status = CB_EXIT_FAILED;
	}
	ro.archive = cli->args.v[0];
	if (format && !strcmp(format, "json"))
		cb_restore_json(stdout, &ro, &st, failed ? cb_last_error() : NULL);
	cb_restore_stats_release(&st);
	cb_enc_view_free(view);
	cb_archive_arg_close(&a);
	return status;
}

int cb_cmd_ls(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log)
{
	struct cb_archive_arg a;
	struct cb_enc_view *view;
	const char *archive;
	int status = open_readable(cli, "ls", &a, &archive, &view, log);

	(void)cfg;   /* ls reads no configuration (but a STORAGE:NAME's) */
	if (status)
		return status;
	if (cb_ls_run(archive, cli->args.v + 1, cli->args.n - 1, cli->json, stdout, log) < 0) {
		status = CB_EXIT_FAILED;
		if (cb_stdout_gone())
			status = CB_EXIT_PIPE;   /* `| head` had enough: quietly, as tar */
		else
			cb_err(log, "ls of '%s' failed - %s", cli->args.v[0], cb_last_error());
	}
	cb_enc_view_free(view);
	cb_archive_arg_close(&a);
	return status;
}

int cb_cmd_index(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log)
{
	struct cb_archive_arg a;
	int is_store = cb_archive_arg_open(cli, cli->args.v[0], &a) == 0 && a.store;

	(void)cfg;   /* index reads no configuration (but a STORAGE:NAME's) */
	cb_archive_arg_close(&a);
	if (is_store) {
		cb_err(log, "index of '%s' failed - a unit store's night keeps its catalog in its "
		       "manifest (verify checks it)", cli->args.v[0]);
		return CB_EXIT_FAILED;
	}
	if (cb_enc_is_encrypted(cli->args.v[0]))
		return cb_enc_cli_index(cli, cli->args.v[0], log);
	if (cb_index_run(cli->args.v[0], cli->dry_run, log) < 0) {
		cb_err(log, "index of '%s' failed - %s", cli->args.v[0], cb_last_error());
		return CB_EXIT_FAILED;
	}
	return CB_EXIT_OK;
}

int cb_cmd_mount(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log)
{
	struct cb_archive_arg a;
	struct cb_enc_view *view;
	const char *archive;
	int status = open_readable(cli, "mount", &a, &archive, &view, log);

	(void)cfg;   /* mount reads no configuration (but a STORAGE:NAME's) */
	if (status)
		return status;
	/* the daemon returns here at the unmount: the view and a store's
	 * fetched night go with it */
	if (cb_mount_run(archive, cli->args.v[1], log) < 0) {
		cb_err(log, "mount of '%s' failed - %s", cli->args.v[0], cb_last_error());
		status = CB_EXIT_FAILED;
	}
	cb_enc_view_free(view);
	cb_archive_arg_close(&a);
	return status;
}

/* A sealed night the options give no key for, or another: said (exit 2
 * for another key); 1 then, else 0. */
static int verify_sealed(struct cb_archive_arg *a, const char *arg, struct cb_log *log, int *status)
{
	if (cb_store_night_key_check(a->store, a->name) >= 0)
		return 0;
	if (cb_store_key(a->store)) {
		cb_err(log, "verify of '%s' failed - %s", arg, cb_last_error());
		*status = CB_EXIT_USAGE;
	} else {
		cb_info(log, "'%s' is encrypted: its objects' stored digests were checked, its contents "
			"were not checked (no --encryption-key)", arg);
	}
	return 1;
}

/* A store's night: every unit against its digest (a bad one named with
 * the nights it breaks), then the archive they make read whole; STORAGE:
 * alone: every unit of every night. An encrypted archive: its own checks. */
static int verify_one(const struct cb_cli *cli, const char *arg, struct cb_log *log,
		      struct cb_verify_stats *st, int *status)
{
	struct cb_archive_arg a;
	int rc = cb_archive_arg_open(cli, arg, &a);

	if (rc == 0 && a.store)
		rc = cb_store_verify_units(a.store, a.name[0] ? a.name : NULL, log);
	if (rc == 0 && a.store && a.name[0] && verify_sealed(&a, arg, log, status))
		a.name[0] = '\0';   /* its contents cannot be read: not fetched */
	if (rc == 0 && (!a.store || a.name[0]))
		rc = cb_archive_arg_fetch(&a, &(struct cb_store_fetch){ 0, NULL, 0, NULL });
	if (rc == 0 && a.path && cb_enc_is_encrypted(a.path)) {
		int s = cb_enc_cli_verify(cli, a.path, log);

		*status = s > *status ? s : *status;
	} else if (rc == 0 && a.path) {
		/* a store's copy is gone after: no .verified beside it */
		rc = cb_verify_run(a.path, cli->dry_run || a.store, !cli_quiet(cli), log, st);
	}
	cb_archive_arg_close(&a);
	return rc;
}

int cb_cmd_verify(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log)
{
	struct cb_verify_stats st;
	int status = CB_EXIT_OK;

	(void)cfg;   /* verify reads no configuration (but a STORAGE:NAME's) */
	for (size_t i = 0; i < cli->args.n; i++)   /* each archive, whatever the others gave */
		if (verify_one(cli, cli->args.v[i], log, &st, &status) < 0) {
			cb_err(log, "verify of '%s' failed - %s", cli->args.v[i], cb_last_error());
			status = CB_EXIT_FAILED;
		}
	return status;
}

/* The options of guest `id` if the config defines it, else the global view. */
static int resolve_for(const struct cb_cli *cli, const struct cb_config *cfg, const char *id,
		       struct cb_opts *o)
{
	if (id && cb_guest_id_check(id) < 0)
		return -1;
	if (id && cb_config_guest(cfg, id))
		return cb_config_resolve(cfg, id, &cli->kv, o);
	return cb_config_resolve(cfg, NULL, &cli->kv, o);
}

/* The kept staging copies in the tmpdir, each marked as a guest's that is
 * configured (a section, or found on the host as --all finds it) or not:
 * keep-staging auto keeps copies by default, and a removed guest's would
 * hold its room for ever. */
struct kept_set {
	struct cb_kept_copy *v;
	size_t n;
	int *orphan;
	struct cb_strvec dirs;  /* the tmpdirs looked in */
	size_t *dir;            /* the tmpdir each copy is in: an index of dirs */
};

/* Adds tmpdir to dirs unless it is one of them already (by device and
 * inode: one directory may be spelled two ways); a missing one holds no
 * copy and is left out. */
static void kept_add_dir(struct cb_strvec *dirs, const char *tmpdir)
{
	struct stat a, b;

	if (!tmpdir || stat(tmpdir, &a) < 0)
		return;
	for (size_t i = 0; i < dirs->n; i++)
		if (stat(dirs->v[i], &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			return;
	cb_strvec_push(dirs, tmpdir);
}

/* Where kept copies may be: the tmpdir of the view o (the command line's
 * --tmpdir alone, if given); without an ID, also each configured guest's
 * own and each storage's (a guest no longer configured kept its copy in
 * the tmpdir its storage or the global section gave it). */
static void kept_dirs(const struct cb_cli *cli, const struct cb_config *cfg, const struct cb_opts *o,
		      const char *id, struct cb_strvec *dirs)
{
	kept_add_dir(dirs, o->tmpdir);
	if (id)
		return;
	for (size_t i = 0; i + 1 < cli->kv.n; i += 2)
		if (!strcasecmp(cli->kv.v[i], "tmpdir"))
			return;
	for (size_t i = 0; i < cfg->n_sections; i++) {
		const struct cb_config_section *sec = &cfg->sections[i];
		struct cb_opts g;

		if (sec->kind == CB_SECTION_STORAGE) {
			for (size_t j = 0; j < sec->n_entries; j++)
				if (!strcmp(sec->entries[j].key, "tmpdir"))
					kept_add_dir(dirs, sec->entries[j].value);
		} else if (sec->kind != CB_SECTION_GLOBAL && cb_config_resolve(cfg, sec->name, &cli->kv, &g) == 0) {
			kept_add_dir(dirs, g.tmpdir);
			cb_opts_release(&g);
		}
	}
}

static int kept_scan(const struct cb_cli *cli, const struct cb_config *cfg, const struct cb_opts *o,
		     const char *id, struct kept_set *k)
{
	struct cb_found_list found = { 0 };
	const struct cb_found_list *fl = cfg->found;

	memset(k, 0, sizeof(*k));
	kept_dirs(cli, cfg, o, id, &k->dirs);
	for (size_t d = 0; d < k->dirs.n; d++) {
		struct cb_kept_copy *v;
		size_t n;

		if (cb_kept_copies(k->dirs.v[d], id, &v, &n) < 0)
			return -1;
		k->v = cb_xrealloc(k->v, (k->n + n + 1) * sizeof(*k->v));
		k->dir = cb_xrealloc(k->dir, (k->n + n + 1) * sizeof(*k->dir));
		for (size_t i = 0; i < n; i++, k->n++) {
			k->v[k->n] = v[i];
			k->dir[k->n] = d;
		}
		free(v);   /* its copies moved into k->v */
	}
	if (!fl && k->n) {
		cb_discover(&found);
		fl = &found;
	}
	k->orphan = cb_xcalloc(k->n + 1, sizeof(*k->orphan));
	for (size_t i = 0; i < k->n; i++)
		k->orphan[i] = !cb_config_guest(cfg, k->v[i].id) && !cb_found_get(fl, k->v[i].id);
	if (fl == &found)
		cb_found_list_release(&found);
	return 0;
}

static void kept_release(struct kept_set *k)
{
	cb_kept_copies_free(k->v, k->n);
	free(k->orphan);
	free(k->dir);
	cb_strvec_clear(&k->dirs);
}

/* The copies of configured guests (ORPHAN 0) or of the others, under
 * their heading (none when there are none). */
static void list_kept_part(const struct kept_set *k, int orphan, FILE *out)
{
	static const char *const heading[] = {
		"KEPT STAGING COPY (keep-staging)",
		"KEPT STAGING COPY OF A GUEST NO LONGER CONFIGURED (prune --staging removes it)",
	};
	char size[32];
	int shown = 0;

	for (size_t i = 0; i < k->n; i++) {
		if (k->orphan[i] != orphan)
			continue;
		if (!shown++)
			fprintf(out, "\n%-8s %9s %s\n", "ID", "SIZE", heading[orphan]);
		cb_fmt_vzsize(size, sizeof(size), k->v[i].bytes);
		fprintf(out, "%-8s %9s %s\n", k->v[i].id, size, k->v[i].path);
	}
}

/* After the backups: the kept staging copies and the space they take. */
static int list_kept(const struct cb_cli *cli, const struct cb_config *cfg, const struct cb_opts *o,
		     const char *id, FILE *out)
{
	struct kept_set k;

	if (kept_scan(cli, cfg, o, id, &k) < 0) {
		kept_release(&k);
		return -1;
	}
	list_kept_part(&k, 0, out);
	list_kept_part(&k, 1, out);
	kept_release(&k);
	return 0;
}

static void remove_gone(const struct cb_opts *o, const char *id, struct cb_log *log);

/* A dump directory's backups, or a unit store's nights. */
static int list_backups(const struct cb_opts *o, const char *id, int json)
{
	struct cb_objstore *s;
	int rc = cb_objstore_open_for(o, &s);

	if (rc == 0)
		rc = s ? cb_list_store(s, id, json, stdout) : cb_list_run(o->dumpdir, id, json, stdout);
	cb_objstore_close(s);
	return rc;
}

int cb_cmd_list(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log)
{
	const char *id = cli->args.n ? cli->args.v[0] : NULL;
	int json;
	struct cb_opts o;
	int status = CB_EXIT_OK;

	if (resolve_for(cli, cfg, id, &o) < 0) {
		cb_err(log, "%s", cb_last_error());
		return CB_EXIT_USAGE;
	}
	json = o.output_format == CB_OUTPUT_JSON;
	remove_gone(&o, id, log);   /* what another tool's prune left (nothing in a missing dumpdir) */
	/* an S3 storage's nights are in its bucket: no dumpdir needed */
	if (o.storage_type != CB_STORAGE_S3 && access(o.dumpdir, F_OK) < 0) {
		char *origin = cb_config_origin(cfg, id, &cli->kv, "dumpdir");
		cb_err(log, "%s: dumpdir '%s': %s", origin, o.dumpdir, strerror(errno));
		free(origin);
		status = CB_EXIT_USAGE;
	} else if (list_backups(&o, id, json) < 0 || fflush(stdout) != 0) {
		if (cb_stdout_gone()) {
			cb_opts_release(&o);
			return CB_EXIT_PIPE;
		}
		cb_err(log, "%s", cb_last_error());
		status = CB_EXIT_FAILED;
	} else if (!json && list_kept(cli, cfg, &o, id, stdout) < 0) {
		/* the backups are listed; the tmpdir may be root's alone */
		cb_warn(log, "kept staging copies not shown: %s", cb_last_error());
	}
	cb_opts_release(&o);
	return status;
}

/* Prune also removes what killed runs of the guest left, when no run of
 * it holds its locks (on this host or, through the storage, another). */
static void prune_leftovers(const struct cb_opts *g, enum cb_guest_type type, const char *id,
			    struct cb_log *log)
{
	struct cb_lock local = CB_LOCK_INIT, store = CB_LOCK_INIT;

	if (cb_lock_dir_check() < 0 || cb_lock_guest(&local, &store, g->dumpdir, cb_guest_type_name(type), id) != 0) {
		cb_verbose(log, "%s: locked by a running backup: its files are left alone", id);
		return;
	}
	cb_leftovers_remove(g->dumpdir, type, id, NULL, g->dry_run, log);
	cb_lock_release(&store);
	cb_lock_release(&local);
}

/* The side files of archives another tool removed (Proxmox VE's prune
 * leaves cbackup's .sha256, .idx, .verified): of guest ID, or of every
 * guest, those with no archive left included. */
static void remove_gone(const struct cb_opts *o, const char *id, struct cb_log *log)
{
	struct cb_guest_ref *v;
	size_t n = cb_leftovers_guests(o->dumpdir, id, &v);

	for (size_t i = 0; i < n; i++)
		prune_leftovers(o, v[i].type, v[i].id, log);
	cb_leftovers_guests_free(v, n);
}

/* One kept staging copy, under the guest's lock (no run of it is using
 * the copy): 0, 1 if the guest is being backed up, -1. */
static int prune_kept(const struct cb_opts *o, const struct cb_kept_copy *k, const char *tmpdir,
		      struct cb_log *log)
{
	struct cb_lock local = CB_LOCK_INIT;
	char size[32];
	int ret;

	cb_fmt_bytes(size, sizeof(size), k->bytes);
	if (cb_lock_dir_check() < 0)
		return -1;
	if (cb_lock_guest(&local, NULL, o->dumpdir, "ct", k->id) != 0) {
		cb_warn(log, "%s: being backed up: its staging copy is left alone", k->id);
		return 1;
	}
	if (o->dry_run) {
		cb_info(log, "%s: would remove the kept staging copy '%s' (%s)", k->id, k->path, size);
		ret = 0;
	} else {
		ret = cb_stage_dir_purge(tmpdir, k->id);
		if (ret == 0)
			cb_info(log, "%s: removed the kept staging copy '%s' (%s)", k->id, k->path, size);
	}
	cb_lock_release(&local);
	return ret;
}

/* prune --staging [ID] [--all]: the kept staging copies in the tmpdir of
 * guest ID, of every guest (--all), else of the guests no longer configured. */
static int prune_staging(const struct cb_cli *cli, const struct cb_config *cfg, const struct cb_opts *o,
			 const char *id, struct cb_log *log)
{
	struct kept_set k;
	size_t done = 0;
	int status = CB_EXIT_OK;

	if (kept_scan(cli, cfg, o, id, &k) < 0) {
		cb_err(log, "%s", cb_last_error());
		status = CB_EXIT_FAILED;
	}
	for (size_t i = 0; i < k.n; i++) {
		int r;
		if (!id && !cli->all && !k.orphan[i])
			continue;
		done++;
		r = prune_kept(o, &k.v[i], k.dirs.v[k.dir[i]], log);
		if (r < 0)
			cb_err(log, "prune of the staging copy of %s failed - %s", k.v[i].id, cb_last_error());
		if (r != 0)
			status = CB_EXIT_FAILED;
	}
	if (done == 0 && status == CB_EXIT_OK)
		cb_info(log, "no kept staging copy%s%s in '%s'%s", id ? " of " : "", id ? id : "",
			o->tmpdir, id || cli->all || !k.n ? "" : " of a guest no longer configured (--all: "
			"of every guest)");
	kept_release(&k);
	return status;
}

/* A unit store: each guest's keep rules over its nights, then the units
 * no night names any more (store_gc.c says why that is safe). */
static int prune_store(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_objstore *s,
		       const char *id, int dry_run, struct cb_log *log)
{
	struct cb_catalog cat;
	int status = CB_EXIT_OK;

	if (cb_store_catalog(s, id, 1, &cat) < 0) {
		cb_err(log, "%s", cb_last_error());
		return CB_EXIT_FAILED;
	}
	for (size_t i = 0; i < cat.n; i++) {
		const struct cb_backup_file *f = &cat.files[i];
		struct cb_opts g;
		unsigned removed = 0;

		if (i > 0 && !strcmp(f->id, f[-1].id) && f->type == f[-1].type)
			continue;   /* one pass per guest */
		if (resolve_for(cli, cfg, f->id, &g) < 0 ||
		    cb_prune_store_guest(s, g.dumpdir, f->type, f->id, g.prune_backups, NULL, dry_run, log,
					 &removed) < 0) {
			cb_err(log, "prune of %s failed - %s", f->id, cb_last_error());
			status = CB_EXIT_FAILED;
		} else if (!dry_run) {
			cb_info(log, "%s: pruned %u backup(s)", f->id, removed);
		}
		cb_opts_release(&g);
	}
	cb_catalog_release(&cat);
	if (cb_store_gc(s, dry_run, log) < 0) {
		cb_err(log, "garbage collection of storage '%s' failed - %s", s->label, cb_last_error());
		status = CB_EXIT_FAILED;
	}
	return status;
}

int cb_cmd_prune(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log)
{
	const char *id = cli->args.n ? cli->args.v[0] : NULL;
	struct cb_objstore *store;
	struct cb_catalog cat;
	struct cb_opts o;
	int status = CB_EXIT_OK;

	if (resolve_for(cli, cfg, id, &o) < 0) {
		cb_err(log, "%s", cb_last_error());
		return CB_EXIT_USAGE;
	}
	if (o.prune_staging) {
		status = prune_staging(cli, cfg, &o, id, log);
		cb_opts_release(&o);
		return status;
	}
	if (cb_objstore_open_for(&o, &store) < 0) {
		cb_err(log, "%s", cb_last_error());
		cb_opts_release(&o);
		return CB_EXIT_USAGE;
	}
	if (store) {
		status = prune_store(cli, cfg, store, id, o.dry_run, log);
		cb_objstore_close(store);
		cb_opts_release(&o);
		return status;
	}
	remove_gone(&o, id, log);
	if (cb_catalog_scan(&cat, o.dumpdir, id) < 0) {
		cb_opts_release(&o);
		cb_err(log, "%s", cb_last_error());
		return CB_EXIT_USAGE;
	}
	for (size_t i = 0; i < cat.n; i++) {
		struct cb_opts g;
		unsigned removed = 0;
		if (i > 0 && !strcmp(cat.files[i].id, cat.files[i - 1].id) && cat.files[i].type == cat.files[i - 1].type)
			continue;   /* one pass per guest */
		if (resolve_for(cli, cfg, cat.files[i].id, &g) < 0) {
			cb_err(log, "prune of %s failed - %s", cat.files[i].id, cb_last_error());
			status = CB_EXIT_FAILED;
			cb_opts_release(&g);
			continue;
		}
		prune_leftovers(&g, cat.files[i].type, cat.files[i].id, log);
		if (cb_prune_guest(g.dumpdir, cat.files[i].type, cat.files[i].id, g.prune_backups, NULL,
				   g.dry_run, log, &removed) < 0) {
			cb_err(log, "prune of %s failed - %s", cat.files[i].id, cb_last_error());
			status = CB_EXIT_FAILED;
		} else if (!g.dry_run) {
			cb_info(log, "%s: pruned %u backup(s)", cat.files[i].id, removed);
		}
		cb_opts_release(&g);
	}
	cb_catalog_release(&cat);
	cb_opts_release(&o);
	return status;
}

int cb_cmd_probe(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log)
{
	struct cb_opts o;
	int status = CB_EXIT_OK;

	if (resolve_for(cli, cfg, NULL, &o) < 0) {
		cb_err(log, "%s", cb_last_error());
		return CB_EXIT_USAGE;
	}
	if (cb_probe_run(&o, log) < 0) {
		cb_err(log, "probe failed - %s", cb_last_error());
		status = CB_EXIT_FAILED;
	}
	cb_opts_release(&o);
	return status;
}
