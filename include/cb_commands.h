/*
 * cb_commands: subcommands other than backup. Each returns an exit status
 * (enum cb_exit) after reporting its error once.
 */
#ifndef CB_COMMANDS_H
#define CB_COMMANDS_H

#include "cb_catalog.h"
#include "cb_cli.h"
#include "cb_config.h"
#include "cb_log.h"

int cb_cmd_restore(const struct cb_cli *cli, struct cb_log *log);
int cb_cmd_verify(const struct cb_cli *cli, struct cb_log *log);
int cb_cmd_list(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);
int cb_cmd_prune(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);
int cb_cmd_probe(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);

#endif
