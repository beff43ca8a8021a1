/*
 * cb_job: one backup job: the guest list (IDs, --all, ad hoc), every
 * guest's options resolved before anything is touched, the global lock,
 * the job-level hook phases, and the final status line. In src/job/, the
 * top floor, above the guest backends it checks and the backup it runs.
 *
 * One idea in 630 lines: the job's sequence, from the guest list to the
 * status line; each part is a step of it that reads the same job state.
 */
#include <errno.h>
#include <libgen.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cb_backup.h"
#include "cb_cleanup.h"
#include "cb_discover.h"
#include "cb_exit.h"
#include "cb_ct_volumes.h"
#include "cb_guest.h"
#include "cb_hook.h"
#include "cb_job.h"
#include "cb_jobstatus.h"
#include "cb_lock.h"
#include "cb_objstore.h"
#include "cb_private.h"
#include "cb_notify.h"
#include "cb_pve.h"

/* Default ID of an ad hoc backup: the root directory's base name. */
static char *adhoc_id(const struct cb_opts *o)
{
	char *copy, *base, *id;

	if (!o->root)
		return cb_xstrdup("0");
	copy = cb_xstrdup(o->root);
	base = basename(copy);
	id = cb_xstrdup(*base && strcmp(base, "/") ? base : "0");
	free(copy);
	return id;
}

static int is_listed(const struct cb_strvec *ids, const char *id)
{
	for (size_t i = 0; i < ids->n; i++)
		if (!strcmp(ids->v[i], id))
			return 1;
	return 0;
}

/* The list of guests this job backs up; NULL entry = ad hoc guest. */
static int job_guest_ids(const struct cb_cli *cli, const struct cb_config *cfg,
			 struct cb_strvec *ids, int *adhoc)
{
	*adhoc = cb_cli_get(cli, "root") || cb_cli_get(cli, "disk");
	if (*adhoc) {
		if (cli->all || cli->args.n > 1)
			return cb_error("--root/--disk back up one guest: give at most one ID and no --all");
		return 0;
	}
	/* "cbackup frobnicate": no command of that name and no guest either */
	if (!cli->command_given && cli->args.n && !cb_config_guest(cfg, cli->args.v[0]) &&
	    !cb_found_get(cfg->found, cli->args.v[0]) &&
	    cli->args.v[0][strspn(cli->args.v[0], "0123456789")])
		return cb_cli_unknown_command(cli->args.v[0]);
	/* as vzdump: --exclude without IDs means every guest but those */
	if (cli->all || (!cli->args.n && cli->exclude_ids.n)) {
		if (cli->args.n)
			return cb_error("give guest IDs or --all, not both");
		cb_config_guest_ids(cfg, ids);
		if (!ids->n)
			return cb_error("--all: no guests defined in %s, and none found on this host "
					"(%s, %s)", cfg->path ? cfg->path : "the configuration (no config "
					"file)", cb_lxc_dir(), cb_pve_dir());
		return 0;
	}
	if (!cli->args.n)
		return cb_error("no guest given (give IDs, --all, or --root DIR; see cbackup --help)");
	for (size_t i = 0; i < cli->args.n; i++)   /* each guest once, in the order given */
		if (cb_guest_id_check(cli->args.v[i]) < 0)
			return -1;
	for (size_t i = 0; i < cli->args.n; i++)
		if (!is_listed(ids, cli->args.v[i]))
			cb_strvec_push(ids, cli->args.v[i]);
	return 0;
}

/* Resolve every guest's options first: a configuration error touches nothing. */
static int resolve_all(const struct cb_cli *cli, const struct cb_config *cfg,
		       struct cb_opts **out, size_t *n_out)
{
	struct cb_strvec ids = CB_STRVEC_INIT;
	struct cb_opts *all = NULL;
	size_t n = 0;
	int adhoc, ret = -1;

