/*
 * cb_track: fanotify change tracking for the freeze window. See
 * include/cb_track.h for what it promises and what it relies on.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/fanotify.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/loop.h>

#include "cb_fhandle.h"
#include "cb_track.h"
#include "cb_util.h"

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

/* Where an event's object is (place(): the one rule, issue 24). Only a
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

/* ---- the set of directory handles ---- */

static uint64_t handle_hash(const struct file_handle *h)
{
	uint64_t x = 1469598103934665603ULL ^ (uint64_t)h->handle_type;

	for (unsigned i = 0; i < h->handle_bytes; i++)
		x = (x ^ h->f_handle[i]) * 1099511628211ULL;
	return x;
}

static int handle_eq(const struct file_handle *a, const struct file_handle *b)
{
	return a->handle_type == b->handle_type && a->handle_bytes == b->handle_bytes &&
	       !memcmp(a->f_handle, b->f_handle, a->handle_bytes);
}

static struct hent *hset_slot(struct hset *s, const struct file_handle *h, uint64_t hash)
{
	size_t i = hash & (s->cap - 1);

	while (s->v[i].h && !(s->v[i].hash == hash && handle_eq(s->v[i].h, h)))
		i = (i + 1) & (s->cap - 1);
	return &s->v[i];
}

static void hset_grow(struct hset *s)
{
	struct hset big = { cb_xcalloc(s->cap ? s->cap * 2 : 1024, sizeof(struct hent)),
			    s->cap ? s->cap * 2 : 1024, s->n, s->n_inside };

	for (size_t i = 0; i < s->cap; i++)
		if (s->v[i].h)
			*hset_slot(&big, s->v[i].h, s->v[i].hash) = s->v[i];
	free(s->v);
	*s = big;
}

/* counted as inside: kept, resolved at the end */
static int kept(int place)
{
	return place == P_INSIDE || place == P_INODE;
}

static struct hent *hset_add(struct hset *s, const struct file_handle *h, uint64_t hash,
			     int place)
{
	size_t size = sizeof(*h) + h->handle_bytes;
	struct hent *e;

	if ((s->n + 1) * 2 > s->cap)
		hset_grow(s);
	e = hset_slot(s, h, hash);
	if (e->h)  /* known already (its answer from when first seen stands) */
		return e;
	e->h = cb_xmalloc(size);
	memcpy(e->h, h, size);
	e->hash = hash;
	e->place = place;
	s->n++;
	s->n_inside += kept(place);
	return e;
}

/* Free a list of changed names and empty it (struct hent, cb_changed_dir). */
static void names_free(char ***names, size_t *n)
{
	for (size_t i = 0; i < *n; i++)
		free((*names)[i]);
	free(*names);
	*names = NULL;
	*n = 0;
}

static void hent_free_names(struct hent *e)
{
	names_free(&e->names, &e->n_names);
}

/* Keep the directories inside the root, forget the others: whether a
 * directory is outside is only a cache, wrong once a directory moves. */
static void hset_forget_outside(struct hset *s)
{
	struct hset in = { cb_xcalloc(s->cap, sizeof(struct hent)), s->cap, 0, 0 };

	for (size_t i = 0; i < s->cap; i++) {
		if (!s->v[i].h)
			continue;
		if (kept(s->v[i].place)) {
			*hset_slot(&in, s->v[i].h, s->v[i].hash) = s->v[i];
			in.n++;
			in.n_inside++;
		} else {
			free(s->v[i].h);
			hent_free_names(&s->v[i]);
		}
	}
	free(s->v);
	*s = in;
}

