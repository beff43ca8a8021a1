/* cb_leftovers: what interrupted runs left. See include/cb_leftovers.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cb_catalog.h"
#include "cb_leftovers.h"
#include "cb_util.h"

struct guest {
	const char *dumpdir, *id, *own_log;
	enum cb_guest_type type;
};

/* 1 if some file named BASE.tar* is in DIR (an archive, finished or not). */
static int has_archive(const char *dir, const char *base, size_t blen)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int found = 0;

	while (d && !found && (de = readdir(d)))
		found = !strncmp(de->d_name, base, blen) && !strncmp(de->d_name + blen, ".tar", 4);
	if (d)
		closedir(d);
	return found;
}

/* The log of a run that ended (finished or failed) says so in its last
 * lines; a run killed with SIGKILL never wrote them. */
static int log_has_end(const char *path)
{
	char tail[4096];
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	off_t size = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
	ssize_t n = -1;

	if (size >= 0) {
		off_t from = size > (off_t)sizeof(tail) - 1 ? size - (off_t)sizeof(tail) + 1 : 0;
		n = pread(fd, tail, sizeof(tail) - 1, from);
	}
	if (fd >= 0)
		close(fd);
	if (n < 0)
		return 1;   /* cannot tell: keep it */
	tail[n] = '\0';
	return strstr(tail, "INFO: Finished Backup of ") || strstr(tail, "ERROR: Backup of ");
}

/* NAME.log of a killed run: no archive beside it, no end line in it (the
 * logs of failed runs stay). Never this run's own log. */
static int is_orphan_log(const struct guest *g, const char *name)
{
	static const char *const whole[] = { "", NULL };
	size_t n = strlen(name);
	char *path, *as_tar;
	int ours, orphan;

	if (n <= 4 || strcmp(name + n - 4, ".log") || (g->own_log && !strcmp(name, g->own_log)))
		return 0;
	/* BASE.log belongs to the guest whose archive would be BASE.tar */
	as_tar = cb_xasprintf("%.*s.tar", (int)(n - 4), name);
	ours = cb_catalog_is_guest_file(as_tar, g->type, g->id, whole);
	free(as_tar);
	if (!ours)
		return 0;
	path = cb_xasprintf("%s/%s", g->dumpdir, name);
	orphan = !has_archive(g->dumpdir, name, n - 4) && !log_has_end(path);
	free(path);
	return orphan;
}

static const char *const side_suffixes[] = { ".sha256", ".idx", ".verified", NULL };

/* DIR/NAME is a side file (.sha256, .idx, .verified) of an archive that is
 * not there: one that never got its name, or that another tool removed. */
static int side_orphan(const char *dir, const char *name)
{
	size_t n = strlen(name), k = 0;
	char *archive;
	int orphan;

	for (int i = 0; side_suffixes[i] && !k; i++) {
		size_t s = strlen(side_suffixes[i]);
		if (n > s && !strcmp(name + n - s, side_suffixes[i]))
			k = s;
	}
	if (!k)
		return 0;
	archive = cb_xasprintf("%s/%.*s", dir, (int)(n - k), name);
	orphan = access(archive, F_OK) < 0 && errno == ENOENT;
	free(archive);
	return orphan;
}

enum leftover { NOT_LEFT, LEFT_BY_RUN, ARCHIVE_GONE };

/* NAME.tmp (archive, checksum or catalog), the .log of a killed run, or a
 * side file whose archive is gone, of exactly this guest: "web" never
 * claims "web-1"'s files. */
static enum leftover is_leftover(const struct guest *g, const char *name)
{
	static const char *const tmp[] = { ".tmp", ".sha256.tmp", ".idx.tmp", NULL };

	if (cb_catalog_is_guest_file(name, g->type, g->id, tmp))
		return LEFT_BY_RUN;
	if (is_orphan_log(g, name))
		return LEFT_BY_RUN;
	if (cb_catalog_is_guest_file(name, g->type, g->id, side_suffixes) &&
	    side_orphan(g->dumpdir, name))
		return ARCHIVE_GONE;
	return NOT_LEFT;
}

unsigned cb_leftovers_remove(const char *dumpdir, enum cb_guest_type type, const char *id,
			     const char *own_log, int dry_run, struct cb_log *log)
{
	struct guest g = { dumpdir, id, own_log, type };
	DIR *d = opendir(dumpdir);
	struct dirent *de;
	unsigned n = 0;

	while (d && (de = readdir(d))) {
		enum leftover why = is_leftover(&g, de->d_name);
		if (why == NOT_LEFT)
			continue;
		char *path = cb_xasprintf("%s/%s", dumpdir, de->d_name);
		n++;
		if (why == ARCHIVE_GONE)
			cb_info(log, "%s '%s': its archive is gone", dry_run ? "would remove" : "removing",
				path);
		else
			cb_info(log, "%s '%s' left by an interrupted run",
				dry_run ? "would remove" : "removing", path);
		if (!dry_run && unlink(path) < 0)
			cb_warn(log, "cannot remove '%s': %s", path, strerror(errno));
		free(path);
	}
	if (d)
		closedir(d);
	return n;
}

/* The guest a side file NAME belongs to, if it is one, in *ref. */
static int side_guest(const char *dir, const char *name, struct cb_guest_ref *ref)
{
	size_t n = strlen(name);
	time_t when;
	enum cb_compress c;
	int ret = -1;

	if (!side_orphan(dir, name))
		return -1;
	for (int i = 0; side_suffixes[i] && ret < 0; i++) {
		size_t s = strlen(side_suffixes[i]);
		char *archive;
		if (n <= s || strcmp(name + n - s, side_suffixes[i]))
			continue;
		archive = cb_xasprintf("%.*s", (int)(n - s), name);
		ret = cb_catalog_parse_name(archive, &ref->type, &ref->id, &when, &c);
		free(archive);
	}
	return ret;
}

static int have_guest(const struct cb_guest_ref *v, size_t n, const struct cb_guest_ref *g)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].type == g->type && !strcmp(v[i].id, g->id))
			return 1;
	return 0;
}

size_t cb_leftovers_guests(const char *dumpdir, const char *id, struct cb_guest_ref **out)
{
	DIR *d = opendir(dumpdir);
	struct dirent *de;
	struct cb_guest_ref *v = NULL, g;
	size_t n = 0;

	while (d && (de = readdir(d))) {
		if (side_guest(dumpdir, de->d_name, &g) < 0)
			continue;
		if ((id && strcmp(g.id, id)) || have_guest(v, n, &g)) {
			free(g.id);
			continue;
		}
		v = cb_xrealloc(v, (n + 1) * sizeof(*v));
		v[n++] = g;
	}
	if (d)
		closedir(d);
	*out = v;
	return n;
}

void cb_leftovers_guests_free(struct cb_guest_ref *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].id);
	free(v);
}
