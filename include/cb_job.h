/*
 * cb_job: one backup job (DESIGN §1 outer level): resolve every guest's
 * options first (a configuration error touches nothing: exit 2), take the
 * global lock (lockwait; exit 3 on timeout), run the job hooks and each
 * guest in turn (a failed guest does not stop the job), and end with
 * "Backup job finished successfully" or "... with errors".
 */
#ifndef CB_JOB_H
#define CB_JOB_H

#include "cb_request.h"
#include "cb_config.h"
#include "cb_log.h"

/* Returns the exit status (enum cb_exit). The guests found on the host
 * (cb_discover) join those of the configuration. */
int cb_job_run(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);

/* The configuration file has errors (cfg from cb_config_open): each said
 * as an ERROR line; with --output-format json the job's document (status
 * "error", config_errors) on stdout; a backup's also in json-status and
 * the mail, when the file's valid keys (or the command line) say where.
 * Returns CB_EXIT_USAGE. */
int cb_job_config_error(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);

/* One guest's configuration, checked before anything is touched: what
 * was found for it could be resolved (or its section mends it), its root,
 * tmpdir and dumpdir exist, its freeze cgroup has a freezer. 0, or -1 with
 * the error set naming where the value comes from (file:line). */
int cb_job_check_guest(const struct cb_cli *cli, const struct cb_config *cfg,
		       const struct cb_opts *o);

/* The S3 storages of guests[0..n), each opened and checked once (its
 * endpoint answers, accepts the keys, has the bucket) before any guest is
 * touched: a guest whose storage fails gets that error (naming the
 * storage) in errors[i], unless it has one already. */
void cb_job_check_stores(const struct cb_opts *guests, size_t n, char **errors);

#endif
