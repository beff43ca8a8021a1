/* cb_pvect: a PVE container config, stripped. See include/cb_pvect.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cb_pve.h"
#include "cb_pvect.h"
#include "cb_util.h"

/* "key: value" with a key of PVE's ("rootfs", "net0", "lxc.idmap"): the
 * key's length, or 0. */
static size_t pve_key(const char *line)
{
	size_t n = strspn(line, "abcdefghijklmnopqrstuvwxyz0123456789_.-");

	return n && line[n] == ':' ? n : 0;
}

/* What vzdump's assemble() deletes from the main section: the keys of
 * this host's state; the sections go as a whole. */
static int dropped(const char *line, size_t klen)
{
	return (klen == 4 && !strncmp(line, "lock", 4)) || (klen == 6 && !strncmp(line, "parent", 6));
}

/* The main section into *out; 1 if every line of it is a PVE one and it
 * has a rootfs. */
static int strip(FILE *in, FILE *out)
{
	char *line = NULL;
	size_t cap = 0, blank = 0;
	int is_pve = 1, rootfs = 0;

	while (getline(&line, &cap, in) > 0 && line[0] != '[') {
		size_t klen = pve_key(line), end = strcspn(line, "\r\n");
		if (end == 0) {
			blank++;   /* kept only between lines: none before a section */
			continue;
		}
		if (line[0] != '#' && !klen)
			is_pve = 0;
		rootfs |= klen == 6 && !strncmp(line, "rootfs", 6);
		if (dropped(line, klen))
			continue;
		for (; blank; blank--)
			fputc('\n', out);
		fprintf(out, "%.*s\n", (int)end, line);
	}
	free(line);
	return is_pve && rootfs;
}

int cb_pvect_load(const char *file, const char *id, struct cb_pvect_conf *c)
{
	FILE *in = fopen(file, "re"), *out;
	struct stat st;
	char *fw;
	int is_pve;

	memset(c, 0, sizeof(*c));
	if (!in || fstat(fileno(in), &st) < 0) {
		if (in)
			fclose(in);
		return cb_error_errno("cannot read guest config '%s'", file);
	}
	out = open_memstream(&c->text, &c->len);
	if (!out)
		abort();   /* out of memory, as cb_xmalloc */
	is_pve = strip(in, out);
	fclose(in);
	fclose(out);
	if (!is_pve) {
		cb_pvect_release(c);
		return 0;
	}
	c->mtime = st.st_mtime;
	fw = cb_xasprintf("%s/firewall/%s.fw", cb_pve_dir(), id);
	if (lstat(fw, &st) == 0 && S_ISREG(st.st_mode))
		c->fw_path = fw;
	else
		free(fw);
	return 1;
}

void cb_pvect_release(struct cb_pvect_conf *c)
{
	free(c->text);
	free(c->fw_path);
	memset(c, 0, sizeof(*c));
}
