/*
 * Archives named STORAGE:NAME on the command line: a night of a unit
 * store (fetched into the private tmpdir, its units checked, for the
 * command to read as any archive), or the file NAME of a classic
 * storage. Anything else is a path.
 */
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include "cb_catalog.h"
#include "cb_commands.h"
#include "cb_objstore.h"
#include "cb_store_ops.h"
#include "cb_util.h"

static int looks_like_backup(const char *name)
{
	enum cb_guest_type type;
	enum cb_compress c;
	time_t when;
	char *id = NULL;
	int yes = cb_catalog_parse_name(name, &type, &id, &when, &c) == 0;

	free(id);
	return yes;
}

/* "STORAGE:NAME" with a STORAGE the configuration has: 1 and its parts;
 * -1 (error set) for an unknown STORAGE before a backup's name. */
static int split_arg(const struct cb_config *cfg, const char *arg, char **storage, char **name)
{
	const char *colon = strchr(arg, ':');
	char *s;

	if (!colon || colon == arg || memchr(arg, '/', (size_t)(colon - arg)) || strchr(colon + 1, '/'))
		return 0;
	s = cb_xasprintf("%.*s", (int)(colon - arg), arg);
	if (!cb_config_storage(cfg, s)) {
		/* a backup's name after it: meant as a storage, not a path */
		int named = looks_like_backup(colon + 1);

		if (named)
			cb_error("no storage '%s' in the configuration ('%s'): STORAGE:NAME names a "
				 "[storage] section", s, cfg->path ? cfg->path : "none read");
		free(s);
		return named ? -1 : 0;
	}
	*storage = s;
	*name = cb_xstrdup(colon + 1);
	return 1;
}

/* The options of storage name, the command line's above them. */
static int resolve_storage(const struct cb_cli *cli, const struct cb_config *cfg, const char *name,
			   struct cb_opts *o)
{
	struct cb_strvec kv = CB_STRVEC_INIT;
	int rc;

	cb_strvec_copy(&kv, &cli->kv);
	cb_strvec_push(&kv, "storage");
	cb_strvec_push(&kv, name);
	rc = cb_config_resolve(cfg, NULL, &kv, o);
	cb_strvec_clear(&kv);
	return rc;
}

static int open_named(const struct cb_cli *cli, const struct cb_config *cfg, const char *storage,
		      struct cb_archive_arg *a)
{
	struct cb_opts o;
	int rc;

	cb_opts_init(&o);
	rc = resolve_storage(cli, cfg, storage, &o);
	if (rc == 0)
		rc = cb_objstore_open_for(&o, &a->store);
	if (rc == 0 && !a->store)
		a->path = cb_xasprintf("%s/%s", o.dumpdir, a->name);
	if (rc == 0 && a->store)
		a->tmpdir = cb_xasprintf("%s/cbackup", o.tmpdir);
	/* a sealed night is opened with the key the options give */
	if (rc == 0 && a->store && cb_store_use_key(a->store, o.encryption_key) < 0) {
		a->usage = 1;
		rc = -1;
	}
	cb_opts_release(&o);
	return rc;
}

int cb_archive_arg_open(const struct cb_cli *cli, const char *arg, struct cb_archive_arg *a)
{
	struct cb_config cfg;
	char *storage = NULL;
	int rc = 0;

	memset(a, 0, sizeof(*a));
	if (!strchr(arg, ':') || access(arg, F_OK) == 0) {
		a->path = cb_xstrdup(arg);
		return 0;
	}
	if (cb_config_load(&cfg, cli->config_path) < 0)
		return -1;
	rc = split_arg(&cfg, arg, &storage, &a->name);
	if (rc == 1)
		rc = open_named(cli, &cfg, storage, a);
	else if (rc == 0)
		a->path = cb_xstrdup(arg);
	cb_config_release(&cfg);
	free(storage);
	return rc;
}

int cb_archive_arg_fetch(struct cb_archive_arg *a, const struct cb_store_fetch *what)
{
	if (!a->store || a->path)
		return 0;
	if (cb_store_night_key_check(a->store, a->name) < 0) {
		a->usage = 1;
		return -1;
	}
	a->path = cb_store_fetch_night(a->store, a->name, a->tmpdir, what);
	a->fetched = a->path != NULL;
	return a->path ? 0 : -1;
}

void cb_archive_arg_close(struct cb_archive_arg *a)
{
	cb_store_stream_free(a->stream);
	if (a->fetched)
		cb_store_drop_night(a->path);
	cb_objstore_close(a->store);
	free(a->path);
	free(a->name);
	free(a->tmpdir);
	memset(a, 0, sizeof(*a));
}
