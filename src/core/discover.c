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

const char *cb_lxc_dir(void)
{
	const char *d = getenv("CBACKUP_LXC_DIR");

	return d && *d ? d : "/var/lib/lxc";
}

const char *cb_qemu_run_dir(void)
{
	const char *d = getenv("CBACKUP_QEMU_RUN_DIR");

	return d && *d ? d : "/var/run/qemu-server";
}

char *found_cgroup(const char *rel)
{
	const char *d = getenv("CBACKUP_CGROUP_DIR");

	return d && *d ? cb_xasprintf("%s/%s", d, rel) : cb_xstrdup(rel);
}

struct cb_found *found_add(struct cb_found_list *list, const char *id, int is_vm, const char *file)
{
	struct cb_found *f;

	list->v = cb_xrealloc(list->v, (list->n + 1) * sizeof(*list->v));
	f = &list->v[list->n++];
	memset(f, 0, sizeof(*f));
	f->id = cb_xstrdup(id);
	f->is_vm = is_vm;
	f->file = cb_xstrdup(file);
	return f;
}

void found_key(struct cb_found *f, const char *key, const char *value, const char *file, int line)
{
	struct cb_found_key *k;

	f->keys = cb_xrealloc(f->keys, (f->n_keys + 1) * sizeof(*f->keys));
	k = &f->keys[f->n_keys++];
	k->key = cb_xstrdup(key);
	k->value = cb_xstrdup(value);
	k->src = line ? cb_xasprintf("%s:%d", file, line) : cb_xstrdup(file);
}

void found_error(struct cb_found *f, const char *key, const char *file, int line, const char *msg)
{
	if (f->error)
		return;
	f->error = line ? cb_xasprintf("%s:%d: %s", file, line, msg) : cb_xstrdup(msg);
	f->error_key = cb_xstrdup(key);
}

void found_note(struct cb_found *f, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	if (s)
		cb_strvec_push(&f->notes, s);
	free(s);
}

FILE *found_fopen(const char *file, char **why)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	FILE *in = NULL;

	*why = NULL;
	if (fd < 0) {
		if (errno != ENOENT && errno != ENOTDIR)
			*why = cb_xasprintf("cannot read '%s': %s", file, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		*why = cb_xasprintf("'%s' is not a regular file", file);
	else if (cb_trust_file_root_group(fd, file, "guest configuration") < 0)
		*why = cb_xstrdup(cb_last_error());
	else if (!(in = fdopen(fd, "r")))
		*why = cb_xasprintf("cannot read '%s': %s", file, strerror(errno));
	if (!in)
		close(fd);
	return in;
}

const struct cb_found *cb_found_get(const struct cb_found_list *list, const char *id)
{
	for (size_t i = 0; list && i < list->n; i++)
		if (!strcmp(list->v[i].id, id))
			return &list->v[i];
	return NULL;
}

const char *cb_found_value(const struct cb_found *f, const char *key, const char **src)
{
	const char *v = NULL;

	for (size_t i = 0; f && i < f->n_keys; i++)
		if (!strcmp(f->keys[i].key, key)) {
			v = f->keys[i].value;
			if (src)
				*src = f->keys[i].src;
		}
	return v;
}

void cb_found_list_release(struct cb_found_list *list)
{
	for (size_t i = 0; i < list->n; i++) {
		struct cb_found *f = &list->v[i];
		for (size_t k = 0; k < f->n_keys; k++) {
			free(f->keys[k].key);
			free(f->keys[k].value);
			free(f->keys[k].src);
		}
		free(f->keys);
		free(f->id);
		free(f->file);
		free(f->skip);
		free(f->error);
		free(f->error_key);
		cb_strvec_clear(&f->notes);
	}
	free(list->v);
	cb_strvec_clear(&list->warnings);
	memset(list, 0, sizeof(*list));
}

/* ---- LXC ---------------------------------------------------------------- */

struct lxc_read {
	struct cb_found *f;
	const char *file;
	char *root;          /* the rootfs directory, for mount targets given absolute */
	char *cgroup;        /* lxc.cgroup.dir.container, else lxc.cgroup.dir */
	int cgroup_specific;
};

/* "dir:/x" and "btrfs:/x" are directories; a bare "/x" too. */
static void lxc_rootfs(struct lxc_read *r, const char *v, int line)
{
	const char *colon = strchr(v, ':');
	char *msg;

	if (v[0] == '/' || (colon && (!strncmp(v, "dir:", 4) || !strncmp(v, "btrfs:", 6)))) {
		free(r->root);
		r->root = cb_xstrdup(v[0] == '/' ? v : colon + 1);
		found_key(r->f, "root", r->root, r->file, line);
		return;
	}
	msg = cb_xasprintf("key 'lxc.rootfs.path': rootfs '%s' is not a directory (dir: or "
			   "btrfs:); cbackup backs up container directories: set root = DIR in a "
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
