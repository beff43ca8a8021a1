/*
 * cb_discover's list of guests found, and the helpers its LXC reader
 * (discover.c) and its Proxmox reader (discover_pve.c) share to fill it:
 * below both, so that neither reader uses the other but discover.c calls
 * discover_pve(). See include/cb_discover.h.
 */
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
