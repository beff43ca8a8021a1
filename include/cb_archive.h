/*
 * cb_archive: writes a pax tar of a staged tree with libarchive, through an
 * archive write callback into a cb_codec_writer (never libarchive's own
 * filters: the codec stage is ours).
 *
 * Entries: "./" first, then the tree in sorted order with "./" prefixed
 * names; numeric owners only (no user/group names); xattrs, POSIX ACLs,
 * sparse files (holes are not stored), hardlinks (second and later links
 * are hardlink entries); sockets are skipped. Extra files (the guest config
 * at ./etc/cbackup/guest.conf, VM images by base name) are added after the
 * tree from their source paths under the given archive names; those marked
 * first (a Proxmox container's ./etc/vzdump/pct.conf and pct.fw, where
 * vzdump puts them and pct restore looks) before it.
 */
#ifndef CB_ARCHIVE_H
#define CB_ARCHIVE_H

#include <stdint.h>
#include <time.h>
#include "cb_codec.h"
#include "cb_log.h"

struct cb_idmap;

struct cb_archive_extra {
	const char *archive_name;  /* "./etc/cbackup/guest.conf" */
	const char *source_path;   /* file on disk (NULL with data) */
	const char *data;          /* or: this content, a 0644 file of root's */
	size_t len;
	time_t mtime;              /* of data */
	int first;                 /* before the tree */
};

struct cb_archive_stats {
	uint64_t entries;
	uint64_t tar_bytes;        /* uncompressed tar bytes produced ("Total bytes written") */
	double seconds;
	double read_seconds;       /* time reading staged data */
};

/* tree may be NULL (VM: extras only). */
int cb_archive_write(const char *tree, const struct cb_archive_extra *extras, size_t n_extras,
		     struct cb_codec_writer *codec, struct cb_log *log, struct cb_archive_stats *stats);

/*
 * A container's mount point: the directory tree (a snapshot or a staging
 * copy of the volume) is archived under name in place of what the main
 * tree has there (the empty mount-point directory), or after the main tree
 * when it has nothing of that name. Grafts may nest.
 */
struct cb_archive_graft {
	const char *name;   /* "./srv/data" */
	const char *tree;   /* directory on disk (for messages when by_fd) */
	int by_fd;          /* the tree is fd (a snapshot cbackup opened), not */
	int fd;             /* looked up by the name tree */
	int staged;         /* cbackup's own staging copy, which only cbackup
	                     * writes: its files' data may be given to the codec
	                     * by token (cb_codec_piece), unread */
	const struct cb_idmap *idmap;  /* root only: an unprivileged container's
	                     * map; every tree's IDs archived as it sees them */
};

/* root: the main tree (its name is "./"), NULL for extras only. */
int cb_archive_write_grafted(const struct cb_archive_graft *root,
			     const struct cb_archive_graft *grafts,
			     size_t n_grafts, const struct cb_archive_extra *extras, size_t n_extras,
			     struct cb_codec_writer *codec, struct cb_log *log,
			     struct cb_archive_stats *stats);

#endif
