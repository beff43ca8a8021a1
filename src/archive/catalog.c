/* cb_catalog: backups in a dump directory. See include/cb_catalog.h. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_catalog.h"
#include "cb_util.h"

static const struct {
	const char *prefix;
	enum cb_guest_type type;
} prefixes[] = {
	{ "cbackup-ct-", CB_GUEST_CT }, { "cbackup-vm-", CB_GUEST_VM },
	{ "vzdump-lxc-", CB_GUEST_CT }, { "vzdump-openvz-", CB_GUEST_CT },
	{ "vzdump-qemu-", CB_GUEST_VM },
};

static const struct {
	const char *ext;
	enum cb_compress c;
} exts[] = {
	{ ".tar", CB_COMPRESS_NONE }, { ".tar.zst", CB_COMPRESS_ZSTD },
	{ ".tar.lzo", CB_COMPRESS_LZO }, { ".tar.gz", CB_COMPRESS_GZIP },
	{ ".vma", CB_COMPRESS_NONE }, { ".vma.zst", CB_COMPRESS_ZSTD },
	{ ".vma.lzo", CB_COMPRESS_LZO }, { ".vma.gz", CB_COMPRESS_GZIP },
	/* encrypted archives (cb_encarchive.h) */
	{ ".tar.cbenc", CB_COMPRESS_NONE }, { ".tar.zst.cbenc", CB_COMPRESS_ZSTD },
	{ ".tar.lzo.cbenc", CB_COMPRESS_LZO }, { ".tar.gz.cbenc", CB_COMPRESS_GZIP },
};
#define N_EXTS (sizeof(exts) / sizeof(exts[0]))
#define STAMP_LEN 19   /* YYYY_MM_DD-HH_MM_SS */

/* Index of the extension NAME ends with (its start in *at), or -1. */
static int find_ext(const char *name, size_t n, size_t *at)
{
	for (size_t i = 0; i < N_EXTS; i++) {
		size_t e = strlen(exts[i].ext);
		if (n > e && !strcmp(name + n - e, exts[i].ext))
			return *at = n - e, (int)i;
	}
	return -1;
}

static const char *type_prefix(const char *name, enum cb_guest_type *type)
{
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(name, prefixes[i].prefix, strlen(prefixes[i].prefix)))
			return *type = prefixes[i].type, name + strlen(prefixes[i].prefix);
	return NULL;
}

/*
 * From the right: the extension, then a fixed-width time stamp after a
 * '-'; the ID is everything between the type prefix and that '-', so that
 * guest "web" never claims "web-1"'s files (IDs may contain '-').
 */
int cb_catalog_parse_name(const char *name, enum cb_guest_type *type, char **id, time_t *when,
			  enum cb_compress *compress)
{
	size_t n = strlen(name), at;
	const char *p = type_prefix(name, type), *stamp, *rest;
	int e = find_ext(name, n, &at);
	struct tm tm;

	if (!p || e < 0 || at < (size_t)(p - name) + STAMP_LEN + 2)
		return -1;
	stamp = name + at - STAMP_LEN;
	if (stamp[-1] != '-')
		return -1;
	memset(&tm, 0, sizeof(tm));
	rest = strptime(stamp, "%Y_%m_%d-%H_%M_%S", &tm);
	if (rest != name + at)
		return -1;
	*id = strndup(p, (size_t)(stamp - 1 - p));
	if (!*id || cb_guest_id_check(*id) < 0) {
		free(*id);
		return -1;
	}
	tm.tm_isdst = -1;
	*when = mktime(&tm);
	*compress = exts[e].c;
	return 0;
}

int cb_catalog_pve_vmid(const char *id)
{
	size_t n = strspn(id, "0123456789");

	return id[n] == '\0' && n >= 3 && n <= 9 && id[0] != '0';
}

char *cb_catalog_base(const char *path)
{
	size_t at;

	if (find_ext(path, strlen(path), &at) >= 0)
		return strndup(path, at);
	return cb_xstrdup(path);
}

