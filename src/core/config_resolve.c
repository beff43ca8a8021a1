/*
 * Resolving a guest's options from a loaded configuration (cb_config.h):
 * the sections that apply to it (global, storage, guest, what discovery
 * found), in their precedence, then the command line; and where each
 * value came from (cb_config_origin).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <iniparser.h>
#include "cb_config.h"
#include "cb_pve.h"
#include "cb_trust.h"
#include "config_int.h"

/* ---- lookup and resolution ---- */

const struct cb_config_section *cb_config_guest(const struct cb_config *cfg, const char *id)
{
	for (size_t i = 1; i < cfg->n_sections; i++) {
		const struct cb_config_section *s = &cfg->sections[i];
		if ((s->kind == CB_SECTION_CT || s->kind == CB_SECTION_VM) && !strcmp(s->name, id))
			return s;
	}
	return NULL;
}

const struct cb_config_section *cb_config_storage(const struct cb_config *cfg, const char *name)
{
	for (size_t i = 1; i < cfg->n_sections; i++) {
		const struct cb_config_section *s = &cfg->sections[i];
		if (s->kind == CB_SECTION_STORAGE && !strcmp(s->name, name))
			return s;
	}
	return NULL;
}

void cb_config_guest_ids(const struct cb_config *cfg, struct cb_strvec *ids)
{
	for (size_t i = 1; i < cfg->n_sections; i++)
		if (cfg->sections[i].kind == CB_SECTION_CT || cfg->sections[i].kind == CB_SECTION_VM)
			cb_strvec_push(ids, cfg->sections[i].name);
	for (size_t i = 0; cfg->found && i < cfg->found->n; i++) {
		const struct cb_found *f = &cfg->found->v[i];
		if (!f->skip && !cb_config_guest(cfg, f->id))
			cb_strvec_push(ids, f->id);
	}
}

/* The last value of KEY in a section, or NULL. */
static const char *section_get(const struct cb_config_section *sec, const char *key)
{
	const char *v = NULL;

	for (size_t i = 0; sec && i < sec->n_entries; i++)
		if (!strcmp(sec->entries[i].key, key))
			v = sec->entries[i].value;
	return v;
}

static const char *cli_get(const struct cb_strvec *kv, const char *key)
{
	const char *v = NULL;

	for (size_t i = 0; kv && i + 1 < kv->n; i += 2)
		if (!strcasecmp(kv->v[i], key))
			v = kv->v[i + 1];
	return v;
}

static int not_defined(const struct cb_config *cfg, const char *what, const char *name)
{
	if (!cfg->path)
		return cb_error("%s '%s' is not defined (no config file)", what, name);
	return cb_error("%s '%s' is not defined in '%s'", what, name, cfg->path);
}

static int apply_section(const struct cb_config *cfg, const struct cb_config_section *sec,
			 struct cb_opts *out)
{
	for (size_t i = 0; sec && i < sec->n_entries; i++) {
		const struct cb_config_entry *e = &sec->entries[i];
		if (cb_opts_set_at(out, e->key, config_kind_where(sec->kind), e->value, NULL) < 0)
			return cb_error_prefix("%s:%d: key '%s'", cfg->path, e->line, e->key);
	}
	return 0;
}

/* A guest found on the host: its keys, and its type and ID. */
static int apply_found(const struct cb_found *f, struct cb_opts *out)
{
	if (!f)
		return 0;
	out->type = f->is_vm ? CB_GUEST_VM : CB_GUEST_CT;
	free(out->id);
	out->id = cb_xstrdup(f->id);
	for (size_t i = 0; i < f->n_keys; i++)
		if (cb_opts_set(out, f->keys[i].key, f->keys[i].value, NULL) < 0)
			return cb_error_prefix("%s: %s", f->keys[i].src, f->keys[i].key);
	return 0;
}

static int apply_cli(const struct cb_strvec *kv, struct cb_opts *out)
{
	for (size_t i = 0; kv && i + 1 < kv->n; i += 2)
		if (cb_opts_set(out, kv->v[i], kv->v[i + 1], NULL) < 0)
			return cb_error_prefix("option --%s", kv->v[i]);
	return 0;
}

/* KEY's line in SEC (the last one), also under its alias ("path" is a
 * storage's dumpdir): 0 if not there. */
static int key_line(const struct cb_config_section *sec, const char *key)
{
	int line = 0;

	for (size_t i = 0; sec && i < sec->n_entries; i++)
		if (!strcmp(sec->entries[i].key, key) ||
		    (!strcmp(key, "dumpdir") && !strcmp(sec->entries[i].key, "path")))
			line = sec->entries[i].line;
	return line;
}

/* A vzdump.conf's Proxmox storage ("storage: local" with no [storage
 * local] section): its dump directory from /etc/pve/storage.cfg, else an
 * error naming the line and the fix. --dumpdir replaces it. */
