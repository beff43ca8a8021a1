/*
 * The catalog against its line in the archive's .sha256 ("HEX  NAME.idx"):
 * what verify checks, and what a backup checks before it copies units of
 * the previous archive by that catalog. See include/cb_index.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <stdint.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "cb_index.h"
#include "cb_util.h"

int cb_idx_expected_sha256(const char *archive, char hex[65])
{
	char *path = cb_xasprintf("%s.sha256", archive), line[4096];
	const char *base = strrchr(archive, '/') ? strrchr(archive, '/') + 1 : archive;
	size_t bl = strlen(base);
	int fd = cb_open_regular(path, 0, "checksum file", NULL);
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;

	hex[0] = '\0';
	if (fd >= 0 && !f)
		close(fd);
	while (f && fgets(line, sizeof(line), f))
		if (strlen(line) > 66 + bl + 4 && !strncmp(line + 66, base, bl) &&
		    !strcmp(line + 66 + bl, ".idx\n"))
			snprintf(hex, 65, "%.64s", line);
	if (f)
		fclose(f);
	free(path);
	if (fd < 0 && errno != ENOENT)
		return -1;
	return hex[0] ? 0 : 1;
}

void cb_idx_sha256_hex(const struct cb_idx *x, char hex[65])
{
	unsigned char md[32];

	EVP_Digest(x->map, x->size, md, NULL, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

int cb_idx_check_sha256(const struct cb_idx *x, const char *want, const char *archive)
{
	char hex[65];

	cb_idx_sha256_hex(x, hex);
	if (strcasecmp(hex, want))
		return cb_error("checksum mismatch: '%s.sha256' says %s for '%s.idx', it has %s", archive,
				want, archive, hex);
	return 0;
}

int cb_idx_read(struct cb_idx *x, const char *path, uint64_t archive_size)
{
	struct stat st;
	int fd = cb_open_regular(path, 0, "catalog", &st);
	unsigned char *buf;
	int rc;

	memset(x, 0, sizeof(*x));
	if (fd < 0)
		return -1;
	if (st.st_size <= 0 || (uint64_t)st.st_size > SIZE_MAX) {
		close(fd);
		return cb_error("catalog '%s' is empty", path);
	}
	buf = cb_xmalloc((size_t)st.st_size);
	rc = cb_read_all(fd, buf, (size_t)st.st_size);
	close(fd);
	if (rc < 0) {
		free(buf);
		return cb_error_errno("cannot read catalog '%s'", path);
	}
	if (cb_idx_load(x, buf, (size_t)st.st_size, archive_size) < 0)
		return cb_error_prefix("'%s'", path);
	return 0;
}
