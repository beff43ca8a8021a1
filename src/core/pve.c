/* cb_pve: Proxmox storages from storage.cfg. See include/cb_pve.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cb_pve.h"
#include "cb_util.h"

/* storage types whose PATH is a mounted file system with a dump/ */
static const char *const file_types[] = {
	"dir", "nfs", "cifs", "cephfs", "glusterfs", "btrfs", NULL
};

const char *cb_pve_dir(void)
{
	const char *d = getenv("CBACKUP_PVE_DIR");

	return d && *d ? d : "/etc/pve";
}

struct stanza {
	char type[64], name[256], path[4096], content[512], pool[512], mountpoint[4096];
	char vgname[256];
	int line;
};

static int is_file_type(const char *type)
{
	for (int i = 0; file_types[i]; i++)
		if (!strcmp(type, file_types[i]))
			return 1;
	return 0;
}

/* "TYPE: NAME" at column 0 starts a stanza; "\tkey value" lines follow. */
static int find_stanza(FILE *f, const char *want, struct stanza *st)
{
	char line[4096];
	int lineno = 0, in = 0;

	while (fgets(line, sizeof(line), f)) {
		char *k, *v;
		lineno++;
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] && line[0] != ' ' && line[0] != '\t' && line[0] != '#') {
			if (in)
				return 1;
			memset(st, 0, sizeof(*st));
			in = sscanf(line, "%63[^: ]: %255s", st->type, st->name) == 2 &&
			     !strcmp(st->name, want);
			st->line = lineno;
			continue;
		}
		if (!in)
			continue;
		k = line + strspn(line, " \t");
		v = k + strcspn(k, " \t");
		if (*v)
			*v++ = '\0';
		v += strspn(v, " \t");
		if (!strcmp(k, "path"))
			snprintf(st->path, sizeof(st->path), "%s", v);
		else if (!strcmp(k, "content"))
			snprintf(st->content, sizeof(st->content), "%s", v);
		else if (!strcmp(k, "pool"))
			snprintf(st->pool, sizeof(st->pool), "%s", v);
		else if (!strcmp(k, "mountpoint"))
			snprintf(st->mountpoint, sizeof(st->mountpoint), "%s", v);
		else if (!strcmp(k, "vgname"))
			snprintf(st->vgname, sizeof(st->vgname), "%s", v);
	}
	return in;
}

static int has_backup_content(const char *content)
{
	char copy[512], *save = NULL;

	snprintf(copy, sizeof(copy), "%s", content);
	for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
		if (!strcmp(t, "backup"))
			return 1;
	return 0;
}

/* Network storages PVE mounts at /mnt/pve/NAME when no path is given. */
static void default_path(struct stanza *st)
{
	if (!st->path[0] && strcmp(st->type, "dir") && strcmp(st->type, "btrfs"))
		snprintf(st->path, sizeof(st->path), "/mnt/pve/%s", st->name);
}

static int stanza_dumpdir(const char *cfg, const struct stanza *st, char **dumpdir)
{
	if (!strcmp(st->type, "pbs"))
		return cb_error("storage '%s' (%s:%d) is a Proxmox Backup Server: cbackup writes "
				"archive files, not PBS chunks; set dumpdir = DIR (or --dumpdir)",
				st->name, cfg, st->line);
	if (!is_file_type(st->type))
		return cb_error("storage '%s' (%s:%d) is of type '%s', which has no directory for "
				"backup files; set dumpdir = DIR (or --dumpdir)", st->name, cfg,
				st->line, st->type);
	if (!has_backup_content(st->content))
		return cb_error("storage '%s' (%s:%d) does not hold backups (content %s): add "
				"'backup' to its content, or set dumpdir = DIR", st->name, cfg, st->line,
				st->content[0] ? st->content : "not set");
	if (!st->path[0])
		return cb_error("storage '%s' (%s:%d) has no path; set dumpdir = DIR", st->name, cfg,
				st->line);
	*dumpdir = cb_xasprintf("%s/dump", st->path);
	return 0;
}

