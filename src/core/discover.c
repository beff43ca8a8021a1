/* cb_discover: the guests of this host; LXC's part. See include/cb_discover.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_opts.h"
#include "cb_trust.h"
#include "discover_int.h"

/* ---- LXC ---------------------------------------------------------------- */

struct lxc_read {
	struct cb_found *f;
	const char *file;
	char *root;          /* the rootfs directory, for mount targets given absolute */
	char *cgroup;        /* lxc.cgroup.dir.container, else lxc.cgroup.dir */
	int cgroup_specific;
};

/* "dir:/x" and "btrfs:/x" are directories; a bare "/x" too. "loop:/img"
 * (an image file) and "lvm:/dev/VG/LV" (a block device) are volumes the
 * backup reaches through the running container or mounts read-only while
 * it is stopped (cb_ct_volume), as for a Proxmox container on an image. */
static void lxc_rootfs(struct lxc_read *r, const char *v, int line)
{
	const char *colon = strchr(v, ':');
	char *msg;

	if (v[0] == '/' || (colon && (!strncmp(v, "dir:", 4) || !strncmp(v, "btrfs:", 6) ||
				      !strncmp(v, "loop:", 5) || !strncmp(v, "lvm:", 4)))) {
		free(r->root);
		r->root = cb_xstrdup(v[0] == '/' ? v : colon + 1);
		found_key(r->f, "root", r->root, r->file, line);
		return;
	}
	msg = cb_xasprintf("key 'lxc.rootfs.path': rootfs '%s' is not a directory (dir:, "
			   "btrfs:), an image (loop:) or a block device (lvm:): set root = DIR in a "
			   "[ct %s] section", v, r->f->id);
	found_error(r->f, "root", r->file, line, msg);
	free(msg);
}

/* The target of a mount entry in the guest: relative to the rootfs, or
 * absolute under it (${LXC_ROOTFS_MOUNT} is not expanded: noted). */
static char *entry_target(const struct lxc_read *r, const char *dest)
{
	size_t n = r->root ? strlen(r->root) : 0;

	if (dest[0] != '/')
		return cb_xasprintf("/%s", dest);
	if (n && !strncmp(dest, r->root, n) && dest[n] == '/')
		return cb_xstrdup(dest + n);
	return NULL;
}

static int has_opt(const char *opts, const char *want)
{
	size_t n = strlen(want);

	for (const char *p = opts; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, want, n) && (p[n] == ',' || !p[n]))
			return 1;
	return 0;
}

/* A read-write bind of a host directory holds the guest's data (backed up
 * as a mount point); anything else is the host's or virtual: noted. */
static void lxc_mount_entry(struct lxc_read *r, const char *v, int line)
{
	char src[4096], dest[4096], type[64], opts[512], *target, *mp;
	struct stat st;

	if (sscanf(v, "%4095s %4095s %63s %511s", src, dest, type, opts) != 4)
		return;
	if (!has_opt(opts, "bind") && !has_opt(opts, "rbind"))
		return;   /* proc, tmpfs, mqueue...: nothing of the guest's to keep */
	if (has_opt(opts, "ro")) {
		found_note(r->f, "%s:%d: mount entry '%s': a read-only bind of a host directory, not "
			   "backed up", r->file, line, src);
		return;
	}
	target = entry_target(r, dest);
	mp = target ? cb_xasprintf("%s,%s", src, target) : NULL;
	if (mp && stat(src, &st) == 0 && S_ISDIR(st.st_mode) && cb_mp_split(mp, NULL, NULL) == 0)
		found_key(r->f, "mp", mp, r->file, line);
	else
		found_note(r->f, "%s:%d: mount entry '%s' on '%s': not a host directory bound "
			   "into the guest, not backed up", r->file, line, src, dest);
	free(mp);
	free(target);
}