static void hset_release(struct hset *s)
{
	for (size_t i = 0; i < s->cap; i++) {
		free(s->v[i].h);
		hent_free_names(&s->v[i]);
	}
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* ---- paths ---- */

/* "a/b" of path under the root, "" for the root itself; NULL outside. */
static const char *rel_of(const struct cb_track *t, const char *path)
{
	if (t->root_len == 1)
		return path[0] == '/' ? path + 1 : NULL;
	if (strncmp(path, t->root, t->root_len) || (path[t->root_len] && path[t->root_len] != '/'))
		return NULL;
	return path[t->root_len] ? path + t->root_len + 1 : "";
}

/* Note that something was widened (--verbose names the first ones). */
static void widen(struct cb_track *t, const char *what, const char *why, const char *scope)
{
	if (t->n_widened < WIDEN_LOGGED)
		t->widened[t->n_widened++] = cb_xasprintf("'%s' %s: %s", what, why, scope);
}

/* Every place in the root of the object at path (as the kernel names
 * it): under the root, under each bind mount's source. Returns how many
 * were put in rels (each freed by the caller), at most n. */
static size_t rels_of(const struct cb_track *t, const char *path, char **rels, size_t n)
{
	const char *r = rel_of(t, path);
	size_t k = 0;

	if (r && k < n)
		rels[k++] = cb_xstrdup(r);
	for (size_t i = 0; i < t->n_binds && k < n; i++) {
		const struct bind *b = &t->binds[i];
		const char *tail = path + b->src_len;
		if (!b->src || strncmp(path, b->src, b->src_len) || (*tail && *tail != '/'))
			continue;
		rels[k++] = *tail ? cb_xasprintf("%s%s", b->rel, tail) : cb_xstrdup(b->rel);
	}
	return k;
}

/* The path fd's /proc link names, if it leads back to the inode sb: 0,
 * else -1 (errno: ENAMETOOLONG for a path of 4096 bytes or more, ESTALE
 * for one that leads elsewhere: a disconnected dentry names "/", a name
 * that ends in " (deleted)" is what it says only if the inode has no
 * links left). */
static int verified_path(const char *link, const struct stat *sb, char *out, size_t len)
{
	ssize_t n = readlink(link, out, len - 1);
	struct stat now;

	if (n < 0)
		return -1;
	if ((size_t)n >= len - 1)
		return errno = ENAMETOOLONG, -1;
	out[n] = '\0';
	if (fstatat(AT_FDCWD, out, &now, AT_SYMLINK_NOFOLLOW) < 0 || now.st_dev != sb->st_dev || now.st_ino != sb->st_ino)
		return errno = ESTALE, -1;
	return 0;
}

/* The one rule (issue 24): where the object at fd (the /proc link LINK
 * names its path) is. out: its verified path when INSIDE or OUTSIDE. */
static enum place place_of(const struct cb_track *t, const char *link, const struct stat *sb,
			   char *out, size_t len, const char **why)
{
	char *rel = NULL;

	if (sb->st_nlink == 0)
		return P_GONE;
	if (verified_path(link, sb, out, len) < 0) {
		*why = errno == ENAMETOOLONG ? "has a path of 4096 bytes or more"
					     : "has a path that does not lead to it (disconnected)";
		return sb->st_dev == t->dev ? P_INODE : P_WHOLE;
	}
	if (rels_of(t, out, &rel, 1)) {
		free(rel);
		return P_INSIDE;
	}
	return P_OUTSIDE;
}

/* A handle of the root's file system: where its object is. */
static enum place place_handle(const struct cb_track *t, struct file_handle *h, char *out,
			       size_t len, struct stat *sb, const char **why)
{
	int fd = open_by_handle_at(t->mount_fd, h, O_PATH | O_CLOEXEC);
	char link[64];
	enum place p;

	if (fd < 0) {
		uint64_t ino;
		int err = errno;

		*why = "has a handle that cannot be opened";
		/* a stale handle: its inode is freed, it is nowhere */
		if (err == ESTALE || err == ENOENT)
			return P_GONE;
		/* the inode exists, the kernel cannot open it now (ENOMEM on a
		 * busy host: an inode being freed or set up, a file it cannot
		 * connect to a path): looked up in the tree by the number its
		 * handle carries; its type is not known (st_mode 0) */
		memset(sb, 0, sizeof(*sb));
		if (cb_fhandle_ino(h, t->have_root_fh ? &t->root_fh.h : NULL, &ino) < 0)
			return P_WHOLE;
		if (err == ENOMEM)
			*why = "has a handle the kernel cannot open now (ENOMEM)";
		sb->st_dev = t->dev;
		sb->st_ino = (ino_t)ino;
		return P_INODE;
	}
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	if (fstat(fd, sb) < 0) {
		*why = "cannot be read (fstat)";
		p = P_WHOLE;
	} else {
		p = place_of(t, link, sb, out, len, why);
	}
	close(fd);
	return p;
}

/* ---- the reader ---- */

static void add_ino(struct cb_track *t, uint64_t ino)
{
	if (t->n_inos && t->inos[t->n_inos - 1] == ino)
		return;
	if (t->n_inos == t->cap_inos) {
		t->cap_inos = t->cap_inos ? t->cap_inos * 2 : 64;
		t->inos = cb_xrealloc(t->inos, t->cap_inos * sizeof(*t->inos));
	}
	t->inos[t->n_inos++] = ino;
}

/* A name made outside the root may be a new link to an inode inside it:
 * its changes are then reported under this name only. */
static void outside_name(struct cb_track *t, struct file_handle *h, const char *name)
{
	int dfd = open_by_handle_at(t->mount_fd, h, O_PATH | O_CLOEXEC);
	struct stat sb;

	if (dfd < 0)
		return;
	if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(sb.st_mode) &&
	    sb.st_nlink > 1 && sb.st_dev == t->dev)
		add_ino(t, (uint64_t)sb.st_ino);
	close(dfd);
}

static void make_whole(struct cb_track *t, struct hent *e)
{
	t->n_names -= e->n_names;
	hent_free_names(e);
	e->whole = 1;
}

/* What an event says changed in directory e (inside the root): the entry
 * NAME only, the directory's own inode ("."), or (made, removed, renamed)
 * its list of names. */
static void note_change(struct cb_track *t, struct hent *e, uint64_t mask, const char *name)
{
	if (e->whole)
		return;
	if (name && !strcmp(name, ".") && !(mask & ~(uint64_t)(NAME_ONLY_MASK | FAN_ONDIR))) {
		e->self = 1;
		return;
	}
	if (!name || !strcmp(name, ".") || (mask & ~(uint64_t)NAME_ONLY_MASK)) {
		make_whole(t, e);
		return;
	}
	for (size_t i = 0; i < e->n_names; i++)
		if (!strcmp(e->names[i], name))
			return;
	if (e->n_names == CB_TRACK_DIR_NAMES || t->n_names >= t->max_names) {
		make_whole(t, e);
		return;
	}
	e->names = cb_xrealloc(e->names, (e->n_names + 1) * sizeof(*e->names));
	e->names[e->n_names++] = cb_xstrdup(name);
	t->n_names++;
}

