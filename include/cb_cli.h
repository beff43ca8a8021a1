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
#include "cb_request.h"

/* Returns 0, or -1 with a usage message (exit status 2). */
int cb_cli_parse(struct cb_cli *cli, int argc, char **argv);
void cb_cli_usage(FILE *out);
/* `cbackup help NAME`, `cbackup NAME --help`: that command's usage and
 * options, wrapped to the terminal. -1 (error set, with a suggestion) for
 * an unknown NAME. */
int cb_cli_command_usage(FILE *out, const char *name);

#endif
