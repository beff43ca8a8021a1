/* Unit tests: cb_archive (pax tar of a tree through the codec) and
 * cb_restore, checked against the source tree and against GNU tar and
 * bsdtar extracting the same archive. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <archive.h>
#include <archive_entry.h>
#include <cmocka.h>
#include <zstd.h>

#include "cb_archive.h"
#include "cb_restore.h"
#include "cb_rmtree.h"
#include "cb_sink.h"
#include "cb_util.h"
#include "testlib.h"

#define HOLE (4 * 1024 * 1024)

struct fixture {
	char dir[64];
	char *tree, *conf;
	struct cb_log log;
};

static char *fx_path(struct fixture *f, const char *rel)
{
	return cb_xasprintf("%s/%s", f->dir, rel);
}

static void put_file(const char *path, const char *content, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	assert_true(fd >= 0);
	assert_int_equal(cb_write_all(fd, content, strlen(content)), 0);
	close(fd);
	assert_int_equal(chmod(path, mode), 0);
}

static void set_ns_mtime(const char *path, long ns)
{
	struct timespec ts[2] = { { 1600000000, 0 }, { 1700000000, ns } };

	assert_int_equal(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), 0);
}

static void make_sparse(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "start", 5, 0), 5);
	assert_int_equal(pwrite(fd, "end", 3, HOLE + 4096), 3);
	close(fd);
}

static void make_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(s);
}

/* Every file type the archive must carry, with owners, modes, ns times. */
static void build_tree(struct fixture *f)
{
	char *t = f->tree;

	assert_int_equal(mkdir(t, 0755), 0);
	assert_int_equal(run("cd '%s' && mkdir sub && echo hello > file && ln file sub/hard2 && "
			     "ln -s file link && mkfifo fifo && mknod dev c 1 3", t), 0);
	char *p = cb_xasprintf("%s/file", t);
	assert_int_equal(setxattr(p, "user.x", "1", 1, 0), 0);
	assert_int_equal(setxattr(p, "user.bin", "a\0\xff\n=b", 6, 0), 0);
	assert_int_equal(lchown(p, 1234, 5678), 0);
	assert_int_equal(chmod(p, 0640), 0);
	assert_int_equal(run("setfacl -m u:1234:r '%s'", p), 0);
	set_ns_mtime(p, 123456789);
	free(p);
	p = cb_xasprintf("%s/sparse", t);
	make_sparse(p);
	free(p);
	p = cb_xasprintf("%s/sock", t);
	make_socket(p);
	free(p);
	p = cb_xasprintf("%s/link", t);
	assert_int_equal(lchown(p, 1234, 5678), 0);
	set_ns_mtime(p, 5);
	free(p);
	p = cb_xasprintf("%s/sub", t);
	assert_int_equal(chmod(p, 0750), 0);
	set_ns_mtime(p, 987654321);
	free(p);
	set_ns_mtime(t, 42);
}