static int pve_storage(const struct cb_config *cfg, const struct cb_config_section *guest,
		       const struct cb_strvec *cli_kv, const char *name, char **pve_dumpdir)
{
	char *where;
	int r, line;

	if (cli_get(cli_kv, "dumpdir"))
		return 0;
	r = cb_pve_storage_dumpdir(name, pve_dumpdir);
	if (r == 0)
		return 0;
	if (cli_get(cli_kv, "storage"))
		where = cb_xstrdup("option --storage");
	else if ((line = key_line(guest, "storage")) || (line = key_line(&cfg->sections[0], "storage")))
		where = cb_xasprintf("%s:%d: key 'storage'", cfg->path, line);
	else
		where = cb_xstrdup("storage");
	if (r == 1)
		cb_error("%s: storage '%s' is not defined: no [storage %s] section, and this host has "
			 "no '%s/storage.cfg' (not Proxmox VE); set dumpdir = DIR, or --dumpdir", where,
			 name, name, cb_pve_dir());
	else
		cb_error_prefix("%s", where);
	free(where);
	return -1;
}

/* Which sections take part: the guest's, and the storage named last (or
 * the Proxmox storage's dump directory). */
static int pick_sections(const struct cb_config *cfg, const char *id, const struct cb_strvec *cli_kv,
			 const struct cb_config_section **guest,
			 const struct cb_config_section **storage, char **pve_dumpdir)
{
	const char *name;

	*guest = *storage = NULL;
	*pve_dumpdir = NULL;
	if (id && !(*guest = cfg->n_sections ? cb_config_guest(cfg, id) : NULL) &&
	    !cb_found_get(cfg->found, id))
		return not_defined(cfg, "guest", id);
	name = cli_get(cli_kv, "storage");
	if (!name)
		name = section_get(*guest, "storage");
	if (!name && cfg->n_sections)
		name = section_get(&cfg->sections[0], "storage");
	if (name && !(*storage = cfg->n_sections ? cb_config_storage(cfg, name) : NULL))
		return pve_storage(cfg, *guest, cli_kv, name, pve_dumpdir);
	return 0;
}

char *cb_config_origin(const struct cb_config *cfg, const char *id, const struct cb_strvec *cli_kv,
		       const char *key)
{
	const struct cb_config_section *guest = NULL, *storage = NULL, *secs[3];
	const char *name;
	int line;

	if (cli_get(cli_kv, key))
		return cb_xasprintf("option --%s", key);
	if (id && cfg->n_sections)
		guest = cb_config_guest(cfg, id);
	name = cli_get(cli_kv, "storage");
	if (!name)
		name = section_get(guest, "storage");
	if (!name && cfg->n_sections)
		name = section_get(&cfg->sections[0], "storage");
	if (name && cfg->n_sections)
		storage = cb_config_storage(cfg, name);
	secs[0] = guest;
	secs[1] = storage;
	secs[2] = cfg->n_sections ? &cfg->sections[0] : NULL;
	for (int i = 0; i < 3; i++) {
		const char *src = NULL;
		if ((line = key_line(secs[i], key)))
			return cb_xasprintf("%s:%d: key '%s'", cfg->path, line, key);
		if (i == 0 && id && cb_found_value(cb_found_get(cfg->found, id), key, &src))
			return cb_xstrdup(src);
	}
	if (guest)
		return cb_xasprintf("%s:%d: [%s %s]", cfg->path, guest->line, config_kind_name(guest->kind),
				    guest->name);
	return cb_xasprintf("default %s", key);
}

int cb_config_resolve(const struct cb_config *cfg, const char *id,
		      const struct cb_strvec *cli_kv, struct cb_opts *out)
{
	const struct cb_config_section *guest, *storage;
	char *pve_dumpdir = NULL;

	cb_opts_init(out);
	if (pick_sections(cfg, id, cli_kv, &guest, &storage, &pve_dumpdir) < 0)
		goto fail;
	if (cfg->n_sections && apply_section(cfg, &cfg->sections[0], out) < 0)
		goto fail;
	if (pve_dumpdir) {   /* the storage's place in the precedence */
		cb_opts_set(out, "dumpdir", pve_dumpdir, NULL);
		free(pve_dumpdir);
	}
	if (apply_section(cfg, storage, out) < 0)
		goto fail;
	if (id && apply_found(cb_found_get(cfg->found, id), out) < 0)
		goto fail;
	if (guest) {
		out->type = guest->kind == CB_SECTION_VM ? CB_GUEST_VM : CB_GUEST_CT;
		free(out->id);
		out->id = cb_xstrdup(guest->name);
		if (apply_section(cfg, guest, out) < 0)
			goto fail;
	}
	if (apply_cli(cli_kv, out) < 0)
		goto fail;
	/* --dumpdir replaced the storage: it is no longer where the backup
	 * goes (the hook's STOREID, the dry run's report) */
	if (cli_get(cli_kv, "dumpdir") && !cli_get(cli_kv, "storage")) {
		free(out->storage);
		out->storage = NULL;
		out->storage_type = CB_STORAGE_DIR;
	}
	return 0;
fail:
	cb_opts_release(out);
	return -1;
}