int cb_catalog_is_guest_file(const char *name, enum cb_guest_type type, const char *id,
			     const char *const *suffixes)
{
	size_t n = strlen(name);

	for (int i = 0; suffixes[i]; i++) {
		size_t k = strlen(suffixes[i]);
		struct cb_backup_file f = { 0 };
		char *archive;
		int ok = 0;
		if (n <= k || strcmp(name + n - k, suffixes[i]))
			continue;
		archive = cb_xasprintf("%.*s", (int)(n - k), name);
		if (cb_catalog_parse_name(archive, &f.type, &f.id, &f.when, &f.compress) == 0) {
			ok = f.type == type && !strcmp(f.id, id);
			free(f.id);
		}
		free(archive);
		if (ok)
			return 1;
	}
	return 0;
}

static int exists_beside(const char *path, const char *suffix)
{
	char *p = cb_xasprintf("%s%s", path, suffix);
	int ok = access(p, F_OK) == 0;
	free(p);
	return ok;
}

/* NAME.notes, if any: a regular file, read without following a symlink;
 * its one trailing newline is the file's, not the note's (vzdump's notes
 * have none: the JSON of list keeps the text only). */
static char *read_notes(const char *path)
{
	enum { MAX_NOTES = 64 * 1024 };
	char *p = cb_xasprintf("%s.notes", path), *text = NULL;
	int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	ssize_t n;

	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
		text = cb_xmalloc(MAX_NOTES + 1);
		n = read(fd, text, MAX_NOTES);
		text[n > 0 ? n : 0] = '\0';
		if (n > 0 && text[n - 1] == '\n')
			text[n - 1] = '\0';
		if (n >= 8 && !memcmp(text, "CBENCNOT", 8))   /* sealed (cb_encarchive.h) */
			strcpy(text, "(encrypted)");
	}
	if (fd >= 0)
		close(fd);
	free(p);
	return text;
}

static int by_id_newest_first(const void *a, const void *b)
{
	const struct cb_backup_file *x = a, *y = b;
	int c = strcmp(x->id, y->id);
	if (c)
		return c;
	return x->when < y->when ? 1 : x->when > y->when ? -1 : strcmp(y->name, x->name);
}

static void add_file(struct cb_catalog *cat, size_t *alloc, const char *dumpdir, const char *name,
		     const struct cb_backup_file *parsed)
{
	struct cb_backup_file *f;
	struct stat st;

	if (cat->n == *alloc) {
		*alloc = *alloc ? *alloc * 2 : 16;
		cat->files = cb_xrealloc(cat->files, *alloc * sizeof(*cat->files));
	}
	f = &cat->files[cat->n++];
	*f = *parsed;
	f->name = cb_xstrdup(name);
	f->path = cb_xasprintf("%s/%s", dumpdir, name);
	f->size = stat(f->path, &st) == 0 ? (uint64_t)st.st_size : 0;
	f->is_protected = exists_beside(f->path, ".protected");
	f->has_checksum = exists_beside(f->path, ".sha256");
	f->verified = exists_beside(f->path, ".verified");
	f->encrypted = strlen(name) > 6 && !strcmp(name + strlen(name) - 6, ".cbenc");
	f->notes = read_notes(f->path);
}

int cb_catalog_scan(struct cb_catalog *cat, const char *dumpdir, const char *id)
{
	DIR *d = opendir(dumpdir);
	struct dirent *de;
	size_t alloc = 0;

	memset(cat, 0, sizeof(*cat));
	if (!d)
		return cb_error_errno("cannot read dump directory '%s'", dumpdir);
	while ((de = readdir(d))) {
		struct cb_backup_file f = { 0 };
		if (cb_catalog_parse_name(de->d_name, &f.type, &f.id, &f.when, &f.compress) < 0)
			continue;
		if (id && strcmp(id, f.id)) {
			free(f.id);
			continue;
		}
		add_file(cat, &alloc, dumpdir, de->d_name, &f);
	}
	closedir(d);
	if (cat->n)
		qsort(cat->files, cat->n, sizeof(*cat->files), by_id_newest_first);
	return 0;
}

void cb_catalog_release(struct cb_catalog *cat)
{
	for (size_t i = 0; i < cat->n; i++) {
		free(cat->files[i].path);
		free(cat->files[i].name);
		free(cat->files[i].id);
		free(cat->files[i].notes);
	}
	free(cat->files);
	memset(cat, 0, sizeof(*cat));
}
