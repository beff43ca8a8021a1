/*
 * cb_commands: the subcommands, and the one table (git's commands[]) from
 * which the command line finds them (name, arity) and main runs them. Each
 * returns an exit status (enum cb_exit) after reporting its error once.
 */
#ifndef CB_COMMANDS_H
#define CB_COMMANDS_H

#include "cb_catalog.h"
#include "cb_cli.h"
#include "cb_config.h"
#include "cb_log.h"

/* The signature of every subcommand: cfg is the loaded configuration for
 * the commands that read it (needs_config), NULL for the others. */
typedef int cb_command_fn(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);

struct cb_command_def {
	const char *name;
	enum cb_command id;
	int min_args, max_args;   /* positional arguments; max -1: any number */
	int needs_config;         /* main loads --config before run */
	int dry_run;              /* honours --dry-run (changes nothing); 0: refuses it */
	cb_command_fn *run;
};

/*
 * An ARCHIVE argument (store_args.c): a path, or STORAGE:NAME, a storage
 * of the configuration (--config): its file NAME when it keeps one a
 * night, or night NAME of its unit store, fetched by cb_archive_arg_fetch
 * into the private tmpdir (removed at close).
 */
struct cb_archive_arg {
	char *path;                  /* what the command reads; NULL until fetched */
	struct cb_objstore *store;   /* a unit store's night: the store */
	char *name;                  /* ... and the night */
	char *tmpdir;                /* where it is fetched */
	int fetched;
};
int cb_archive_arg_open(const struct cb_cli *cli, const char *arg, struct cb_archive_arg *a);
/* The night's units what asks for (cb_store_ops.h). */
struct cb_store_fetch;
int cb_archive_arg_fetch(struct cb_archive_arg *a, const struct cb_store_fetch *what);
void cb_archive_arg_close(struct cb_archive_arg *a);

/* The entry of a name or of an id; NULL if there is none. */
const struct cb_command_def *cb_command_find(const char *name);
const struct cb_command_def *cb_command_get(enum cb_command id);

int cb_cmd_restore(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);
int cb_cmd_verify(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);
int cb_cmd_list(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);
int cb_cmd_prune(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);
int cb_cmd_probe(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);
int cb_cmd_ls(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);
int cb_cmd_index(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);
int cb_cmd_help(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);
int cb_cmd_guests(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);
int cb_cmd_mount(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);

#endif
