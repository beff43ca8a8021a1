/* cb_browse: `cbackup ls` and `cbackup index`. See include/cb_browse.h. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cb_browse.h"
#include "cb_index.h"
#include "cb_text.h"
#include "cb_util.h"

/* GNU tar's mode column: type, rwx with s/S and t/T. */
static void mode_string(const struct cb_idx_entry *e, char m[11])
{
	static const char rwx[] = "rwxrwxrwx";
	uint32_t t = e->mode & S_IFMT;

	m[0] = e->flags & CB_IDX_HARDLINK ? 'h' : t == S_IFDIR ? 'd' : t == S_IFLNK ? 'l'
	     : t == S_IFCHR ? 'c' : t == S_IFBLK ? 'b' : t == S_IFIFO ? 'p' : '-';
	for (int i = 0; i < 9; i++)
		m[1 + i] = e->mode & (0400u >> i) ? rwx[i] : '-';
	if (e->mode & S_ISUID)
		m[3] = m[3] == 'x' ? 's' : 'S';
	if (e->mode & S_ISGID)
		m[6] = m[6] == 'x' ? 's' : 'S';
	if (e->mode & S_ISVTX)
		m[9] = m[9] == 'x' ? 't' : 'T';
	m[10] = '\0';
}

/* tar -tv's line; *width is its running width of "uid/gid size". */
static void print_tar_line(FILE *out, const struct cb_idx_entry *e, int *width)
{
	char mode[11], owner[32], size[48], date[32];
	time_t t = (time_t)e->mtime;
	struct tm tm;
	uint32_t type = e->mode & S_IFMT;
	char *path, *link;
	int pad;

	mode_string(e, mode);
	snprintf(owner, sizeof(owner), "%u/%u", e->uid, e->gid);
	if (type == S_IFCHR || type == S_IFBLK)
		snprintf(size, sizeof(size), "%u,%u", e->dev_major, e->dev_minor);
	else
		snprintf(size, sizeof(size), "%llu", (unsigned long long)e->size);
	localtime_r(&t, &tm);
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M", &tm);
	pad = (int)(strlen(owner) + 1 + strlen(size));
	if (pad > *width)
		*width = pad;
	/* names quoted as tar -tv quotes them: a name cannot forge a line */
	path = cb_quote(e->path);
	link = cb_quote(e->link);
	fprintf(out, "%s %s %*s %s %s", mode, owner, *width - pad + (int)strlen(size), size, date,
		path);
	if (e->flags & CB_IDX_HARDLINK)
		fprintf(out, " link to %s", link);
	else if (type == S_IFLNK)
		fprintf(out, " -> %s", link);
	fputc('\n', out);
	free(path);
	free(link);
}

static const char *type_name(const struct cb_idx_entry *e)
{
	switch (e->mode & S_IFMT) {
	case S_IFDIR: return "dir";
	case S_IFLNK: return "symlink";
	case S_IFCHR: return "char";
	case S_IFBLK: return "block";
	case S_IFIFO: return "fifo";
	default: return e->flags & CB_IDX_HARDLINK ? "hardlink" : "file";
	}
}

static void print_json_line(FILE *out, const struct cb_idx_entry *e)
{
	fputc('{', out);
	cb_json_member(out, "", "path", e->path, "");
	fprintf(out, ",\"type\":\"%s\",\"size\":%llu,\"mode\":\"%04o\",\"uid\":%u,\"gid\":%u,"
		"\"mtime\":%lld.%09u", type_name(e), (unsigned long long)e->size, e->mode & 07777,
		e->uid, e->gid, (long long)e->mtime, e->mtime_nsec);
	if (*e->link) {
		fputc(',', out);
		cb_json_member(out, "", "link", e->link, "");
	}
	if ((e->mode & S_IFMT) == S_IFCHR || (e->mode & S_IFMT) == S_IFBLK)
		fprintf(out, ",\"major\":%u,\"minor\":%u", e->dev_major, e->dev_minor);
	fputs("}\n", out);
}

static void print_entries(FILE *out, const struct cb_idx *x, const uint64_t *v, uint64_t n,
			  int json, int *width)
{
	for (uint64_t i = 0; i < n; i++) {
		struct cb_idx_entry e;

		cb_idx_entry(x, v ? v[i] : i, &e);
		if (json)
			print_json_line(out, &e);
		else
			print_tar_line(out, &e, width);
	}
}

int cb_ls_run(const char *archive, char *const *paths, size_t n_paths, int json, FILE *out,
	      struct cb_log *log)
{
	struct cb_idx x;
	int width = 19, ret = 0;

	if (cb_idx_open_for(&x, archive, log) < 0)
		return -1;
	if (n_paths == 0)
		print_entries(out, &x, NULL, x.n_entries, json, &width);
	for (size_t i = 0; i < n_paths; i++) {
		uint64_t *v, n = cb_idx_select(&x, paths[i], &v);

		if (n == 0)
			ret = cb_error("'%s': not in the archive", paths[i]);
		print_entries(out, &x, v, n, json, &width);
		free(v);
	}
	cb_idx_close(&x);
	if (fflush(out) != 0)
		return cb_error_errno("cannot write the listing");
	return ret;
}

/* The units found by decoding are the catalog's; a zstd archive's seek
 * table must agree with them (other seekable-aware readers use it): one
 * that does not is reported, never used. */
static void check_seek_table(const char *archive, const struct cb_idx *x, struct cb_log *log)
{
	struct cb_codec_units u = { 0 };
	int fd = cb_open_regular_given(archive, "", NULL), rc, same;
	uint64_t uo, co;

	if (fd < 0)
		return;
	rc = cb_zstd_read_seek_table(fd, x->archive_size, &u);
	close(fd);
	same = rc == 0 && u.n == x->n_units;
	for (uint64_t i = 0; same && i < u.n; i++) {
		cb_idx_unit_for(x, u.v[i].u_off, &uo, &co);
		same = uo == u.v[i].u_off && co == u.v[i].c_off;
	}
	if (rc < 0)
		cb_warn(log, "'%s': %s (ignored: the frames themselves are the units)", archive,
			cb_last_error());
	else if (rc == 0 && !same)
		cb_warn(log, "'%s': the zstd seek table disagrees with the frames (ignored)", archive);
	else if (rc == 1)
		cb_info(log, "'%s' has no zstd seek table (an archive of one stream)", archive);
	cb_codec_units_release(&u);
}

int cb_index_run(const char *archive, int dry_run, struct cb_log *log)
{
	char *path = cb_xasprintf("%s.idx", archive), hex[65];
	unsigned char *buf = NULL;
	size_t len;
	int ret = -1;
	struct cb_idx x;

	if (cb_idx_scan_archive(archive, &buf, &len) < 0)
		goto out;
	/* what is written must load: the same checks as every reader's */
	{
		unsigned char *copy = cb_xmalloc(len);

		memcpy(copy, buf, len);
		if (cb_idx_load(&x, copy, len, 0) < 0)
			goto out;
	}
	if (x.codec == CB_COMPRESS_ZSTD)
		check_seek_table(archive, &x, log);
	cb_idx_close(&x);
	if (dry_run) {
		cb_info(log, "dry run: would write catalog '%s' (%zu bytes)", path, len);
		ret = 0;
		goto out;
	}
	if (cb_idx_write_file(path, buf, len, hex) < 0)
		goto out;
	cb_info(log, "wrote catalog '%s' (%zu bytes, sha256 %s)", path, len, hex);
	ret = 0;
out:
	free(buf);
	free(path);
	return ret;
}
