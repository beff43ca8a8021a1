/* Unit tests: the staging engine (cb_stage): the pass-2 decision, the
 * exclude rule, and real two-pass round trips in a scratch directory. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sysmacros.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <cmocka.h>

#include "cb_audit.h"
#include "cb_cleanup.h"
#include "cb_fhandle.h"
#include "cb_rmtree.h"
#include "cb_stage.h"
#include "cb_util.h"

/* ---- cb_stage_decide ---- */

static struct stat base_stat(mode_t mode)
{
	struct stat s;

	memset(&s, 0, sizeof(s));
	s.st_dev = 7;
	s.st_ino = 42;
	s.st_mode = mode;
	s.st_size = 100;
	s.st_uid = 1;
	s.st_gid = 2;
	s.st_mtim.tv_sec = 1000;
	s.st_mtim.tv_nsec = 5;
	s.st_ctim.tv_sec = 2000;
	s.st_ctim.tv_nsec = 6;
	return s;
}

static struct cb_index_rec rec_of(const struct stat *s)
{
	struct cb_index_rec r = { (uint64_t)s->st_dev, (uint64_t)s->st_ino, (uint64_t)s->st_size,
				  s->st_mtim, s->st_ctim, s->st_mode, s->st_uid, s->st_gid,
				  (uint64_t)s->st_rdev };
	return r;
}

/* Racily clean entries (recorded with a ctime at or after pass 1's start)
 * are never taken as unchanged, even when every stat field is the same: a
 * symlink made again under its recycled inode in the same timestamp tick,
 * a file rewritten with its size in that tick. */
static void test_decide_racy(void **state)
{
	struct stat f = base_stat(S_IFREG | 0644), l = base_stat(S_IFLNK | 0777);
	struct stat d = base_stat(S_IFDIR | 0755), c = base_stat(S_IFCHR | 0600);
	struct cb_index_rec rf = rec_of(&f), rl = rec_of(&l), rd = rec_of(&d), rc = rec_of(&c);
	/* ctimes are 2000.000000006: a cutoff 20 ms later still sees them */
	struct timespec before = { 2000, 20000007 }, at = { 2000, 20000006 };
	(void)state;

	/* recorded before the cutoff: the stat decides */
	assert_int_equal(cb_stage_decide_racy(&rf, &f, &before), CB_DELTA_SAME);
	assert_int_equal(cb_stage_decide_racy(&rl, &l, &before), CB_DELTA_SAME);
	/* at or after it: copied or made again */
	assert_int_equal(cb_stage_decide_racy(&rf, &f, &at), CB_DELTA_DATA);
	assert_int_equal(cb_stage_decide_racy(&rl, &l, &at), CB_DELTA_REPLACE);
	assert_int_equal(cb_stage_decide_racy(&rc, &c, &at), CB_DELTA_REPLACE);
	/* a directory is listed anyway */
	assert_int_equal(cb_stage_decide_racy(&rd, &d, &at), CB_DELTA_SAME);
	/* whole-second ctimes: racy from the second before */
	f.st_ctim.tv_nsec = 0;
	rf = rec_of(&f);
	assert_int_equal(cb_stage_decide_racy(&rf, &f, &(struct timespec){ 2001, 999999999 }),
			 CB_DELTA_DATA);
	assert_int_equal(cb_stage_decide_racy(&rf, &f, &(struct timespec){ 2002, 0 }),
			 CB_DELTA_SAME);
	/* what the stat already says wins */
	l.st_ino++;
	assert_int_equal(cb_stage_decide_racy(&rl, &l, &before), CB_DELTA_REPLACE);
}

static void test_decide(void **state)
{
	struct stat s = base_stat(S_IFREG | 0644), n;
	struct cb_index_rec r = rec_of(&s);
	(void)state;

	assert_int_equal(cb_stage_decide(&r, &s), CB_DELTA_SAME);
	n = s;  /* written, mtime put back: only ctime tells */
	n.st_ctim.tv_nsec++;
	assert_int_equal(cb_stage_decide(&r, &n), CB_DELTA_DATA);
	n = s;
	n.st_size++;
	assert_int_equal(cb_stage_decide(&r, &n), CB_DELTA_DATA);
	n = s;
	n.st_mtim.tv_sec++;
	assert_int_equal(cb_stage_decide(&r, &n), CB_DELTA_DATA);
	n = s;
	n.st_ino++;
	assert_int_equal(cb_stage_decide(&r, &n), CB_DELTA_REPLACE);
	n = s;
	n.st_dev++;
	assert_int_equal(cb_stage_decide(&r, &n), CB_DELTA_REPLACE);
	n = s;
	n.st_mode = S_IFDIR | 0644;
	assert_int_equal(cb_stage_decide(&r, &n), CB_DELTA_REPLACE);
}