/* What place() says to do with an object that is not placed by a path. */
static void widen_place(struct cb_track *t, enum place p, const struct stat *sb, const char *why)
{
	char what[64];

	snprintf(what, sizeof(what), "%s inode %llu",
		 S_ISDIR(sb->st_mode) ? "directory" : sb->st_mode ? "file" : "object",
		 (unsigned long long)sb->st_ino);
	if (p == P_INODE)
		widen(t, what, why, S_ISDIR(sb->st_mode) ? "the directory looked up in the tree "
							   "by its inode" : "looked up in the tree by its inode");
	if (p == P_WHOLE) {
		widen(t, "an event's object", why, "the whole walk");
		t->whole_why = "an event that cannot be placed";
	}
}

/* The set's entry of directory handle h, placed when first seen. */
static struct hent *dir_entry(struct cb_track *t, struct file_handle *h)
{
	uint64_t hash = handle_hash(h);
	struct hent *e = t->dirs.cap ? hset_slot(&t->dirs, h, hash) : NULL;
	const char *why = "";
	char path[4096];
	struct stat sb;
	enum place p;

	if (e && e->h)
		return e;
	p = place_handle(t, h, path, sizeof(path), &sb, &why);
	widen_place(t, p, &sb, why);
	return hset_add(&t->dirs, h, hash, p);
}

/* An event with no directory (FAN_REPORT_FID only): its object has no
 * parent the kernel can name, a disconnected dentry (a write through
 * open_by_handle_at, as an NFS server does). */
static void note_orphan(struct cb_track *t, struct file_handle *h, uint64_t mask)
{
	const char *why = "has no parent directory (a disconnected dentry)";
	char path[4096];
	struct stat sb;
	enum place p = place_handle(t, h, path, sizeof(path), &sb, &why);

	if (p == P_GONE || p == P_OUTSIDE)
		return;
	if (S_ISDIR(sb.st_mode) || (p == P_INODE && !sb.st_mode)) {
		/* a directory; or of a type not known: a directory, and below
		 * a file, both looked up by its inode */
		note_change(t, dir_entry(t, h), mask, NULL);
		if (S_ISDIR(sb.st_mode))
			return;
	}
	if (p == P_WHOLE) {
		widen_place(t, p, &sb, why);
		return;
	}
	widen_place(t, P_INODE, &sb, why);
	add_ino(t, (uint64_t)sb.st_ino);
}

/* A directory moved in as NAME of directory handle h (inside): what
 * changed in it while it was outside was forgotten, its subtree is walked.
 * By its name now: moved again since, it has events of its own. */
static void moved_in(struct cb_track *t, struct file_handle *h, const char *name)
{
	struct { struct file_handle h; unsigned char b[MAX_HANDLE_SZ]; } fh;
	int dfd = open_by_handle_at(t->mount_fd, h, O_PATH | O_CLOEXEC), mnt_id;
	struct hent *in;

	fh.h.handle_bytes = MAX_HANDLE_SZ;
	if (dfd < 0 || name_to_handle_at(dfd, name, &fh.h, &mnt_id, 0) < 0) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	close(dfd);
	in = dir_entry(t, &fh.h);
	if (kept(in->place) && !in->deep) {
		make_whole(t, in);
		in->deep = 1;
		widen(t, name, "was moved into a directory of the root", "its subtree walked");
	}
}

/* The records of an event: its directory (with the entry's name) and its
 * object (FAN_REPORT_FID). */
struct ev {
	struct file_handle *dir, *obj;
	const char *name;
};

static void parse_event(const char *info, size_t len, struct ev *ev)
{
	struct fanotify_event_info_header hdr;

	memset(ev, 0, sizeof(*ev));
	while (len >= sizeof(hdr)) {
		struct file_handle *h;
		memcpy(&hdr, info, sizeof(hdr));
		if (hdr.len < sizeof(struct fanotify_event_info_fid) || hdr.len > len)
			break;
		h = (struct file_handle *)((const struct fanotify_event_info_fid *)info)->handle;
		if (hdr.info_type == FAN_EVENT_INFO_TYPE_DFID_NAME ||
		    hdr.info_type == FAN_EVENT_INFO_TYPE_DFID) {
			ev->dir = h;
			if (hdr.info_type == FAN_EVENT_INFO_TYPE_DFID_NAME)
				ev->name = (const char *)h->f_handle + h->handle_bytes;
		} else if (hdr.info_type == FAN_EVENT_INFO_TYPE_FID) {
			ev->obj = h;
		}
		info += hdr.len;
		len -= hdr.len;
	}
}

/* m: the event's header, copied out (the kernel aligns events to 4 bytes,
 * the header wants 8); info: the len bytes that follow it. */
