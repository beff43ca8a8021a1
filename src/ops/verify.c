/* cb_verify: check an archive end to end. See include/cb_verify.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <archive_entry.h>
#include <openssl/evp.h>

#include "cb_cleanup.h"
#include "cb_index.h"
#include "cb_private.h"
#include "cb_tarread.h"
#include "cb_util.h"
#include "cb_verify.h"

/* ARCHIVE_WARN: the entry was read, with something libarchive did not
 * like (said as a WARN: line); a worse code fails the verify. */
static void la_warn(struct cb_log *log, struct cb_tarread *t, const char *name)
{
	cb_warn(log, "'%s': %s", name ? name : "", archive_error_string(t->a));
}

static int read_entry_data(struct cb_tarread *t, const char *name, struct cb_verify_stats *st,
			   struct cb_log *log)
{
	const void *buf;
	size_t size;
	la_int64_t off;
	int rc;

	while ((rc = archive_read_data_block(t->a, &buf, &size, &off)) == ARCHIVE_OK ||
	       rc == ARCHIVE_WARN) {
		if (rc == ARCHIVE_WARN)
			la_warn(log, t, name);
		st->bytes += size;
		if (cb_check_interrupt() < 0)
			return -1;
	}
	if (rc != ARCHIVE_EOF) {
		char what[512];
		snprintf(what, sizeof(what), "corrupt archive at entry '%s'", name);
		return cb_tarread_error(t, what);
	}
	return 0;
}

static int walk(struct cb_tarread *t, struct cb_verify_stats *st, struct cb_log *log)
{
	struct archive_entry *e;
	int rc;

	while ((rc = archive_read_next_header(t->a, &e)) != ARCHIVE_EOF) {
		if (rc < ARCHIVE_WARN)
			return cb_tarread_error(t, st->entries ? "corrupt archive after its last good entry"
								 : "not a readable tar archive");
		if (rc == ARCHIVE_WARN)
			la_warn(log, t, archive_entry_pathname(e));
		st->entries++;
		if (read_entry_data(t, archive_entry_pathname(e), st, log) < 0)
			return -1;
	}
	return cb_tarread_finish_stream(t);
}

/* ARCHIVE.idx, when there is one: sound, of this archive, and what the
 * .sha256 says (a damaged catalog fails verify: `cbackup index` remakes it). */
static int check_catalog(const char *archive, struct cb_log *log)
{
	char *path = cb_xasprintf("%s.idx", archive), want[65];
	struct cb_idx x;
	struct stat st;
	int ret = 0;

	if (lstat(path, &st) < 0 || stat(archive, &st) < 0)
		goto out;
	if (cb_idx_expected_sha256(archive, want) < 0 ||
	    cb_idx_open(&x, path, (uint64_t)st.st_size) < 0) {
		ret = cb_error_prefix("catalog (run cbackup index to rebuild it)");
		goto out;
	}
	ret = cb_idx_check_digest(&x);
	if (ret == 0 && *want && cb_idx_check_sha256(&x, want, archive) < 0)
		ret = -1;
	cb_idx_close(&x);
	if (ret < 0)
		cb_error_prefix("catalog '%s' (run cbackup index to rebuild it)", path);
	else
		cb_info(log, "catalog '%s' is good", path);
out:
	free(path);
	return ret;
}

/* A failure here is a warning: the archive is good all the same. */
void cb_verify_mark(const char *archive, struct cb_log *log)
{
	char *path = cb_xasprintf("%s.verified", archive), text[80];
	time_t now = time(NULL);
	char stamp[64];

	strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", localtime(&now));
	snprintf(text, sizeof(text), "verified %s\n", stamp);
	if (cb_write_file_replace(path, text, 0644) < 0)
		cb_warn(log, "%s", cb_last_error());
	free(path);
}

