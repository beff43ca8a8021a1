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
#include <sys/stat.h>
#include <unistd.h>

#include "cb_track.h"
#include "cb_util.h"

#define EVENT_MASK (FAN_MODIFY | FAN_ATTRIB | FAN_CLOSE_WRITE | FAN_CREATE | FAN_DELETE | \
		    FAN_MOVED_FROM | FAN_MOVED_TO | FAN_ONDIR)
#define READ_BUF (64 << 10)
/* Events that change an entry but not the directory's list of names. */
#define NAME_ONLY_MASK (FAN_MODIFY | FAN_ATTRIB | FAN_CLOSE_WRITE)

/* One directory seen in an event, by its file handle. */
struct hent {
	uint64_t hash;
	int inside;                 /* under the guest root when first seen */
	int whole;                  /* list it: names are not enough */
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
	int fan_fd, mount_fd, stop_fd;
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
	uint64_t events;
	int overflow, over_cap;
	char *buf;
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

static struct hent *hset_add(struct hset *s, const struct file_handle *h, uint64_t hash,
			     int inside)
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
	e->inside = inside;
	s->n++;
	s->n_inside += inside;
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
	struct hset kept = { cb_xcalloc(s->cap, sizeof(struct hent)), s->cap, 0, 0 };

	for (size_t i = 0; i < s->cap; i++) {
		if (!s->v[i].h)
			continue;
		if (s->v[i].inside) {
			*hset_slot(&kept, s->v[i].h, s->v[i].hash) = s->v[i];
			kept.n++;
			kept.n_inside++;
		} else {
			free(s->v[i].h);
			hent_free_names(&s->v[i]);
		}
	}
	free(s->v);
	*s = kept;
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

/* A /proc magic link's target (readlink's n bytes) names an unlinked file. */
static int unlinked_target(const char *path, ssize_t n)
{
	return n > 10 && !strcmp(path + n - 10, " (deleted)");
}

/* The path an fd stands for now; "" if it is unlinked or unknown. */
static void fd_path(int fd, char *out, size_t len)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, out, len - 1);
	out[n < 0 || (size_t)n >= len - 1 ? 0 : n] = '\0';
	if (unlinked_target(out, n))
		out[0] = '\0';
}

/* The current path of a directory handle: 0, or -1 if it is gone. */
static int handle_path(const struct cb_track *t, struct file_handle *h, char *out, size_t len)
{
	int fd = open_by_handle_at(t->mount_fd, h, O_PATH | O_CLOEXEC);

	if (fd < 0)
		return -1;
	fd_path(fd, out, len);
	close(fd);
	return out[0] ? 0 : -1;
}

/* ---- the reader ---- */

