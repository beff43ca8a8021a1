/*
 * restore --salvage: which members a damaged archive still holds. Every
 * unit's bytes are checked against the catalog's CRC-32 before anything is
 * restored; a member with a byte (header, data or padding) in a damaged
 * unit is lost (and restore_paths.c adds the hardlinks to a lost member,
 * then restores the others in runs that never reach a damaged unit).
 * Also the restore's report: the stats' release and the JSON document.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cb_cleanup.h"
#include "cb_index.h"
#include "cb_text.h"
#include "cb_util.h"
#include "restore_int.h"

#define CHECK_BUF (1024 * 1024)

/* The CRC-32 of len bytes at off in fd; -1 if they cannot all be read. */
static int unit_crc(int fd, unsigned char *buf, uint64_t off, uint64_t len, uint32_t *crc)
{
	uLong c = crc32(0, NULL, 0);

	while (len > 0) {
		ssize_t n = pread(fd, buf, len < CHECK_BUF ? (size_t)len : CHECK_BUF, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		c = crc32(c, buf, (uInt)n);
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	*crc = (uint32_t)c;
	return 0;
}

static void add_bad_unit(struct cb_restore_stats *st, uint64_t u)
{
	st->bad_units = cb_xrealloc(st->bad_units, (st->n_bad_units + 1) * sizeof(*st->bad_units));
	st->bad_units[st->n_bad_units++] = u;
}

/* Every unit against its digest; the damaged ones into st->bad_units. */
static int find_bad_units(const struct cb_idx *x, const char *archive, struct restore_job *r)
{
	unsigned char *buf = NULL;
	struct stat sb;
	int fd = open(archive, O_RDONLY | O_CLOEXEC), ret = -1;

	if (fd < 0 || fstat(fd, &sb) < 0) {
		cb_error_errno("cannot read '%s'", archive);
		goto out;
	}
	buf = cb_xmalloc(CHECK_BUF);
	for (uint64_t u = 0; u < x->n_units; u++) {
		struct cb_codec_unit cu, next;
		uint64_t end = (uint64_t)sb.st_size;
		uint32_t crc;

		if (cb_check_interrupt() < 0)
			goto out;
		cb_idx_unit(x, u, &cu);
		if (u + 1 < x->n_units) {
			cb_idx_unit(x, u + 1, &next);
			end = next.c_off;
		}
		if (end < cu.c_off || unit_crc(fd, buf, cu.c_off, end - cu.c_off, &crc) < 0 ||
		    crc != cu.crc)
			add_bad_unit(r->st, u);
	}
	ret = 0;
out:
	free(buf);
	if (fd >= 0)
		close(fd);
	return ret;
}

void restore_lost(struct restore_job *r, const char *path, uint64_t unit, const char *why)
{
	struct cb_restore_stats *st = r->st;
	char *q = cb_quote(path);

	st->lost = cb_xrealloc(st->lost, (st->n_lost + 1) * sizeof(*st->lost));
	st->lost[st->n_lost++] = (struct cb_restore_lost){ cb_xstrdup(path), unit };
	cb_err(r->log, "lost: '%s' (%s unit %llu)", q, why, (unsigned long long)unit);
	free(q);
}

int restore_salvage_plan(struct restore_job *r, const struct cb_idx *x, const char *archive,
			uint64_t **lost_out)
{
	uint64_t *lost;

	*lost_out = NULL;
	if (x->codec != CB_COMPRESS_NONE && (x->version < 2 || x->n_units == 0))
		return cb_error("restore --salvage needs the catalog's unit digests, and '%s.idx' "
				"has none (a catalog of version 1, or none)", archive);
	if (find_bad_units(x, archive, r) < 0)
		return -1;
	lost = cb_xcalloc(x->n_entries ? x->n_entries : 1, sizeof(*lost));
	for (size_t b = 0; b < r->st->n_bad_units; b++) {
		uint64_t u = r->st->bad_units[b], *v = NULL;
		uint64_t n = cb_idx_members_in(x, cb_idx_unit_start(x, u), cb_idx_unit_start(x, u + 1), &v);

		cb_err(r->log, "unit %llu of '%s' is damaged: its members are lost",
		       (unsigned long long)u, archive);
		for (uint64_t k = 0; k < n; k++) {
			struct cb_idx_entry e;

			if (lost[v[k]])
				continue;
			cb_idx_entry(x, v[k], &e);
			lost[v[k]] = u + 1;
			restore_lost(r, e.path, u, "a byte of it in damaged");
		}
		free(v);
	}
	*lost_out = lost;
	return 0;
}

void cb_restore_stats_release(struct cb_restore_stats *st)
{
	for (size_t i = 0; i < st->n_lost; i++)
		free(st->lost[i].path);
	free(st->lost);
	free(st->bad_units);
	memset(st, 0, sizeof(*st));
}

static void json_lost(FILE *out, const struct cb_restore_stats *st)
{
	fputs("  \"damaged_units\": [", out);
	for (size_t i = 0; i < st->n_bad_units; i++)
		fprintf(out, "%s%llu", i ? ", " : "", (unsigned long long)st->bad_units[i]);
	fputs("],\n  \"lost\": [", out);
	for (size_t i = 0; i < st->n_lost; i++) {
		fputs(i ? ",\n    { " : "\n    { ", out);
		cb_json_member(out, "", "path", st->lost[i].path, "");
		fprintf(out, ", \"unit\": %llu }", (unsigned long long)st->lost[i].unit);
	}
	fputs(st->n_lost ? "\n  ]\n" : "]\n", out);
}

void cb_restore_json(FILE *out, const struct cb_restore_opts *o, const struct cb_restore_stats *st,
		     const char *error)
{
	fprintf(out, "{\n  \"cbackup\": \"%s\",\n  \"command\": \"restore\",\n", CB_VERSION);
	cb_json_member(out, "  ", "archive", o->archive, "\n");
	fputs(",\n", out);
	cb_json_member(out, "  ", "destination", o->destdir, "\n");
	fprintf(out, ",\n  \"status\": \"%s\",\n", error ? "failed" : st->n_lost ? "partial" : "ok");
	cb_json_member(out, "  ", "error", error, "\n");
	fprintf(out, ",\n  \"salvage\": %s,\n  \"entries\": %llu,\n  \"bytes\": %llu,\n",
		o->salvage ? "true" : "false", (unsigned long long)st->entries,
		(unsigned long long)st->bytes);
	json_lost(out, st);
	fputs("}\n", out);
	fflush(out);
}