int cb_pve_storage_dumpdir(const char *name, char **dumpdir)
{
	char *cfg = cb_xasprintf("%s/storage.cfg", cb_pve_dir());
	FILE *f = fopen(cfg, "re");
	struct stanza st;
	int ret;

	*dumpdir = NULL;
	if (!f) {
		ret = errno == ENOENT ? 1 : cb_error_errno("cannot read '%s'", cfg);
		free(cfg);
		return ret;
	}
	if (find_stanza(f, name, &st)) {
		default_path(&st);
		ret = stanza_dumpdir(cfg, &st, dumpdir);
	} else {
		ret = cb_error("storage '%s' is defined neither in a [storage %s] section nor in '%s'; "
			       "set dumpdir = DIR (or --dumpdir)", name, name, cfg);
	}
	fclose(f);
	free(cfg);
	return ret;
}

/* STORE's stanza from storage.cfg: 1 found, 0 not there, -1 unreadable
 * (the error set); *cfg_out the file's name (malloc'ed). */
static int load_stanza(const char *store, struct stanza *st, char **cfg_out)
{
	char *cfg = cb_xasprintf("%s/storage.cfg", cb_pve_dir());
	FILE *f = fopen(cfg, "re");
	int found;

	*cfg_out = cfg;
	if (!f)
		return cb_error_errno("cannot read '%s'", cfg);
	found = find_stanza(f, store, st);
	fclose(f);
	if (found)
		default_path(st);
	return found;
}

/* A block storage's volume: the device node Proxmox's plugin uses for it
 * (LVM and LVM-thin /dev/VG/LV, a ZFS zvol, a kernel-mapped rbd image);
 * cb_ct_volume reaches what it holds. */
static int block_volume(const char *cfg, const struct stanza *st, const char *volname,
			char **path)
{
	if ((!strcmp(st->type, "lvmthin") || !strcmp(st->type, "lvm")) && st->vgname[0])
		*path = cb_xasprintf("/dev/%s/%s", st->vgname, volname);
	else if (!strcmp(st->type, "zfspool") && st->pool[0])
		*path = cb_xasprintf("/dev/zvol/%s/%s", st->pool, volname);
	else if (!strcmp(st->type, "rbd"))
		*path = cb_xasprintf("/dev/rbd/%s/%s", st->pool[0] ? st->pool : "rbd", volname);
	else
		return cb_error("storage '%s' (%s:%d) of type '%s': cbackup does not know where it "
				"keeps '%s'", st->name, cfg, st->line, st->type, volname);
	return 0;
}

/* A volume of a storage that keeps it as a file or directory: where. */
static int stanza_volume(const char *cfg, const struct stanza *st, const char *volname,
			 char **path)
{
	const char *base = st->mountpoint[0] ? st->mountpoint : NULL;
	char *pool = NULL;

	if (is_file_type(st->type)) {
		if (!st->path[0])
			return cb_error("storage '%s' (%s:%d) has no path", st->name, cfg, st->line);
		/* images are "VMID/NAME" under PATH/images */
		*path = cb_xasprintf("%s/images/%s", st->path, volname);
		return 0;
	}
	if (!strcmp(st->type, "zfspool") && !strncmp(volname, "subvol-", 7)) {
		/* a container's ZFS dataset, mounted at its pool's mountpoint */
		if (!base)
			base = pool = cb_xasprintf("/%s", st->pool);
		*path = cb_xasprintf("%s/%s", base, volname);
		free(pool);
		return 0;
	}
	return block_volume(cfg, st, volname, path);
}

int cb_pve_volume_path(const char *volid, char **path)
{
	char store[256], *cfg = NULL;
	const char *colon = strchr(volid, ':');
	struct stanza st;
	int r;

	*path = NULL;
	if (!colon || colon == volid || (size_t)(colon - volid) >= sizeof(store) || !colon[1] ||
	    strstr(colon + 1, ".."))
		return cb_error("'%s' is not a volume STORAGE:NAME", volid);
	memcpy(store, volid, (size_t)(colon - volid));
	store[colon - volid] = '\0';
	r = load_stanza(store, &st, &cfg);
	if (r == 0)
		r = cb_error("storage '%s' is not defined in '%s'", store, cfg);
	else if (r == 1)
		r = stanza_volume(cfg, &st, colon + 1, path);
	free(cfg);
	return r < 0 ? -1 : 0;
}