static void add_ino(struct cb_track *t, uint64_t ino)
{
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
 * NAME only, or (made, removed, renamed, a directory) its list of names. */
static void note_change(struct cb_track *t, struct hent *e, uint64_t mask, const char *name)
{
	if (e->whole)
		return;
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

/* m: the event's header, copied out (the kernel aligns events to 4 bytes,
 * the header wants 8); info: what follows it in the read buffer. */
static void note_event(struct cb_track *t, const struct fanotify_event_metadata *m,
		       const void *info)
{
	const struct fanotify_event_info_fid *fid = info;
	struct file_handle *h = (struct file_handle *)fid->handle;
	const char *name = fid->hdr.info_type == FAN_EVENT_INFO_TYPE_DFID_NAME
				   ? (const char *)h->f_handle + h->handle_bytes : NULL;
	uint64_t hash = handle_hash(h);
	struct hent *e = t->dirs.cap ? hset_slot(&t->dirs, h, hash) : NULL;
	char path[4096];
	int inside;

	if ((m->mask & FAN_ONDIR) && (m->mask & (FAN_MOVED_FROM | FAN_MOVED_TO))) {
		hset_forget_outside(&t->dirs);
		e = NULL;
	}
	if (!(e && e->h)) {
		if (handle_path(t, h, path, sizeof(path)) < 0)
			return;  /* gone: its parent has an event of its own */
		e = hset_add(&t->dirs, h, hash, rel_of(t, path) != NULL);
	}
	if ((inside = e->inside))
		note_change(t, e, m->mask, name);
	if (!inside && name && !(m->mask & FAN_ONDIR) && (m->mask & FAN_CREATE))
		outside_name(t, h, name);
	if (t->dirs.n - t->dirs.n_inside > t->max)
		hset_forget_outside(&t->dirs);
	if (t->dirs.n_inside + t->n_inos > t->max)
		t->over_cap = 1;
}

/* Events of one read(): 0, or -1 when the queue is empty. */
static int read_events(struct cb_track *t)
{
	ssize_t n = read(t->fan_fd, t->buf, READ_BUF);
	const char *p = (const char *)t->buf;
	struct fanotify_event_metadata m;

	if (n <= 0)
		return -1;
	pthread_mutex_lock(&t->lock);
	/* FAN_EVENT_OK/NEXT, on a copy of each header: events are only
	 * 4-byte aligned, and reading the header in place is undefined */
	while ((size_t)n >= sizeof(m)) {
		memcpy(&m, p, sizeof(m));
		if (m.event_len < sizeof(m) || m.event_len > (size_t)n)
			break;
		t->events++;
		if (m.mask & FAN_Q_OVERFLOW)
			t->overflow = 1;
		else if (!t->over_cap && m.event_len > sizeof(m))
			note_event(t, &m, p + sizeof(m));
		p += m.event_len;
		n -= (ssize_t)m.event_len;
	}
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static void *reader_main(void *arg)
{
	struct cb_track *t = arg;
	struct pollfd p[2] = { { t->fan_fd, POLLIN, 0 }, { t->stop_fd, POLLIN, 0 } };
	/* tests: a reader that waits for the end lets the queue overflow */
	int stall = getenv("CB_TRACK_STALL") != NULL;

	if (stall)
		p[0].fd = -1;  /* poll() skips it */
	for (;;) {
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (p[0].revents)
			while (read_events(t) == 0)
				;
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

	t->log = log;
	t->fan_fd = t->mount_fd = t->stop_fd = -1;
	t->max = env_max("CB_TRACK_MAX", CB_TRACK_MAX);
	t->max_names = env_max("CB_TRACK_NAMES", CB_TRACK_NAMES);
	pthread_mutex_init(&t->lock, NULL);
	t->root = realpath(root, NULL);
	if (!t->root || stat(t->root, &sb) < 0)
		return start_fail(t, "guest root"), NULL;
	t->root_len = strlen(t->root);
	t->dev = sb.st_dev;
	t->mount_fd = open(t->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	t->fan_fd = fanotify_init(FAN_CLASS_NOTIF | FAN_REPORT_DFID_NAME | FAN_NONBLOCK | FAN_CLOEXEC,
				  O_RDONLY | O_CLOEXEC);
	if (t->mount_fd < 0 || t->fan_fd < 0)
		return start_fail(t, "fanotify_init"), NULL;
	if (fanotify_mark(t->fan_fd, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, EVENT_MASK, t->mount_fd,
			  NULL) < 0)
		return start_fail(t, "fanotify_mark"), NULL;
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
			  EVENT_MASK | FAN_EVENT_ON_CHILD, fd, NULL) == 0)
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
	if (t->mount_fd >= 0)
		close(t->mount_fd);
	if (t->stop_fd >= 0)
		close(t->stop_fd);
	hset_release(&t->dirs);
	pthread_mutex_destroy(&t->lock);
	free(t->inos);
	free(t->root);
	free(t->buf);
	free(t);
}

void cb_changes_free(struct cb_changes *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_dirs; i++) {
		free(c->dirs[i].rel);
		names_free(&c->dirs[i].names, &c->dirs[i].n_names);
	}
	free(c->dirs);
	free(c->inos);
	free(c);
}

/* ---- finish: what the guest's processes hold ---- */

void cb_changes_add_names(struct cb_changes *c, const char *rel, char *const *names, size_t n)
{
	struct cb_changed_dir *d;

	if (c->n_dirs == c->cap_dirs) {
		c->cap_dirs = c->cap_dirs ? c->cap_dirs * 2 : 64;
		c->dirs = cb_xrealloc(c->dirs, c->cap_dirs * sizeof(*c->dirs));
	}
	d = &c->dirs[c->n_dirs++];
	d->rel = cb_xstrdup(rel);
	d->names = NULL;
	d->n_names = names && n ? n : 0;
	if (d->n_names)
		d->names = cb_xcalloc(n, sizeof(*d->names));
	for (size_t i = 0; i < d->n_names; i++)
		d->names[i] = cb_xstrdup(names[i]);
}

void cb_changes_add_dir(struct cb_changes *c, const char *rel)
{
	cb_changes_add_names(c, rel, NULL, 0);
}

/* A file a process holds (LINK: its /proc magic link): its directory, or
 * its inode if its path is not under the root but it has other names. */
static void note_held(struct cb_track *t, struct cb_changes *c, const char *link)
{
	char path[4096];
	const char *rel, *slash;
	struct stat sb;
	ssize_t n;

	if (stat(link, &sb) < 0 || sb.st_dev != t->dev || S_ISDIR(sb.st_mode))
		return;
	n = readlink(link, path, sizeof(path) - 1);
	path[n < 0 ? 0 : n] = '\0';
	/* the name it was opened by is gone (" (deleted)"): any other name */
	if (unlinked_target(path, n)) {
		if (sb.st_nlink > 0)
			add_ino(t, (uint64_t)sb.st_ino);
		return;
	}
	if (!(rel = rel_of(t, path))) {
		/* another name of it may be under the root */
		if (sb.st_nlink > 1)
			add_ino(t, (uint64_t)sb.st_ino);
		return;
	}
	slash = strrchr(rel, '/');
	if (!slash) {
		cb_changes_add_dir(c, "");
		return;
	}
	path[0] = '\0';
	strncat(path, rel, (size_t)(slash - rel));
	cb_changes_add_dir(c, path);
}

static int writable_fd(pid_t pid, const char *fd)
{
	char file[320], line[128];
	unsigned long flags = 0;
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/fdinfo/%s", (int)pid, fd);
	if (!(f = fopen(file, "re")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "flags: %lo", &flags) == 1)
			break;
	fclose(f);
	return (flags & O_ACCMODE) != O_RDONLY;
}

static void scan_fds(struct cb_track *t, struct cb_changes *c, pid_t pid)
{
	char dir[64], link[336];
	struct dirent *d;
	DIR *dp;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	if (!(dp = opendir(dir)))
		return;
	while ((d = readdir(dp)))
		if (d->d_name[0] != '.' && writable_fd(pid, d->d_name)) {
			snprintf(link, sizeof(link), "%s/%s", dir, d->d_name);
			note_held(t, c, link);
		}
	closedir(dp);
}

/* Shared writable mappings: their writes raise no event at all. */
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
		    perms[1] == 'w' && perms[3] == 's') {
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

/* ---- finish ---- */

static int cmp_rel(const void *a, const void *b)
{
	return strcmp(((const struct cb_changed_dir *)a)->rel, ((const struct cb_changed_dir *)b)->rel);
}

/* d is named again by o (freed here): listed if either says so. */
static void changed_dir_merge(struct cb_changed_dir *d, struct cb_changed_dir *o)
{
	if (!d->names || !o->names) {
		names_free(&d->names, &d->n_names);
		names_free(&o->names, &o->n_names);
	} else {
		d->names = cb_xrealloc(d->names, (d->n_names + o->n_names) * sizeof(*d->names));
		memcpy(d->names + d->n_names, o->names, o->n_names * sizeof(*o->names));
		d->n_names += o->n_names;
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

/* The directories the events named, where they are now. */
static void resolve_dirs(struct cb_track *t, struct cb_changes *c)
{
	char path[4096];
	const char *rel;

	for (size_t i = 0; i < t->dirs.cap; i++) {
		struct hent *e = &t->dirs.v[i];
		if (e->h && e->inside && handle_path(t, e->h, path, sizeof(path)) == 0 &&
		    (rel = rel_of(t, path)))
			cb_changes_add_names(c, rel, e->whole ? NULL : e->names, e->n_names);
	}
}

static struct cb_changes *finish_fail(struct cb_track *t, struct cb_changes *c, const char *why)
{
	cb_warn(t->log, "change tracking is not exact this time (%s): the final sync walks the "
		"whole tree", why);
	cb_changes_free(c);
	cb_track_free(t);
	return NULL;
}

struct cb_changes *cb_track_finish(struct cb_track *t, const struct cb_guest *g)
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
	while (read_events(t) == 0)
		;
	if (errno != EAGAIN)
		return finish_fail(t, c, "reading the event queue failed");
	if (t->overflow)
		return finish_fail(t, c, "the event queue overflowed");
	if (g && (g->kind == CB_FREEZER_CGROUP2 || g->kind == CB_FREEZER_CGROUP1) && g->path)
		scan_cgroup(t, c, g->path);
	else
		scan_all(t, c);
	if (t->over_cap || t->dirs.n_inside + t->n_inos + c->n_dirs > t->max)
		return finish_fail(t, c, "more changed directories than the tracking cap");
	resolve_dirs(t, c);
	c->events = t->events;
	cb_verbose(t->log, "change tracking: %llu events, %zu directories, %zu inodes to look up "
		   "(%.3f s to drain and scan the processes)", (unsigned long long)t->events,
		   c->n_dirs, t->n_inos, cb_now() - start);
	c->inos = t->inos;
	c->n_inos = t->n_inos;
	t->inos = NULL;
	cb_track_free(t);
	return c;
}