static void note_event(struct cb_track *t, const struct fanotify_event_metadata *m,
		       const char *info, size_t len)
{
	struct hent *e;
	struct ev ev;

	if (m->pid == t->self_pid && !(m->mask & ~(uint64_t)(OPEN_MASK | FAN_ONDIR))) {
		t->own_events++;  /* pass 1 reading the tree */
		return;
	}
	parse_event(info, len, &ev);
	if (!ev.dir) {
		if (ev.obj)
			note_orphan(t, ev.obj, m->mask);
		else
			t->whole_why = "an event without a file handle";
		return;
	}
	/* whether a directory is outside is only a cache, wrong once one moves */
	if ((m->mask & FAN_ONDIR) && (m->mask & (FAN_MOVED_FROM | FAN_MOVED_TO)))
		hset_forget_outside(&t->dirs);
	e = dir_entry(t, ev.dir);
	if (kept(e->place)) {
		note_change(t, e, m->mask, ev.name);
		if ((m->mask & FAN_MOVED_TO) && (m->mask & FAN_ONDIR) && ev.name)
			moved_in(t, ev.dir, ev.name);
	} else if (e->place == P_OUTSIDE && ev.name && !(m->mask & FAN_ONDIR) &&
		   (m->mask & FAN_CREATE)) {
		outside_name(t, ev.dir, ev.name);
	}
	if (t->dirs.n - t->dirs.n_inside > t->max)
		hset_forget_outside(&t->dirs);
	if (t->dirs.n_inside + t->n_inos > t->max)
		t->over_cap = 1;
}

/* Events of one read() of group fd: how many, or -1 when the queue is
 * empty (errno EAGAIN) or the read failed. */
static ssize_t read_group(struct cb_track *t, int fd)
{
	ssize_t n = read(fd, t->buf, READ_BUF), got = 0;
	const char *p = (const char *)t->buf;
	struct fanotify_event_metadata m;

	if (n <= 0) {
		if (n == 0)
			errno = EAGAIN;
		return -1;
	}
	pthread_mutex_lock(&t->lock);
	/* FAN_EVENT_OK/NEXT, on a copy of each header: events are only
	 * 4-byte aligned, and reading the header in place is undefined */
	while ((size_t)n >= sizeof(m)) {
		memcpy(&m, p, sizeof(m));
		if (m.event_len < sizeof(m) || m.event_len > (size_t)n)
			break;
		t->events++;
		got++;
		if (m.mask & FAN_Q_OVERFLOW)
			t->overflow = 1;
		else if (!t->over_cap && m.event_len > sizeof(m))
			note_event(t, &m, p + sizeof(m), m.event_len - sizeof(m));
		p += m.event_len;
		n -= (ssize_t)m.event_len;
	}
	pthread_mutex_unlock(&t->lock);
	return got;
}

/* At the freeze, both groups up to what they hold now: 0, or -1 (errno)
 * if a read failed. The guest is frozen and every change it made has
 * its event queued, so what is queued now is all that matters; the rest
 * of the host goes on writing to the file system, and reading until the
 * queue is empty could take as long as it keeps writing (seconds on a
 * busy host, all of it frozen time). FIONREAD gives the events queued,
 * FAN_EVENT_METADATA_LEN bytes counted for each (their records not). */
static int drain_queued(struct cb_track *t)
{
	for (int i = 0, fd[2] = { t->fan_fd, t->open_fd }; i < 2; i++) {
		int queued = 0;
		ssize_t n;

		if (ioctl(fd[i], FIONREAD, &queued) < 0)
			return -1;
		queued /= (int)FAN_EVENT_METADATA_LEN;
		while (queued > 0 && (n = read_group(t, fd[i])) > 0)
			queued -= (int)n;
		if (queued > 0 && errno != EAGAIN)
			return -1;
	}
	return 0;
}

/* One read of each group with events per wakeup, so that a stop request
 * is seen between reads even while the host floods the queue. */
static void *reader_main(void *arg)
{
	struct cb_track *t = arg;
	struct pollfd p[3] = { { t->fan_fd, POLLIN, 0 }, { t->open_fd, POLLIN, 0 },
			       { t->stop_fd, POLLIN, 0 } };
	/* tests: a reader that waits for the end lets the queue overflow */
	int stall = getenv("CB_TRACK_STALL") != NULL;

	if (stall)
		p[0].fd = p[1].fd = -1;  /* poll() skips them */
	for (;;) {
		if (poll(p, 3, -1) < 0 && errno != EINTR)
			break;
		if (p[2].revents)
			break;
		if (p[0].revents)
			read_group(t, t->fan_fd);
		if (p[1].revents)
			read_group(t, t->open_fd);
	}
	return NULL;
}

/* ---- the mounts under the root ---- */

/* mountinfo's octal escapes (\040 for a space) decoded in place */
static void unescape(char *s)
{
	char *o = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*o++ = *s++;
		}
	}
	*o = '\0';
}

/* The lines of /proc/self/mountinfo whose mount point is strictly under
 * the root, in one string (compared at the end); each mount point is
 * handed to fn. */
static char *mounts_under(struct cb_track *t, void (*fn)(struct cb_track *, const char *))
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192], mp[4096];
	char *all = cb_xstrdup(""), *next;
	const char *r;

	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
			continue;
		unescape(mp);
		if (!(r = rel_of(t, mp)) || !*r)
			continue;
		next = cb_xasprintf("%s%s", all, line);
		free(all);
		all = next;
		if (fn)
			fn(t, mp);
	}
	if (f)
		fclose(f);
	return all;
}

/* A mount at mp (under the root): a bind mount of the root's file system
 * maps its source to mp; one of another file system is left empty by the
 * passes (DESIGN §7), nothing to track. */
