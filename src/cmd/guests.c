/*
 * cbackup guests: what --all would back up, read-only. Every guest of the
 * configuration and every guest found on the host (cb_discover): where it
 * comes from, its mode, whether it runs (a stopped one is backed up as it
 * is, without a freeze), what of it is left out, or why it is skipped or
 * cannot be backed up. Exit 2 when one cannot (its configuration is wrong),
 * as the backup would.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cb_commands.h"
#include "cb_discover.h"
#include "cb_exit.h"
#include "cb_guest.h"
#include "cb_job.h"
#include "cb_pve.h"

static const char *kind(int is_vm)
{
	return is_vm ? "VM" : "CT";
}

static void print_what(const struct cb_opts *o, FILE *out)
{
	if (o->root)
		fprintf(out, "  root '%s'\n", o->root);
	for (size_t i = 0; i < o->mps.n; i++)
		fprintf(out, "  mount point '%s'\n", o->mps.v[i]);
	for (size_t i = 0; i < o->disks.n; i++)
		fprintf(out, "  disk '%s'\n", o->disks.v[i]);
	if (o->freeze_cgroup)
		fprintf(out, "  freeze cgroup '%s'\n", o->freeze_cgroup);
	if (o->qmp)
		fprintf(out, "  qmp '%s'\n", o->qmp);
}

/* One guest; 1 when it cannot be backed up. */
static int print_guest(const struct cb_cli *cli, const struct cb_config *cfg, const char *id,
		       FILE *out)
{
	const struct cb_found *f = cb_found_get(cfg->found, id);
	const struct cb_config_section *sec = cb_config_guest(cfg, id);
	struct cb_opts o;
	char why[512];
	int running, bad = 0;

	if (f && f->skip && !sec) {
		fprintf(out, "%s %s: skipped - %s\n", kind(f->is_vm), id, f->skip);
		return 0;
	}
	if (cb_config_resolve(cfg, id, &cli->kv, &o) < 0) {
		fprintf(out, "%s %s: ERROR: %s\n", kind(sec ? sec->kind == CB_SECTION_VM : f->is_vm), id,
			cb_last_error());
		return 1;
	}
	if (cb_job_check_guest(cli, cfg, &o) < 0) {
		fprintf(out, "%s %s: ERROR: %s\n", kind(o.type == CB_GUEST_VM), id, cb_last_error());
		bad = 1;
	} else {
		running = cb_guest_status(&o, why, sizeof(why));
		fprintf(out, "%s %s: backed up, mode %s, %s%s%s%s\n", kind(o.type == CB_GUEST_VM), id,
			cb_mode_name(o.mode), running ? "running" : "stopped", running ? "" : " (",
			running ? "" : why, running ? "" : "): as it is, without a freeze");
	}
	if (f)
		fprintf(out, "  found in '%s'\n", f->file);
	if (sec)
		fprintf(out, "  section [%s %s] %s:%d%s\n", sec->kind == CB_SECTION_VM ? "vm" : "ct", id,
			cfg->path, sec->line, f ? " overrides what was found" : "");
	print_what(&o, out);
	for (size_t i = 0; f && i < f->notes.n; i++)
		fprintf(out, "  not backed up: %s\n", f->notes.v[i]);
	cb_opts_release(&o);
	return bad;
}

int cb_cmd_guests(const struct cb_cli *cli, const struct cb_config *cfg_loaded, struct cb_log *log)
{
	struct cb_found_list found;
	struct cb_config cfg = *cfg_loaded;
	struct cb_strvec ids = CB_STRVEC_INIT;
	int bad = 0;

	cb_discover(&found);
	cfg.found = &found;
	for (size_t i = 0; i < found.warnings.n; i++)
		cb_warn(log, "guest discovery: %s", found.warnings.v[i]);
	cb_config_guest_ids(&cfg, &ids);
	for (size_t i = 0; i < found.n; i++)   /* the skipped ones too, saying why */
		if (found.v[i].skip && !cb_config_guest(&cfg, found.v[i].id))
			cb_strvec_push(&ids, found.v[i].id);
	if (!ids.n)
		printf("no guests: none defined in %s, none found in %s, %s/lxc, %s/qemu-server\n",
		       cfg.path ? cfg.path : "a configuration file", cb_lxc_dir(), cb_pve_dir(),
		       cb_pve_dir());
	for (size_t i = 0; i < ids.n; i++)
		bad |= print_guest(cli, &cfg, ids.v[i], stdout);
	fflush(stdout);
	cb_strvec_clear(&ids);
	cb_found_list_release(&found);
	return bad ? CB_EXIT_USAGE : CB_EXIT_OK;
}