static int setup(void **state)
{
	struct fixture *f = cb_xcalloc(1, sizeof(*f));

	strcpy(f->dir, "/tmp/cb-test-archive.XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	cb_log_init(&f->log);
	f->log.quiet = 1;
	f->tree = fx_path(f, "tree");
	f->conf = fx_path(f, "guest.conf");
	build_tree(f);
	put_file(f->conf, "arch: amd64\n", 0600);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	cb_remove_tree(f->dir);
	free(f->tree);
	free(f->conf);
	free(f);
	return 0;
}

static void make_archive(struct fixture *f, const char *path, enum cb_compress type)
{
	struct cb_codec_params p = { .type = type, .policy = CB_POLICY_ALWAYS };
	struct cb_archive_extra extra = { .archive_name = "./etc/cbackup/guest.conf", .source_path = f->conf };
	struct cb_archive_stats st;
	struct cb_codec_writer *w;
	struct cb_sink *s;

	assert_int_equal(cb_sink_open_file(&s, path), 0);
	assert_int_equal(cb_codec_writer_new(&w, &p, s), 0);
	if (cb_archive_write(f->tree, &extra, 1, w, &f->log, &st) < 0)
		fail_msg("cb_archive_write: %s", cb_last_error());
	assert_int_equal(cb_codec_finish(w), 0);
	assert_int_equal(cb_sink_commit(s), 0);
	cb_codec_writer_free(w);
	cb_sink_free(s);
	/* ./ sub file link fifo dev sparse sub/hard2 + extra (sock skipped) */
	assert_int_equal(st.entries, 9);
	assert_int_equal(st.tar_bytes % 10240, 0);
	assert_true(st.tar_bytes < 64 * 1024);       /* the hole is not stored */
}

static char *slurp_cmd(const char *fmt, const char *arg)
{
	char *cmd = cb_xasprintf(fmt, arg);
	FILE *p = popen(cmd, "r");
	char *buf = cb_xcalloc(1, 4096);

	assert_non_null(p);
	assert_true(fread(buf, 1, 4095, p) > 0);
	pclose(p);
	free(cmd);
	return buf;
}

#define SAME_OWNER 1
#define SAME_TIME  2
#define SAME_XATTR 4
#define ROOT_TIME  8      /* bsdtar leaves the times of "./" alone */

static void check_same(const char *a_root, const char *b_root, const char *rel, int what)
{
	char *a = cb_xasprintf("%s/%s", a_root, rel), *b = cb_xasprintf("%s/%s", b_root, rel);
	struct stat sa, sb;

	assert_int_equal(lstat(a, &sa), 0);
	if (lstat(b, &sb) < 0)
		fail_msg("'%s' missing", b);
	assert_int_equal(sa.st_mode, sb.st_mode);
	assert_int_equal(sa.st_size, sb.st_size);
	assert_int_equal(sa.st_rdev, sb.st_rdev);
	if (what & SAME_OWNER) {
		assert_int_equal(sa.st_uid, sb.st_uid);
		assert_int_equal(sa.st_gid, sb.st_gid);
	}
	if ((what & SAME_TIME) && !S_ISLNK(sa.st_mode)) {
		assert_int_equal(sa.st_mtim.tv_sec, sb.st_mtim.tv_sec);
		assert_int_equal(sa.st_mtim.tv_nsec, sb.st_mtim.tv_nsec);
	}
	if (S_ISREG(sa.st_mode))
		assert_int_equal(run("cmp -s '%s' '%s'", a, b), 0);
	if (S_ISLNK(sa.st_mode)) {
		char la[256] = "", lb[256] = "";
		assert_true(readlink(a, la, sizeof(la) - 1) > 0);
		assert_true(readlink(b, lb, sizeof(lb) - 1) > 0);
		assert_string_equal(la, lb);
	}
	free(a);
	free(b);
}

static void check_xattr_acl(const char *root)
{
	char *p = cb_xasprintf("%s/file", root), v[16] = "";
	char *acl;

	assert_int_equal(lgetxattr(p, "user.x", v, sizeof(v)), 1);
	assert_string_equal(v, "1");
	assert_int_equal(lgetxattr(p, "user.bin", v, sizeof(v)), 6);
	assert_memory_equal(v, "a\0\xff\n=b", 6);
	acl = slurp_cmd("getfacl -pn --omit-header '%s'", p);
	assert_non_null(strstr(acl, "user:1234:r--"));
	free(acl);
	free(p);
}

static void check_links_and_hole(const char *root)
{
	char *a = cb_xasprintf("%s/file", root), *b = cb_xasprintf("%s/sub/hard2", root);
	char *s = cb_xasprintf("%s/sparse", root);
	struct stat sa, sb, ss;

	assert_int_equal(stat(a, &sa), 0);
	assert_int_equal(stat(b, &sb), 0);
	assert_int_equal(sa.st_ino, sb.st_ino);
	assert_int_equal(sa.st_nlink, 2);
	assert_int_equal(stat(s, &ss), 0);
	assert_int_equal(ss.st_size, HOLE + 4096 + 3);
	assert_true(ss.st_blocks * 512 < 256 * 1024);
	free(a);
	free(b);
	free(s);
}

static const char *const all_paths[] = { "file", "sub", "sub/hard2", "link", "fifo", "dev", "sparse" };

static void check_tree(struct fixture *f, const char *dst, int what)
{
	struct stat st;
	char *p;

	for (size_t i = 0; i < sizeof(all_paths) / sizeof(*all_paths); i++)
		check_same(f->tree, dst, all_paths[i], what);
	check_same(f->tree, dst, ".", what & ROOT_TIME ? what : what & ~SAME_TIME);
	check_links_and_hole(dst);
	if (what & SAME_XATTR)
		check_xattr_acl(dst);
	p = cb_xasprintf("%s/sock", dst);
	assert_int_equal(lstat(p, &st), -1);
	free(p);
}

static void restore_ok(struct fixture *f, const char *archive, const char *dst)
{
	struct cb_restore_opts o = { .archive = archive, .destdir = dst, .force = 0 };
	struct cb_restore_stats st;

	if (cb_restore_run(&o, &f->log, &st) < 0)
		fail_msg("restore: %s", cb_last_error());
	assert_int_equal(st.entries, 8);   /* the guest config left out */
	assert_true(st.bytes >= 5 + 3 + 6 + 12);
}

static void check_extra(const char *dst)
{
	char *p = cb_xasprintf("%s/etc/cbackup/guest.conf", dst);
	struct stat st;

	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_uid, 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_size, 12);
	free(p);
}

