/*
 * cb_restore: extract an archive below DESTDIR. See include/cb_restore.h.
 *
 * Decompression is ours (cb_codec reader); libarchive only parses tar and
 * writes to disk. Here: the whole archive read, after the space check
 * (from the catalog; a counting pass when there is none); each entry is
 * extracted by restore_entry.c (names checked, made absolute under the
 * canonical DESTDIR), the tree made and put in DESTDIR's place by
 * restore_dest.c, restore --path by restore_paths.c.
 *
 * No ARCHIVE_EXTRACT_SPARSE: holes are made where the archive's sparse map
 * has them, and nowhere else (a dense file of zeros, a swap file, stays
 * dense, as GNU tar leaves it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <archive.h>
#include <archive_entry.h>

#include "cb_codec.h"
#include "cb_restore.h"
#include "cb_tarread.h"
#include "cb_cleanup.h"
#include "cb_util.h"
#include "cb_pvect.h"
#include "restore_int.h"

static int dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int empty = 1;

	if (!d)
		return cb_error_errno("cannot open directory '%s'", path);
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			empty = 0;
			break;
		}
	closedir(d);
	return empty;
}

/* A dry run creates no DESTDIR: its space is that of the nearest
 * directory above it that exists. */
static int dry_dest(struct restore_job *r, const char *destdir)
{
	char *p = cb_xstrdup(destdir), *slash;

	cb_info(r->log, "dry run: would create '%s'", destdir);
	while ((slash = strrchr(p, '/')) && access(p, F_OK) < 0)
		slash == p ? (void)(p[1] = '\0') : (void)(*slash = '\0');
	r->dest = realpath(access(p, F_OK) == 0 ? p : ".", NULL);
	free(p);
	return r->dest ? 0 : cb_error_errno("cannot resolve '%s'", destdir);
}

/* --dry-run: the checks restore_dest.c makes on DESTDIR, and nothing made. */
static int dry_prepare_dest(struct restore_job *r, const struct cb_restore_opts *o)
{
	struct stat st;
	int empty;

	if (stat(o->destdir, &st) < 0) {
		if (errno != ENOENT)
			return cb_error_errno("cannot stat '%s'", o->destdir);
		return dry_dest(r, o->destdir);
	} else if (!S_ISDIR(st.st_mode)) {
		return cb_error("destination '%s' is not a directory", o->destdir);
	} else {
		empty = dir_is_empty(o->destdir);
		if (empty < 0)
			return -1;
		if (!empty && !o->force)
			return cb_error("destination '%s' is not empty (use --force)", o->destdir);
	}
	r->dest = realpath(o->destdir, NULL);
	if (!r->dest)
		return cb_error_errno("cannot resolve '%s'", o->destdir);
	return 0;
}

/* The container config an archive carries (vzdump's ./etc/vzdump/pct.conf
 * and pct.fw, cbackup's ./etc/cbackup/guest.conf) belongs to the host, not
 * to the guest's tree (pct restore takes it out too): a whole restore
 * leaves it out; restore --path names it to get it. */
static int is_guest_config(struct archive_entry *e)
{
	static const char *const names[] = { "etc/vzdump/pct.conf", "etc/vzdump/pct.fw",
					     "etc/cbackup/guest.conf", NULL };
	const char *p = archive_entry_pathname(e);

	if (!p || archive_entry_filetype(e) != AE_IFREG)
		return 0;
	p += strncmp(p, "./", 2) ? 0 : 2;
	for (int i = 0; names[i]; i++)
		if (!strcmp(p, names[i]))
			return 1;
	return 0;
}

/* DEBUG: the units each decoding thread took (none: one thread) */
static void say_threads(struct restore_job *r)
{
	uint64_t units[16], sum = 0;
	char list[16 * 24] = "";
	size_t at = 0;
	int n = cb_codec_reader_threads(r->tr.reader, units, 16);

	for (int i = 0; i < n && i < 16; i++) {
		sum += units[i];
		at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%llu", i ? " " : "",
				       (unsigned long long)units[i]);
	}
	if (n > 0)
		cb_debug(r->log, "decoded %llu units on %d threads (units each: %s)",
			 (unsigned long long)sum, n, list);
}