	if (job_guest_ids(cli, cfg, &ids, &adhoc) < 0)
		goto out;
	if (adhoc) {
		all = cb_xcalloc(1, sizeof(*all));
		n = 1;
		if (cb_config_resolve(cfg, NULL, &cli->kv, &all[0]) < 0 || cb_guest_check_opts(&all[0]) < 0)
			goto out;
		if (!all[0].id)
			all[0].id = cli->args.n ? cb_xstrdup(cli->args.v[0]) : adhoc_id(&all[0]);
		if (cb_guest_id_check(all[0].id) < 0) {
			if (!cli->args.n && !cb_cli_get(cli, "id"))
				cb_error_prefix("the root directory's name is no guest ID (give --id ID)");
			goto out;
		}
		ret = 0;
		goto out;
	}
	all = cb_xcalloc(ids.n, sizeof(*all));
	for (size_t i = 0; i < ids.n; i++) {
		if (is_listed(&cli->exclude_ids, ids.v[i]))
			continue;
		if (cb_config_resolve(cfg, ids.v[i], &cli->kv, &all[n]) < 0) {
			cb_opts_release(&all[n]);
			goto out;
		}
		n++;
		if (cb_guest_check_opts(&all[n - 1]) < 0) {
			cb_error_prefix("guest %s", ids.v[i]);
			goto out;
		}
	}
	ret = 0;
out:
	if (ret < 0) {
		for (size_t i = 0; i < n; i++)
			cb_opts_release(&all[i]);
		free(all);
		all = NULL;
		n = 0;
	}
	*out = all;
	*n_out = n;
	cb_strvec_clear(&ids);
	return ret;
}

static int job_hook(const struct cb_opts *o, const char *phase, struct cb_log *log)
{
	struct cb_hook_env env = { .dumpdir = cb_objstore_dumpdir_for(o), .storeid = o->storage };

	if (o->dry_run)
		return 0;   /* a dry run runs nothing */
	return cb_hook_run(o->script, phase, NULL, NULL, &env, log);
}

/* A job hook failed (the message is set): vzdump's job-abort path. */
static int abort_job(const struct cb_opts *o, struct cb_log *log, struct cb_job_status *js)
{
	cb_jobstatus_set_error(js, cb_last_error());
	cb_err(log, "Backup job failed - %s", cb_last_error());
	cb_log_syslog(LOG_ERR, "Backup job failed - %s", cb_last_error());
	if (job_hook(o, "job-abort", log) < 0)
		cb_warn(log, "%s", cb_last_error());
	return CB_EXIT_FAILED;
}

/* vzdump's global lock: one job at a time on this host, waiting lockwait minutes. */
static int take_global_lock(struct cb_lock *lock, const struct cb_opts *o, struct cb_log *log)
{
	char *path = cb_xasprintf("%s/cbackup.lock", cb_lock_dir());
	int ret = cb_lock_dir_check() < 0 ? -1 : cb_lock_acquire(lock, path, 0);

	if (ret == 1) {
		cb_info(log, "trying to get global lock - waiting...");
		ret = cb_lock_acquire(lock, path, o->lockwait * 60.0);
		if (ret == 0)
			cb_info(log, "got global lock");
	}
	if (ret == 1)
		cb_error("can't acquire lock '%s' - got timeout", path);
	if (ret != 0)
		cb_err(log, "%s", cb_last_error());
	free(path);
	return ret;
}

/* js->guests[i] is guests[i]'s result. A guest whose configuration is
 * wrong (cfg_errors[i]) starts its log and fails with that error, touching
 * nothing else. */
static size_t run_guests(struct cb_opts *guests, size_t n, char **cfg_errors, struct cb_log *log,
			 struct cb_job_status *js, size_t *misconfigured)
{
	size_t failed = 0;

