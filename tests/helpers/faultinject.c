/*
 * e2e helper: an LD_PRELOAD shim that makes chosen system calls fail, so
 * the e2e tests can inject faults the kernel rarely gives on demand (EIO on
 * a source read, ENOSPC after N bytes, a failing rename or fsync) without
 * any test branch in cbackup itself. lib.sh builds it as
 * build/e2e-helpers/faultinject.so.
 *
 * CB_FAULT="RULE[;RULE...]", RULE = OP:ERRNO[:OPTION...]
 *   OP      read   read, pread, pread64, readv, copy_file_range (its input fd)
 *           write  write, pwrite, pwrite64, writev, copy_file_range (output fd)
 *           rename rename, renameat, renameat2 (matched on the old path)
 *           fsync  fsync, fdatasync
 *           open   open, openat (matched on the path argument)
 *           unlink unlink, unlinkat (matched on the path argument)
 *           stat   fstatat, fstatat64 (matched on the directory fd's path,
 *                  '/', the name)
 *           data   write (matched on the bytes written, not the path: a
 *                  QMP command naming a node, say; SIGSTOP holds cbackup
 *                  right before it sends that command)
 *           copy   copy_file_range only (its input fd): with SIGSTOP, a
 *                  test holds the kernel's copy of a range cbackup read
 *                  and checked before, and changes the source meanwhile
 *           handle open_by_handle_at (matched on the path the handle leads
 *                  to: the real call is made, its fd closed, the error
 *                  returned; what a busy host's kernel sometimes answers,
 *                  ENOMEM for an inode it is freeing or setting up)
 *   ERRNO   EIO, ENOSPC, EDQUOT, EROFS, EACCES, EPERM, ENOMEM or a number: the call
 *           fails with it (and so does every later matching call); or
 *           SIGINT, SIGTERM, SIGHUP, SIGKILL, SIGSTOP: the first matching call
 *           sends that signal to the process and then goes ahead (a real
 *           signal, delivered exactly inside the phase that makes the call;
 *           SIGSTOP holds it there until the test sends SIGCONT; for copy
 *           it is raised on the calling thread, so the copy waits even on
 *           a helper thread)
 *           TORN (stat only): the first matching call returns the real stat
 *           with st_size one more, times unchanged: what a stat racing an
 *           open(O_TRUNC) in another process can see (the kernel sets the
 *           size before the times); later calls are real
 *   OPTION  PATH-SUBSTRING  only calls on paths containing it (for fds: the
 *                           /proc/self/fd link target); default: every path
 *           after=N         let N bytes pass first (read/write; a call that
 *                           crosses N is cut short at N), or N calls (others)
 * The shim acts only inside a process named "cbackup" (so hook scripts and
 * freeze commands run by cbackup are not affected), or in any process when
 * CB_FAULT_ANY=1. Every injected failure appends "OP ERRNO PATH" to the
 * file CB_FAULT_LOG if that is set: a test can check that the fault fired.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum op { OP_READ, OP_WRITE, OP_RENAME, OP_FSYNC, OP_OPEN, OP_UNLINK, OP_STAT, OP_HANDLE,
	  OP_DATA, OP_COPY, OP_NONE };
static const char *const op_names[] = { "read", "write", "rename", "fsync", "open", "unlink",
					"stat", "handle", "data", "copy" };

#define MAX_RULES 8

struct rule {
	enum op op;
	int err;
	int sig;           /* instead of err: raise this once */
	int torn;          /* instead of err: one torn stat */
	int fired;
	char match[512];
	uint64_t after;
	uint64_t seen;     /* bytes (read/write) or calls so far, atomically */
};

static struct rule rules[MAX_RULES];
static int n_rules;
static int active;

