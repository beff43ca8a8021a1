/* Private to src/archive/: the hardlink map (linkmap.c), the tar header
 * rewrite (paxfix.c), an entry's xattrs and ACLs (entry_xattr.c), and the
 * archive being written (struct arch) that the walk (archive.c) and the
 * writing of one member (archive_member.c) share. */
#ifndef CB_ARCHIVE_INT_H
#define CB_ARCHIVE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <archive.h>
#include <archive_entry.h>
#include "cb_archive.h"
#include "cb_codec.h"
#include "cb_fdpath.h"

struct lm_slot {
	uint64_t dev, ino;
	char *name;                 /* archive name of the first link; NULL: free */
	uint32_t left;              /* names still to come */
};

struct linkmap {
	struct lm_slot *slots;
	size_t cap, n;
};

/*
 * An inode with nlink names, now met under name: NULL the first time
 * (remembered; write its data), else the first name to link to. *last: that
 * was its last name; the returned string is then the caller's to free.
 */
char *linkmap_link(struct linkmap *m, uint64_t dev, uint64_t ino, uint64_t nlink,
		   const char *name, int *last);
void linkmap_release(struct linkmap *m);

/* paxfix.c: an entry's header bytes as libarchive wrote them, rewritten
 * for GNU tar (see there); acl: SCHILY.acl.access/default texts to write
 * (NULL: none), replacing libarchive's. */
struct paxfix {
	char *acl[2];
};
int paxfix_header(const unsigned char *in, size_t len, const struct paxfix *x, unsigned char **out,
		  size_t *outlen);
/* "user::rw-,user:3000000002:r--,..." from a system.posix_acl_* value. */
char *paxfix_acl_text(const unsigned char *v, size_t n);

/* entry_xattr.c: an entry's xattrs and POSIX ACLs into a libarchive entry
 * (the ACLs' texts into fix, for paxfix_header), with the staging engine's
 * own names put back as what they stand for. Buffers are the reader's own,
 * reused from entry to entry. */
#define ENTRY_XATTR_MAX 65536          /* XATTR_SIZE_MAX: no value is longer */
struct cb_log;
struct archive_entry;
struct entry_xattrs {
	char *list;
	size_t list_cap;
	unsigned char *val;            /* ENTRY_XATTR_MAX + 256: a side-store file too */
	int side_fd;                   /* the staging engine's big-xattr store, or -1 */
	unsigned char *side_acl[2];    /* an ACL from the side store, until the end */
	size_t side_acl_len[2];
	struct paxfix *fix;
	struct cb_log *log;
	const struct cb_idmap *idmap;  /* IDs shifted back (idshift.c), or NULL */
};
void entry_xattrs_init(struct entry_xattrs *x, struct paxfix *fix, struct cb_log *log);
/* fd: the entry open (regular file, directory), or -1 and path (read
 * without following a last symlink). 0, or -1 (a side-store value that
 * cannot be read: error set); a list that cannot be read is a WARN. */
int entry_xattrs_read(struct entry_xattrs *x, struct archive_entry *e, int fd, const char *path,
		      const char *arcname);
void entry_xattrs_release(struct entry_xattrs *x);

/* idshift.c: an unprivileged container's host IDs as it sees them; 0, or
 * -1 (error set, naming arcname) for an ID outside the map. */
struct cb_idmap;
int idshift_owner(const struct cb_idmap *m, struct archive_entry *e, const char *arcname);
int idshift_acl(const struct cb_idmap *m, unsigned char *v, size_t n, const char *arcname);
int idshift_caps(const struct cb_idmap *m, unsigned char *v, size_t *n, const char *arcname);

/* archive.c and archive_member.c: one archive being written */
#define DATA_BUF (1024 * 1024)

struct arch {
	struct archive *a;            /* pax writer */
	struct archive *disk;         /* metadata reader for the tree */
	struct archive *disk_dense;   /* the same for files without holes */
	struct archive *disk_plain;   /* for extras: no xattrs/ACLs of the host */
	struct linkmap links;         /* staged inodes with names still to come */
	struct cb_codec_writer *codec;
	struct cb_log *log;
	struct cb_archive_stats *st;
	unsigned char *buf, *zeros;
	dev_t root_dev;
	struct entry_xattrs xa;       /* its side_fd: the staging engine's big-xattr store */
	const struct cb_archive_graft *grafts;
	size_t n_grafts;
	unsigned char *grafted;       /* per graft: archived already */
	int codec_failed;             /* the message is in cb_last_error() */
	/* bytes read in place into the codec's chunk, on their way through
	 * libarchive (see out_cb) */
	const unsigned char *pend;
	size_t pend_len;
	int pend_saved;               /* copied to buf: foreign bytes came first */
	/* an entry's header, held back to be rewritten (paxfix.c) */
	int capture;
	unsigned char *hdr;
	size_t hdr_len, hdr_cap;
	struct paxfix fix;
	struct cb_fdpath fp;          /* the walk's directories, bounded fds */
	/* tokens (cb_codec_piece): the tree walked is a staging copy; the
	 * archive's start by the clock file times come from; the regular
	 * file being written has a token */
	int staged;
	struct timespec start;
	int has_tok;
	unsigned char tok[CB_TOKEN_LEN];
};


/* archive_member.c: one member */
la_ssize_t member_out_cb(struct archive *a, void *cd, const void *buf, size_t len);
int member_la_fail(struct arch *c, struct archive *a, const char *name);
int member_put_entry(struct arch *c, struct archive_entry *e, int fd, const char *src);
int member_read_meta(struct arch *c, struct archive *disk, struct archive_entry *e, int fd,
		     const struct stat *st, const char *src);
int member_add_tree_entry(struct arch *c, int dfd, const char *name, const char *arcname, int fd,
			  const struct stat *st);

#endif