static void add_mount(struct cb_track *t, const char *mp)
{
	struct { struct file_handle h; unsigned char b[MAX_HANDLE_SZ]; } fh;
	char path[4096];
	const char *why = "";
	struct bind *b;
	struct stat sb;
	int mnt_id;
	enum place p;

	if (stat(mp, &sb) < 0 || sb.st_dev != t->dev)
		return;
	t->binds = cb_xrealloc(t->binds, (t->n_binds + 1) * sizeof(*t->binds));
	b = &t->binds[t->n_binds];
	memset(b, 0, sizeof(*b));
	b->rel = cb_xstrdup(rel_of(t, mp));
	/* its source as the events' handles name it: through the same
	 * open_by_handle_at and /proc link */
	fh.h.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(AT_FDCWD, mp, &fh.h, &mnt_id, 0) == 0 &&
	    ((p = place_handle(t, &fh.h, path, sizeof(path), &sb, &why)) == P_INSIDE ||
	     p == P_OUTSIDE)) {
		b->src = cb_xstrdup(path);
		b->src_len = strlen(path);
		cb_verbose(t->log, "change tracking: the bind mount '/%s' shows '%s'", b->rel, path);
	} else {
		widen(t, mp, "is a bind mount whose source cannot be placed", "its subtree walked");
	}
	t->n_binds++;
}

/* ---- start ---- */

static int start_fail(struct cb_track *t, const char *why)
{
	cb_warn(t->log, "change tracking unavailable (%s: %s): the final sync walks the whole tree",
		why, strerror(errno));
	cb_track_free(t);
	return -1;
}

/* def, or the environment's NAME if it is a positive number (tests) */
static size_t env_max(const char *name, size_t def)
{
	const char *e = getenv(name);

	return e && atol(e) > 0 ? (size_t)atol(e) : def;
}

struct cb_track *cb_track_start(const char *root, struct cb_log *log)
{
	struct cb_track *t = cb_xcalloc(1, sizeof(*t));
	struct stat sb;
	int mnt_id;

	t->log = log;
	t->fan_fd = t->open_fd = t->mount_fd = t->stop_fd = -1;
	t->max = env_max("CB_TRACK_MAX", CB_TRACK_MAX);
	t->max_names = env_max("CB_TRACK_NAMES", CB_TRACK_NAMES);
	pthread_mutex_init(&t->lock, NULL);
	t->root = realpath(root, NULL);
	if (!t->root || stat(t->root, &sb) < 0)
		return start_fail(t, "guest root"), NULL;
	t->root_len = strlen(t->root);
	t->dev = sb.st_dev;
	t->root_ino = sb.st_ino;
	t->self_pid = getpid();
	t->mount_fd = open(t->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	t->root_fh.h.handle_bytes = MAX_HANDLE_SZ;
	t->have_root_fh = name_to_handle_at(AT_FDCWD, t->root, &t->root_fh.h, &mnt_id, 0) == 0;
	/* FAN_REPORT_FID too: an event on a file without a parent (a
	 * disconnected dentry) is reported only with its own handle */
	t->fan_fd = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME | FAN_REPORT_FID |
				  FAN_NONBLOCK | FAN_CLOEXEC, O_RDONLY | O_CLOEXEC);
	t->open_fd = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME | FAN_REPORT_FID |
				   FAN_UNLIMITED_QUEUE | FAN_NONBLOCK | FAN_CLOEXEC, O_RDONLY | O_CLOEXEC);
	if (t->mount_fd < 0 || t->fan_fd < 0 || t->open_fd < 0)
		return start_fail(t, "fanotify_init"), NULL;
	if (fanotify_mark(t->fan_fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, EVENT_MASK, t->mount_fd,
			  NULL) < 0 ||
	    (OPEN_MASK && fanotify_mark(t->open_fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM,
					OPEN_MASK | FAN_ONDIR, t->mount_fd, NULL) < 0))
		return start_fail(t, "fanotify_mark"), NULL;
	if (t->mount_fd >= 0)
		t->mounts = mounts_under(t, add_mount);
	t->stop_fd = eventfd(0, EFD_CLOEXEC);
	t->buf = cb_xmalloc(READ_BUF);
	if (t->stop_fd < 0 || cb_thread_start(&t->reader, reader_main, t) < 0)
		return start_fail(t, "reader thread"), NULL;
	t->reader_running = 1;
	cb_verbose(log, "change tracking: watching the file system of '%s'", t->root);
	return t;
}

void cb_track_ignore_dir(void *arg, int fd)
{
	struct cb_track *t = arg;
#ifdef FAN_MARK_IGNORE_SURV
	struct stat sb;

	/* only on the guest's file system: another one raises no events */
	if (t->ignore_failed || t->n_ignored >= CB_TRACK_IGNORED || fstat(fd, &sb) < 0 ||
	    sb.st_dev != t->dev)
		return;
	if (fanotify_mark(t->fan_fd, FAN_MARK_ADD | FAN_MARK_IGNORE_SURV,
			  EVENT_MASK | FAN_EVENT_ON_CHILD, fd, NULL) == 0 &&
	    fanotify_mark(t->open_fd, FAN_MARK_ADD | FAN_MARK_IGNORE_SURV,
			  OPEN_MASK | FAN_ONDIR | FAN_EVENT_ON_CHILD, fd, NULL) == 0)
		t->n_ignored++;
	else  /* an older kernel: the events are read and dropped, as before */
		t->ignore_failed = 1;
#else
	(void)t;
	(void)fd;
#endif
}