static void lxc_line(struct lxc_read *r, char *line, int lineno)
{
	char *k = line + strspn(line, " \t"), *eq, *v, *end;

	if (*k == '#' || !(eq = strchr(k, '=')))
		return;
	v = eq + 1;
	for (end = eq; end > k && (end[-1] == ' ' || end[-1] == '\t'); end--)
		;
	*end = '\0';
	v += strspn(v, " \t");
	v[strcspn(v, "\r\n")] = '\0';
	for (end = v + strlen(v); end > v && (end[-1] == ' ' || end[-1] == '\t'); end--)
		*(end - 1) = '\0';
	if (!strcmp(k, "lxc.rootfs.path") || !strcmp(k, "lxc.rootfs"))
		lxc_rootfs(r, v, lineno);
	else if (!strcmp(k, "lxc.mount.entry"))
		lxc_mount_entry(r, v, lineno);
	else if (!strcmp(k, "lxc.cgroup.dir.container") ||
		 (!strcmp(k, "lxc.cgroup.dir") && !r->cgroup_specific)) {
		free(r->cgroup);
		r->cgroup = cb_xstrdup(v);
		r->cgroup_specific |= !strcmp(k, "lxc.cgroup.dir.container");
	} else if (!strcmp(k, "lxc.include") || !strcmp(k, "lxc.mount.fstab")) {
		found_note(r->f, "%s:%d: %s '%s' is not read: give its paths in a [ct %s] section",
			   r->file, lineno, k, v, r->f->id);
	}
}

static void lxc_guest(struct cb_found_list *list, const char *name, const char *file, FILE *in)
{
	struct lxc_read r = { .file = file };
	char line[8192], *cg;
	int lineno = 0;

	r.f = found_add(list, name, 0, file);
	found_key(r.f, "config", file, file, 0);
	while (fgets(line, sizeof(line), in))
		lxc_line(&r, line, ++lineno);
	if (!r.root)
		found_error(r.f, "root", file, lineno, "no lxc.rootfs.path: set root = DIR in a [ct] "
			    "section");
	/* lxc 4+ puts the payload at lxc.payload.NAME of the cgroup root */
	cg = r.cgroup ? found_cgroup(r.cgroup) : NULL;
	if (!cg) {
		char *rel = cb_xasprintf("lxc.payload.%s", name);
		cg = found_cgroup(rel);
		free(rel);
	}
	found_key(r.f, "freeze-cgroup", cg, file, 0);
	free(cg);
	free(r.root);
	free(r.cgroup);
}

/* DIR/NAME/config for every NAME, in name order. */
static void discover_lxc(struct cb_found_list *list)
{
	struct dirent **names = NULL;
	int n = scandir(cb_lxc_dir(), &names, NULL, alphasort);

	if (n < 0 && errno != ENOENT && errno != ENOTDIR) {
		char *w = cb_xasprintf("cannot read '%s': %s", cb_lxc_dir(), strerror(errno));
		cb_strvec_push(&list->warnings, w);
		free(w);
	}
	for (int i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		char *file = cb_xasprintf("%s/%s/config", cb_lxc_dir(), name), *why = NULL;
		FILE *in = name[0] != '.' ? found_fopen(file, &why) : NULL;

		struct cb_found *same = (struct cb_found *)cb_found_get(list, name);

		if (why && !same && cb_guest_id_check(name) == 0) {
			/* a configuration it may not trust: that guest fails, loudly */
			found_error(found_add(list, name, 0, file), "root", file, 0, why);
		} else if (same && (in || why)) {
			/* pct writes a running container's lxc config here: the same guest */
			if (same->is_vm)
				found_note(same, "'%s' is another guest of the same ID, not backed up",
					   file);
		} else if (in && cb_guest_id_check(name) < 0) {
			struct cb_found *f = found_add(list, name, 0, file);
			f->skip = cb_xasprintf("its name is no guest ID (%s)", cb_last_error());
		} else if (in) {
			lxc_guest(list, name, file, in);
		}
		if (in)
			fclose(in);
		free(why);
		free(file);
		free(names[i]);
	}
	free(names);
}

void cb_discover(struct cb_found_list *list)
{
	memset(list, 0, sizeof(*list));
	discover_pve(list);
	discover_lxc(list);
}
