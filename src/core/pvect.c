/* cb_pvect: a PVE container config, stripped. See include/cb_pvect.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cb_pve.h"
#include "cb_pvect.h"
#include "cb_util.h"

struct pvect_read {
	const char *file;
	struct cb_pvect_conf *c;
	int unprivileged;
};

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

/* id through the map: from the host's side to the container's, or back */
static int idmap_find(const struct cb_idmap *m, char type, unsigned long id, unsigned long *out,
		      int to_host)
{
	for (size_t i = 0; i < m->n; i++) {
		const struct cb_idmap_range *r = &m->v[i];
		unsigned long from = to_host ? r->ct : r->host, to = to_host ? r->host : r->ct;
		if (r->type == type && id >= from && id - from < r->len) {
			*out = to + (id - from);
			return 0;
		}
	}
	return -1;
}

int cb_idmap_back(const struct cb_idmap *m, char type, unsigned long host, unsigned long *ct)
{
	return idmap_find(m, type, host, ct, 0);
}

int cb_idmap_forward(const struct cb_idmap *m, char type, unsigned long ct, unsigned long *host)
{
	return idmap_find(m, type, ct, host, 1);
}

static void map_add(struct cb_idmap *m, char type, unsigned long ct, unsigned long host,
		    unsigned long len)
{
	m->v = cb_xrealloc(m->v, (m->n + 1) * sizeof(*m->v));
	m->v[m->n++] = (struct cb_idmap_range){ type, ct, host, len };
}

/* "lxc.idmap: u 0 100000 65536" (the format parse_id_maps() takes) */
static int idmap_line(const char *file, const char *v, struct cb_idmap *m)
{
	unsigned long ct, host, len;
	char type, end;

	if (sscanf(v, " %c %lu %lu %lu %c", &type, &ct, &host, &len, &end) != 4 ||
	    (type != 'u' && type != 'g'))
		return cb_error("'%s': cannot parse lxc.idmap '%s' (accepted: u|g CT HOST COUNT)",
				file, v);
	map_add(m, type, ct, host, len);
	return 0;
}

/* Lines that make the ID map: -1 on a bad lxc.idmap. */
static int map_key(const char *file, const char *line, size_t klen, struct pvect_read *rd)
{
	const char *v = line + klen + 1 + strspn(line + klen + 1, " \t");

	if (klen == 12 && !strncmp(line, "unprivileged", 12))
		rd->unprivileged = atoi(v) == 1;
	if (klen == 9 && !strncmp(line, "lxc.idmap", 9))
		return idmap_line(file, v, &rd->c->map);
	return 0;
}

/* The main section into *out; 1 if every line of it is a PVE one and it
 * has a rootfs, -1 on a bad ID map line. */
static int strip(FILE *in, FILE *out, struct pvect_read *rd)
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
		line[end] = '\0';
		if (klen && map_key(rd->file, line, klen, rd) < 0) {
			free(line);
			return -1;
		}
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
	struct pvect_read rd = { file, c, 0 };
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
	is_pve = strip(in, out, &rd);
	fclose(in);
	fclose(out);
	if (is_pve <= 0) {
		cb_pvect_release(c);
		return is_pve;
	}
	if (!c->map.n && rd.unprivileged) {   /* PVE's default */
		map_add(&c->map, 'u', 0, 100000, 65536);
		map_add(&c->map, 'g', 0, 100000, 65536);
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
	free(c->map.v);
	memset(c, 0, sizeof(*c));
}
