/* cb_cli: table-driven command line parsing. See include/cb_cli.h.
 * In src/job/ with the command table (cb_commands) it is driven by. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/ioctl.h>
#include <unistd.h>

#include "cb_cli.h"
#include "cb_commands.h"
#include "cb_opts.h"

/* Options that are not config keys. */
enum cli_only { OPT_CONFIG, OPT_ALL, OPT_EXCLUDE, OPT_FORCE, OPT_KEEP_OLD, OPT_PATH, OPT_JSON, OPT_HELP, OPT_VERSION,
	       OPT_IGNORE_CHECKSUM, OPT_SALVAGE, OPT_MAP_IDS, OPT_NONE };
static const struct {
	const char *name;
	enum cli_only id;
	int takes_value;
	const char *help;
	const char *arg;   /* the value's name in the help */
} cli_only_opts[] = {
	{ "config", OPT_CONFIG, 1, "configuration file (default /etc/cbackup.conf)", "FILE" },
	{ "all", OPT_ALL, 0, "back up every guest of the configuration", NULL },
	{ "exclude", OPT_EXCLUDE, 1, "with --all: skip these guest IDs (comma-separated)", "ID,..." },
	{ "force", OPT_FORCE, 0, "restore: replace a non-empty destination", NULL },
	{ "keep-old", OPT_KEEP_OLD, 0, "restore --force: keep the replaced tree as DESTDIR.old-TIME",
	  NULL },
	{ "path", OPT_PATH, 1, "restore: only this file or subtree of the archive (repeatable)",
	  "PATH" },
	{ "ignore-checksum", OPT_IGNORE_CHECKSUM, 0,
	  "restore: go on when the archive does not match its .sha256", NULL },
	{ "salvage", OPT_SALVAGE, 0,
	  "restore: every member outside damaged units; each member lost is named, exit status 1",
	  NULL },
	{ "map-ids", OPT_MAP_IDS, 1, "restore: shift owners, ACLs and capabilities to the host's IDs "
	  "by this unprivileged container's config (its lxc.idmap)", "FILE" },
	{ "json", OPT_JSON, 0, "ls: one JSON object per entry", NULL },
	{ "help", OPT_HELP, 0, "show this help (after a command: that command's)", NULL },
	{ "version", OPT_VERSION, 0, "show the version", NULL },
};
#define N_CLI_ONLY (sizeof(cli_only_opts) / sizeof(cli_only_opts[0]))

/* ---- help: the whole of it, or one command's, wrapped to the terminal ---- */

#define OPT_COL 24   /* where an option's help starts */

static void all_options(FILE *out, int width, int backup_only);

/* Columns of the terminal on stdout, else $COLUMNS, else 80. */
static int term_width(void)
{
	struct winsize ws;
	const char *c = getenv("COLUMNS");

	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
		return ws.ws_col;
	if (c && atoi(c) >= 40)
		return atoi(c);
	return 80;
}

/* "  --NAME ARG" then TEXT, wrapped at word boundaries to WIDTH, the
 * continuation lines indented to OPT_COL. */
static void print_option(FILE *out, const char *name, const char *text, int width)
{
	int col = fprintf(out, "  --%s", name);
	const char *p = text;

	if (col >= OPT_COL - 1) {
		fputc('\n', out);
		col = 0;
	}
	fprintf(out, "%*s", OPT_COL - col, "");
	col = OPT_COL;
	while (*p) {
		size_t w = strcspn(p, " ");
		if (col > OPT_COL && col + 1 + (int)w > width) {
			fprintf(out, "\n%*s", OPT_COL, "");
			col = OPT_COL;
		} else if (col > OPT_COL) {
			fputc(' ', out);
			col++;
		}
		fprintf(out, "%.*s", (int)w, p);
		col += (int)w;
		p += w;
		p += strspn(p, " ");
	}
	fputc('\n', out);
}