/* cbackup restore leaves the guest config out of the restored root */
static void check_no_extra(const char *dst)
{
	char *p = cb_xasprintf("%s/etc/cbackup", dst);
	struct stat st;

	assert_int_equal(lstat(p, &st), -1);
	free(p);
}

static void test_restore_all_codecs(void **state)
{
	struct fixture *f = *state;
	enum cb_compress types[] = { CB_COMPRESS_ZSTD, CB_COMPRESS_LZO, CB_COMPRESS_GZIP, CB_COMPRESS_NONE };
	const char *names[] = { "a.tar.zst", "a.tar.lzo", "a.tar.gz", "a.tar" };

	for (size_t i = 0; i < 4; i++) {
		char *arch = fx_path(f, names[i]), *dst = cb_xasprintf("%s/r%zu/deeper", f->dir, i);

		make_archive(f, arch, types[i]);
		restore_ok(f, arch, dst);
		check_tree(f, dst, SAME_OWNER | SAME_TIME | SAME_XATTR | ROOT_TIME);
		check_no_extra(dst);
		free(arch);
		free(dst);
	}
}

static void test_gnu_tar(void **state)
{
	struct fixture *f = *state;
	char *arch = fx_path(f, "g.tar.zst"), *dst = fx_path(f, "gnu");

	make_archive(f, arch, CB_COMPRESS_ZSTD);
	assert_int_equal(mkdir(dst, 0755), 0);
	assert_int_equal(run("zstd -q -dc '%s' | tar --xattrs --xattrs-include='*' --acls --numeric-owner "
			     "-xpf - -C '%s'", arch, dst), 0);
	check_tree(f, dst, SAME_OWNER | SAME_TIME | SAME_XATTR | ROOT_TIME);
	check_extra(dst);
	free(arch);
	free(dst);
}

static void test_bsdtar(void **state)
{
	struct fixture *f = *state;
	char *arch = fx_path(f, "b.tar.zst"), *dst = fx_path(f, "bsd");

	make_archive(f, arch, CB_COMPRESS_ZSTD);
	assert_int_equal(mkdir(dst, 0755), 0);
	assert_int_equal(run("bsdtar --numeric-owner -xpf '%s' -C '%s'", arch, dst), 0);
	check_tree(f, dst, SAME_OWNER | SAME_TIME | SAME_XATTR);
	free(arch);
	free(dst);
}

