/* cb_cli: table-driven command line parsing. See include/cb_cli.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cb_cli.h"
#include "cb_commands.h"
#include "cb_opts.h"

/* Options that are not config keys. */
enum cli_only { OPT_CONFIG, OPT_ALL, OPT_EXCLUDE, OPT_FORCE, OPT_PATH, OPT_JSON, OPT_HELP, OPT_VERSION,
	       OPT_IGNORE_CHECKSUM, OPT_NONE };
static const struct {
	const char *name;
	enum cli_only id;
	int takes_value;
	const char *help;
} cli_only_opts[] = {
	{ "config", OPT_CONFIG, 1, "configuration file (default /etc/cbackup.conf)" },
	{ "all", OPT_ALL, 0, "back up every guest of the configuration" },
	{ "exclude", OPT_EXCLUDE, 1, "with --all: skip these guest IDs (comma-separated)" },
	{ "force", OPT_FORCE, 0, "restore: allow a non-empty destination" },
	{ "path", OPT_PATH, 1, "restore: only this file or subtree of the archive (repeatable)" },
	{ "ignore-checksum", OPT_IGNORE_CHECKSUM, 0,
	  "restore: go on when the archive does not match its .sha256" },
	{ "json", OPT_JSON, 0, "ls: one JSON object per entry" },
	{ "help", OPT_HELP, 0, "show this help" },
	{ "version", OPT_VERSION, 0, "show the version" },
};
#define N_CLI_ONLY (sizeof(cli_only_opts) / sizeof(cli_only_opts[0]))

void cb_cli_usage(FILE *out)
{
	fputs("usage: cbackup [backup] ID... | --all [--exclude ID,...]  [options]\n"
	      "       cbackup backup --root DIR [--id ID] [--type ct]   [options]\n"
	      "       cbackup backup --disk FILE [--disk FILE...] --id ID --type vm [options]\n"
	      "       cbackup restore ARCHIVE DESTDIR [--force] [--path PATH...] [--ignore-checksum]\n"
	      "                       [--dry-run]\n"
	      "       cbackup ls ARCHIVE [PATH...] [--json]\n"
	      "       cbackup index ARCHIVE [--dry-run]\n"
	      "       cbackup mount ARCHIVE MOUNTPOINT\n"
	      "       cbackup verify ARCHIVE [--dry-run]\n"
	      "       cbackup list [ID] [--storage NAME | --dumpdir DIR]\n"
	      "       cbackup prune [ID] [--prune-backups keep-last=N,...] [--dry-run]\n"
	      "       cbackup prune [ID] --staging [--tmpdir DIR] [--dry-run]\n"
	      "       cbackup probe [--storage NAME | --dumpdir DIR] [--tmpdir DIR]\n\n"
	      "options:\n", out);
	for (size_t i = 0; i < N_CLI_ONLY; i++)
		fprintf(out, "  --%-18s %s\n", cli_only_opts[i].name, cli_only_opts[i].help);
	for (const struct cb_opt_schema *s = cb_opt_table; s->key; s++) {
		char arg[64];
		if (!(s->where & CB_WHERE_CLI))
			continue;
		snprintf(arg, sizeof(arg), "%s %s", s->key, s->type == CB_OPT_BOOL ? "[0|1]" : s->accepted);
		fprintf(out, "  --%-18s %s%s\n", arg, s->help, s->since_issue ? " (not yet implemented)" : "");
	}
	fputs("\nexit status: 0 all guests backed up, 1 a guest failed, 2 usage or configuration\n"
	      "error, 3 lock not obtained within lockwait. See cbackup(8), cbackup.conf(5).\n", out);
}

static int is_bool_word(const char *s)
{
	static const char *const words[] = { "0", "1", "yes", "no", "true", "false", "on", "off", NULL };
	for (int i = 0; words[i]; i++)
		if (!strcmp(s, words[i]))
			return 1;
	return 0;
}

static int apply_cli_only(struct cb_cli *cli, enum cli_only id, const char *value)
{
	switch (id) {
	case OPT_CONFIG:
		free(cli->config_path);
		cli->config_path = cb_xstrdup(value);
		break;
	case OPT_ALL: cli->all = 1; break;
	case OPT_FORCE: cli->force = 1; break;
	case OPT_IGNORE_CHECKSUM: cli->ignore_checksum = 1; break;
	case OPT_PATH: cb_strvec_push(&cli->paths, value); break;
	case OPT_JSON: cli->json = 1; break;
	case OPT_HELP: cli->help = 1; break;
	case OPT_VERSION: cli->version = 1; break;
	case OPT_EXCLUDE: {
		char *copy = cb_xstrdup(value), *save = NULL;
		for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
			cb_strvec_push(&cli->exclude_ids, t);
		free(copy);
		break;
	}
	case OPT_NONE: break;
	}
	return 0;
}

static enum cli_only find_cli_only(const char *name)
{
	for (size_t i = 0; i < N_CLI_ONLY; i++)
		if (!strcmp(cli_only_opts[i].name, name))
			return cli_only_opts[i].id;
	return OPT_NONE;
}