void cb_track_free(struct cb_track *t)
{
	if (!t)
		return;
	if (t->reader_running) {
		uint64_t one = 1;
		if (write(t->stop_fd, &one, sizeof(one)) == sizeof(one))
			pthread_join(t->reader, NULL);
	}
	if (t->fan_fd >= 0)
		close(t->fan_fd);
	if (t->open_fd >= 0)
		close(t->open_fd);
	if (t->mount_fd >= 0)
		close(t->mount_fd);
	if (t->stop_fd >= 0)
		close(t->stop_fd);
	hset_release(&t->dirs);
	pthread_mutex_destroy(&t->lock);
	for (size_t i = 0; i < t->n_binds; i++) {
		free(t->binds[i].src);
		free(t->binds[i].rel);
	}
	for (size_t i = 0; i < t->n_widened; i++)
		free(t->widened[i]);
	free(t->binds);
	free(t->mounts);
	free(t->inos);
	free(t->root);
	free(t->buf);
	free(t);
}

static void changed_dirs_free(struct cb_changed_dir *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].rel);
		names_free(&v[i].names, &v[i].n_names);
	}
	free(v);
}

void cb_changes_free(struct cb_changes *c)
{
	if (!c)
		return;
	changed_dirs_free(c->dirs, c->n_dirs);
	changed_dirs_free(c->by_ino, c->n_by_ino);
	free(c->inos);
	free(c);
}

/* ---- finish: what the guest's processes hold ---- */

static struct cb_changed_dir *dir_push(struct cb_changed_dir **v, size_t *n, size_t *cap,
				       char *const *names, size_t n_names)
{
	struct cb_changed_dir *d;

	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 64;
		*v = cb_xrealloc(*v, *cap * sizeof(**v));
	}
	d = &(*v)[(*n)++];
	memset(d, 0, sizeof(*d));
	/* names, even none (the directory's own inode only), or NULL: list it */
	if (names) {
		d->names = cb_xcalloc(n_names ? n_names : 1, sizeof(*d->names));
		d->n_names = n_names;
	}
	for (size_t i = 0; i < d->n_names; i++)
		d->names[i] = cb_xstrdup(names[i]);
	return d;
}

void cb_changes_add_names(struct cb_changes *c, const char *rel, char *const *names, size_t n)
{
	dir_push(&c->dirs, &c->n_dirs, &c->cap_dirs, names, n)->rel = cb_xstrdup(rel);
}

void cb_changes_add_dir(struct cb_changes *c, const char *rel)
{
	cb_changes_add_names(c, rel, NULL, 0);
}

/* "a/b/c": names c in "a/b" */
static void add_rel_name(struct cb_changes *c, char *rel)
{
	char *slash = strrchr(rel, '/'), *base = slash ? slash + 1 : rel;

	if (slash)
		*slash = '\0';
	cb_changes_add_names(c, slash ? rel : "", &base, 1);
}

/* A file a process holds (LINK: its /proc magic link): its names in the
 * root, checked by name; by inode if it cannot be placed, or if it is
 * outside but has other names. */
static void note_held(struct cb_track *t, struct cb_changes *c, const char *link)
{
	char path[4096], **rels = cb_xcalloc(t->n_binds + 1, sizeof(*rels));
	const char *why = "";
	struct stat sb;
	size_t n;

	if (stat(link, &sb) < 0 || sb.st_dev != t->dev || S_ISDIR(sb.st_mode))
		goto out;
	switch (place_of(t, link, &sb, path, sizeof(path), &why)) {
	case P_INSIDE:
		n = rels_of(t, path, rels, t->n_binds + 1);
		for (size_t i = 0; i < n; i++)
			add_rel_name(c, rels[i]);
		break;
	case P_OUTSIDE:
		if (sb.st_nlink > 1)  /* another name of it may be under the root */
			add_ino(t, (uint64_t)sb.st_ino);
		break;
	case P_INODE:  /* the name it was opened by is gone (" (deleted)") */
		add_ino(t, (uint64_t)sb.st_ino);
		break;
	default:
		break;
	}
out:
	for (size_t i = 0; i < t->n_binds + 1; i++)
		free(rels[i]);
	free(rels);
}

/* Every descriptor: chattr needs only a read-only one. */
static void scan_fds(struct cb_track *t, struct cb_changes *c, pid_t pid)
{
	char dir[64], link[336];
	struct dirent *d;
	DIR *dp;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	if (!(dp = opendir(dir)))
		return;
	while ((d = readdir(dp)))
		if (d->d_name[0] != '.') {
			snprintf(link, sizeof(link), "%s/%s", dir, d->d_name);
			note_held(t, c, link);
		}
	closedir(dp);
}

/* Shared mappings of files: their writes raise no event at all, and one
 * made read-only or inaccessible (mprotect) after a write still has
 * unwritten pages, or may be made writable again: every shared file
 * mapping counts, whatever its permissions now (a superset of smaps'
 * VmFlags "sh mw", without smaps' walk of the page tables). */
static void scan_maps(struct cb_track *t, struct cb_changes *c, pid_t pid)
{
	char file[64], line[4352], range[64], perms[8], link[160];
	unsigned long ino;
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/maps", (int)pid);
	if (!(f = fopen(file, "re")))
		return;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %7s %*s %*s %lu", range, perms, &ino) == 3 && ino &&
		    perms[3] == 's') {
			snprintf(link, sizeof(link), "/proc/%d/map_files/%s", (int)pid, range);
			note_held(t, c, link);
		}
	fclose(f);
}