static void print_schema_option(FILE *out, const struct cb_opt_schema *s, int width)
{
	char arg[96], *text;

	snprintf(arg, sizeof(arg), "%s %s", s->key,
		 s->type == CB_OPT_BOOL && !s->names ? "[0|1]" : s->accepted);
	text = cb_xasprintf("%s%s", s->help, s->since_issue ? " (not yet implemented)" : "");
	print_option(out, arg, text, width);
	free(text);
}

static void print_cli_only(FILE *out, size_t i, int width)
{
	char arg[64];

	snprintf(arg, sizeof(arg), "%s %s", cli_only_opts[i].name,
		 cli_only_opts[i].arg ? cli_only_opts[i].arg : "");
	print_option(out, cli_only_opts[i].takes_value ? arg : cli_only_opts[i].name,
		     cli_only_opts[i].help, width);
}

/* Each command's usage and the options it reads (NULL: every option). */
static const struct {
	const char *name, *usage;
	const char *const *opts;
} command_help[] = {
	{ "backup", "cbackup [backup] ID... | --all [--exclude ID,...]  [options]\n"
		    "       cbackup backup --root DIR [--id ID] [--type ct]   [options]\n"
		    "       cbackup backup --disk FILE [--disk FILE...] --id ID --type vm [options]\n"
		    "Back up guests: a staging copy, the guest frozen only for the final sync, then a\n"
		    "compressed, seekable archive in dumpdir.", NULL },
	{ "restore", "cbackup restore ARCHIVE DESTDIR [--force] [--path PATH...] [--dry-run]\n"
		     "                [--ignore-checksum] [--salvage] [--map-ids FILE]\n"
		     "                [--output-format json]\n"
		     "Unpack an archive (or some of its paths) into DESTDIR.",
	  (const char *const[]){ "force", "keep-old", "path", "ignore-checksum", "salvage", "map-ids",
				 "output-format", "dry-run", "encryption-key", "config", "tmpdir", "help", NULL } },
	{ "ls", "cbackup ls ARCHIVE [PATH...] [--json]\nList an archive's entries from its catalog.",
	  (const char *const[]){ "json", "encryption-key", "config", "tmpdir", "help", NULL } },
	{ "index", "cbackup index ARCHIVE [--dry-run]\n"
		   "Write the catalog (ARCHIVE.idx) of an archive without one.",
	  (const char *const[]){ "dry-run", "encryption-key", "config", "tmpdir", "help", NULL } },
	{ "key", "cbackup key create FILE\n"
		 "       cbackup key show FILE\n"
		 "       cbackup key protect KEYFILE COPY\n"
		 "       cbackup key recover COPY KEYFILE\n"
		 "Make a new encryption key (mode 0600), show a key's fingerprint, write a\n"
		 "passphrase-protected copy of it (scrypt), or make the key again from one.",
	  (const char *const[]){ "help", NULL } },
	{ "mount", "cbackup mount ARCHIVE MOUNTPOINT\nMount an archive read-only (FUSE).",
	  (const char *const[]){ "encryption-key", "config", "tmpdir", "help", NULL } },
	{ "verify", "cbackup verify ARCHIVE... [--dry-run]\n"
		    "Check archives against their .sha256 and read them whole.",
	  (const char *const[]){ "dry-run", "encryption-key", "config", "tmpdir", "help", NULL } },
	{ "list", "cbackup list [ID] [--storage NAME | --dumpdir DIR]\nList the backups in dumpdir.",
	  (const char *const[]){ "config", "storage", "dumpdir", "tmpdir", "output-format", "help",
				 NULL } },
	{ "prune", "cbackup prune [ID] [--prune-backups keep-last=N,...] [--dry-run]\n"
		   "       cbackup prune [ID] --staging [--all] [--tmpdir DIR] [--dry-run]\n"
		   "Remove old backups by the retention rules (or the kept staging copies: of ID,\n"
		   "of the guests no longer configured, with --all of every guest).",
	  (const char *const[]){ "config", "storage", "dumpdir", "tmpdir", "prune-backups", "maxfiles",
				 "dry-run", "staging", "all", "help", NULL } },
	{ "probe", "cbackup probe [--storage NAME | --dumpdir DIR] [--tmpdir DIR]\n"
		   "Measure each stage (read, compress, checksum, storage write) on this host.",
	  (const char *const[]){ "config", "storage", "dumpdir", "tmpdir", "compress", "zstd",
				 "help", NULL } },
	{ "guests", "cbackup guests [--config FILE]\n"
		    "List the guests --all backs up: those of the configuration and those found on\n"
		    "this host (LXC, Proxmox VE), where from, in which mode, and why one is skipped.",
	  (const char *const[]){ "config", "help", NULL } },
	{ "help", "cbackup help [COMMAND]\nThis help, or one command's.",
	  (const char *const[]){ NULL } },
};
#define N_COMMAND_HELP (sizeof(command_help) / sizeof(command_help[0]))

