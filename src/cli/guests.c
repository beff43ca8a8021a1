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
#include "cb_ct_volumes.h"
#include "cb_discover.h"
#include "cb_exit.h"
#include "cb_guest.h"
#include "cb_job.h"
#include "cb_pve.h"

static int excluded(const struct cb_cli *cli, const char *id)
{
	for (size_t i = 0; i < cli->exclude_ids.n; i++)
		if (!strcmp(cli->exclude_ids.v[i], id))
			return 1;
	return 0;
}

static const char *kind(int is_vm)
{
	return is_vm ? "VM" : "CT";
}

/* How a volume that is a disk image or a block device will be reached
 * (cb_ct_volume): through the running container's init, or mounted read-only. */
static void print_reach(const struct cb_opts *o, const char *vol, const char *target, int running,
			FILE *out)
{
	struct cb_ctinit init;

	if (!cb_ct_volume_is_image(vol))
		return;
	if (!running)
		fprintf(out, "    stopped: mounted read-only from '%s' for the copy (ext4/xfs, no "
			"journal replayed; a loop device for an image)\n", vol);
	else if (cb_ct_volume_find_init(o->id, o->freeze_cgroup, &init) == 0)
		fprintf(out, "    running: read through the container, /proc/%d/root%s (its init, "
			"pid %d from %s)\n", (int)init.pid, strcmp(target, "/") ? target : "",
			(int)init.pid, init.source);
	else
		fprintf(out, "    running, but its init is not found: %s\n", cb_last_error());
	if (running)
		cb_ctinit_release(&init);
}

static void print_what(const struct cb_opts *o, int running, FILE *out)
{
	if (o->root)
		fprintf(out, "  root '%s'\n", o->root);
	if (o->root && o->type == CB_GUEST_CT)
		print_reach(o, o->root, "/", running, out);
	for (size_t i = 0; i < o->mps.n; i++) {
		char *src = NULL, *target = NULL;
		fprintf(out, "  mount point '%s'\n", o->mps.v[i]);
		if (cb_mp_split(o->mps.v[i], &src, &target) == 0)
			print_reach(o, src, target + 1, running, out);
		free(src);
		free(target);
	}
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
	int running = 0, bad = 0;

	if (f && f->skip && !sec) {
		fprintf(out, "%s %s: skipped - %s\n", kind(f->is_vm), id, f->skip);
		return 0;
	}
	if (cb_config_resolve(cfg, id, &cli->kv, &o) < 0) {
		fprintf(out, "%s %s: ERROR: %s\n", kind(sec ? sec->kind == CB_SECTION_VM : f->is_vm), id,
			cb_last_error());
		return 1;
	}
	if (cb_job_check_guest(cli, cfg, &o) < 0 ||
	    (!(running = cb_guest_status(&o, why, sizeof(why))) &&
	     cb_guest_check_stopped(&o, why) < 0)) {
		fprintf(out, "%s %s: ERROR: %s\n", kind(o.type == CB_GUEST_VM), id, cb_last_error());
		bad = 1;
	} else {
		fprintf(out, "%s %s: backed up, mode %s, %s%s%s%s\n", kind(o.type == CB_GUEST_VM), id,
			cb_mode_name(o.mode), running ? "running" : "stopped", running ? "" : " (",
			running ? "" : why, running ? "" : "): as it is, without a freeze");
	}
	if (f)
		fprintf(out, "  found in '%s'\n", f->file);
	if (sec)
		fprintf(out, "  section [%s %s] %s:%d%s\n", sec->kind == CB_SECTION_VM ? "vm" : "ct", id,
			cfg->path, sec->line, f ? " overrides what was found" : "");
	print_what(&o, running, out);
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
	for (size_t i = 0; i < ids.n; i++) {
		const struct cb_found *f = cb_found_get(&found, ids.v[i]);
		const struct cb_config_section *sec = cb_config_guest(&cfg, ids.v[i]);
		if (excluded(cli, ids.v[i]))   /* as --all --exclude */
			printf("%s %s: excluded (--exclude)\n", kind(sec ? sec->kind == CB_SECTION_VM
								     : f && f->is_vm), ids.v[i]);
		else
			bad |= print_guest(cli, &cfg, ids.v[i], stdout);
	}
	fflush(stdout);
	cb_strvec_clear(&ids);
	cb_found_list_release(&found);
	return bad ? CB_EXIT_USAGE : CB_EXIT_OK;
}