	for (size_t i = 0; i < n; i++) {
		if (cb_interrupted()) {
			cb_err(log, "Backup of VM %s skipped - job interrupted", guests[i].id);
			js->guests[i].error = cb_xstrdup("job interrupted");
			failed++;
			cb_opts_release(&guests[i]);
			continue;
		}
		*misconfigured += cfg_errors[i] != NULL;
		if (cb_backup_guest(&guests[i], cfg_errors[i], log, &js->guests[i]) < 0)
			failed++;
	}
	return failed;
}

/* The end of every job that got past its configuration: JSON on stdout,
 * the json-status file, the mail. Neither of the last two can fail the job. */
static void report_job(struct cb_job_status *js, const struct cb_opts *o, int status,
		       struct cb_log *log)
{
	js->end = time(NULL);
	js->exit_status = status;
	if (o->output_format == CB_OUTPUT_JSON) {
		cb_jobstatus_json(js, stdout);
		fflush(stdout);
	}
	if (o->dry_run)
		return;   /* a dry run writes and sends nothing */
	if (o->json_status && cb_jobstatus_write(js, o->json_status) < 0)
		cb_warn(log, "json-status: %s", cb_last_error());
	if (cb_notify_mail(o, js, log) < 0)
		cb_warn(log, "cannot send the mail report: %s", cb_last_error());
}

/* Usage errors found once every guest is resolved (the message set). */
static int check_job(const struct cb_cli *cli, const struct cb_opts *guests, size_t n,
		     struct cb_log *log)
{
	if (n == 0)
		return cb_error("no guest left to back up (all excluded)");
	if (n > 1 && guests[0].to_stdout)
		return cb_error("--stdout writes the archive of exactly one guest (%zu given)", n);
	if (guests[0].to_stdout && guests[0].output_format == CB_OUTPUT_JSON)
		return cb_error("--stdout and --output-format json both want standard output");
	if (guests[0].to_stdout && isatty(STDOUT_FILENO))
		return cb_error("refusing to write an archive to a terminal (redirect --stdout)");
	if (guests[0].to_stdout && guests[0].encryption_key && strcmp(guests[0].encryption_key, "none"))
		return cb_error("--stdout cannot be encrypted (encryption-key): an encrypted archive "
				"is sealed from its catalog, in a dump directory");
	if (cb_cli_get(cli, "maxfiles"))
		cb_warn(log, "option --maxfiles is deprecated: it means --prune-backups keep-last=%s; "
			"use that instead", cb_cli_get(cli, "maxfiles"));
	return 0;
}

/* KEY's directory must exist: else a configuration error naming where
 * the value comes from. */
static int check_dir_key(const struct cb_cli *cli, const struct cb_config *cfg,
			 const struct cb_opts *o, const char *key, const char *dir)
{
	struct stat st;
	char *origin;
	int r = stat(dir, &st), saved = errno;

	/* a container's root may be a disk image or block device (cb_ct_volume) */
	if (r == 0 && (S_ISDIR(st.st_mode) || (!strcmp(key, "root") && cb_ct_volume_is_image(dir))))
		return 0;
	origin = cb_config_origin(cfg, o->id, &cli->kv, key);
	if (r == 0)
		cb_error("%s: %s '%s' is not a directory%s", origin, key, dir,
			 strcmp(key, "root") ? "" : ", a disk image or a block device");
	else if (saved == ENOENT && !strncmp(dir, "/dev/", 5))
		cb_error("%s: %s '%s' does not exist (a logical volume not active? lvchange -ay "
			 "it)", origin, key, dir);
	else if (saved == ENOENT)
		cb_error("%s: %s '%s' does not exist", origin, key, dir);
	else
		cb_error("%s: %s '%s': %s", origin, key, dir, strerror(saved));
	free(origin);
	return -1;
}

/* A dump directory inside a container is left out of its walk (cb_stage
 * skip); one that IS a volume of it (its root, an mp source) cannot be
 * left out without leaving the volume out: refused, or the next night
 * would archive this night's archive. By device and inode: a bind mount
 * or a symlink naming the same directory is the same. */