static void print_named_option(FILE *out, const char *name, int width)
{
	const struct cb_opt_schema *s;

	for (size_t i = 0; i < N_CLI_ONLY; i++)
		if (!strcmp(cli_only_opts[i].name, name)) {
			print_cli_only(out, i, width);
			return;
		}
	s = cb_opt_find(name);
	if (s)
		print_schema_option(out, s, width);
}

int cb_cli_command_usage(FILE *out, const char *name)
{
	int width = term_width();

	for (size_t i = 0; i < N_COMMAND_HELP; i++) {
		if (strcmp(command_help[i].name, name))
			continue;
		fprintf(out, "usage: %s\n", command_help[i].usage);
		if (!command_help[i].opts) {
			fputs("\noptions:\n", out);
			all_options(out, width, 1);
		} else if (command_help[i].opts[0]) {
			fputs("\noptions:\n", out);
			for (const char *const *o = command_help[i].opts; *o; o++)
				print_named_option(out, *o, width);
		}
		fputs("\nSee cbackup(8) (its EXIT STATUS lists the exit codes).\n", out);
		return 0;
	}
	return cb_cli_unknown_command(name);
}

/* Every option, the command line's own first; backup_only: without those
 * of restore, ls and prune alone. */
static void all_options(FILE *out, int width, int backup_only)
{
	static const char not_backup[] = " force keep-old path json staging salvage map-ids ";
	char word[64];

	for (size_t i = 0; i < N_CLI_ONLY; i++) {
		snprintf(word, sizeof(word), " %s ", cli_only_opts[i].name);
		if (!backup_only || !strstr(not_backup, word))
			print_cli_only(out, i, width);
	}
	for (const struct cb_opt_schema *s = cb_opt_table; s->key; s++) {
		snprintf(word, sizeof(word), " %s ", s->key);
		if ((s->where & CB_WHERE_CLI) && (!backup_only || !strstr(not_backup, word)))
			print_schema_option(out, s, width);
	}
}