static void test_decide_meta(void **state)
{
	struct stat s = base_stat(S_IFLNK | 0777), n;
	struct cb_index_rec r = rec_of(&s);
	(void)state;

	assert_int_equal(cb_stage_decide(&r, &s), CB_DELTA_SAME);
	n = s;  /* lchown of a symlink, or one made again under its freed
		 * inode number: only reading it tells, so it is made again */
	n.st_uid = 99;
	n.st_ctim.tv_sec++;
	assert_int_equal(cb_stage_decide(&r, &n), CB_DELTA_REPLACE);
	n = s;
	n.st_ctim.tv_nsec++;
	assert_int_equal(cb_stage_decide(&r, &n), CB_DELTA_REPLACE);
	s = base_stat(S_IFCHR | 0600);  /* a device: rdev alone tells */
	s.st_rdev = makedev(1, 3);
	r = rec_of(&s);
	assert_int_equal(cb_stage_decide(&r, &s), CB_DELTA_SAME);
	n = s;
	n.st_rdev = makedev(1, 5);
	assert_int_equal(cb_stage_decide(&r, &n), CB_DELTA_REPLACE);
	n = s;
	n.st_mode = S_IFCHR | 0644;
	assert_int_equal(cb_stage_decide(&r, &n), CB_DELTA_REPLACE);
	s = base_stat(S_IFLNK | 0777);
	r = rec_of(&s);
	n = s;
	n.st_mode = S_IFREG | 0777;
	assert_int_equal(cb_stage_decide(&r, &n), CB_DELTA_REPLACE);

	s = base_stat(S_IFDIR | 0755);
	r = rec_of(&s);
	n = s;  /* an entry added: mtime and ctime move, size may too */
	n.st_mtim.tv_sec++;
	n.st_ctim.tv_sec++;
	n.st_size += 4096;
	assert_int_equal(cb_stage_decide(&r, &n), CB_DELTA_META);
	n = s;
	n.st_mode = S_IFDIR | 0700;
	assert_int_equal(cb_stage_decide(&r, &n), CB_DELTA_META);
	n = s;
	n.st_atim.tv_sec += 100;  /* atime alone: nothing to do */
	assert_int_equal(cb_stage_decide(&r, &n), CB_DELTA_SAME);
}

/* ---- cb_stage_excluded ---- */

static void test_excluded(void **state)
{
	struct cb_strvec ex = CB_STRVEC_INIT;
	(void)state;

	assert_false(cb_stage_excluded(NULL, "tmp/foo", 0));
	cb_strvec_push(&ex, "/tmp/?*");
	cb_strvec_push(&ex, "*.pid");
	cb_strvec_push(&ex, "cache/");
	cb_strvec_push(&ex, "lib/junk");
	assert_true(cb_stage_excluded(&ex, "tmp/foo", 0));
	assert_true(cb_stage_excluded(&ex, "tmp/.x", 1));
	assert_false(cb_stage_excluded(&ex, "tmp", 1));
	assert_false(cb_stage_excluded(&ex, "var/tmp/foo", 0));
	assert_true(cb_stage_excluded(&ex, "run/x.pid", 0));
	assert_true(cb_stage_excluded(&ex, "x.pid", 0));
	assert_true(cb_stage_excluded(&ex, "a/b/c.pid", 0));
	assert_false(cb_stage_excluded(&ex, "run/x.pidfile", 0));
	assert_true(cb_stage_excluded(&ex, "var/cache", 1));
	assert_false(cb_stage_excluded(&ex, "var/cache", 0));  /* "dir/": dirs only */
	assert_true(cb_stage_excluded(&ex, "usr/lib/junk", 0));
	assert_true(cb_stage_excluded(&ex, "lib/junk", 0));
	assert_false(cb_stage_excluded(&ex, "usr/xlib/junk", 0));
	assert_false(cb_stage_excluded(&ex, "etc/passwd", 0));
	cb_strvec_clear(&ex);
}

/* ---- real trees ---- */

struct tree {
	char base[64], src[96], dst[96];
	struct cb_log log;
};

static char *pathf(const char *fmt, ...) CB_PRINTF(1, 2);
static char *pathf(const char *fmt, ...)
{
	static char buf[4][512];
	static int i;
	va_list ap;

	i = (i + 1) % 4;
	va_start(ap, fmt);
	vsnprintf(buf[i], sizeof(buf[i]), fmt, ap);
	va_end(ap);
	return buf[i];
}

static void put(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	close(fd);
}

static void put_big(const char *path, size_t len, int seed)
{
	char *b = malloc(len);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	for (size_t i = 0; i < len; i++)
		b[i] = (char)(i * 31 + seed);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, b, len), (ssize_t)len);
	close(fd);
	free(b);
}

static void set_mtime(const char *path, time_t sec, long nsec)
{
	struct timespec ts[2] = { { 500000000, 111 }, { sec, nsec } };
	assert_int_equal(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0);
}

static char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	struct stat sb;
	char *b;

	if (fd < 0 || fstat(fd, &sb) < 0)
		return NULL;
	b = malloc((size_t)sb.st_size + 1);
	*len = (size_t)read(fd, b, (size_t)sb.st_size);
	close(fd);
	return b;
}