static int check_dump_in_guest(const struct cb_cli *cli, const struct cb_config *cfg,
			       const struct cb_opts *o)
{
	struct stat d, v;
	char *src = NULL, *origin;
	int ret = 0;

	if (o->type != CB_GUEST_CT || o->to_stdout || !o->dumpdir || stat(o->dumpdir, &d) < 0)
		return 0;
	for (size_t i = 0; i <= o->mps.n && ret == 0; i++) {
		if (i && cb_mp_split(o->mps.v[i - 1], &src, NULL) < 0)
			continue;
		if (stat(i ? src : o->root, &v) == 0 && v.st_dev == d.st_dev && v.st_ino == d.st_ino) {
			origin = cb_config_origin(cfg, o->id, &cli->kv, "dumpdir");
			ret = cb_error("%s: dump directory '%s' is the guest's %s '%s': its archives would "
				       "be backed up with it the next night (set another dumpdir)",
				       origin, o->dumpdir, i ? "mount point" : "root", i ? src : o->root);
			free(origin);
		}
		free(src);
		src = NULL;
	}
	return ret;
}

/* A cgroup named for the freeze that exists without a freezer is a typo
 * or the wrong hierarchy; one that does not exist is a stopped guest. */
static int check_freezer(const struct cb_cli *cli, const struct cb_config *cfg,
			 const struct cb_opts *o)
{
	struct cb_guest g;
	char why[512], *origin;
	int ret = 0;

	if (!o->freeze_cgroup || !*o->freeze_cgroup || cb_guest_status(o, why, sizeof(why)) == 0)
		return 0;
	if (cb_guest_init(&g, o) < 0) {
		origin = cb_config_origin(cfg, o->id, &cli->kv, "freeze-cgroup");
		ret = cb_error_prefix("%s", origin);
		free(origin);
	}
	cb_guest_release(&g);
	return ret;
}

/* KEY set for guest ID by its section or the command line: what was
 * found for it no longer counts. */
static int key_given(const struct cb_cli *cli, const struct cb_config *cfg, const char *id,
		     const char *key)
{
	const struct cb_config_section *sec = cb_config_guest(cfg, id);

	if (cb_cli_get(cli, key))
		return 1;
	for (size_t i = 0; sec && i < sec->n_entries; i++)
		if (!strcmp(sec->entries[i].key, key))
			return 1;
	return 0;
}

int cb_job_check_guest(const struct cb_cli *cli, const struct cb_config *cfg,
		       const struct cb_opts *o)
{
	const struct cb_found *f = o->id ? cb_found_get(cfg->found, o->id) : NULL;

	if (f && f->error && !key_given(cli, cfg, o->id, f->error_key))
		return cb_error("%s", f->error);
	if (o->type == CB_GUEST_CT && !o->root) {
		char *origin = cb_config_origin(cfg, o->id, &cli->kv, "root");
		cb_error("%s: CT %s has no root directory (set root = DIR)", origin, o->id);
		free(origin);
		return -1;
	}
	if ((o->type == CB_GUEST_CT && check_dir_key(cli, cfg, o, "root", o->root) < 0) ||
	    check_dir_key(cli, cfg, o, "tmpdir", o->tmpdir) < 0 ||
	    (!o->to_stdout && o->storage_type == CB_STORAGE_DIR &&
	     check_dir_key(cli, cfg, o, "dumpdir", o->dumpdir) < 0) ||
	    check_dump_in_guest(cli, cfg, o) < 0 || check_freezer(cli, cfg, o) < 0)
		return -1;
	return 0;
}

/* Every guest's paths, checked before anything is touched: errors[i] is
 * guest i's configuration error or NULL. That guest is not backed up (the
 * others are: one unmounted storage does not cost the whole night) and
 * the job ends with status 2. */