void cb_cli_usage(FILE *out)
{
	fputs("usage: cbackup [backup] ID... | --all [--exclude ID,...]  [options]\n"
	      "       cbackup backup --root DIR [--id ID] [--type ct]   [options]\n"
	      "       cbackup backup --disk FILE [--disk FILE...] --id ID --type vm [options]\n"
	      "       cbackup restore ARCHIVE DESTDIR [--force [--keep-old]] [--path PATH...] [--dry-run]\n"
	      "                       [--ignore-checksum] [--salvage]\n"
	      "                       [--map-ids FILE]\n"
	      "       cbackup ls ARCHIVE [PATH...] [--json]\n"
	      "       cbackup index ARCHIVE [--dry-run]\n"
	      "       cbackup mount ARCHIVE MOUNTPOINT\n"
	      "       cbackup key create|show FILE | protect KEYFILE COPY | recover COPY KEYFILE\n"
	      "       cbackup verify ARCHIVE... [--dry-run]\n"
	      "       cbackup list [ID] [--storage NAME | --dumpdir DIR]\n"
	      "       cbackup prune [ID] [--prune-backups keep-last=N,...] [--dry-run]\n"
	      "       cbackup prune [ID] --staging [--all] [--tmpdir DIR] [--dry-run]\n"
	      "       cbackup probe [--storage NAME | --dumpdir DIR] [--tmpdir DIR]\n"
	      "       cbackup guests [--config FILE]\n"
	      "       cbackup help [COMMAND]    (or cbackup COMMAND --help)\n\n"
	      "options:\n", out);
	all_options(out, term_width(), 0);
	fputs("\nexit status: 0 all guests backed up, 1 a guest failed, 2 usage or configuration\n"
	      "error, 3 lock not obtained within lockwait, 130/143 SIGINT/SIGTERM, 141 standard\n"
	      "output closed by its reader. See cbackup(8), cbackup.conf(5).\n", out);
}

/* a value for boolean option O (keep-staging also takes auto) */
static int is_bool_word(const struct cb_opt_schema *o, const char *s)
{
	static const char *const words[] = { "0", "1", "yes", "no", "true", "false", "on", "off", NULL };
	for (int i = 0; words[i]; i++)
		if (!strcmp(s, words[i]))
			return 1;
	for (const struct cb_enum_name *n = o->names; n && n->name; n++)
		if (!strcmp(s, n->name))
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
	case OPT_SALVAGE: cli->salvage = 1; break;
	case OPT_MAP_IDS:
		free(cli->map_ids);
		cli->map_ids = cb_xstrdup(value);
		break;
	case OPT_KEEP_OLD: cli->keep_old = 1; break;
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

static enum cli_only find_cli_only(const char *name, int *takes_value)
{
	for (size_t i = 0; i < N_CLI_ONLY; i++)
		if (!strcmp(cli_only_opts[i].name, name)) {
			*takes_value = cli_only_opts[i].takes_value;
			return cli_only_opts[i].id;
		}
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
	co = find_cli_only(name, &takes_value);
	s = co == OPT_NONE ? cb_opt_find(name) : NULL;
	if (co == OPT_NONE && (!s || !(s->where & CB_WHERE_CLI))) {
		cb_error("unknown option '--%s' (see cbackup --help)", name);
		goto out;
	}
	/* (the table is not in the enum's order: the entry's own flag) */
	if (s)
		takes_value = s->type != CB_OPT_BOOL;
	if (!value && s && s->type == CB_OPT_BOOL)
		value = (*i + 1 < argc && is_bool_word(s, argv[*i + 1])) ? argv[++*i] : "1";
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

	if (c) {
		cli->command = c->id;
		cli->command_given = 1;
	}
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
	/* vzdump refuses both: --dumpdir replaces the storage, which one was meant? */
	if (ret == 0 && cb_cli_get(cli, "storage") && cb_cli_get(cli, "dumpdir"))
		ret = cb_error("options --storage and --dumpdir are both given; give one (--dumpdir "
			       "writes to that directory instead of a storage)");
	if (ret == 0 && cli->paths.n && cli->command != CB_CMD_RESTORE)
		ret = cb_error("option '--path' is only for restore (a storage's path is a config key)");
	if (ret == 0 && cli->salvage && cli->command != CB_CMD_RESTORE)
		ret = cb_error("option '--salvage' is only for restore");
	if (ret == 0 && cli->map_ids && cli->command != CB_CMD_RESTORE)
		ret = cb_error("option '--map-ids' is only for restore");
	if (ret == 0 && cli->json && cli->command != CB_CMD_LS)
		ret = cb_error("option '--json' is only for ls (see --output-format)");
	if (ret == 0 && !cli->help && !cli->version)
		ret = check_arity(cli);
	return ret;
}

