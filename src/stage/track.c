/*
 * cb_track: fanotify change tracking for the freeze window, the reader of
 * the events and the tracker's life (start, finish). See
 * include/cb_track.h for what it promises and what it relies on, and
 * track_int.h for the files it is split into.
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

#include "cb_changes.h"
#include "cb_fhandle.h"
#include "cb_util.h"
#include "track_int.h"

/* ---- the reader ---- */

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
		track_add_ino(t, (uint64_t)sb.st_ino);
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
static void track_widen_place(struct cb_track *t, enum place p, const struct stat *sb, const char *why)
{
	char what[64];

	snprintf(what, sizeof(what), "%s inode %llu",
		 S_ISDIR(sb->st_mode) ? "directory" : sb->st_mode ? "file" : "object",
		 (unsigned long long)sb->st_ino);
	if (p == P_INODE)
		track_widen(t, what, why, S_ISDIR(sb->st_mode) ? "the directory looked up in the tree "
							   "by its inode" : "looked up in the tree by its inode");
	if (p == P_WHOLE) {
		track_widen(t, "an event's object", why, "the whole walk");
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
	p = track_place_handle(t, h, path, sizeof(path), &sb, &why);
	track_widen_place(t, p, &sb, why);
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
	enum place p = track_place_handle(t, h, path, sizeof(path), &sb, &why);

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
		track_widen_place(t, p, &sb, why);
		return;
	}
	track_widen_place(t, P_INODE, &sb, why);
	track_add_ino(t, (uint64_t)sb.st_ino);
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
	if (place_kept(in->place) && !in->deep) {
		make_whole(t, in);
		in->deep = 1;
		track_widen(t, name, "was moved into a directory of the root", "its subtree walked");
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
	if (place_kept(e->place)) {
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
		t->mounts = track_mounts_under(t, track_add_mount);
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

	switch (track_place_handle(t, e->h, path, sizeof(path), &sb, &why)) {
	case P_INSIDE:
		n = track_rels_of(t, path, rels, t->n_binds + 1);
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
			track_widen_place(t, P_INODE, &sb, why);
		cb_changes_add_by_ino(c, (uint64_t)sb.st_ino, hent_names(e, 0), e->n_names);
		c->by_ino[c->n_by_ino - 1].deep = e->deep;
		break;
	case P_WHOLE:
		track_widen_place(t, P_WHOLE, &sb, why);
		break;
	default:  /* gone, or moved out: its move raised an event of its own */
		break;
	}
}

static void resolve_dirs(struct cb_track *t, struct cb_changes *c)
{
	char **rels = cb_xcalloc(t->n_binds + 1, sizeof(*rels));

	for (size_t i = 0; i < t->dirs.cap; i++)
		if (t->dirs.v[i].h && place_kept(t->dirs.v[i].place))
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
		track_scan_cgroup(t, c, cgroup);
	else
		track_scan_all(t, c);
	track_scan_loops(t);
	mounts = track_mounts_under(t, NULL);
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

