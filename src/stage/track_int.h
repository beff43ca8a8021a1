/*
 * track_int.h: what the files of change tracking share (track.c: the
 * reader of the events and the tracker's life; track_place.c: where an
 * event's object is, the one placement rule; track_hset.c: the set of
 * directories the events named; track_scan.c: what the events cannot
 * show, found by scanning the host). The change list they produce is
 * its own module, cb_changes.h. Not a public header.
 */
#ifndef CB_TRACK_INT_H
#define CB_TRACK_INT_H

#include <fcntl.h>
#include <pthread.h>
#include <sys/fanotify.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "cb_track.h"

/* FAN_OPEN and FAN_CLOSE_NOWRITE: chattr (FS_IOC_SETFLAGS, FSSETXATTR)
 * raises no event of its own, but needs a file descriptor: one opened
 * while tracking (FAN_OPEN), one opened before and closed before the
 * freeze (FAN_CLOSE_NOWRITE), or one held at the freeze (the scan of the
 * guest's processes). cbackup's own opens are dropped by pid. */
#define OPEN_MASK (FAN_OPEN | FAN_CLOSE_NOWRITE)
#define EVENT_MASK (FAN_MODIFY | FAN_ATTRIB | FAN_CLOSE_WRITE | FAN_CREATE | FAN_DELETE | \
		    FAN_MOVED_FROM | FAN_MOVED_TO | FAN_ONDIR)
#define READ_BUF (64 << 10)
/* Events that change an entry but not the directory's list of names. */
#define NAME_ONLY_MASK (FAN_MODIFY | FAN_ATTRIB | FAN_CLOSE_WRITE | OPEN_MASK)
/* At most this many widenings are named in the log (--verbose). */
#define WIDEN_LOGGED 32

/* Where an event's object is (track_place.c: the one rule). Only a
 * path verified to lead to the object says INSIDE or OUTSIDE; whatever
 * cannot be placed exactly is looked up by inode or walks all. */
enum place {
	P_GONE,     /* no longer exists (stale handle, unlinked): nothing */
	P_INSIDE,   /* under the root, or under a bind mount's source */
	P_OUTSIDE,  /* verified outside the root and every bind source */
	P_INODE,    /* unplaceable: pass 2 looks its inode up in the tree */
	P_WHOLE,    /* unknowable: the whole walk */
};

/* One directory seen in an event, by its file handle. */
struct hent {
	uint64_t hash;
	int place;                  /* enum place, when first seen */
	int whole;                  /* list it: names are not enough */
	int self;                   /* the directory's own inode changed */
	int deep;                   /* walk its subtree (moved in) */
	struct file_handle *h;      /* NULL: empty slot */
	char **names;               /* the entries changed in it (inside only) */
	size_t n_names;
};

struct hset {
	struct hent *v;
	size_t cap, n, n_inside;
};

struct cb_track {
	struct cb_log *log;
	char *root;                 /* realpath of the guest root */
	size_t root_len;
	dev_t dev;
	ino_t root_ino;
	int fan_fd, mount_fd, stop_fd;
	/* OPEN_MASK in a group of its own, its queue unlimited: every read
	 * of the file system (the host's too) raises these, and their volume
	 * must not overflow the queue of the events that change the tree */
	int open_fd;
	pthread_t reader;
	int reader_running;
	pthread_mutex_t lock;       /* the set and the flags below */
	struct hset dirs;
	size_t n_names, max_names;  /* names kept in all the directories */
	size_t n_ignored;           /* cb_track_ignore_dir's marks */
	int ignore_failed;
	uint64_t *inos;             /* outside-linked inodes */
	size_t n_inos, cap_inos;
	size_t max;
	uint64_t events, own_events;  /* own: cbackup's reads, dropped */
	int overflow, over_cap;
	char *buf;
	pid_t self_pid;             /* cbackup's own opens are not the guest's */
	struct bind *binds;         /* mounts under the root of its fs */
	size_t n_binds;
	char *mounts;               /* the mount table under the root at start */
	const char *whole_why;      /* set: the final sync walks everything */
	struct { struct file_handle h; unsigned char b[MAX_HANDLE_SZ]; } root_fh;
	int have_root_fh;           /* root_fh: the root's handle (btrfs subvolume) */
	char *widened[WIDEN_LOGGED];/* what was widened and why, for --verbose */
	size_t n_widened;
};

/* A mount inside the root of the root's file system (a bind mount): its
 * source, as handles name it, maps to rel in the root. */
struct bind {
	char *src;                  /* NULL: not placeable, its subtree is walked */
	size_t src_len;
	char *rel;
};

/* track_hset.c: what the events name, by directory handle and by inode */
uint64_t handle_hash(const struct file_handle *h);
struct hent *hset_slot(struct hset *s, const struct file_handle *h, uint64_t hash);
/* counted as inside: kept, resolved at the end */
int place_kept(int place);
struct hent *hset_add(struct hset *s, const struct file_handle *h, uint64_t hash, int place);
void hent_free_names(struct hent *e);
void hset_forget_outside(struct hset *s);
void hset_release(struct hset *s);
void track_add_ino(struct cb_track *t, uint64_t ino);

/* track_place.c: paths and the placement rule */
const char *track_rel_of(const struct cb_track *t, const char *path);
void track_widen(struct cb_track *t, const char *what, const char *why, const char *scope);
size_t track_rels_of(const struct cb_track *t, const char *path, char **rels, size_t n);
enum place track_place_of(const struct cb_track *t, const char *link, const struct stat *sb,
			   char *out, size_t len, const char **why);
enum place track_place_handle(const struct cb_track *t, struct file_handle *h, char *out,
			       size_t len, struct stat *sb, const char **why);


/* track_scan.c: the mounts under the root, the host's processes and loop devices */
/* The mount table under the root, as text; fn (if not NULL) is called
 * with each mount point. */
char *track_mounts_under(struct cb_track *t, void (*fn)(struct cb_track *, const char *));
void track_add_mount(struct cb_track *t, const char *mp);
void track_scan_cgroup(struct cb_track *t, struct cb_changes *c, const char *dir);
void track_scan_all(struct cb_track *t, struct cb_changes *c);
void track_scan_loops(struct cb_track *t);

#endif