static const struct { const char *name; int err; } errnames[] = {
	{ "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EDQUOT", EDQUOT }, { "EROFS", EROFS },
	{ "EACCES", EACCES }, { "EPERM", EPERM }, { "ENOENT", ENOENT }, { "EINTR", EINTR },
	{ "ENOMEM", ENOMEM },
};
static const struct { const char *name; int sig; } signames[] = {
	{ "SIGINT", SIGINT }, { "SIGTERM", SIGTERM }, { "SIGHUP", SIGHUP }, { "SIGKILL", SIGKILL },
	{ "SIGSTOP", SIGSTOP },
};

static enum op parse_op(const char *s)
{
	for (int i = 0; i < OP_NONE; i++)
		if (!strcmp(s, op_names[i]))
			return (enum op)i;
	return OP_NONE;
}

static int parse_errno(const char *s)
{
	for (size_t i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
		if (!strcmp(s, errnames[i].name))
			return errnames[i].err;
	return atoi(s);
}

static const char *errno_name(int err)
{
	for (size_t i = 0; i < sizeof(errnames) / sizeof(errnames[0]); i++)
		if (errnames[i].err == err)
			return errnames[i].name;
	return "E?";
}

static void parse_rule(char *text)
{
	struct rule *r = &rules[n_rules];
	char *save = NULL, *tok;

	memset(r, 0, sizeof(*r));
	tok = strtok_r(text, ":", &save);
	if (!tok || (r->op = parse_op(tok)) == OP_NONE)
		return;
	tok = strtok_r(NULL, ":", &save);
	if (!tok)
		return;
	for (size_t i = 0; i < sizeof(signames) / sizeof(signames[0]); i++)
		if (!strcmp(tok, signames[i].name))
			r->sig = signames[i].sig;
	if (r->op == OP_STAT && !strcmp(tok, "TORN"))
		r->torn = 1;
	if (!r->sig && !r->torn && !(r->err = parse_errno(tok)))
		return;
	while ((tok = strtok_r(NULL, ":", &save))) {
		if (!strncmp(tok, "after=", 6))
			r->after = strtoull(tok + 6, NULL, 10);
		else
			snprintf(r->match, sizeof(r->match), "%s", tok);
	}
	n_rules++;
}

__attribute__((constructor)) static void fault_init(void)
{
	const char *spec = getenv("CB_FAULT"), *any = getenv("CB_FAULT_ANY");
	char *copy, *save = NULL, *tok;

	if (!spec || !*spec)
		return;
	if (!(any && !strcmp(any, "1")) && strcmp(program_invocation_short_name, "cbackup"))
		return;
	copy = strdup(spec);
	for (tok = strtok_r(copy, ";", &save); tok && n_rules < MAX_RULES;
	     tok = strtok_r(NULL, ";", &save))
		parse_rule(tok);
	free(copy);
	active = n_rules > 0;
}

static void log_fault(const struct rule *r, const char *path)
{
	const char *logf = getenv("CB_FAULT_LOG");
	char line[1200];
	int fd, n;

	if (!logf)
		return;
	n = snprintf(line, sizeof(line), "%s %s %s\n", op_names[r->op],
		     r->torn ? "TORN" : r->sig ? strsignal(r->sig) : errno_name(r->err), path);
	fd = (int)syscall(SYS_openat, AT_FDCWD, logf, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (syscall(SYS_write, fd, line, (size_t)(n < (int)sizeof(line) ? n : (int)sizeof(line) - 1)) < 0)
		n = 0;
	syscall(SYS_close, fd);
}

static int fd_path(int fd, char *buf, size_t len)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, buf, len - 1);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return 0;
}

/* The rule for OP on PATH, or NULL. */
static struct rule *find_rule(enum op op, const char *path)
{
	for (int i = 0; i < n_rules; i++)
		if (rules[i].op == op && (!rules[i].match[0] || (path && strstr(path, rules[i].match))))
			return &rules[i];
	return NULL;
}

