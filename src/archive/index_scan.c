/*
 * The catalog from the archive alone: decode it from the start, feed the
 * tar scanner, record the units the decoder meets (zstd frames, gzip
 * members, lzop blocks). For an archive cbackup wrote these are the units
 * its writer recorded, so `cbackup index` rebuilds the same .idx; for an
 * old single-stream archive there is one unit (stream offsets only).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_index.h"
#include "cb_util.h"

#define SCAN_BUF (1024 * 1024)

static int scan_fd(int fd, uint64_t size, unsigned char **buf, size_t *len)
{
	struct cb_codec_reader *r = NULL;
	struct cb_tarscan *s = cb_tarscan_new();
	struct cb_codec_units units = { 0 };
	unsigned char *b = cb_xmalloc(SCAN_BUF);
	ssize_t n = -1;
	uint64_t total = 0;
	int ret = -1;

	if (cb_codec_reader_new(&r, fd) < 0)
		goto out;
	cb_codec_reader_record_units(r, &units);
	while ((n = cb_codec_read(r, b, SCAN_BUF)) > 0) {
		total += (uint64_t)n;
		if (cb_tarscan_feed(s, b, (size_t)n) < 0)
			goto out;
	}
	if (n < 0 || cb_tarscan_end(s) < 0)
		goto out;
	cb_codec_units_finish(&units, total);
	ret = cb_idx_build(s, &units, cb_codec_reader_type(r), size, buf, len);
out:
	cb_codec_reader_free(r);
	cb_tarscan_free(s);
	cb_codec_units_release(&units);
	free(b);
	return ret;
}

int cb_idx_scan_archive(const char *archive, unsigned char **buf, size_t *len)
{
	struct stat st;
	int fd = cb_open_regular_given(archive, "", &st);
	int ret;

	if (fd < 0)
		return -1;
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	ret = scan_fd(fd, (uint64_t)st.st_size, buf, len);
	close(fd);
	return ret < 0 ? cb_error_prefix("'%s'", archive) : 0;
}

int cb_idx_open_for(struct cb_idx *x, const char *archive, struct cb_log *log)
{
	char *path = cb_xasprintf("%s.idx", archive);
	struct stat st;
	unsigned char *buf;
	size_t len;
	int ret;

	/* a FIFO named as the archive must not pass for one through its catalog */
	if ((ret = cb_open_regular_given(archive, "", &st)) < 0) {
		free(path);
		return -1;
	}
	close(ret);
	ret = cb_idx_open(x, path, (uint64_t)st.st_size);
	/* damage first: a catalog is used only if its own digest holds */
	if (ret == 0 && (ret = cb_idx_check_digest(x)) < 0) {
		cb_idx_close(x);
		cb_error_prefix("'%s'", path);
	}
	if (ret == 0)
		goto out;
	if (access(path, F_OK) == 0)
		cb_warn(log, "%s: scanning the archive instead", cb_last_error());
	else
		cb_info(log, "no catalog '%s': scanning the whole archive", path);
	ret = cb_idx_scan_archive(archive, &buf, &len) < 0 ? -1
	      : cb_idx_load(x, buf, len, (uint64_t)st.st_size);
out:
	free(path);
	return ret;
}
