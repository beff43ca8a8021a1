/*
 * A unit store night's local cache of its units (include/cb_unit_cache.h).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_private.h"
#include "cb_unit_cache.h"
#include "cb_util.h"

struct cb_unit_cache {
	int dfd;
};

struct cb_unit_cache *cb_unit_cache_open(const char *dir)
{
	int dfd = cb_private_dir_open(dir);
	struct cb_unit_cache *c;

	if (dfd < 0)
		return NULL;
	c = cb_xcalloc(1, sizeof(*c));
	c->dfd = dfd;
	return c;
}

int cb_unit_cache_get(struct cb_unit_cache *c, const unsigned char *dig, uint64_t len, struct cb_s3_buf *out)
{
	char hex[65];
	struct stat st;
	int fd, ok;

	cb_store_hex(dig, hex);
	fd = openat(c->dfd, hex, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == len;
	if (ok) {
		out->len = 0;
		if (out->cap < len + 1) {
			out->cap = (size_t)len + 1;
			out->data = cb_xrealloc(out->data, out->cap);
		}
		ok = cb_read_all(fd, out->data, (size_t)len) == 0;
		out->len = ok ? (size_t)len : 0;
	}
	close(fd);
	return ok;
}

void cb_unit_cache_put(struct cb_unit_cache *c, const unsigned char *dig, const void *p, size_t len,
		       int replace)
{
	char hex[65], tmp[80];
	struct stat st;
	int fd, ok;

	cb_store_hex(dig, hex);
	if (!replace && fstatat(c->dfd, hex, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	    (uint64_t)st.st_size == len)
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", hex);
	unlinkat(c->dfd, tmp, 0);
	fd = cb_create_excl_at(c->dfd, tmp, 0600);
	if (fd < 0)
		return;
	/* no fsync: a file lost to a crash is read from the store */
	ok = cb_write_all(fd, p, len) == 0;
	if (close(fd) < 0)
		ok = 0;
	if (!ok || renameat(c->dfd, tmp, c->dfd, hex) < 0)
		unlinkat(c->dfd, tmp, 0);
}

static int ref_cmp(const void *a, const void *b)
{
	return strcmp(((const struct cb_store_ref *)a)->hex, ((const struct cb_store_ref *)b)->hex);
}

void cb_unit_cache_keep(struct cb_unit_cache *c, const struct cb_store_ref *refs, size_t n)
{
	struct cb_store_ref *v = cb_xmalloc((n ? n : 1) * sizeof(*v));
	int dfd = openat(c->dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	struct cb_store_ref key = { 0 };
	struct dirent *de;

	memcpy(v, refs, n * sizeof(*v));
	qsort(v, n, sizeof(*v), ref_cmp);
	while (d && (de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (strlen(de->d_name) == 64)
			memcpy(key.hex, de->d_name, 65);
		if (strlen(de->d_name) != 64 || !bsearch(&key, v, n, sizeof(*v), ref_cmp))
			unlinkat(c->dfd, de->d_name, 0);
	}
	if (d)
		closedir(d);
	else if (dfd >= 0)
		close(dfd);
	free(v);
}

void cb_unit_cache_free(struct cb_unit_cache *c)
{
	if (!c)
		return;
	close(c->dfd);
	free(c);
}