/* A damaged unit: which members have bytes in it (from the catalog). */
static void name_members(const char *archive, uint64_t unit, char *msg, size_t len)
{
	char *path = cb_xasprintf("%s.idx", archive);
	struct cb_idx x;
	struct cb_idx_entry e;
	uint64_t *v = NULL, n = 0;
	size_t at = strlen(msg);

	if (cb_idx_open(&x, path, 0) == 0) {
		n = cb_idx_members_in(&x, cb_idx_unit_start(&x, unit), cb_idx_unit_start(&x, unit + 1), &v);
		for (uint64_t i = 0; i < n && at + 1 < len; i++) {
			cb_idx_entry(&x, v[i], &e);
			at += (size_t)snprintf(msg + at, len - at, "%s'%s'", i ? ", " : "; members in it: ",
					       e.path);
			if (at >= len)
				break;
			if (i == 15 && n > 16) {
				snprintf(msg + at, len - at, " and %llu more", (unsigned long long)(n - 16));
				break;
			}
		}
		cb_idx_close(&x);
	}
	free(v);
	free(path);
}

/* The tar stream's size, as ARCHIVE.idx gives it (0: no catalog). */
static uint64_t catalog_tar_size(const char *archive)
{
	char *path = cb_xasprintf("%s.idx", archive);
	struct cb_idx x;
	uint64_t size = 0;

	if (access(path, F_OK) == 0 && cb_idx_open(&x, path, 0) == 0) {
		size = x.tar_size;
		cb_idx_close(&x);
	}
	free(path);
	return size;
}

int cb_verify_run(const char *archive, int dry_run, int progress, struct cb_log *log,
		  struct cb_verify_stats *st)
{
	struct cb_tarread t = { .fd = -1, .file_fd = -1 };
	struct cb_progress bar = { 0 };
	char size[32], walk_error[4096];
	int have_sum, walked, ret = -1;
	uint64_t bad;

	memset(st, 0, sizeof(*st));
	walked = cb_tarread_open_checked(&t, archive, CB_SUM_FILE);
	if (walked == 0) {
		cb_progress_start(&bar, progress, "verify", catalog_tar_size(archive));
		t.progress = &bar;
		walked = walk(&t, st, log);
		cb_progress_end(&bar);
	}
	snprintf(walk_error, sizeof(walk_error), "%s", cb_last_error());
	if (t.file_fd < 0) {   /* not even opened, or a .sha256 that is no checksum file */
		cb_error("%s", walk_error);
		goto out;
	}
	have_sum = t.expect_sha256[0] != '\0';
	if (!have_sum)
		cb_warn(log, "no checksum file '%s.sha256': checking each unit against the catalog "
			"and the codec's own checks", archive);
	if (walked < 0 && t.reader && (bad = cb_codec_reader_bad_unit(t.reader)) > 0)
		name_members(archive, bad - 1, walk_error, sizeof(walk_error));
	if (have_sum && cb_tarread_finish_sha256(&t) < 0)
		goto out;
	/* a flipped byte is first of all a checksum mismatch: say that first */
	if (have_sum && strcasecmp(t.expect_sha256, t.sha256)) {
		cb_error("checksum mismatch: '%s.sha256' says %s, the archive has %s%s%s", archive,
			 t.expect_sha256, t.sha256, walked < 0 ? "; " : "", walked < 0 ? walk_error : "");
		goto out;
	}
	if (walked < 0) {
		cb_error("%s", walk_error);
		goto out;
	}
	if (check_catalog(archive, log) < 0)
		goto out;
	st->checksum_checked = have_sum;
	cb_fmt_bytes(size, sizeof(size), st->bytes);
	cb_info(log, "archive '%s' is good: %llu entries, %s of file data%s", archive,
		(unsigned long long)st->entries, size, st->checksum_checked ? ", checksum matches" : "");
	if (dry_run)
		cb_info(log, "dry run: '%s.verified' not written", archive);
	else
		cb_verify_mark(archive, log);
	ret = 0;
out:
	cb_tarread_close(&t);
	return ret;
}
