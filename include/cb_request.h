/*
 * cb_request.h: what the command line asked for, as cb_cli_parse (the
 * front end, src/cli/) hands it to the library: the command, its
 * arguments and the option overrides. Plain data and its accessors
 * (src/core/request.c), so that the job and the commands below the front
 * end can read it.
 */
#ifndef CB_REQUEST_H
#define CB_REQUEST_H

#include "cb_util.h"

enum cb_command { CB_CMD_BACKUP, CB_CMD_RESTORE, CB_CMD_VERIFY, CB_CMD_LIST, CB_CMD_PRUNE,
		  CB_CMD_PROBE, CB_CMD_LS, CB_CMD_INDEX, CB_CMD_MOUNT, CB_CMD_HELP,
		  CB_CMD_GUESTS, CB_CMD_KEY };

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
	char *map_ids;                /* restore --map-ids FILE */
	struct cb_strvec paths;       /* restore --path P (repeatable) */
	int json;                     /* ls --json */
	int dry_run;                  /* --dry-run (also in kv, for the commands with a config) */
	int help, version;
	int command_given;            /* the command word was on the line (not implied backup) */
	char *cmdline;                /* "cbackup 101 --mode suspend" for the log */
};

/* The value the command line gave for KEY (last one), or NULL. */
const char *cb_cli_get(const struct cb_cli *cli, const char *key);
void cb_cli_release(struct cb_cli *cli);
/* Every command's name, NULL-ended (cbackup help lists the same). */
extern const char *const cb_command_names[];
/* "unknown command 'NAME' (did you mean 'prune'?)" as the error; -1. */
int cb_cli_unknown_command(const char *name);

#endif