static int same_xattrs(const char *a, const char *b)
{
	char la[4096], lb[4096], va[1024], vb[1024];
	ssize_t na = llistxattr(a, la, sizeof(la)), nb = llistxattr(b, lb, sizeof(lb));

	if (na != nb)
		return 0;
	for (char *p = la; p < la + na; p += strlen(p) + 1) {
		ssize_t x = lgetxattr(a, p, va, sizeof(va)), y = lgetxattr(b, p, vb, sizeof(vb));
		if (x != y || x < 0 || memcmp(va, vb, (size_t)x))
			return 0;
	}
	return 1;
}

/* Differences between two trees (type, owner, mode, size, mtime, rdev,
 * link targets, contents, xattrs); sockets in a are expected missing. */
static int tree_diff(const char *a, const char *b)
{
	struct stat sa, sb;
	int diffs = 0;

	if (lstat(a, &sa) < 0)
		return 1;
	if (lstat(b, &sb) < 0) {
		if (S_ISSOCK(sa.st_mode))
			return 0;
		print_message("missing: %s\n", b);
		return 1;
	}
	if (sa.st_mode != sb.st_mode || sa.st_uid != sb.st_uid || sa.st_gid != sb.st_gid ||
	    (!S_ISDIR(sa.st_mode) && sa.st_size != sb.st_size) || sa.st_rdev != sb.st_rdev ||
	    sa.st_mtim.tv_sec != sb.st_mtim.tv_sec || sa.st_mtim.tv_nsec != sb.st_mtim.tv_nsec ||
	    !same_xattrs(a, b)) {
		print_message("differs: %s (mode %o/%o)\n", b, sa.st_mode, sb.st_mode);
		diffs++;
	}
	if (S_ISREG(sa.st_mode)) {
		size_t la = 0, lb = 0;
		char *ca = slurp(a, &la), *cb = slurp(b, &lb);
		if (!ca || !cb || la != lb || memcmp(ca, cb, la)) {
			print_message("content differs: %s\n", b);
			diffs++;
		}
		free(ca);
		free(cb);
	} else if (S_ISLNK(sa.st_mode)) {
		char ta[256] = "", tb[256] = "";
		if (readlink(a, ta, sizeof(ta) - 1) < 0 || readlink(b, tb, sizeof(tb) - 1) < 0 ||
		    strcmp(ta, tb))
			diffs++;
	} else if (S_ISDIR(sa.st_mode)) {
		char cmd[1200], line[600];
		FILE *p;
		/* both directions: the union of names */
		snprintf(cmd, sizeof(cmd), "(ls -A '%s'; ls -A '%s') | sort -u", a, b);
		p = popen(cmd, "r");
		while (p && fgets(line, sizeof(line), p)) {
			char *ca, *cb;
			line[strcspn(line, "\n")] = '\0';
			ca = cb_xasprintf("%s/%s", a, line);
			cb = cb_xasprintf("%s/%s", b, line);
			if (access(ca, F_OK) < 0 && faccessat(AT_FDCWD, ca, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
				print_message("extra in staging: %s\n", cb);
				diffs++;
			} else {
				diffs += tree_diff(ca, cb);
			}
			free(ca);
			free(cb);
		}
		if (p)
			pclose(p);
	}
	return diffs;
}

/* Directory mtimes: tree_diff reads them back after reading the dirs. */
static int setup(void **state)
{
	struct tree *t = calloc(1, sizeof(*t));

	strcpy(t->base, "/tmp/cbstage.XXXXXX");
	assert_non_null(mkdtemp(t->base));
	snprintf(t->src, sizeof(t->src), "%s/src", t->base);
	snprintf(t->dst, sizeof(t->dst), "%s/dst", t->base);
	assert_int_equal(mkdir(t->src, 0755), 0);
	cb_log_init(&t->log);
	t->log.quiet = 1;
	*state = t;
	return 0;
}

static int teardown(void **state)
{
	struct tree *t = *state;

	/* a failed test may have left its mounts (cb_remove_tree never crosses one) */
	umount2(pathf("%s/mnt", t->src), MNT_DETACH);
	umount2(t->dst, MNT_DETACH);
	cb_remove_tree(t->base);
	free(t);
	return 0;
}

static void make_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
}

/* A v2 file capability: cap_net_bind_service+ep. */
static int set_cap(const char *path)
{
	struct vfs_cap_data cap;

	memset(&cap, 0, sizeof(cap));
	cap.magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE;
	cap.data[0].permitted = 1u << CAP_NET_BIND_SERVICE;
	return setxattr(path, "security.capability", &cap, XATTR_CAPS_SZ_2, 0);
}

/* ACL blob (the kernel's xattr form): u:1234:r-- on top of the mode. */
static int set_acl(const char *path, const char *name)
{
	uint32_t blob[1 + 5 * 2];
	const uint16_t tags[5] = { 1, 2, 4, 0x10, 0x20 }, perms[5] = { 6, 4, 4, 4, 0 };
	const uint32_t ids[5] = { 0xffffffff, 1234, 0xffffffff, 0xffffffff, 0xffffffff };

	blob[0] = 2;
	for (int i = 0; i < 5; i++) {
		blob[1 + i * 2] = tags[i] | (uint32_t)perms[i] << 16;
		blob[2 + i * 2] = ids[i];
	}
	return setxattr(path, name, blob, sizeof(blob), 0);
}