static int restore_all(struct restore_job *r)
{
	struct archive_entry *e;
	int rc;

	r->tr.progress = &r->progress;
	for (;;) {
		if (cb_check_interrupt() < 0)
			return -1;
		rc = archive_read_next_header(r->tr.a, &e);
		/* the stream's end, and the .sha256, checked before success */
		if (rc == ARCHIVE_EOF) {
			say_threads(r);
			return cb_tarread_end(&r->tr);
		}
		if (rc < ARCHIVE_WARN) {
			if (r->tr.codec_failed)
				return -1;
			return cb_error("cannot read archive: %s", archive_error_string(r->tr.a));
		}
		if (rc == ARCHIVE_WARN)
			cb_warn(r->log, "%s", archive_error_string(r->tr.a));
		if (is_guest_config(e))
			continue;
		if (restore_entry(r, e) < 0)
			return -1;
	}
}

/* ---- free space: a counting pass over the tar headers ---- */


/* Data blocks an entry takes on disk: its data regions (holes take none),
 * rounded up to the file system's block; every entry at least a block
 * (directories, symlinks, inodes' own overhead, roughly). */
static uint64_t entry_blocks(struct archive_entry *e, uint64_t bsize)
{
	uint64_t data = 0;
	la_int64_t off, len;

	if (archive_entry_filetype(e) == AE_IFREG && !archive_entry_hardlink(e)) {
		if (archive_entry_sparse_reset(e) > 0) {
			while (archive_entry_sparse_next(e, &off, &len) == ARCHIVE_OK)
				data += (uint64_t)len;
		} else {
			data = (uint64_t)archive_entry_size(e);
		}
	}
	return data ? (data + bsize - 1) / bsize : 1;
}

static int count_archive(const char *archive, uint64_t bsize, struct restore_need *n)
{
	struct cb_tarread t;
	struct archive_entry *e;
	int rc, ret = -1;

	if (cb_tarread_open(&t, archive, 0) < 0)
		goto out;
	while ((rc = archive_read_next_header(t.a, &e)) != ARCHIVE_EOF) {
		if (rc < ARCHIVE_WARN || cb_check_interrupt() < 0) {
			if (rc < ARCHIVE_WARN)
				cb_tarread_error(&t, "cannot read archive");
			goto out;
		}
		n->bytes += entry_blocks(e, bsize) * bsize;
		n->entries++;
	}
	n->tar = t.total;
	ret = 0;
out:
	cb_tarread_close(&t);
	return ret;
}

static int check_space(struct restore_job *r, const struct cb_restore_opts *o)
{
	struct statvfs vfs;
	struct restore_need n = { 0, 0, 0 };
	uint64_t bs;

	if (restore_statvfs(r, &vfs) < 0)
		return cb_error_errno("cannot stat file system of '%s'", r->dest);
	bs = vfs.f_frsize ? vfs.f_frsize : 4096;
	/* the catalog's word saves decoding the whole archive once more */
	if (restore_need_from_catalog(o->archive, o->stream ? o->stream_size : 0, bs, &n) < 0) {
		/* a stream is read once: streamed nights have a sound catalog */
		if (o->stream)
			return cb_error("'%s': its catalog cannot be read", o->archive);
		n = (struct restore_need){ 0, 0, 0 };
		if (count_archive(o->archive, bs, &n) < 0)
			return -1;
	}
	/* the tar stream's size (the catalog's, or the counting pass's) is
	 * the progress total */
	cb_progress_start(&r->progress, o->progress, "restore", n.tar);
	return restore_space_check(r, o, &n);
}

static int open_disk(struct restore_job *r)
{
	r->out = archive_write_disk_new();
	if (!r->out)
		return cb_error("cannot initialise libarchive");
	/* no archive_write_disk_set_standard_lookup(): owners by number */
	if (archive_write_disk_set_options(r->out, EXTRACT_FLAGS) != ARCHIVE_OK)
		return cb_error("cannot set up the restore: %s", archive_error_string(r->out));
	return 0;
}

