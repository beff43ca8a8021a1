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
	int usage;                   /* it failed on its key: exit 2 */
	struct cb_store_stream *stream;   /* a whole night streamed: path has no file */
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
/* `cbackup key create|show FILE` (cli/enccmd.c). */
int cb_cmd_key(const struct cb_cli *cli, const struct cb_config *cfg, struct cb_log *log);

/*
 * An encrypted archive named on the command line (cli/enccmd.c): the
 * key from --encryption-key checked against it, then a decrypted view the
 * command reads in its place (*view: free with cb_enc_view_free). A plain
 * archive: *plain = archive, *view = NULL. 0, or the exit status of the
 * error reported (CB_EXIT_USAGE for a missing or wrong key).
 */
struct cb_enc_view;
/* verify of an encrypted archive: without the key its stored checksums
 * only (and it says so), with it every frame and then the plain checks. */
int cb_enc_cli_verify(const struct cb_cli *cli, const char *archive, struct cb_log *log);
/* index of an encrypted archive: its catalog made again, with the key. */
int cb_enc_cli_index(const struct cb_cli *cli, const char *archive, struct cb_log *log);
int cb_enc_cli_open(const struct cb_cli *cli, const char *archive, struct cb_log *log,
		    const char **plain, struct cb_enc_view **view);
/* The same for a view with options (restore: --path, --salvage). */
struct cb_enc_view_opts;
int cb_enc_cli_open_for(const struct cb_cli *cli, const char *archive,
			const struct cb_enc_view_opts *o, struct cb_log *log, const char **plain,
			struct cb_enc_view **view);

#endif
