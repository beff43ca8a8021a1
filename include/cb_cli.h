/*
 * cb_cli: argv -> subcommand, positional arguments and option overrides.
 *
 * Backup options are not listed here: every key of cb_opt_table that may
 * appear on the command line is accepted as --KEY VALUE or --KEY=VALUE
 * (boolean keys also as a bare --KEY), validated with cb_opts_set() and
 * kept as key/value pairs for cb_config_resolve(), so the command line and
 * the config file share one setter and one precedence rule.
 */
#ifndef CB_CLI_H
#define CB_CLI_H

#include <stdio.h>
#include "cb_util.h"

enum cb_command { CB_CMD_BACKUP, CB_CMD_RESTORE, CB_CMD_VERIFY, CB_CMD_LIST, CB_CMD_PRUNE,
		  CB_CMD_PROBE, CB_CMD_LS, CB_CMD_INDEX, CB_CMD_MOUNT, CB_CMD_HELP,
		  CB_CMD_GUESTS };

struct cb_cli {
	enum cb_command command;
	struct cb_strvec args;        /* positional: guest IDs, or ARCHIVE DESTDIR */
	struct cb_strvec kv;          /* alternating key, value */
	char *config_path;            /* --config FILE */
	int all;                      /* --all */
	struct cb_strvec exclude_ids; /* --exclude ID,... */
	int force;                    /* restore --force */
	int ignore_checksum;          /* restore --ignore-checksum */
	int keep_old;                 /* restore --keep-old */
	int salvage;                  /* restore --salvage */
	struct cb_strvec paths;       /* restore --path P (repeatable) */
	int json;                     /* ls --json */
	int dry_run;                  /* --dry-run (also in kv, for the commands with a config) */
	int help, version;
	int command_given;            /* the command word was on the line (not implied backup) */
	char *cmdline;                /* "cbackup 101 --mode suspend" for the log */
};

/* Returns 0, or -1 with a usage message (exit status 2). */
int cb_cli_parse(struct cb_cli *cli, int argc, char **argv);
void cb_cli_release(struct cb_cli *cli);
/* The value the command line gave for KEY (last one), or NULL. */
const char *cb_cli_get(const struct cb_cli *cli, const char *key);
void cb_cli_usage(FILE *out);
/* `cbackup help NAME`, `cbackup NAME --help`: that command's usage and
 * options, wrapped to the terminal. -1 (error set, with a suggestion) for
 * an unknown NAME. */
int cb_cli_command_usage(FILE *out, const char *name);
/* "unknown command 'NAME' (did you mean 'prune'?)" as the error; -1. */
int cb_cli_unknown_command(const char *name);

#endif