static struct rule *fd_rule(enum op op, int fd, char *path, size_t len)
{
	if (!active)
		return NULL;
	if (fd_path(fd, path, len) < 0)
		return NULL;
	return find_rule(op, path);
}

/* The threshold is crossed: 0 = fail the call (errno set), 1 = go ahead
 * (a signal rule, which raises its signal the first time only). */
static int fire(struct rule *r, const char *path)
{
	if (!r->sig) {
		log_fault(r, path);
		errno = r->err;
		return 0;
	}
	if (!__atomic_exchange_n(&r->fired, 1, __ATOMIC_SEQ_CST)) {
		log_fault(r, path);
		/* copy: SIGSTOP to the calling thread (it cannot be blocked),
		 * which stops before the copy goes ahead, also on a helper
		 * thread that blocks signals (a process-directed one stops the
		 * process a moment later, the copy perhaps done) */
		if (r->sig == SIGSTOP && r->op == OP_COPY)
			raise(SIGSTOP);
		else
			kill(getpid(), r->sig);
	}
	return 1;
}

/* For a byte-counting call of LEN bytes: how many may pass (LEN = all);
 * 0 means fail now (errno set). */
static size_t allow_bytes(struct rule *r, const char *path, size_t len)
{
	uint64_t before = __atomic_fetch_add(&r->seen, len, __ATOMIC_SEQ_CST);

	if (before + len <= r->after)
		return len;
	if (before < r->after && !r->sig)
		return (size_t)(r->after - before);
	return fire(r, path) ? len : 0;
}

/* For a counted call: 1 pass, 0 fail (errno set). */
static int allow_call(struct rule *r, const char *path)
{
	if (__atomic_fetch_add(&r->seen, 1, __ATOMIC_SEQ_CST) < r->after)
		return 1;
	return fire(r, path);
}