static char **check_paths(const struct cb_cli *cli, const struct cb_config *cfg,
			  const struct cb_opts *guests, size_t n)
{
	char **errors = cb_xcalloc(n + 1, sizeof(*errors));

	for (size_t i = 0; i < n; i++)
		if (cb_job_check_guest(cli, cfg, &guests[i]) < 0)
			errors[i] = cb_xstrdup(cb_last_error());
	cb_job_check_stores(guests, n, errors);
	return errors;
}

/* The hook script runs at job-init, before any guest: one that is not there
 * or cannot run is a configuration error, in --dry-run as in the real run. */
static int check_script(const struct cb_cli *cli, const struct cb_config *cfg,
			const struct cb_opts *o)
{
	struct stat st;
	char *origin;

	if (!o->script || (stat(o->script, &st) == 0 && S_ISREG(st.st_mode) &&
			   access(o->script, X_OK) == 0))
		return 0;
	origin = cb_config_origin(cfg, NULL, &cli->kv, "script");
	if (stat(o->script, &st) < 0)
		cb_error("%s: hook script '%s': %s", origin, o->script, strerror(errno));
	else
		cb_error("%s: hook script '%s' is not an executable file", origin, o->script);
	free(origin);
	return -1;
}

/* The command line's keys that say where a job's result goes: when the
 * other options do not resolve, these and the file's still do. */
static void reporting_kv(const struct cb_strvec *kv, struct cb_strvec *out)
{
	static const char keys[] = " output-format json-status mailto mailnotification sendmail "
				   "mail-timeout dry-run ";
	char word[80];

	for (size_t i = 0; i + 1 < kv->n; i += 2) {
		snprintf(word, sizeof(word), " %s ", kv->v[i]);
		if (strstr(keys, word)) {
			cb_strvec_push(out, kv->v[i]);
			cb_strvec_push(out, kv->v[i + 1]);
		}
	}
}

/* The job's reporting options: all of them, else those of the file and
 * the command line's reporting keys, else the file's alone. */
static int resolve_reporting(const struct cb_cli *cli, const struct cb_config *cfg,
			     struct cb_opts *o)
{
	struct cb_strvec kv = CB_STRVEC_INIT;
	int r;

	if (cb_config_resolve(cfg, NULL, &cli->kv, o) == 0)
		return 0;
	reporting_kv(&cli->kv, &kv);
	r = cb_config_resolve(cfg, NULL, &kv, o);
	if (r < 0)
		r = cb_config_resolve(cfg, NULL, NULL, o);
	if (r < 0) {   /* a file too broken to resolve: the command line's word alone */
		struct cb_config none = { 0 };
		r = cb_config_resolve(&none, NULL, &kv, o);
	}
	cb_strvec_clear(&kv);
	return r;
}

/* The job stopped before its first guest: the error goes wherever the
 * configuration got far enough to say (JSON, json-status, mail), and
 * always to stderr and syslog. */
static int config_failed(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log)
{
	char *msg = cb_xstrdup(cb_last_error());
	struct cb_opts o;
	struct cb_job_status js;

	cb_err(log, "%s", msg);
	cb_log_syslog(LOG_ERR, "Backup job failed - %s", msg);
	if (resolve_reporting(cli, cfg, &o) == 0) {
		cb_jobstatus_init(&js, cli->cmdline);
		cb_jobstatus_set_error(&js, msg);
		report_job(&js, &o, CB_EXIT_USAGE, log);
		cb_jobstatus_release(&js);
		cb_opts_release(&o);
	}
	free(msg);
	return CB_EXIT_USAGE;
}

static int run_job(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);