static void build_source(struct tree *t, int *have_cap)
{
	const char *s = t->src;
	int fd;

	put(pathf("%s/file", s), "hello world\n");
	assert_int_equal(lsetxattr(pathf("%s/file", s), "user.test", "v1", 2, 0), 0);
	assert_int_equal(chown(pathf("%s/file", s), 1234, 1234), 0);
	assert_int_equal(chmod(pathf("%s/file", s), 04755), 0);
	set_mtime(pathf("%s/file", s), 1700000000, 123456789);
	fd = open(pathf("%s/sparse", s), O_WRONLY | O_CREAT, 0600);
	assert_int_equal(pwrite(fd, "data", 4, 1 << 20), 4);
	assert_int_equal(ftruncate(fd, 3 << 20), 0);  /* a trailing hole too */
	close(fd);
	assert_int_equal(symlink("file", pathf("%s/link", s)), 0);
	assert_int_equal(lchown(pathf("%s/link", s), 1234, 1234), 0);
	assert_int_equal(mkdir(pathf("%s/dir", s), 0750), 0);
	assert_int_equal(mkdir(pathf("%s/dir/sub", s), 0755), 0);
	put(pathf("%s/dir/sub/deep", s), "deep\n");
	put(pathf("%s/hl1", s), "linked\n");
	assert_int_equal(link(pathf("%s/hl1", s), pathf("%s/dir/hl2", s)), 0);
	assert_int_equal(mkfifo(pathf("%s/fifo", s), 0640), 0);
	assert_int_equal(mknod(pathf("%s/null", s), S_IFCHR | 0666, makedev(1, 3)), 0);
	make_socket(pathf("%s/sock", s));
	put(pathf("%s/capfile", s), "#!/bin/true\n");
	assert_int_equal(chmod(pathf("%s/capfile", s), 0755), 0);
	*have_cap = set_cap(pathf("%s/capfile", s)) == 0;
	put(pathf("%s/aclfile", s), "acl\n");
	assert_int_equal(set_acl(pathf("%s/aclfile", s), "system.posix_acl_access"), 0);
	assert_int_equal(mkdir(pathf("%s/acldir", s), 0755), 0);
	assert_int_equal(set_acl(pathf("%s/acldir", s), "system.posix_acl_default"), 0);
	put_big(pathf("%s/big", s), 200000, 1);
	put(pathf("%s/todelete", s), "bye\n");
	put(pathf("%s/toreplace", s), "a file for now\n");
	set_mtime(pathf("%s/dir", s), 1600000000, 42);
	assert_int_equal(chmod(s, 0751), 0);
}

static void run_pass(struct cb_stage *st, int pass, struct cb_stage_stats *stats)
{
	int r;

	/* what changed just before a pass is racily clean for the next one
	 * (copied again): let the clock pass CB_STAGE_RACY_TICK_NS first */
	usleep(CB_STAGE_RACY_TICK_NS / 1000 + 10000);
	r = pass == 1 ? cb_stage_pass1(st, stats) : cb_stage_pass2(st, stats);
	if (r < 0)
		print_message("pass %d: %s\n", pass, cb_last_error());
	assert_int_equal(r, 0);
}

