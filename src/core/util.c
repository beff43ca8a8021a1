/* cb_util: errors, memory, string vectors, formatting. See include/cb_util.h. */
#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cb_util.h"

static _Thread_local char last_error[16384];

/* A message longer than the buffer loses its middle, never its end: that
 * is where the cause is (": No such file or directory" after a path of
 * any length, the first error after the prefixes). Takes msg. */
static int set_error(char *msg)
{
	size_t n = msg ? strlen(msg) : 0, room = sizeof(last_error) - 1;

	if (!msg)
		snprintf(last_error, sizeof(last_error), "out of memory formatting an error");
	else if (n <= room)
		memcpy(last_error, msg, n + 1);
	else {
		size_t head = (room - 3) / 2, tail = room - 3 - head;
		memcpy(last_error, msg, head);
		memcpy(last_error + head, "...", 3);
		memcpy(last_error + head + 3, msg + n - tail, tail + 1);
	}
	free(msg);
	return -1;
}

static char *vfmt(const char *fmt, va_list ap)
{
	char *s;

	return vasprintf(&s, fmt, ap) < 0 ? NULL : s;
}

int cb_error(const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	msg = vfmt(fmt, ap);
	va_end(ap);
	return set_error(msg);
}

int cb_error_errno(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	char *msg, *full = NULL;

	va_start(ap, fmt);
	msg = vfmt(fmt, ap);
	va_end(ap);
	if (msg && asprintf(&full, "%s: %s", msg, strerror(saved)) < 0)
		full = NULL;
	free(msg);
	set_error(full);
	errno = saved;
	return -1;
}

int cb_error_prefix(const char *fmt, ...)
{
	va_list ap;
	char *prefix, *full = NULL;

	va_start(ap, fmt);
	prefix = vfmt(fmt, ap);
	va_end(ap);
	if (prefix && asprintf(&full, "%s: %s", prefix, last_error) < 0)
		full = NULL;
	free(prefix);
	return set_error(full);
}

const char *cb_last_error(void)
{
	return last_error;
}

static void *oom(size_t n)
{
	fprintf(stderr, "ERROR: out of memory allocating %zu bytes\n", n);
	abort();
}

void *cb_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	return p ? p : oom(n);
}

void *cb_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	return p ? p : oom(n * size);
}

void *cb_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	return q ? q : oom(n);
}

/*
 * A page fault costs a few microseconds on bare metal and up to ten in
 * some VMs; a backup's buffers (a dozen MiB) would take thousands of them
 * on the archive's critical path. The kernel backs an aligned, advised
 * range with huge pages when it has them (THP "always" or "madvise"), and
 * with small pages otherwise: the same memory either way.
 */
#ifndef __SANITIZE_ADDRESS__
#define HUGE_PAGE (2UL * 1024 * 1024)

static size_t huge_round(size_t n)
{
	return (n + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
}

void *cb_xmalloc_huge(size_t n)
{
	size_t len = huge_round(n ? n : 1);
	unsigned char *map = mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char *p;
	size_t head;

	if (map == MAP_FAILED)
		return oom(n);
	p = (unsigned char *)(((uintptr_t)map + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
	head = (size_t)(p - map);
	if (head)
		munmap(map, head);
	if (HUGE_PAGE - head)
		munmap(p + len, HUGE_PAGE - head);
	madvise(p, len, MADV_HUGEPAGE);
	return p;
}

void cb_free_huge(void *p, size_t n)
{
	if (p)
		munmap(p, huge_round(n ? n : 1));
}

/* Mapped (page-aligned), as huge ones, only not advised: cb_free_huge's
 * rounding unmaps the whole mapping of either. */
void *cb_xmalloc_pages(size_t n)
{
	size_t len = huge_round(n ? n : 1);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return oom(n);
	madvise(p, len, MADV_NOHUGEPAGE);
	return p;
}

void cb_pages_trim(void *buf, size_t cap, size_t keep, size_t used)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t from = ((uintptr_t)buf + keep + page - 1) & ~(page - 1);
	uintptr_t to = ((uintptr_t)buf + cap) & ~(page - 1);

	if (used > keep && to > from)
		madvise((void *)from, to - from, MADV_DONTNEED);
}
#else
/* ASan checks the bounds of heap blocks, not of mappings: keep them there */
void *cb_xmalloc_huge(size_t n)
{
	return cb_xmalloc(n);
}

void cb_free_huge(void *p, size_t n)
{
	(void)n;
	free(p);
}

void *cb_xmalloc_pages(size_t n)
{
	return cb_xmalloc(n);
}

void cb_pages_trim(void *buf, size_t cap, size_t keep, size_t used)
{
	(void)buf, (void)cap, (void)keep, (void)used;
}
#endif

char *cb_xstrdup(const char *s)
{
	char *p = strdup(s);
	return p ? p : oom(strlen(s));
}

char *cb_xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return n < 0 ? oom(0) : s;
}

void cb_strvec_push(struct cb_strvec *sv, const char *s)
{
	if (sv->n + 2 > sv->alloc) {
		sv->alloc = sv->alloc ? sv->alloc * 2 : 8;
		sv->v = cb_xrealloc(sv->v, sv->alloc * sizeof(*sv->v));
	}
	sv->v[sv->n++] = cb_xstrdup(s);
	sv->v[sv->n] = NULL;
}

void cb_strvec_clear(struct cb_strvec *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = sv->alloc = 0;
}

void cb_strvec_copy(struct cb_strvec *dst, const struct cb_strvec *src)
{
	for (size_t i = 0; i < src->n; i++)
		cb_strvec_push(dst, src->v[i]);
}

void cb_fmt_bytes(char *buf, size_t len, uint64_t bytes)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%lluB", (unsigned long long)bytes);
	else if (v < 10)
		snprintf(buf, len, "%.1f%s", v, units[u]);
	else
		snprintf(buf, len, "%.0f%s", v, units[u]);
}

