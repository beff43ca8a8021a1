/*
 * cb_job: one backup job: the guest list (IDs, --all, ad hoc), every
 * guest's options resolved before anything is touched, the global lock,
 * the job-level hook phases, and the final status line.
 */
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cb_backup.h"
#include "cb_cleanup.h"
#include "cb_exit.h"
#include "cb_guest.h"
#include "cb_hook.h"
#include "cb_job.h"
#include "cb_jobstatus.h"
#include "cb_lock.h"
#include "cb_private.h"
#include "cb_notify.h"

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
	/* as vzdump: --exclude without IDs means every guest but those */
	if (cli->all || (!cli->args.n && cli->exclude_ids.n)) {
		if (cli->args.n)
			return cb_error("give guest IDs or --all, not both");
		cb_config_guest_ids(cfg, ids);
		if (!ids->n)
			return cb_error("--all: no guests defined in %s",
					cfg->path ? cfg->path : "the configuration (no config file)");
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
	struct cb_hook_env env = { .dumpdir = o->dumpdir, .storeid = o->storage };

	if (o->dry_run)
		return 0;   /* a dry run runs nothing */
	return cb_hook_run(o->script, phase, NULL, NULL, &env, log);
}

/* A job hook failed (the message is set): vzdump's job-abort path. */
static int abort_job(const struct cb_opts *o, struct cb_log *log, struct cb_job_status *js)
{
	cb_jobstatus_set_error(js, cb_last_error());
	cb_err(log, "Backup job failed - %s", cb_last_error());
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

/* js->guests[i] is guests[i]'s result. */
static size_t run_guests(struct cb_opts *guests, size_t n, struct cb_log *log,
			 struct cb_job_status *js)
{
	size_t failed = 0;

	for (size_t i = 0; i < n; i++) {
		if (cb_interrupted()) {
			cb_err(log, "Backup of %s %s skipped - job interrupted",
			       cb_guest_type_label(guests[i].type), guests[i].id);
			js->guests[i].error = cb_xstrdup("job interrupted");
			failed++;
			cb_opts_release(&guests[i]);
			continue;
		}
		if (cb_backup_guest(&guests[i], log, &js->guests[i]) < 0)
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

/* Usage errors found once every guest is resolved. */
static int check_job(const struct cb_cli *cli, const struct cb_opts *guests, size_t n,
		     struct cb_log *log)
{
	if (n == 0 || (n > 1 && guests[0].to_stdout)) {
		cb_err(log, n ? "--stdout writes the archive of exactly one guest (%zu given)"
			      : "no guest left to back up (all excluded)", n);
		return -1;
	}
	if (guests[0].to_stdout && guests[0].output_format == CB_OUTPUT_JSON) {
		cb_err(log, "--stdout and --output-format json both want standard output");
		return -1;
	}
	if (cb_cli_get(cli, "maxfiles"))
		cb_warn(log, "option --maxfiles is deprecated: it means --prune-backups keep-last=%s; "
			"use that instead", cb_cli_get(cli, "maxfiles"));
	return 0;
}

static void free_guests(struct cb_opts *guests, size_t n)
{
	for (size_t i = 0; i < n; i++)
		cb_opts_release(&guests[i]);
	free(guests);
}

int cb_job_run(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log)
{
	struct cb_lock lock = CB_LOCK_INIT;
	struct cb_opts *guests, job_opts;
	struct cb_job_status js;
	size_t n, failed;
	int status, lock_status;

	if (resolve_all(cli, cfg, &guests, &n) < 0) {
		cb_err(log, "%s", cb_last_error());
		return CB_EXIT_USAGE;
	}
	for (size_t i = 0; i < cfg->warnings.n; i++)
		cb_warn(log, "%s", cfg->warnings.v[i]);
	if (check_job(cli, guests, n, log) < 0) {
		free_guests(guests, n);
		return CB_EXIT_USAGE;
	}
	/* job-level keys (the job hooks' script, dumpdir, storage; lockwait,
	 * quiet, verbose; mailto, json-status): global < its storage <
	 * command line, the same whichever guest comes first; resolved once, a
	 * guest's section has no say. It resolved for the guests already: it
	 * cannot fail here. */
	if (cb_config_resolve(cfg, NULL, &cli->kv, &job_opts) < 0) {
		cb_err(log, "%s", cb_last_error());
		free_guests(guests, n);
		return CB_EXIT_USAGE;
	}
	log->quiet = job_opts.quiet;
	log->verbose = job_opts.verbose;
	cb_jobstatus_init(&js, cli->cmdline);
	for (size_t i = 0; i < n; i++)
		cb_jobstatus_add(&js, guests[i].id, guests[i].type);
	if (job_hook(&job_opts, "job-init", log) < 0) {
		cb_jobstatus_set_error(&js, cb_last_error());
		cb_err(log, "Backup job failed - %s", cb_last_error());
		status = CB_EXIT_FAILED;
		goto out;
	}
	lock_status = take_global_lock(&lock, &job_opts, log);
	if (lock_status != 0) {
		cb_jobstatus_set_error(&js, cb_last_error());
		status = lock_status == 1 ? CB_EXIT_LOCKED : CB_EXIT_FAILED;
		goto out;
	}
	cb_info(log, "starting new backup job: %s", cli->cmdline);
	if (job_hook(&job_opts, "job-start", log) < 0) {
		status = abort_job(&job_opts, log, &js);
		goto out;
	}
	failed = run_guests(guests, n, log, &js);
	/* as vzdump: job-end runs inside the job, so its failure fails the job */
	if (job_hook(&job_opts, "job-end", log) < 0) {
		status = abort_job(&job_opts, log, &js);
		goto out;
	}
	cb_info(log, "Backup job finished %s", failed ? "with errors" :
		cb_jobstatus_failed(&js) ? "with warnings" : "successfully");
	/* a warning (cb_jobstatus.h) is loud too: the archive may be stale */
	status = cb_jobstatus_failed(&js) ? CB_EXIT_FAILED : CB_EXIT_OK;
out:
	cb_lock_release(&lock);   /* the next job need not wait for the mail */
	report_job(&js, &job_opts, status, log);
	/* the staging copies removed in the background since each guest's
	 * result: the job's result is out, the process ends once they are gone */
	for (size_t i = 0; i < js.n; i++)
		if (cb_trash_wait(js.guests[i].trash) < 0)
			cb_warn(log, "%s", cb_last_error());
	cb_jobstatus_release(&js);
	free_guests(guests, n);
	cb_opts_release(&job_opts);
	return status;
}