int cb_job_config_error(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log)
{
	int backup = cli->command == CB_CMD_BACKUP;
	struct cb_job_status js;
	struct cb_opts o;
	char *msg;

	for (size_t i = 0; i < cfg->n_errors; i++)
		cb_err(log, "%s", cfg->errors[i].text);
	msg = cfg->n_errors > 1 ? cb_xasprintf("%zu errors in configuration '%s', the first: %s",
					     cfg->n_errors, cfg->path, cfg->errors[0].text)
				: cb_xstrdup(cfg->n_errors ? cfg->errors[0].text : cb_last_error());
	/* a night's job that cannot read its configuration alerts as a failed one */
	if (backup)
		cb_log_syslog(LOG_ERR, "Backup job failed - %s", msg);
	if (resolve_reporting(cli, cfg, &o) == 0) {
		cb_jobstatus_init(&js, cli->cmdline);
		cb_jobstatus_set_error(&js, msg);
		for (size_t i = 0; i < cfg->n_errors; i++)
			cb_jobstatus_add_config_error(&js, cfg->path, cfg->errors[i].line,
						      cfg->errors[i].key, cfg->errors[i].text);
		if (backup) {
			report_job(&js, &o, CB_EXIT_USAGE, log);
		} else if (o.output_format == CB_OUTPUT_JSON) {
			js.end = time(NULL);
			js.exit_status = CB_EXIT_USAGE;
			cb_jobstatus_json(&js, stdout);
		}
		cb_jobstatus_release(&js);
		cb_opts_release(&o);
	}
	free(msg);
	return CB_EXIT_USAGE;
}

static void free_guests(struct cb_opts *guests, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cb_opts_release(&guests[i]);
	free(guests);
}

/*
 * Every guest's options, then the job-level keys (the job hooks' script,
 * dumpdir, storage; lockwait, quiet, verbose; mailto, json-status): global
 * < its storage < command line, the same whichever guest comes first; a
 * guest's section has no say. -1 (the message set) on a usage or
 * configuration error: nothing is touched.
 */
static int prepare_job(const struct cb_cli *cli, const struct cb_config *cfg,
		       struct cb_opts **guests, size_t *n, struct cb_opts *job_opts,
		       struct cb_log *log)
{
	if (resolve_all(cli, cfg, guests, n) < 0)
		return -1;
	if (cb_config_resolve(cfg, NULL, &cli->kv, job_opts) < 0) {
		free_guests(*guests, *n);
		return -1;
	}
	if (check_job(cli, *guests, *n, log) < 0 || check_script(cli, cfg, job_opts) < 0) {
		free_guests(*guests, *n);
		cb_opts_release(job_opts);
		return -1;
	}
	return 0;
}

/* --all: the guests found that are not backed up, and why; a dry run also
 * says where each guest was found and what of it is left out. */
static void log_found(const struct cb_cli *cli, const struct cb_config *cfg,
		      const struct cb_opts *guests, size_t n, struct cb_log *log)
{
	const struct cb_found_list *fl = cfg->found;

	for (size_t i = 0; i < fl->warnings.n; i++)
		cb_warn(log, "guest discovery: %s", fl->warnings.v[i]);
	for (size_t i = 0; cli->all && i < fl->n; i++)
		if (fl->v[i].skip && !cb_config_guest(cfg, fl->v[i].id))
			cb_info(log, "skipping %s %s - %s", fl->v[i].is_vm ? "VM" : "CT", fl->v[i].id,
				fl->v[i].skip);
	for (size_t i = 0; i < n && guests[i].dry_run; i++) {
		const struct cb_found *f = cb_found_get(fl, guests[i].id);
		const struct cb_config_section *sec = cb_config_guest(cfg, guests[i].id);
		if (f)
			cb_info(log, "dry run: %s %s found in '%s'", f->is_vm ? "VM" : "CT", f->id,
				f->file);
		if (sec)
			cb_info(log, "dry run: %s %s: section [%s %s] %s:%d", guests[i].type ==
				CB_GUEST_VM ? "VM" : "CT", sec->name, guests[i].type == CB_GUEST_VM ?
				"vm" : "ct", sec->name, cfg->path, sec->line);
		for (size_t k = 0; f && k < f->notes.n; k++)
			cb_info(log, "dry run: %s %s: %s", f->is_vm ? "VM" : "CT", f->id, f->notes.v[k]);
	}
}