void cb_fmt_vzsize(char *buf, size_t len, uint64_t bytes)
{
	double kb = bytes / 1024.0, mb = kb / 1024, gb = mb / 1024;

	if (kb < 1024)
		snprintf(buf, len, "%lluKB", (unsigned long long)kb);
	else if (mb < 1024)
		snprintf(buf, len, "%lluMB", (unsigned long long)mb);
	else if (gb < 1024)
		snprintf(buf, len, "%.2fGB", gb);
	else
		snprintf(buf, len, "%.2fTB", gb / 1024);
}

void cb_fmt_hms(char *buf, size_t len, double seconds)
{
	unsigned long s = seconds < 0 ? 0 : (unsigned long)(seconds + 0.5);
	snprintf(buf, len, "%02lu:%02lu:%02lu", s / 3600, (s / 60) % 60, s % 60);
}

double cb_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* write (off < 0) or pwrite at off until len bytes are out, EINTR retried;
 * a call that takes nothing and says no error: the disk is full */
static int write_fully(int fd, const char *p, size_t len, int64_t off)
{
	while (len > 0) {
		ssize_t n = off < 0 ? write(fd, p, len) : pwrite(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0) {
			errno = ENOSPC;
			return -1;
		}
		p += n;
		len -= (size_t)n;
		off = off < 0 ? off : off + n;
	}
	return 0;
}

int cb_write_all(int fd, const void *buf, size_t len)
{
	return write_fully(fd, buf, len, -1);
}

int cb_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	return write_fully(fd, buf, len, (int64_t)off);
}

/* read (off < 0) or pread at off until len bytes are in, EINTR retried */
static int read_fully(int fd, char *p, size_t len, int64_t off)
{
	while (len > 0) {
		ssize_t n = off < 0 ? read(fd, p, len) : pread(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
		off = off < 0 ? off : off + n;
	}
	return 0;
}

int cb_read_all(int fd, void *buf, size_t len)
{
	return read_fully(fd, buf, len, -1);
}

int cb_pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	return read_fully(fd, buf, len, (int64_t)off);
}

struct typed_name {
	char *name;
	unsigned char type;
};

static int typed_cmp(const void *a, const void *b)
{
	return strcmp(((const struct typed_name *)a)->name, ((const struct typed_name *)b)->name);
}

/* The directory's entries, unsorted: 0, or -1 with errno (none kept). */
static int read_names(int dfd, struct typed_name **out, size_t *n)
{
	int fd = dup(dfd), err;
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct typed_name *v = NULL;
	struct dirent *de;
	size_t cap = 0;

	*n = 0;
	if (!d) {
		err = errno;
		if (fd >= 0)
			close(fd);
		errno = err;
		return -1;
	}
	rewinddir(d);  /* the fd is shared with dfd: from the start */
	errno = 0;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			if (*n == cap)
				v = cb_xrealloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));
			v[(*n)++] = (struct typed_name){ cb_xstrdup(de->d_name), de->d_type };
		}
		errno = 0;
	}
	err = errno;
	closedir(d);
	if (err) {
		while (*n > 0)
			free(v[--*n].name);
		free(v);
		errno = err;
		return -1;
	}
	*out = v;
	return 0;
}

