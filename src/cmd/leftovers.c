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

/* NAME.tmp (archive, checksum or catalog), NAME.sha256 or NAME.idx whose archive never got its
 * name, or the .log of a killed run, of exactly this guest: "web" never
 * claims "web-1"'s files. */
static int is_leftover(const struct guest *g, const char *name)
{
	static const char *const tmp[] = { ".tmp", ".sha256.tmp", ".idx.tmp", NULL };
	static const char *const sum[] = { ".sha256", ".idx", NULL };
	size_t n = strlen(name);
	char *archive;
	int orphan;

	if (cb_catalog_is_guest_file(name, g->type, g->id, tmp))
		return 1;
	if (is_orphan_log(g, name))
		return 1;
	if (!cb_catalog_is_guest_file(name, g->type, g->id, sum))
		return 0;
	archive = cb_xasprintf("%s/%.*s", g->dumpdir,
			       (int)(n - (strcmp(name + n - 4, ".idx") ? 7 : 4)), name);
	orphan = access(archive, F_OK) < 0 && errno == ENOENT;
	free(archive);
	return orphan;
}

unsigned cb_leftovers_remove(const char *dumpdir, enum cb_guest_type type, const char *id,
			     const char *own_log, int dry_run, struct cb_log *log)
{
	struct guest g = { dumpdir, id, own_log, type };
	DIR *d = opendir(dumpdir);
	struct dirent *de;
	unsigned n = 0;

	while (d && (de = readdir(d))) {
		if (!is_leftover(&g, de->d_name))
			continue;
		char *path = cb_xasprintf("%s/%s", dumpdir, de->d_name);
		n++;
		cb_info(log, "%s '%s' left by an interrupted run", dry_run ? "would remove" : "removing",
			path);
		if (!dry_run && unlink(path) < 0)
			cb_warn(log, "cannot remove '%s': %s", path, strerror(errno));
		free(path);
	}
	if (d)
		closedir(d);
	return n;
}