/* A plain tar with one hostile entry, written with libarchive directly. */
static void evil_tar(const char *path, const char *name, const char *hardlink)
{
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();

	archive_write_set_format_pax(a);
	assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
	archive_entry_copy_pathname(e, "ok");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, 3);
	assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
	assert_int_equal(archive_write_data(a, "ok\n", 3), 3);
	archive_entry_clear(e);
	archive_entry_copy_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	if (hardlink)
		archive_entry_copy_hardlink(e, hardlink);
	else
		archive_entry_set_size(e, 5);
	assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
	if (!hardlink)
		assert_int_equal(archive_write_data(a, "evil\n", 5), 5);
	archive_entry_free(e);
	assert_int_equal(archive_write_close(a), ARCHIVE_OK);
	archive_write_free(a);
}

static void test_refuses_unsafe(void **state)
{
	struct fixture *f = *state;
	char *arch = fx_path(f, "evil.tar"), *dst = fx_path(f, "d1/d2");
	char *abs = fx_path(f, "abs_evil"), *outside = fx_path(f, "d1/evil");
	char *target = fx_path(f, "secret");
	struct cb_restore_opts o = { .archive = arch, .destdir = dst, .force = 1 };
	struct cb_restore_stats st;
	struct stat sb;
	const char *names[] = { "../evil", "a/../../evil", abs };

	put_file(target, "secret\n", 0600);
	for (size_t i = 0; i < 3; i++) {
		evil_tar(arch, names[i], NULL);
		assert_int_equal(run("tar tf '%s' 2>/dev/null | grep -q evil", arch), 0);
		assert_int_equal(cb_restore_run(&o, &f->log, &st), -1);
		assert_non_null(strstr(cb_last_error(), "unsafe"));
		assert_int_equal(lstat(outside, &sb), -1);
		assert_int_equal(lstat(abs, &sb), -1);
	}
	evil_tar(arch, "innocent", "../../secret");
	assert_int_equal(cb_restore_run(&o, &f->log, &st), -1);
	assert_non_null(strstr(cb_last_error(), "unsafe"));
	evil_tar(arch, "innocent2", target);
	assert_int_equal(cb_restore_run(&o, &f->log, &st), -1);
	/* "..." is an ordinary name, neither unsafe nor the root */
	evil_tar(arch, "...", NULL);
	assert_int_equal(cb_restore_run(&o, &f->log, &st), 0);
	{
		char *dots = cb_xasprintf("%s/...", dst);
		assert_int_equal(lstat(dots, &sb), 0);
		assert_int_equal(sb.st_size, 5);
		free(dots);
	}
	free(arch);
	free(dst);
	free(abs);
	free(outside);
	free(target);
}

static void test_nonempty_dest(void **state)
{
	struct fixture *f = *state;
	char *arch = fx_path(f, "n.tar.gz"), *dst = fx_path(f, "full"), *junk = fx_path(f, "full/junk");
	struct cb_restore_opts o = { .archive = arch, .destdir = dst, .force = 0 };
	struct cb_restore_stats st;

	make_archive(f, arch, CB_COMPRESS_GZIP);
	assert_int_equal(mkdir(dst, 0755), 0);
	put_file(junk, "x", 0644);
	assert_int_equal(cb_restore_run(&o, &f->log, &st), -1);
	assert_non_null(strstr(cb_last_error(), "is not empty (use --force)"));
	o.force = 1;
	assert_int_equal(cb_restore_run(&o, &f->log, &st), 0);
	check_tree(f, dst, SAME_OWNER | SAME_TIME | SAME_XATTR | ROOT_TIME);
	free(arch);
	free(dst);
	free(junk);
}