int cb_job_run(const struct cb_cli *cli, const struct cb_config *cfg_loaded, struct cb_log *log)
{
	struct cb_found_list found;
	struct cb_config with_found = *cfg_loaded;
	const struct cb_config *cfg = &with_found;
	int status;

	cb_discover(&found);
	with_found.found = &found;
	status = run_job(cli, cfg, log);
	cb_found_list_release(&found);
	return status;
}

static int run_job(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log)
{
	struct cb_lock lock = CB_LOCK_INIT;
	struct cb_opts *guests, job_opts;
	struct cb_job_status js;
	size_t n, failed, misconfigured = 0;
	char **cfg_errors = NULL;
	int status, lock_status;

	for (size_t i = 0; i < cfg->warnings.n; i++)
		cb_warn(log, "%s", cfg->warnings.v[i]);
	if (prepare_job(cli, cfg, &guests, &n, &job_opts, log) < 0)
		return config_failed(cli, cfg, log);
	cfg_errors = check_paths(cli, cfg, guests, n);
	log->quiet = job_opts.quiet;
	log->verbose = job_opts.verbose;
	log_found(cli, cfg, guests, n, log);
	cb_jobstatus_init(&js, cli->cmdline);
	for (size_t i = 0; i < n; i++)
		cb_jobstatus_add(&js, guests[i].id, guests[i].type);
	if (job_hook(&job_opts, "job-init", log) < 0) {
		cb_jobstatus_set_error(&js, cb_last_error());
		cb_err(log, "Backup job failed - %s", cb_last_error());
		cb_log_syslog(LOG_ERR, "Backup job failed - %s", cb_last_error());
		status = CB_EXIT_FAILED;
		goto out;
	}
	lock_status = take_global_lock(&lock, &job_opts, log);
	if (lock_status != 0) {
		cb_jobstatus_set_error(&js, cb_last_error());
		cb_log_syslog(LOG_ERR, "Backup job failed - %s", cb_last_error());
		status = lock_status == 1 ? CB_EXIT_LOCKED : CB_EXIT_FAILED;
		goto out;
	}
	cb_info(log, "starting new backup job: %s", cli->cmdline);
	if (job_hook(&job_opts, "job-start", log) < 0) {
		status = abort_job(&job_opts, log, &js);
		goto out;
	}
	failed = run_guests(guests, n, cfg_errors, log, &js, &misconfigured);
	/* as vzdump: job-end runs inside the job, so its failure fails the job */
	if (job_hook(&job_opts, "job-end", log) < 0) {
		status = abort_job(&job_opts, log, &js);
		goto out;
	}
	cb_info(log, "Backup job finished %s", failed ? "with errors" :
		cb_jobstatus_failed(&js) ? "with warnings" : "successfully");
	cb_log_syslog(cb_jobstatus_failed(&js) ? LOG_ERR : LOG_INFO,
		      "Backup job finished %s (%zu of %zu guests failed)", failed ? "with errors" :
		      cb_jobstatus_failed(&js) ? "with warnings" : "successfully", failed, n);
	/* a warning (cb_jobstatus.h) is loud too: the archive may be stale */
	status = misconfigured ? CB_EXIT_USAGE : cb_jobstatus_failed(&js) ? CB_EXIT_FAILED : CB_EXIT_OK;
out:
	cb_lock_release(&lock);   /* the next job need not wait for the mail */
	report_job(&js, &job_opts, status, log);
	/* the staging copies removed in the background since each guest's
	 * result: the job's result is out, the process ends once they are gone */
	for (size_t i = 0; i < js.n; i++)
		if (cb_trash_wait(js.guests[i].trash) < 0)
			cb_warn(log, "%s", cb_last_error());
	cb_jobstatus_release(&js);
	for (size_t i = 0; i < n; i++)
		free(cfg_errors[i]);
	free(cfg_errors);
	free_guests(guests, n);
	cb_opts_release(&job_opts);
	return status;
}
