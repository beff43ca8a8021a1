/* cb_discover: Proxmox VE's containers and VMs. See include/cb_discover.h. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cb_opts.h"
#include "cb_pve.h"
#include "discover_int.h"

struct pve_read {
	struct cb_found *f;
	const char *file;
	int lineno;
};

/* "VOLUME,opt=x,..." → the volume (malloc'ed); *opts points at the rest. */
static char *split_volume(const char *v, const char **opts)
{
	size_t n = strcspn(v, ",");
	char *vol = cb_xmalloc(n + 1);

	memcpy(vol, v, n);
	vol[n] = '\0';
	*opts = v[n] ? v + n + 1 : "";
	return vol;
}

/* The value of option NAME= in "a=1,b=2" (malloc'ed), or NULL. */
static char *volume_opt(const char *opts, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = opts; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, name, n) && p[n] == '=') {
			size_t len = strcspn(p + n + 1, ",");
			char *v = cb_xmalloc(len + 1);
			memcpy(v, p + n + 1, len);
			v[len] = '\0';
			return v;
		}
	return NULL;
}

/* VOLUME → a path through storage.cfg (an absolute path is itself); an
 * error of the guest's, naming the line, when it cannot be placed. A
 * container's volume may be a directory (a subvol), or a disk image or a
 * block device (vm-ID-disk-N.raw, an LVM-thin volume: Proxmox's default),
 * which the backup reaches through the running container or mounts
 * read-only while it is stopped (cb_ct_volume). */
static char *resolve_volume(struct pve_read *r, const char *key, const char *cbkey,
			    const char *vol)
{
	char *path = NULL, *msg;

	if (vol[0] == '/')
		return cb_xstrdup(vol);
	if (cb_pve_volume_path(vol, &path) == 0)
		return path;
	msg = cb_xasprintf("key '%s': volume '%s': %s", key, vol, cb_last_error());
	found_error(r->f, cbkey, r->file, r->lineno, msg);
	free(msg);
	return NULL;
}

/* rootfs and mpN: the rootfs always, a mount point of a storage with
 * backup=1 (vzdump's rule); binds and devices are not backed up. */
static void pve_ct_key(struct pve_read *r, const char *k, const char *v)
{
	const char *opts;
	char *vol = split_volume(v, &opts), *backup = volume_opt(opts, "backup");
	char *target = volume_opt(opts, "mp"), *path = NULL, *mp;

	if (!strcmp(k, "rootfs")) {
		if ((path = resolve_volume(r, k, "root", vol)))
			found_key(r->f, "root", path, r->file, r->lineno);
	} else if (vol[0] == '/') {
		found_note(r->f, "%s:%d: %s '%s': a bind or device mount point, not backed up (as "
			   "vzdump)", r->file, r->lineno, k, vol);
	} else if (!backup || strcmp(backup, "1")) {
		found_note(r->f, "%s:%d: %s '%s': backup=1 not set, not backed up (as vzdump)",
			   r->file, r->lineno, k, vol);
	} else if (!target) {
		found_error(r->f, "mp", r->file, r->lineno, "mount point without mp=PATH");
	} else if ((path = resolve_volume(r, k, "mp", vol))) {
		mp = cb_xasprintf("%s,%s", path, target);
		found_key(r->f, "mp", mp, r->file, r->lineno);
		free(mp);
	}
	free(path);
	free(vol);
	free(backup);
	free(target);
}

static int is_vm_disk_key(const char *k)
{
	static const char *const prefixes[] = { "ide", "sata", "scsi", "virtio", "efidisk",
						"tpmstate", NULL };

	for (int i = 0; prefixes[i]; i++) {
		size_t n = strlen(prefixes[i]);
		if (!strncmp(k, prefixes[i], n) && k[n] && !k[n + strspn(k + n, "0123456789")])
			return 1;
	}
	return 0;
}

