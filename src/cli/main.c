/* cbackup: entry point. Parses the command line, loads the configuration,
 * dispatches the subcommand, and is the only place that exits. The top of
 * src/job/, above everything. */
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "cb_cleanup.h"
#include "cb_cli.h"
#include "cb_commands.h"
#include "cb_config.h"
#include "cb_exit.h"
#include "cb_job.h"
#include "cb_log.h"

/* Run the subcommand from cb_commands' table, with the configuration
 * loaded first for those that read it. */
static int run_command(const struct cb_cli *cli, struct cb_log *log)
{
	const struct cb_command_def *c = cb_command_get(cli->command);
	struct cb_config cfg;
	int status;

	/* said first, not as a permission error on /run/cbackup later; a user
	 * backing up trees of their own names a lock directory of theirs */
	if ((c->id == CB_CMD_BACKUP || c->id == CB_CMD_PRUNE) && geteuid() != 0 &&
	    !getenv("CBACKUP_LOCK_DIR")) {
		cb_err(log, "cbackup %s must run as root: it freezes guests, reads every file of "
		       "them and locks in /run/cbackup (for trees of your own, set CBACKUP_LOCK_DIR "
		       "to a directory of yours)", c->name);
		return CB_EXIT_USAGE;
	}
	if (!c->needs_config)
		return c->run(cli, NULL, log);
	if (cb_config_open(&cfg, cli->config_path) < 0) {
		status = cb_job_config_error(cli, &cfg, log);
		cb_config_release(&cfg);
		return status;
	}
	status = c->run(cli, &cfg, log);
	cb_config_release(&cfg);
	return status;
}

int main(int argc, char **argv)
{
	struct cb_cli cli;
	struct cb_log log;
	int status;

	/* libarchive converts names between the locale's charset and the pax
	 * header's UTF-8: under cron's "C" locale every non-ASCII name would
	 * fail that conversion. C.UTF-8 makes it the identity. */
	if (!setlocale(LC_CTYPE, "C.UTF-8"))
		setlocale(LC_CTYPE, "");
	cb_log_init(&log);
	cb_cleanup_install();
	if (cb_cli_parse(&cli, argc, argv) < 0) {
		cb_err(&log, "%s", cb_last_error());
		/* a backup's command line is cron's or a timer's: its mistake
		 * alerts like a configuration error (no config read yet) */
		if (cli.command == CB_CMD_BACKUP)
			cb_log_syslog(LOG_ERR, "Backup job failed - %s", cb_last_error());
		cb_cli_release(&cli);
		return CB_EXIT_USAGE;
	}
	if (cli.help && cli.command_given && cli.command != CB_CMD_HELP)
		cb_cli_command_usage(stdout, cb_command_get(cli.command)->name);
	else if (cli.help)
		cb_cli_usage(stdout);
	else if (cli.version)
		printf("cbackup %s\n", CB_VERSION);
	if (cli.help || cli.version) {
		cb_cli_release(&cli);
		return CB_EXIT_OK;
	}
	status = run_command(&cli, &log);
	cb_cli_release(&cli);
	if (status != CB_EXIT_OK && cb_interrupted())
		status = CB_EXIT_SIGNAL + cb_interrupted();
	else if (status != CB_EXIT_OK && cb_stdout_gone())
		status = CB_EXIT_PIPE;
	return status;
}