static void scan_pid(struct cb_track *t, struct cb_changes *c, pid_t pid)
{
	if (pid == getpid())
		return;
	scan_fds(t, c, pid);
	scan_maps(t, c, pid);
}

/* Every process of the cgroup dir and the cgroups below it. */
static void scan_cgroup(struct cb_track *t, struct cb_changes *c, const char *dir)
{
	char *file = cb_xasprintf("%s/cgroup.procs", dir);
	FILE *f = fopen(file, "re");
	struct dirent *d;
	DIR *dp;
	int pid;

	while (f && fscanf(f, "%d", &pid) == 1)
		scan_pid(t, c, pid);
	if (f)
		fclose(f);
	free(file);
	if (!(dp = opendir(dir)))
		return;
	while ((d = readdir(dp)))
		if (d->d_type == DT_DIR && d->d_name[0] != '.') {
			char *sub = cb_xasprintf("%s/%s", dir, d->d_name);
			scan_cgroup(t, c, sub);
			free(sub);
		}
	closedir(dp);
}

static void scan_all(struct cb_track *t, struct cb_changes *c)
{
	DIR *dp = opendir("/proc");
	struct dirent *d;

	while (dp && (d = readdir(dp)))
		if (d->d_name[0] >= '1' && d->d_name[0] <= '9')
			scan_pid(t, c, (pid_t)atoi(d->d_name));
	if (dp)
		closedir(dp);
}

/* ---- finish: what the kernel writes without an event ---- */

/* st_dev of a loop device's backing file (LOOP_GET_STATUS64 encodes it as
 * the kernel's new_encode_dev) */
static int same_dev(uint64_t enc, dev_t dev)
{
	unsigned maj = (unsigned)((enc & 0xfff00) >> 8);
	unsigned min = (unsigned)((enc & 0xff) | ((enc >> 12) & 0xfff00));

	return maj == major(dev) && min == minor(dev);
}

/* Loop devices over files of the root's file system: the kernel writes
 * to the file, no event, no descriptor in /proc. Their files are looked
 * up by inode. */
static void scan_loops(struct cb_track *t)
{
	DIR *dp = opendir("/sys/block");
	struct loop_info64 li;
	struct dirent *d;

	while (dp && (d = readdir(dp))) {
		char *dev, *bf;
		struct stat sb;
		int fd, ok;
		if (strncmp(d->d_name, "loop", 4))
			continue;
		dev = cb_xasprintf("/dev/%s", d->d_name);
		bf = cb_xasprintf("/sys/block/%s/loop/backing_file", d->d_name);
		fd = open(dev, O_RDONLY | O_CLOEXEC);
		ok = fd >= 0 && ioctl(fd, LOOP_GET_STATUS64, &li) == 0;
		if (ok && same_dev(li.lo_device, t->dev)) {
			add_ino(t, li.lo_inode);
			cb_verbose(t->log, "change tracking: %s writes to inode %llu (offset %llu): "
				   "looked up in the tree", dev, (unsigned long long)li.lo_inode,
				   (unsigned long long)li.lo_offset);
		} else if (!ok && access(bf, F_OK) == 0) {
			/* bound, but not readable by its node (none in this
			 * namespace): its backing file's path */
			FILE *f = fopen(bf, "re");
			char path[4096] = "";
			if (f && fgets(path, sizeof(path), f))
				path[strcspn(path, "\n")] = '\0';
			if (f)
				fclose(f);
			if (stat(path, &sb) == 0 && sb.st_dev == t->dev)
				add_ino(t, (uint64_t)sb.st_ino);
			else if (stat(path, &sb) < 0)
				t->whole_why = "a loop device whose backing file cannot be found";
		}
		if (fd >= 0)
			close(fd);
		free(dev);
		free(bf);
	}
	if (dp)
		closedir(dp);
}

/* ---- finish ---- */

static int cmp_rel(const void *a, const void *b)
{
	return strcmp(((const struct cb_changed_dir *)a)->rel, ((const struct cb_changed_dir *)b)->rel);
}

/* d is named again by o (freed here): listed if either says so. */
static void changed_dir_merge(struct cb_changed_dir *d, struct cb_changed_dir *o)
{
	d->deep |= o->deep;
	if (!d->names || !o->names) {
		names_free(&d->names, &d->n_names);
		names_free(&o->names, &o->n_names);
	} else if (o->n_names) {
		d->names = cb_xrealloc(d->names, (d->n_names + o->n_names) * sizeof(*d->names));
		memcpy(d->names + d->n_names, o->names, o->n_names * sizeof(*o->names));
		d->n_names += o->n_names;
		free(o->names);
	} else {
		free(o->names);
	}
	free(o->rel);
}

void cb_changes_sort(struct cb_changes *c)
{
	size_t k = 0;

	if (c->n_dirs)   /* qsort(NULL, 0, ...) is undefined (UBSan) */
		qsort(c->dirs, c->n_dirs, sizeof(*c->dirs), cmp_rel);
	for (size_t i = 0; i < c->n_dirs; i++) {
		if (k && !strcmp(c->dirs[k - 1].rel, c->dirs[i].rel))
			changed_dir_merge(&c->dirs[k - 1], &c->dirs[i]);
		else
			c->dirs[k++] = c->dirs[i];
	}
	c->n_dirs = k;
}