/* A VM's disks: every one but CD-ROMs, "none" and backup=0 (as vzdump). */
static void pve_vm_key(struct pve_read *r, const char *k, const char *v)
{
	const char *opts;
	char *vol, *media, *backup, *path;

	if (!is_vm_disk_key(k))
		return;
	vol = split_volume(v, &opts);
	media = volume_opt(opts, "media");
	backup = volume_opt(opts, "backup");
	if (!strcmp(vol, "none") || (media && !strcmp(media, "cdrom")))
		;   /* no disk of the guest's */
	else if (backup && !strcmp(backup, "0"))
		found_note(r->f, "%s:%d: %s '%s': backup=0, not backed up", r->file, r->lineno, k,
			   vol);
	else if ((path = resolve_volume(r, k, "disk", vol))) {
		found_key(r->f, "disk", path, r->file, r->lineno);
		free(path);
	}
	free(vol);
	free(media);
	free(backup);
}

/* "key: value" lines until the first snapshot section "[name]". */
static void pve_guest(struct cb_found_list *list, const char *id, const char *file, FILE *in,
		      int is_vm)
{
	struct pve_read r = { .file = file };
	char line[8192], *k, *v;

	r.f = found_add(list, id, is_vm, file);
	found_key(r.f, "config", file, file, 0);
	while (fgets(line, sizeof(line), in)) {
		r.lineno++;
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0] == '[')
			break;
		k = line;
		if (*k == '#' || !(v = strchr(k, ':')))
			continue;
		*v++ = '\0';
		v += strspn(v, " \t");
		if (!strcmp(k, "template") && !strcmp(v, "1"))
			r.f->skip = cb_xasprintf("a template (%s:%d)", file, r.lineno);
		else if (is_vm)
			pve_vm_key(&r, k, v);
		else if (!strcmp(k, "rootfs") || (!strncmp(k, "mp", 2) && k[2] &&
						    !k[2 + strspn(k + 2, "0123456789")]))
			pve_ct_key(&r, k, v);
	}
	if (!is_vm && !cb_found_value(r.f, "root", NULL))
		found_error(r.f, "root", file, r.lineno, "no rootfs");
}

static void pve_guest_extras(struct cb_found *f)
{
	char *rel, *val;

	if (f->is_vm) {
		val = cb_xasprintf("%s/%s.qmp", cb_qemu_run_dir(), f->id);
		found_key(f, "qmp", val, f->file, 0);
	} else {
		rel = cb_xasprintf("lxc/%s", f->id);
		val = found_cgroup(rel);
		free(rel);
		found_key(f, "freeze-cgroup", val, f->file, 0);
	}
	free(val);
}

/* PVE/SUB/ID.conf for every numeric ID, in ID order. */
static void pve_dir(struct cb_found_list *list, const char *sub, int is_vm)
{
	char *dir = cb_xasprintf("%s/%s", cb_pve_dir(), sub);
	struct dirent **names = NULL;
	int n = scandir(dir, &names, NULL, versionsort);

	if (n < 0 && errno != ENOENT && errno != ENOTDIR) {
		char *w = cb_xasprintf("cannot read '%s': %s", dir, strerror(errno));
		cb_strvec_push(&list->warnings, w);
		free(w);
	}
	for (int i = 0; i < n; i++) {
		char *id = cb_xstrdup(names[i]->d_name), *dot = strrchr(id, '.'), *file, *why;
		FILE *in;

		if (dot && !strcmp(dot, ".conf") && dot > id &&
		    (size_t)(dot - id) == strspn(id, "0123456789")) {
			*dot = '\0';
			file = cb_xasprintf("%s/%s", dir, names[i]->d_name);
			in = found_fopen(file, &why);
			if (why && !cb_found_get(list, id))
				found_error(found_add(list, id, is_vm, file), is_vm ? "disk" : "root",
					    file, 0, why);
			else if (in && !cb_found_get(list, id)) {
				pve_guest(list, id, file, in, is_vm);
				pve_guest_extras(&list->v[list->n - 1]);
			}
			if (in)
				fclose(in);
			free(why);
			free(file);
		}
		free(id);
		free(names[i]);
	}
	free(names);
	free(dir);
}

void discover_pve(struct cb_found_list *list)
{
	pve_dir(list, "lxc", 0);
	pve_dir(list, "qemu-server", 1);
}