int cb_dir_names_types(int dfd, struct cb_strvec *names, unsigned char **types)
{
	struct typed_name *v;
	unsigned char *t;
	size_t n;

	*types = NULL;
	if (read_names(dfd, &v, &n) < 0)
		return -1;
	if (n > 1)
		qsort(v, n, sizeof(*v), typed_cmp);
	t = cb_xmalloc(n + 1);
	names->alloc = names->n + n + 1;
	names->v = cb_xrealloc(names->v, names->alloc * sizeof(*names->v));
	for (size_t i = 0; i < n; i++) {   /* the names move over, not copied */
		names->v[names->n++] = v[i].name;
		t[i] = v[i].type;
	}
	names->v[names->n] = NULL;
	free(v);
	*types = t;
	return 0;
}

int cb_dir_names(int dfd, struct cb_strvec *names)
{
	unsigned char *types;
	int r = cb_dir_names_types(dfd, names, &types);

	free(types);
	return r;
}

struct deep_call {
	int (*fn)(void *);
	void *arg;
	int ret;
	char *err;                    /* the thread's cb_last_error() on failure */
	sigset_t mask;                /* the caller's signal mask */
};

static void *deep_main(void *p)
{
	struct deep_call *c = p;

	pthread_sigmask(SIG_SETMASK, &c->mask, NULL);
	c->ret = c->fn(c->arg);
	if (c->ret < 0)
		c->err = cb_xstrdup(last_error);
	return NULL;
}

/* A thread with all signals blocked (they stay with the caller's thread,
 * whose handlers only count), on a stack of `stack` bytes (0: the
 * default). 0 or -1. */
static int thread_start(pthread_t *th, void *(*fn)(void *), void *arg, size_t stack)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int rc;

	if (pthread_attr_init(&attr) != 0)
		return -1;
	if (stack)
		pthread_attr_setstacksize(&attr, stack);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(th, &attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return rc == 0 ? 0 : -1;
}

int cb_thread_start(pthread_t *th, void *(*fn)(void *), void *arg)
{
	return thread_start(th, fn, arg, 0);
}

int cb_thread_start_deep(pthread_t *th, void *(*fn)(void *), void *arg)
{
	return thread_start(th, fn, arg, CB_DEEP_STACK);
}

/*
 * The deep thread takes the caller's place for signals too: the caller
 * blocks them while it waits, the thread has the caller's mask. So a
 * signal the work sends itself (kill(getpid())) is handled before that
 * call returns, as it was on the caller's thread, and an outside one while
 * the work runs is handled by the thread that checks for it.
 */
int cb_call_deep(int (*fn)(void *), void *arg)
{
	struct deep_call c = { fn, arg, 0, NULL, { { 0 } } };
	sigset_t all;
	pthread_t th;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &c.mask);
	if (thread_start(&th, deep_main, &c, CB_DEEP_STACK) < 0) {  /* no room for it */
		pthread_sigmask(SIG_SETMASK, &c.mask, NULL);
		return fn(arg);
	}
	pthread_join(th, NULL);
	pthread_sigmask(SIG_SETMASK, &c.mask, NULL);
	if (c.err)
		set_error(c.err);
	return c.ret;
}

void cb_node_name(char *buf, size_t len)
{
	if (gethostname(buf, len - 1) < 0 || !buf[0])
		snprintf(buf, len, "localhost");
	buf[len - 1] = '\0';
	buf[strcspn(buf, ".")] = '\0';
}

/* Levenshtein distance of a and b (short words: keys, commands). */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), *row = cb_xcalloc(lb + 1, sizeof(*row)), d;

	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	d = row[lb];
	free(row);
	return d;
}

const char *cb_closest_word(const char *word, const char *const *cands, size_t n)
{
	size_t best = (size_t)-1, limit = strlen(word) / 3 + 1;
	const char *found = NULL;

	for (size_t i = 0; i < n; i++) {
		size_t d = cands[i] ? edit_distance(word, cands[i]) : (size_t)-1;
		if (d < best) {
			best = d;
			found = cands[i];
		}
	}
	return best <= (limit > 3 ? 3 : limit) ? found : NULL;
}

int cb_stdout_gone(void)
{
	struct pollfd pfd = { STDOUT_FILENO, POLLOUT, 0 };
	struct stat st;

	if (fstat(STDOUT_FILENO, &st) < 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
		return 0;
	return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLERR | POLLHUP));
}

char *cb_find_on_path(const char *name)
{
	const char *path = getenv("PATH");
	char *copy = cb_xstrdup(path ? path : "/usr/sbin:/usr/bin:/sbin:/bin"), *save = NULL;
	char *found = NULL;

	for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
		char *p = cb_xasprintf("%s/%s", d, name);
		if (access(p, X_OK) == 0)
			found = p;
		else
			free(p);
	}
	free(copy);
	return found;
}