static void check_pass1(struct tree *t, const struct cb_stage_stats *stats, int have_cap)
{
	struct stat a, b;

	/* atime kept (and not bumped in the source by the copy) */
	assert_int_equal(lstat(pathf("%s/file", t->dst), &b), 0);
	assert_int_equal(b.st_atim.tv_sec, 500000000);
	assert_int_equal(b.st_atim.tv_nsec, 111);
	assert_int_equal(b.st_mode, S_IFREG | 04755);
	assert_int_equal(b.st_uid, 1234);
	assert_int_equal(b.st_mtim.tv_nsec, 123456789);
	assert_int_equal(lstat(pathf("%s/sparse", t->dst), &b), 0);
	assert_int_equal(b.st_size, 3 << 20);
	assert_true(b.st_blocks <= 64);  /* holes stayed holes */
	assert_int_equal(lstat(pathf("%s/hl1", t->dst), &a), 0);
	assert_int_equal(lstat(pathf("%s/dir/hl2", t->dst), &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	assert_int_equal(lstat(pathf("%s/null", t->dst), &b), 0);
	assert_true(S_ISCHR(b.st_mode) && b.st_rdev == makedev(1, 3));
	assert_int_equal(lstat(pathf("%s/fifo", t->dst), &b), 0);
	assert_true(S_ISFIFO(b.st_mode));
	assert_int_equal(lstat(pathf("%s/sock", t->dst), &b), -1);
	assert_int_equal(lgetxattr(pathf("%s/aclfile", t->dst), "system.posix_acl_access", NULL, 0), 44);
	if (have_cap)
		assert_int_equal(getxattr(pathf("%s/capfile", t->dst), "security.capability", NULL, 0),
				 XATTR_CAPS_SZ_2);
	assert_int_equal(lstat(t->dst, &b), 0);
	assert_int_equal(b.st_mode & 07777, 0751);
	assert_true(stats->skipped >= 1);      /* the socket */
	assert_int_equal(stats->files, 18);    /* 17 entries (the socket too) + the root */
	assert_int_equal(stats->files_transferred, 9);  /* hl2 is a link */
	assert_int_equal(tree_diff(t->src, t->dst), 0);
}

static void modify_source(struct tree *t)
{
	const char *s = t->src;
	struct stat sb;

	usleep(20000);  /* coarse timestamps: make ctime move for sure */
	assert_int_equal(stat(pathf("%s/file", s), &sb), 0);
	put(pathf("%s/file", s), "HELLO WORLD\n");  /* same size, mtime put back */
	set_mtime(pathf("%s/file", s), sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
	assert_int_equal(unlink(pathf("%s/todelete", s)), 0);
	put(pathf("%s/dir/new", s), "new\n");
	assert_int_equal(rename(pathf("%s/big", s), pathf("%s/dir/sub/big2", s)), 0);
	assert_int_equal(unlink(pathf("%s/toreplace", s)), 0);
	assert_int_equal(mkdir(pathf("%s/toreplace", s), 0700), 0);
	put(pathf("%s/toreplace/inner", s), "inner\n");
	assert_int_equal(lchown(pathf("%s/link", s), 5, 5), 0);
}

static void test_roundtrip(void **state)
{
	struct tree *t = *state;
	struct cb_stage_opts o = { .src = t->src, .dst = t->dst };
	struct cb_stage_stats stats;
	struct cb_stage *st;
	int have_cap;

	build_source(t, &have_cap);
	assert_int_equal(cb_stage_new(&st, &o, &t->log), 0);
	run_pass(st, 1, &stats);
	check_pass1(t, &stats, have_cap);

	modify_source(t);
	run_pass(st, 2, &stats);
	assert_int_equal(tree_diff(t->src, t->dst), 0);
	/* file (data), dir/new, toreplace/inner; big2 reuses the staged big */
	assert_int_equal(stats.files_transferred, 3);
	assert_int_equal(stats.deleted, 2);  /* todelete, big (parked) */
	assert_int_equal(stats.files, 19);

	run_pass(st, 2, &stats);  /* nothing changed */
	assert_int_equal(stats.files_transferred, 0);
	assert_int_equal(stats.transferred_size, 0);
	assert_int_equal(stats.deleted, 0);
	assert_int_equal(stats.files, 19);
	assert_int_equal(tree_diff(t->src, t->dst), 0);
	cb_stage_free(st);
}

/* keep-staging: a second pass 1 over a kept copy is a delta. */
/*
 * Pass 2 opens a staged directory only when something in it must change
 * (src/stage/stage_walk.c, stage_dst_dir): changes deep below directories that did not
 * change themselves (a file's data, a file's mode, a file removed, a file
 * added to a directory whose times are then put back) must still land,
 * through a chain of directories opened on demand; an unchanged hardlinked
 * file still has its staged names checked. A staged directory gone under
 * the pass makes it fail, naming that directory.
 */
static void test_deep_changes(void **state)
{
	struct tree *t = *state;
	const char *s = t->src;
	struct cb_stage_opts o = { .src = t->src, .dst = t->dst };
	struct cb_stage_stats stats;
	struct cb_stage *st;
	struct stat sb;
	char *tmp;

	assert_int_equal(mkdir(pathf("%s/a", s), 0755), 0);
	assert_int_equal(mkdir(pathf("%s/a/b", s), 0755), 0);
	assert_int_equal(mkdir(pathf("%s/a/b/c", s), 0755), 0);
	assert_int_equal(mkdir(pathf("%s/a/b/d", s), 0755), 0);
	assert_int_equal(mkdir(pathf("%s/x", s), 0755), 0);
	put(pathf("%s/a/b/c/data", s), "old contents\n");
	put(pathf("%s/a/b/c/mode", s), "mode\n");
	put(pathf("%s/a/b/d/gone", s), "gone\n");
	put(pathf("%s/x/h1", s), "linked\n");
	assert_int_equal(link(pathf("%s/x/h1", s), pathf("%s/a/h2", s)), 0);
	assert_int_equal(cb_stage_new(&st, &o, &t->log), 0);
	run_pass(st, 1, &stats);

	usleep(20000);  /* coarse timestamps: make ctime move for sure */
	put(pathf("%s/a/b/c/data", s), "new contents\n");
	assert_int_equal(chmod(pathf("%s/a/b/c/mode", s), 0600), 0);
	assert_int_equal(unlink(pathf("%s/a/b/d/gone", s)), 0);
	/* a directory whose mode and owner change, nothing inside it */
	assert_int_equal(chmod(pathf("%s/x", s), 0700), 0);
	assert_int_equal(chown(pathf("%s/x", s), 4321, 4321), 0);
	/* a new file in a/b/c whose directory times are then put back */
	assert_int_equal(stat(pathf("%s/a/b/c", s), &sb), 0);
	put(pathf("%s/a/b/c/added", s), "added\n");
	set_mtime(pathf("%s/a/b/c", s), sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
	run_pass(st, 2, &stats);
	assert_int_equal(tree_diff(t->src, t->dst), 0);
	/* data, added, and mode: its ctime moved, which could hide a write
	 * with the mtime put back, so it is copied again */
	assert_int_equal(stats.files_transferred, 3);
	assert_int_equal(stats.deleted, 1);
	assert_int_equal(lstat(pathf("%s/x/h1", t->dst), &sb), 0);
	{
		struct stat h2;
		assert_int_equal(lstat(pathf("%s/a/h2", t->dst), &h2), 0);
		assert_int_equal(h2.st_ino, sb.st_ino);
	}

	/* the staged a/b vanishes (moved away), then a/b/c changes */
	tmp = cb_xasprintf("%s/moved-away", t->base);
	assert_int_equal(rename(pathf("%s/a/b", t->dst), tmp), 0);
	usleep(20000);
	put(pathf("%s/a/b/c/data", s), "newer contents\n");
	assert_int_equal(cb_stage_pass2(st, &stats), -1);
	assert_non_null(strstr(cb_last_error(), "cannot open 'a/b' in staging"));
	cb_stage_free(st);
	free(tmp);
}

static void test_keep_staging(void **state)
{
	struct tree *t = *state;
	struct cb_stage_opts o = { .src = t->src, .dst = t->dst, .keep = 1 };
	struct cb_stage_stats stats;
	struct cb_stage *st;
	int have_cap;

	build_source(t, &have_cap);
	assert_int_equal(cb_stage_new(&st, &o, &t->log), 0);
	run_pass(st, 1, &stats);
	cb_stage_free(st);

	put(pathf("%s/extra", t->dst), "stale\n");
	put(pathf("%s/dir/sub/deep", t->src), "deeper\n");
	assert_int_equal(unlink(pathf("%s/todelete", t->src)), 0);
	assert_int_equal(cb_stage_new(&st, &o, &t->log), 0);
	run_pass(st, 1, &stats);
	assert_int_equal(stats.files_transferred, 1);  /* only dir/sub/deep */
	assert_int_equal(stats.deleted, 2);            /* extra, todelete */
	assert_int_equal(tree_diff(t->src, t->dst), 0);
	run_pass(st, 2, &stats);
	assert_int_equal(stats.files_transferred, 0);
	cb_stage_free(st);
}

/* The progress totals count a hardlinked file's data once and a sparse
 * file's allocated bytes only, as pass 1 copies and the archive stores. */
static void test_estimate_links_holes(void **state)
{
	struct tree *t = *state;
	struct cb_stage_est e;
	int fd;

	put_big(pathf("%s/a", t->src), 1000, 1);
	assert_int_equal(link(pathf("%s/a", t->src), pathf("%s/b", t->src)), 0);
	fd = open(pathf("%s/hole", t->src), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 64 << 20), 0);
	close(fd);
	assert_int_equal(cb_stage_estimate(t->src, NULL, &e), 0);
	assert_int_equal(e.entries, 4);
	assert_int_equal(e.data, 1000);
	assert_int_equal(e.tar, 4 * 512 + 1024);
}

static void test_excludes_estimate(void **state)
{
	struct tree *t = *state;
	struct cb_strvec ex = CB_STRVEC_INIT;
	struct cb_stage_opts o = { .src = t->src, .dst = t->dst, .excludes = &ex };
	struct cb_stage_stats stats;
	struct cb_stage *st;
	struct cb_stage_est e, all;
	struct stat sb;

	assert_int_equal(mkdir(pathf("%s/tmp", t->src), 0777), 0);
	put_big(pathf("%s/tmp/junk", t->src), 1 << 20, 3);
	assert_int_equal(mkdir(pathf("%s/run", t->src), 0755), 0);
	put(pathf("%s/run/x.pid", t->src), "1\n");
	put(pathf("%s/run/keep", t->src), "k\n");
	assert_int_equal(cb_stage_estimate(t->src, NULL, &all), 0);
	cb_strvec_push(&ex, "/tmp/?*");
	cb_strvec_push(&ex, "*.pid");
	assert_int_equal(cb_stage_estimate(t->src, &ex, &e), 0);
	assert_int_equal(all.entries, 6);
	assert_int_equal(e.entries, 4);
	assert_true(all.bytes >= e.bytes + (1 << 20));
	/* the progress totals: the file bytes pass 1 copies, and the tar
	 * stream's least (a header an entry, ./run/keep's 2 bytes padded) */
	assert_int_equal(e.data, 2);
	assert_int_equal(e.tar, 4 * 512 + 512);
	assert_true(all.data >= (1 << 20) + 4);

	assert_int_equal(cb_stage_new(&st, &o, &t->log), 0);
	run_pass(st, 1, &stats);
	assert_int_equal(stat(pathf("%s/tmp", t->dst), &sb), 0);
	assert_int_equal(stat(pathf("%s/tmp/junk", t->dst), &sb), -1);
	assert_int_equal(stat(pathf("%s/run/x.pid", t->dst), &sb), -1);
	assert_int_equal(stat(pathf("%s/run/keep", t->dst), &sb), 0);
	assert_int_equal(stats.skipped, 2);
	assert_int_equal(stats.total_size, 2);
	put(pathf("%s/tmp/more", t->src), "m\n");
	run_pass(st, 2, &stats);
	assert_int_equal(stat(pathf("%s/tmp/more", t->dst), &sb), -1);
	assert_int_equal(stats.files_transferred, 0);
	cb_stage_free(st);
	cb_strvec_clear(&ex);
}

/* Another file system inside the source becomes an empty directory (as
 * rsync -x); a full staging file system is an error naming the file and
 * the cause. Needs mount(2) (root): skipped without it. */
static void test_mounts_enospc(void **state)
{
	struct tree *t = *state;
	struct cb_stage_opts o = { .src = t->src, .dst = t->dst };
	struct cb_stage_stats stats;
	struct cb_stage *st;
	char mnt[160];
	struct stat sb;
	int r;

	snprintf(mnt, sizeof(mnt), "%s/mnt", t->src);
	assert_int_equal(mkdir(mnt, 0755), 0);
	assert_int_equal(mkdir(t->dst, 0700), 0);
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=1m") < 0)
		skip();
	put(pathf("%s/inside", mnt), "other fs\n");
	put_big(pathf("%s/big", t->src), 300000, 5);
	assert_int_equal(mount("tmpfs", t->dst, "tmpfs", 0, "size=128k"), 0);
	assert_int_equal(cb_stage_new(&st, &o, &t->log), 0);
	r = cb_stage_pass1(st, &stats);
	cb_stage_free(st);
	umount2(t->dst, MNT_DETACH);
	assert_int_equal(r, -1);
	assert_string_equal(cb_last_error(), "cannot write 'big' to staging: No space left on device");

	assert_int_equal(cb_stage_new(&st, &o, &t->log), 0);
	run_pass(st, 1, &stats);
	cb_stage_free(st);
	umount2(mnt, MNT_DETACH);
	assert_int_equal(stat(pathf("%s/mnt", t->dst), &sb), 0);
	assert_true(S_ISDIR(sb.st_mode));
	assert_int_equal(stat(pathf("%s/mnt/inside", t->dst), &sb), -1);
	assert_int_equal(stat(pathf("%s/big", t->dst), &sb), 0);
	assert_int_equal(sb.st_size, 300000);
}

/* SIGINT stops the copy (runs last: the recorded signal stays). */
static void test_interrupt(void **state)
{
	struct tree *t = *state;
	struct cb_stage_opts o = { .src = t->src, .dst = t->dst };
	struct cb_stage_stats stats;
	struct cb_stage *st;

	put_big(pathf("%s/big", t->src), 100000, 9);
	cb_cleanup_install();
	raise(SIGINT);
	assert_int_equal(cb_stage_new(&st, &o, &t->log), 0);
	assert_int_equal(cb_stage_pass1(st, &stats), -1);
	assert_string_equal(cb_last_error(), "interrupted by signal INT");
	assert_int_equal(cb_stage_pass2(st, &stats), -1);  /* no complete first sync */
	cb_stage_free(st);
}

/* The tracking audit (cb_audit.h): what differs from the index counts
 * only with a ctime settled before the mark; each way of differing named. */
static struct timespec audit_mark(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts;
}

static const char *audit_what(const struct cb_audit *a, const char *path)
{
	for (size_t i = 0; i < a->n_names; i++)
		if (!strcmp(a->paths[i], path))
			return a->whats[i];
	return "(not named)";
}

static void test_audit(void **state)
{
	struct tree *t = *state;
	struct cb_strvec ex = { 0 };
	struct cb_stage_opts o = { .src = t->src, .dst = t->dst, .excludes = &ex };
	struct cb_stage_stats stats;
	struct timespec before;
	struct cb_audit a;
	struct cb_stage *st;

	cb_strvec_push(&ex, "/sub/skip*");
	assert_int_equal(mkdir(pathf("%s/sub", t->src), 0755), 0);
	for (const char *const *f = (const char *const[]){ "a", "b", "gone", "same", NULL }; *f; f++)
		put(pathf("%s/sub/%s", t->src, *f), "data\n");
	assert_int_equal(cb_stage_new(&st, &o, &t->log), 0);
	run_pass(st, 1, &stats);
	run_pass(st, 2, &stats);
	usleep(CB_STAGE_RACY_TICK_NS / 1000 + 10000);
	before = audit_mark();
	assert_int_equal(cb_audit_run(st, &before, &a), 0);
	assert_int_equal(a.missed, 0);
	assert_int_equal(a.checked, 6);   /* the root, sub and its 4 files */
	cb_audit_release(&a);

	usleep(CB_STAGE_RACY_TICK_NS / 1000 + 10000);
	put(pathf("%s/sub/a", t->src), "more data\n");
	assert_int_equal(chmod(pathf("%s/sub/b", t->src), 0600), 0);
	assert_int_equal(unlink(pathf("%s/sub/gone", t->src)), 0);
	put(pathf("%s/sub/new", t->src), "new\n");
	put(pathf("%s/sub/skipped", t->src), "excluded\n");
	make_socket(pathf("%s/sub/sock", t->src));   /* never staged */
	/* made after the mark: a change of the running guest, not a miss */
	assert_int_equal(cb_audit_run(st, &before, &a), 0);
	assert_int_equal(a.missed, 0);
	cb_audit_release(&a);
	usleep(CB_STAGE_RACY_TICK_NS / 1000 + 10000);
	before = audit_mark();
	assert_int_equal(cb_audit_run(st, &before, &a), 0);
	assert_int_equal(a.missed, 5);
	assert_int_equal(a.n_names, 5);
	assert_string_equal(audit_what(&a, "sub"), "content");
	assert_string_equal(audit_what(&a, "sub/a"), "content");
	assert_string_equal(audit_what(&a, "sub/b"), "mode or owner");
	assert_string_equal(audit_what(&a, "sub/gone"), "gone");
	assert_string_equal(audit_what(&a, "sub/new"), "not archived");
	cb_audit_release(&a);
	cb_stage_free(st);
	cb_strvec_clear(&ex);
}

/* A handle of the kernel's layouts gives its inode number; btrfs's only
 * in the root's subvolume; a layout not known, or too short, gives none. */
struct fh_buf { struct file_handle h; unsigned char b[MAX_HANDLE_SZ]; };

static void fh_make(struct fh_buf *f, int type, const void *bytes, unsigned n)
{
	memset(f, 0, sizeof(*f));
	f->h.handle_type = type;
	f->h.handle_bytes = n;
	memcpy(f->h.f_handle, bytes, n);
}

static void test_fhandle_ino(void **state)
{
	struct fh_buf real, f, root;
	char path[] = "/tmp/cbackup-unit-fh.XXXXXX";
	uint32_t ino32[2] = { 4242, 7 };
	uint64_t ino = 0, b[3], r[3];
	unsigned char x64[12] = { 0 };
	uint64_t big = 0x123456789aULL;
	struct stat sb;
	int fd = mkstemp(path), mnt_id;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &sb), 0);
	real.h.handle_bytes = MAX_HANDLE_SZ;
	/* the file system of /tmp, whatever it is: a known layout gives
	 * st_ino; an unknown one (tmpfs's own, say) gives none */
	if (name_to_handle_at(AT_FDCWD, path, &real.h, &mnt_id, 0) == 0 &&
	    cb_fhandle_ino(&real.h, &real.h, &ino) == 0)
		assert_int_equal(ino, (uint64_t)sb.st_ino);
	close(fd);
	unlink(path);

	fh_make(&f, 1, ino32, 8);  /* FILEID_INO32_GEN: ext4 */
	assert_int_equal(cb_fhandle_ino(&f.h, NULL, &ino), 0);
	assert_int_equal(ino, 4242);
	fh_make(&f, 2, ino32, 4);  /* too short */
	assert_int_equal(cb_fhandle_ino(&f.h, NULL, &ino), -1);
	memcpy(x64, &big, 8);
	fh_make(&f, 0x81, x64, 12);  /* xfs, 64-bit inode numbers */
	assert_int_equal(cb_fhandle_ino(&f.h, NULL, &ino), 0);
	assert_int_equal(ino, big);
	fh_make(&f, 0x42, x64, 12);  /* a layout not known here */
	assert_int_equal(cb_fhandle_ino(&f.h, NULL, &ino), -1);

	/* btrfs: objectid, subvolume, generation */
	b[0] = 300; b[1] = 5; b[2] = 1;
	r[0] = 256; r[1] = 5; r[2] = 1;
	fh_make(&f, 0x4d, b, 20);
	fh_make(&root, 0x4d, r, 20);
	assert_int_equal(cb_fhandle_ino(&f.h, NULL, &ino), -1);
	ino = 0;
	assert_int_equal(cb_fhandle_ino(&f.h, &root.h, &ino), 0);
	assert_int_equal(ino, 300);
	r[1] = 257;  /* the root in another subvolume: numbers are its own */
	fh_make(&root, 0x4f, r, 20);
	assert_int_equal(cb_fhandle_ino(&f.h, &root.h, &ino), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decide),
		cmocka_unit_test(test_decide_racy),
		cmocka_unit_test(test_decide_meta),
		cmocka_unit_test(test_excluded),
		cmocka_unit_test(test_fhandle_ino),
		cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keep_staging, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deep_changes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_excludes_estimate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_estimate_links_holes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mounts_enospc, setup, teardown),
		cmocka_unit_test_setup_teardown(test_audit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_interrupt, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