void restore_release(struct restore_job *r)
{
	cb_tarread_close(&r->tr);
	restore_disk_release(r);
	restore_dest_release(r);
	free(r->dest);
}

/* --path and --salvage find members by the catalog (restore_paths.c);
 * a whole restore reads the archive from its start. */
static int by_catalog(const struct cb_restore_opts *o)
{
	return o->n_paths > 0 || o->salvage;
}

/* --map-ids FILE: an unprivileged Proxmox VE container's config, whose
 * lxc.idmap lines (or PVE's default map) give the host's IDs */
static int load_id_map(const char *file, struct cb_pvect_conf *c)
{
	int pve = cb_pvect_load(file, "0", c);

	if (pve < 0)
		return cb_error_prefix("--map-ids");
	if (!pve || !c->map.n)
		return cb_error("--map-ids '%s': not the config of an unprivileged container (no "
				"ID map: 'unprivileged: 1' or lxc.idmap lines)", file);
	return 0;
}

int cb_restore_check_map_ids(const char *file)
{
	struct cb_pvect_conf c = { 0 };
	int ret = load_id_map(file, &c);

	cb_pvect_release(&c);
	return ret;
}

int cb_restore_run(const struct cb_restore_opts *o, struct cb_log *log, struct cb_restore_stats *st)
{
	struct restore_job r = { .log = log, .st = st, .tr = { .fd = -1, .file_fd = -1 }, .parent_fd = -1,
			 .dest_fd = -1, .stage_fd = -1, .stage_dir_fd = -1, .cwd_fd = -1 };
	/* the archive by its absolute name: the working directory changes */
	char *archive = o->stream ? restore_stream_name(o->archive) : realpath(o->archive, NULL), size[32];
	struct cb_restore_opts ao = *o;
	struct cb_pvect_conf ids = { 0 };
	int ret = -1;

	memset(st, 0, sizeof(*st));
	if (o->map_ids && load_id_map(o->map_ids, &ids) < 0)
		goto out;
	r.idmap = o->map_ids ? &ids.map : NULL;
	if (open_disk(&r) < 0)
		goto out;
	if (o->dry_run) {
		/* the checks of a restore, then the counting pass: nothing else */
		ret = dry_prepare_dest(&r, o) < 0 ? -1
		      : by_catalog(o) ? cb_restore_paths(&r, o) : check_space(&r, o);
		goto out;
	}
	if (!archive) {
		cb_error_errno("cannot open '%s'", o->archive);
		goto out;
	}
	ao.archive = archive;
	if ((o->stream && restore_stream_open(&r, &ao) < 0) ||
	    (!o->stream && !by_catalog(o) && cb_tarread_open_checked(&r.tr, archive, o->ignore_checksum ? CB_SUM_NONE : CB_SUM_CATALOG) < 0) ||
	    restore_dest_open(&r, &ao) < 0)
		goto out;
	ret = by_catalog(o) ? cb_restore_paths(&r, &ao)
			    : check_space(&r, &ao) < 0 || restore_all(&r) < 0 ? -1 : 0;
	cb_progress_end(&r.progress);
	if (ret < 0)
		goto out;
	ret = -1;
	if (restore_close(&r) < 0 || restore_dest_finish(&r, &ao) < 0)
		goto out;
	cb_fmt_bytes(size, sizeof(size), st->bytes);
	cb_info(log, "restored %llu entries, %s", (unsigned long long)st->entries, size);
	ret = 0;
out:
	if (ret == 0 && st->n_lost)
		cb_error("%zu member(s) %s in %zu damaged unit(s), the others %s", st->n_lost,
			 o->dry_run ? "would be lost" : "lost", st->n_bad_units,
			 o->dry_run ? "restorable" : "restored");
	restore_release(&r);
	cb_pvect_release(&ids);
	free(archive);
	return ret;
}