#define REAL(name, type) \
	static type real_##name; \
	if (!real_##name) real_##name = (type)dlsym(RTLD_NEXT, #name)

/* ---- reads and writes ---------------------------------------------------- */

typedef ssize_t (*rw_fn)(int, void *, size_t);
typedef ssize_t (*prw_fn)(int, void *, size_t, off_t);
typedef ssize_t (*iov_fn)(int, const struct iovec *, int);

static ssize_t do_rw(enum op op, rw_fn fn, int fd, void *buf, size_t len)
{
	char path[4096];
	struct rule *r = fd_rule(op, fd, path, sizeof(path));
	size_t ok;

	if (!r || len == 0)
		return fn(fd, buf, len);
	ok = allow_bytes(r, path, len);
	if (ok == 0)
		return -1;
	return fn(fd, buf, ok);
}

static ssize_t do_prw(enum op op, prw_fn fn, int fd, void *buf, size_t len, off_t off)
{
	char path[4096];
	struct rule *r = fd_rule(op, fd, path, sizeof(path));
	size_t ok;

	if (!r || len == 0)
		return fn(fd, buf, len, off);
	ok = allow_bytes(r, path, len);
	if (ok == 0)
		return -1;
	return fn(fd, buf, ok, off);
}

/* Vectored calls: all or nothing (cutting an iovec short is not needed). */
static ssize_t do_iov(enum op op, iov_fn fn, int fd, const struct iovec *iov, int cnt)
{
	char path[4096];
	struct rule *r = fd_rule(op, fd, path, sizeof(path));
	size_t len = 0;

	for (int i = 0; r && i < cnt; i++)
		len += iov[i].iov_len;
	if (r && len && allow_bytes(r, path, len) < len) {
		errno = r->err;
		return -1;
	}
	return fn(fd, iov, cnt);
}

ssize_t read(int fd, void *buf, size_t len)
{
	REAL(read, rw_fn);
	return do_rw(OP_READ, real_read, fd, buf, len);
}

/* A data rule whose substring is in BUF: 1 fail the write (errno set). */
static int data_fails(const void *buf, size_t len)
{
	for (int i = 0; active && i < n_rules; i++) {
		struct rule *r = &rules[i];
		if (r->op == OP_DATA && r->match[0] && memmem(buf, len, r->match, strlen(r->match)))
			return !allow_call(r, r->match);
	}
	return 0;
}

ssize_t write(int fd, const void *buf, size_t len)
{
	REAL(write, rw_fn);
	if (data_fails(buf, len))
		return -1;
	return do_rw(OP_WRITE, real_write, fd, (void *)buf, len);
}

ssize_t pread(int fd, void *buf, size_t len, off_t off)
{
	REAL(pread, prw_fn);
	return do_prw(OP_READ, real_pread, fd, buf, len, off);
}

ssize_t pread64(int fd, void *buf, size_t len, off_t off)
{
	REAL(pread64, prw_fn);
	return do_prw(OP_READ, real_pread64, fd, buf, len, off);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	REAL(pwrite, prw_fn);
	return do_prw(OP_WRITE, real_pwrite, fd, (void *)buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off_t off)
{
	REAL(pwrite64, prw_fn);
	return do_prw(OP_WRITE, real_pwrite64, fd, (void *)buf, len, off);
}

ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
	REAL(readv, iov_fn);
	return do_iov(OP_READ, real_readv, fd, iov, cnt);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	REAL(writev, iov_fn);
	return do_iov(OP_WRITE, real_writev, fd, iov, cnt);
}

typedef ssize_t (*cfr_fn)(int, loff_t *, int, loff_t *, size_t, unsigned int);

ssize_t copy_file_range(int in, loff_t *in_off, int out, loff_t *out_off, size_t len,
			unsigned int flags)
{
	char path[4096];
	struct rule *r;
	size_t ok = len;

	REAL(copy_file_range, cfr_fn);
	if ((r = fd_rule(OP_COPY, in, path, sizeof(path))) && len)
		ok = allow_bytes(r, path, len);
	if (ok && (r = fd_rule(OP_READ, in, path, sizeof(path))) && len)
		ok = allow_bytes(r, path, len);
	if (ok && (r = fd_rule(OP_WRITE, out, path, sizeof(path))) && len)
		ok = allow_bytes(r, path, ok);
	if (ok == 0 && len)
		return -1;
	return real_copy_file_range(in, in_off, out, out_off, ok, flags);
}

/* ---- rename, fsync, open ------------------------------------------------- */

typedef int (*rename_fn)(const char *, const char *);
typedef int (*renameat_fn)(int, const char *, int, const char *);
typedef int (*renameat2_fn)(int, const char *, int, const char *, unsigned int);
typedef int (*fsync_fn)(int);

static int rename_fails(const char *old)
{
	struct rule *r = active ? find_rule(OP_RENAME, old) : NULL;
	return r && !allow_call(r, old);
}

int rename(const char *old, const char *new)
{
	REAL(rename, rename_fn);
	return rename_fails(old) ? -1 : real_rename(old, new);
}

int renameat(int ofd, const char *old, int nfd, const char *new)
{
	REAL(renameat, renameat_fn);
	return rename_fails(old) ? -1 : real_renameat(ofd, old, nfd, new);
}

int renameat2(int ofd, const char *old, int nfd, const char *new, unsigned int flags)
{
	REAL(renameat2, renameat2_fn);
	return rename_fails(old) ? -1 : real_renameat2(ofd, old, nfd, new, flags);
}

static int fsync_fails(int fd)
{
	char path[4096];
	struct rule *r = fd_rule(OP_FSYNC, fd, path, sizeof(path));
	return r && !allow_call(r, path);
}

int fsync(int fd)
{
	REAL(fsync, fsync_fn);
	return fsync_fails(fd) ? -1 : real_fsync(fd);
}

int fdatasync(int fd)
{
	REAL(fdatasync, fsync_fn);
	return fsync_fails(fd) ? -1 : real_fdatasync(fd);
}

typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*open_fn)(const char *, int, ...);