/* Parse argv[*i] (an option). Advances *i past a consumed value. */
static int parse_option(struct cb_cli *cli, int argc, char **argv, int *i, struct cb_opts *scratch)
{
	char *name = cb_xstrdup(argv[*i] + 2), *value = strchr(name, '=');
	const struct cb_opt_schema *s;
	enum cli_only co;
	int takes_value, ret = -1;

	if (value)
		*value++ = '\0';
	co = find_cli_only(name);
	s = co == OPT_NONE ? cb_opt_find(name) : NULL;
	if (co == OPT_NONE && (!s || !(s->where & CB_WHERE_CLI))) {
		cb_error("unknown option '--%s' (see cbackup --help)", name);
		goto out;
	}
	takes_value = s ? s->type != CB_OPT_BOOL : cli_only_opts[co].takes_value;
	if (!value && s && s->type == CB_OPT_BOOL)
		value = (*i + 1 < argc && is_bool_word(argv[*i + 1])) ? argv[++*i] : "1";
	if (!value && takes_value) {
		if (*i + 1 >= argc) {
			cb_error("option '--%s' needs a value", name);
			goto out;
		}
		value = argv[++*i];
	}
	if (co != OPT_NONE) {
		ret = apply_cli_only(cli, co, value ? value : "1");
		goto out;
	}
	if (cb_opts_set(scratch, s->key, value, NULL) < 0) {
		cb_error_prefix("option --%s", s->key);
		goto out;
	}
	cb_strvec_push(&cli->kv, s->key);
	cb_strvec_push(&cli->kv, value);
	ret = 0;
out:
	free(name);
	return ret;
}

/* The subcommands and their arity come from cb_commands' table. */
static int find_command(struct cb_cli *cli, const char *word)
{
	const struct cb_command_def *c = cb_command_find(word);

	if (c)
		cli->command = c->id;
	return c != NULL;
}

static int check_arity(const struct cb_cli *cli)
{
	const struct cb_command_def *c = cb_command_get(cli->command);

	if ((int)cli->args.n < c->min_args || (c->max_args >= 0 && (int)cli->args.n > c->max_args))
		return cb_error("wrong number of arguments for '%s' (see cbackup --help)", c->name);
	return 0;
}

static void record_cmdline(struct cb_cli *cli, int argc, char **argv)
{
	size_t len = strlen("cbackup") + 1;
	for (int i = 1; i < argc; i++)
		len += strlen(argv[i]) + 1;
	cli->cmdline = cb_xmalloc(len);
	strcpy(cli->cmdline, "cbackup");
	for (int i = 1; i < argc; i++) {
		strcat(cli->cmdline, " ");
		strcat(cli->cmdline, argv[i]);
	}
}

int cb_cli_parse(struct cb_cli *cli, int argc, char **argv)
{
	struct cb_opts scratch;
	int ret = 0, first = 1;

	memset(cli, 0, sizeof(*cli));
	record_cmdline(cli, argc, argv);
	cb_opts_init(&scratch);
	for (int i = 1; i < argc && ret == 0; i++) {
		if (!strncmp(argv[i], "--", 2) && argv[i][2])
			ret = parse_option(cli, argc, argv, &i, &scratch);
		else if (argv[i][0] == '-' && argv[i][1])
			ret = !strcmp(argv[i], "-h") ? (cli->help = 1, 0)
			      : cb_error("unknown option '%s' (see cbackup --help)", argv[i]);
		else if (!(first && find_command(cli, argv[i])))
			cb_strvec_push(&cli->args, argv[i]);
		first = 0;
	}
	cli->dry_run = scratch.dry_run;
	cb_opts_release(&scratch);
	if (ret == 0 && cli->dry_run && !cb_command_get(cli->command)->dry_run)
		ret = cb_error("'%s' cannot do a dry run: option '--dry-run' refused",
			       cb_command_get(cli->command)->name);
	if (ret == 0 && cb_cli_get(cli, "maxfiles") && cb_cli_get(cli, "prune-backups"))
		ret = cb_error("options --maxfiles and --prune-backups are both given; keep only "
			       "--prune-backups");
	if (ret == 0 && cli->paths.n && cli->command != CB_CMD_RESTORE)
		ret = cb_error("option '--path' is only for restore (a storage's path is a config key)");
	if (ret == 0 && cli->json && cli->command != CB_CMD_LS)
		ret = cb_error("option '--json' is only for ls (see --output-format)");
	if (ret == 0 && !cli->help && !cli->version)
		ret = check_arity(cli);
	return ret;
}

const char *cb_cli_get(const struct cb_cli *cli, const char *key)
{
	const char *v = NULL;
	for (size_t i = 0; i + 1 < cli->kv.n; i += 2)
		if (!strcmp(cli->kv.v[i], key))
			v = cli->kv.v[i + 1];
	return v;
}

void cb_cli_release(struct cb_cli *cli)
{
	cb_strvec_clear(&cli->args);
	cb_strvec_clear(&cli->kv);
	cb_strvec_clear(&cli->exclude_ids);
	cb_strvec_clear(&cli->paths);
	free(cli->config_path);
	free(cli->cmdline);
	memset(cli, 0, sizeof(*cli));
}