/* What pass 2 does with directory e: its names, none (its own inode
 * only), or NULL: list it (walk it, if deep). The root's own inode is
 * checked by listing it. */
static char *const *hent_names(const struct hent *e, int root)
{
	static char *const none[1];

	if (e->whole || e->deep || (root && e->self))
		return NULL;
	return e->names ? e->names : none;
}

/* One directory the events named, where it is now: by each of its paths
 * in the root, or by inode (the rule of place()). */
static void resolve_dir(struct cb_track *t, struct cb_changes *c, struct hent *e, char **rels)
{
	char path[4096];
	const char *why = "";
	struct stat sb;
	size_t n;

	switch (place_handle(t, e->h, path, sizeof(path), &sb, &why)) {
	case P_INSIDE:
		n = rels_of(t, path, rels, t->n_binds + 1);
		for (size_t i = 0; i < n; i++) {
			cb_changes_add_names(c, rels[i], hent_names(e, !*rels[i]), e->n_names);
			c->dirs[c->n_dirs - 1].deep = e->deep;
			free(rels[i]);
		}
		break;
	case P_INODE:
		if (sb.st_ino == t->root_ino) {
			cb_changes_add_names(c, "", hent_names(e, 1), e->n_names);
			c->dirs[c->n_dirs - 1].deep = e->deep;
			break;
		}
		if (e->place != P_INODE)  /* placed when first seen, not now */
			widen_place(t, P_INODE, &sb, why);
		dir_push(&c->by_ino, &c->n_by_ino, &c->cap_by_ino, hent_names(e, 0),
			 e->n_names)->ino = (uint64_t)sb.st_ino;
		c->by_ino[c->n_by_ino - 1].deep = e->deep;
		break;
	case P_WHOLE:
		widen_place(t, P_WHOLE, &sb, why);
		break;
	default:  /* gone, or moved out: its move raised an event of its own */
		break;
	}
}

static void resolve_dirs(struct cb_track *t, struct cb_changes *c)
{
	char **rels = cb_xcalloc(t->n_binds + 1, sizeof(*rels));

	for (size_t i = 0; i < t->dirs.cap; i++)
		if (t->dirs.v[i].h && kept(t->dirs.v[i].place))
			resolve_dir(t, c, &t->dirs.v[i], rels);
	/* bind mounts whose source cannot be placed: walked */
	for (size_t i = 0; i < t->n_binds; i++)
		if (!t->binds[i].src) {
			cb_changes_add_dir(c, t->binds[i].rel);
			c->dirs[c->n_dirs - 1].deep = 1;
		}
	free(rels);
}

/* The widenings, named (--verbose) */
static void log_widened(struct cb_track *t)
{
	for (size_t i = 0; i < t->n_widened; i++)
		cb_verbose(t->log, "change tracking: %s", t->widened[i]);
}

static struct cb_changes *finish_fail(struct cb_track *t, struct cb_changes *c, const char *why)
{
	log_widened(t);
	cb_warn(t->log, "change tracking is not exact this time (%s): the final sync walks the "
		"whole tree", why);
	cb_changes_free(c);
	cb_track_free(t);
	return NULL;
}

/* What the events cannot show: the guest's processes' files and
 * mappings, loop devices, a change of the mounts under the root. */
static void scan_unreported(struct cb_track *t, struct cb_changes *c, const char *cgroup)
{
	char *mounts;

	if (cgroup)
		scan_cgroup(t, c, cgroup);
	else
		scan_all(t, c);
	scan_loops(t);
	mounts = mounts_under(t, NULL);
	if (strcmp(mounts, t->mounts ? t->mounts : ""))
		t->whole_why = "the mounts under the root changed";
	free(mounts);
}

struct cb_changes *cb_track_finish(struct cb_track *t, const char *cgroup)
{
	struct cb_changes *c = cb_xcalloc(1, sizeof(*c));
	double start = cb_now();
	uint64_t one = 1;

	/* the guest is frozen: every change it made has its event queued.
	 * Stop the reader, then read until the queue is empty. */
	if (write(t->stop_fd, &one, sizeof(one)) != sizeof(one))
		return finish_fail(t, c, "cannot stop the event reader");
	pthread_join(t->reader, NULL);
	t->reader_running = 0;
	if (drain_queued(t) < 0)
		return finish_fail(t, c, "reading the event queue failed");
	if (t->overflow)
		return finish_fail(t, c, "the event queue overflowed");
	scan_unreported(t, c, cgroup);
	if (t->over_cap || t->dirs.n_inside + t->n_inos + c->n_dirs > t->max)
		return finish_fail(t, c, "more changed directories than the tracking cap");
	resolve_dirs(t, c);
	if (t->whole_why)
		return finish_fail(t, c, t->whole_why);
	log_widened(t);
	c->events = t->events - t->own_events;
	cb_verbose(t->log, "change tracking: %llu events (and %llu of its own reads), %zu "
		   "directories, %zu directories and %zu inodes to look up (%.3f s to drain and "
		   "scan the processes)", (unsigned long long)c->events,
		   (unsigned long long)t->own_events, c->n_dirs, c->n_by_ino, t->n_inos,
		   cb_now() - start);
	c->inos = t->inos;
	c->n_inos = t->n_inos;
	t->inos = NULL;
	cb_track_free(t);
	return c;
}