static void test_corrupt_archive(void **state)
{
	struct fixture *f = *state;
	char *arch = fx_path(f, "c.tar.zst"), *dst = fx_path(f, "cdst");
	struct cb_restore_opts o = { .archive = arch, .destdir = dst, .force = 0 };
	struct cb_restore_stats st;

	unsigned char head[1 << 16];
	size_t frame;
	int fd;

	make_archive(f, arch, CB_COMPRESS_ZSTD);
	/* cut into the first frame, not only the padding and the seek table
	 * after the frames (a restore needs neither, `verify` finds that cut) */
	fd = open(arch, O_RDONLY);
	assert_true(fd >= 0);
	assert_true(read(fd, head, sizeof(head)) > 0);
	close(fd);
	frame = ZSTD_findFrameCompressedSize(head, sizeof(head));
	assert_false(ZSTD_isError(frame));
	assert_int_equal(run("truncate -s %zu '%s'", frame / 2, arch), 0);
	assert_int_equal(cb_restore_run(&o, &f->log, &st), -1);
	assert_non_null(strstr(cb_last_error(), "zstd"));
	free(arch);
	free(dst);
}

/* Mount points: a graft replaces the tree's directory of its name (once,
 * with the graft root's own mode), one the tree lacks comes after it. */
static void test_grafts(void **state)
{
	struct fixture *f = *state;
	char *mnt = cb_xasprintf("%s/mnt", f->tree), *v1 = fx_path(f, "vol1"), *v2 = fx_path(f, "vol2");
	char *a = cb_xasprintf("%s/a", v1), *b = cb_xasprintf("%s/b", v2), *arch = fx_path(f, "m.tar");
	struct cb_archive_graft grafts[] = { { "./mnt", v1, 0, -1, 0, NULL }, { "./new/place", v2, 0, -1, 0, NULL } };
	struct cb_codec_params p = { .type = CB_COMPRESS_NONE, .policy = CB_POLICY_ALWAYS };
	struct cb_archive_stats st;
	struct cb_codec_writer *w;
	struct cb_sink *s;
	char *list;

	assert_int_equal(mkdir(mnt, 0700), 0);
	assert_int_equal(mkdir(v1, 0750), 0);
	assert_int_equal(mkdir(v2, 0755), 0);
	assert_int_equal(chmod(v1, 0750), 0);
	put_file(a, "on volume 1\n", 0644);
	put_file(b, "on volume 2\n", 0600);
	assert_int_equal(cb_sink_open_file(&s, arch), 0);
	assert_int_equal(cb_codec_writer_new(&w, &p, s), 0);
	struct cb_archive_graft root = { "./", f->tree, 0, -1, 0, NULL };

	if (cb_archive_write_grafted(&root, grafts, 2, NULL, 0, w, &f->log, &st) < 0)
		fail_msg("cb_archive_write_grafted: %s", cb_last_error());
	assert_int_equal(cb_codec_finish(w), 0);
	assert_int_equal(cb_sink_commit(s), 0);
	cb_codec_writer_free(w);
	cb_sink_free(s);
	assert_int_equal(st.entries, 8 + 1 + 1 + 2);
	list = slurp_cmd("tar -tvf '%s' | awk '{ print $1, $6 }'", arch);
	assert_non_null(strstr(list, "drwxr-x--- ./mnt/\n-rw-r--r-- ./mnt/a\n"));
	assert_null(strstr(list, "drwx------ ./mnt/"));
	assert_non_null(strstr(list, "drwxr-xr-x ./new/place/\n-rw------- ./new/place/b\n"));
	assert_int_equal(run("tar -xOf '%s' ./new/place/b | grep -qx 'on volume 2'", arch), 0);
	free(list);
	free(mnt);
	free(v1);
	free(v2);
	free(a);
	free(b);
	free(arch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_restore_all_codecs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gnu_tar, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bsdtar, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refuses_unsafe, setup, teardown),
		cmocka_unit_test_setup_teardown(test_nonempty_dest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt_archive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_grafts, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