static int open_fails(const char *path)
{
	struct rule *r = active ? find_rule(OP_OPEN, path) : NULL;
	return r && !allow_call(r, path);
}

int openat(int dfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	REAL(openat, openat_fn);
	if (flags & (O_CREAT | __O_TMPFILE)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return open_fails(path) ? -1 : real_openat(dfd, path, flags, mode);
}

int openat64(int dfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	REAL(openat64, openat_fn);
	if (flags & (O_CREAT | __O_TMPFILE)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return open_fails(path) ? -1 : real_openat64(dfd, path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	REAL(open64, open_fn);
	if (flags & (O_CREAT | __O_TMPFILE)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return open_fails(path) ? -1 : real_open64(path, flags, mode);
}

int open(const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	REAL(open, open_fn);
	if (flags & (O_CREAT | __O_TMPFILE)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return open_fails(path) ? -1 : real_open(path, flags, mode);
}

typedef int (*handle_fn)(int, struct file_handle *, int);

int open_by_handle_at(int mount_fd, struct file_handle *h, int flags)
{
	char path[4096];
	struct rule *r;
	int fd;

	REAL(open_by_handle_at, handle_fn);
	fd = real_open_by_handle_at(mount_fd, h, flags);
	if (fd < 0 || !(r = fd_rule(OP_HANDLE, fd, path, sizeof(path))) || allow_call(r, path))
		return fd;
	syscall(SYS_close, fd);
	errno = r->err;
	return -1;
}

typedef int (*unlink_fn)(const char *);
typedef int (*unlinkat_fn)(int, const char *, int);

static int unlink_fails(const char *path)
{
	struct rule *r = active ? find_rule(OP_UNLINK, path) : NULL;
	return r && !allow_call(r, path);
}

int unlink(const char *path)
{
	REAL(unlink, unlink_fn);
	return unlink_fails(path) ? -1 : real_unlink(path);
}

int unlinkat(int dfd, const char *path, int flags)
{
	REAL(unlinkat, unlinkat_fn);
	return unlink_fails(path) ? -1 : real_unlinkat(dfd, path, flags);
}

/* ---- stat ------------------------------------------------------------------ */

typedef int (*fstatat_fn)(int, const char *, struct stat *, int);

/* After the real call: 0 as it was, or -1 failing it (errno set); a torn
 * rule alters *sb once. */
static int stat_fault(int dfd, const char *name, struct stat *sb, int ret)
{
	char path[4096 + 256], dir[4096];
	struct rule *r;

	if (!active || ret < 0 || (dfd != AT_FDCWD && fd_path(dfd, dir, sizeof(dir)) < 0))
		return ret;
	snprintf(path, sizeof(path), "%s/%s", dfd == AT_FDCWD ? "." : dir, name);
	if (!(r = find_rule(OP_STAT, path)))
		return ret;
	if (__atomic_fetch_add(&r->seen, 1, __ATOMIC_SEQ_CST) < r->after)
		return ret;
	if (!r->torn)
		return fire(r, path) ? ret : -1;
	if (!__atomic_exchange_n(&r->fired, 1, __ATOMIC_SEQ_CST)) {
		log_fault(r, path);
		sb->st_size++;
	}
	return ret;
}

int fstatat(int dfd, const char *name, struct stat *sb, int flags)
{
	REAL(fstatat, fstatat_fn);
	return stat_fault(dfd, name, sb, real_fstatat(dfd, name, sb, flags));
}

/* struct stat64 is struct stat on the 64-bit targets this shim serves */
typedef int (*fstatat64_fn)(int, const char *, struct stat64 *, int);

int fstatat64(int dfd, const char *name, struct stat64 *sb, int flags)
{
	REAL(fstatat64, fstatat64_fn);
	return stat_fault(dfd, name, (struct stat *)sb, real_fstatat64(dfd, name, sb, flags));
}
