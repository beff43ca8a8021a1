/* cb_ct_volume: a container's image or block-device volume. See include/cb_ct_volumes.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cb_ct_volumes.h"
#include "cb_discover.h"
#include "cb_guest.h"
#include "cb_run.h"
#include "cb_util.h"

int cb_ct_volume_is_image(const char *path)
{
	struct stat st;

	return path && stat(path, &st) == 0 && (S_ISREG(st.st_mode) || S_ISBLK(st.st_mode));
}

void cb_ctinit_release(struct cb_ctinit *init)
{
	free(init->cgroup_dir);
	memset(init, 0, sizeof(*init));
}

/* /proc/PID/stat's field 22 (the start time in clock ticks): 0, or -1. */
static int pid_start(pid_t pid, unsigned long long *start)
{
	char path[64], buf[1024], *p;
	int fd, n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = (int)read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* the name in parentheses may hold blanks and ')': after the last one */
	if (!(p = strrchr(buf, ')')))
		return -1;
	return sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
			  "%*d %*d %*d %llu", start) == 1 ? 0 : -1;
}

/* How deep PID's pid namespace is (the fields of NSpid) when it is pid 1
 * there; 0 when it is not an init of a namespace of its own (or gone). */
static int init_depth(pid_t pid)
{
	char path[64], line[512];
	FILE *f;
	int depth = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *last = NULL;
		if (strncmp(line, "NSpid:", 6))
			continue;
		for (char *t = strtok_r(line + 6, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save)) {
			depth++;
			last = t;
		}
		if (depth < 2 || strcmp(last, "1"))
			depth = 0;
		break;
	}
	fclose(f);
	return depth;
}

/* Every process of the cgroup DIR and its descendants to fn; stop when fn
 * returns non-zero (that value returned). */
static int each_proc(const char *dir, int (*fn)(void *arg, pid_t pid), void *arg, int level)
{
	char *procs = cb_xasprintf("%s/cgroup.procs", dir), line[64];
	FILE *f = fopen(procs, "re");
	struct dirent *e;
	DIR *d;
	int r = 0;

	free(procs);
	while (f && !r && fgets(line, sizeof(line), f))
		r = fn(arg, (pid_t)atol(line));
	if (f)
		fclose(f);
	if (r || level > 16 || !(d = opendir(dir)))
		return r;
	while (!r && (e = readdir(d)))
		if (e->d_type == DT_DIR && e->d_name[0] != '.') {
			char *sub = cb_xasprintf("%s/%s", dir, e->d_name);
			r = each_proc(sub, fn, arg, level + 1);
			free(sub);
		}
	closedir(d);
	return r;
}

struct scan {
	pid_t want, best;
	int best_depth, ties;
};

static int is_pid(void *arg, pid_t pid)
{
	return pid == ((struct scan *)arg)->want;
}

/* The outermost init: the CT's own, not one of a container nested in it. */
static int pick_init(void *arg, pid_t pid)
{
	struct scan *s = arg;
	int d = init_depth(pid);

	if (d && (!s->best || d < s->best_depth)) {
		s->best = pid;
		s->best_depth = d;
		s->ties = 0;
	} else if (d && d == s->best_depth) {
		s->ties++;
	}
	return 0;
}

struct lxc_pid {
	pid_t pid;
};

static void on_lxc_line(void *arg, const char *line)
{
	struct lxc_pid *p = arg;
	long v;

	if (sscanf(line, "PID: %ld", &v) == 1 && v > 1)
		p->pid = (pid_t)v;
}

/* lxc's own answer (`lxc-info -P LXCPATH -n ID -p`), 0 when it has none. */
static pid_t lxc_info_pid(const char *id)
{
	struct lxc_pid p = { 0 };
	struct cb_run run = { .what = "lxc-info", .timeout_ms = 10000, .on_line = on_lxc_line,
			      .arg = &p };
	char *prog = cb_find_on_path("lxc-info");
	char *argv[] = { prog, "-P", (char *)cb_lxc_dir(), "-n", (char *)id, "-p", NULL };

	if (prog && cb_run_argv(&run, argv) < 0)
		p.pid = 0;
	free(prog);
	return p.pid;
}

int cb_ct_volume_find_init(const char *id, const char *cgroup, struct cb_ctinit *init)
{
	struct scan s = { 0 };

	memset(init, 0, sizeof(*init));
	if (!cgroup || !(init->cgroup_dir = cb_guest_cgroup_dir(cgroup)))
		return cb_error("CT %s: no cgroup to find its init in", id);
	init->source = "lxc-info";
	if (!(init->pid = lxc_info_pid(id))) {
		init->source = "cgroup";
		each_proc(init->cgroup_dir, pick_init, &s, 0);
		if (!s.best || s.ties)
			return cb_error("CT %s: %s in cgroup '%s'", id, s.best ? "more than one init "
					"of a pid namespace of its own" : "no init of a pid namespace of "
					"its own", init->cgroup_dir);
		init->pid = s.best;
	}
	if (pid_start(init->pid, &init->start) < 0)
		return cb_error("CT %s: its init (pid %d, from %s) is gone", id, (int)init->pid,
				init->source);
	return 0;
}

int cb_ct_volume_check_init(const struct cb_ctinit *init)
{
	struct scan s = { .want = init->pid };
	unsigned long long now;

	if (pid_start(init->pid, &now) < 0 || now != init->start)
		return cb_error("pid %d (from %s) is no longer the process found (its start time "
				"changed: the pid was recycled); refusing its root", (int)init->pid,
				init->source);
	if (!each_proc(init->cgroup_dir, is_pid, &s, 0))
		return cb_error("pid %d (from %s) is not in the container's cgroup '%s'; refusing "
				"its root", (int)init->pid, init->source, init->cgroup_dir);
	if (!init_depth(init->pid))
		return cb_error("pid %d (from %s) is not the container's init (not pid 1 of a pid "
				"namespace of its own); refusing its root", (int)init->pid,
				init->source);
	return 0;
}

int cb_ct_volume_open_root(const struct cb_ctinit *init)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/root", (int)init->pid);
	if ((fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return cb_error_errno("cannot open '%s'", path);
	/* after the open: the fd is the root of the process checked now */
	if (cb_ct_volume_check_init(init) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int cb_ct_volume_open_in(int root_fd, const char *target)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	const char *rel = target + strspn(target, "/");
	int fd = (int)syscall(SYS_openat2, root_fd, *rel ? rel : ".", &how, sizeof(how));

	if (fd < 0)
		return cb_error_errno("cannot open mount point '%s' in the container", target);
	return fd;
}

/* A free loop device backed by IMAGE, read-only, cleared by the kernel once
 * nothing holds it (AUTOCLEAR): its fd, its name in dev. */
static int loop_attach(const char *image, char *dev, size_t len)
{
	struct loop_config cfg;
	int img = open(image, O_RDONLY | O_CLOEXEC | O_NOCTTY), ctl = -1, loop = -1, n, e = 0;

	if (img < 0)
		return cb_error_errno("cannot open image '%s'", image);
	if ((ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC)) < 0) {
		close(img);
		return cb_error_errno("cannot open /dev/loop-control to map '%s'", image);
	}
	/* another program may take the free device first: ask again */
	for (int tries = 0; tries < 16 && loop < 0; tries++) {
		if ((n = ioctl(ctl, LOOP_CTL_GET_FREE)) < 0) {
			e = errno;
			break;
		}
		snprintf(dev, len, "/dev/loop%d", n);
		if ((loop = open(dev, O_RDONLY | O_CLOEXEC)) < 0) {
			e = errno;
			break;
		}
		memset(&cfg, 0, sizeof(cfg));
		cfg.fd = (unsigned)img;
		cfg.info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR;
		snprintf((char *)cfg.info.lo_file_name, sizeof(cfg.info.lo_file_name), "%s", image);
		if (ioctl(loop, LOOP_CONFIGURE, &cfg) == 0)
			break;
		e = errno;
		close(loop);
		loop = -1;
		if (e != EBUSY)
			break;
	}
	close(ctl);
	close(img);
	if (loop < 0) {
		errno = e;
		return cb_error_errno("cannot map '%s' on a loop device", image);
	}
	return loop;
}

/* ext2/3/4 (the ext4 driver) or xfs, from the superblock; NULL otherwise. */
static const char *fs_type(int fd)
{
	unsigned char sb[2048];

	if (pread(fd, sb, sizeof(sb), 0) != (ssize_t)sizeof(sb))
		return NULL;
	if (sb[1080] == 0x53 && sb[1081] == 0xEF)
		return "ext4";
	if (!memcmp(sb, "XFSB", 4))
		return "xfs";
	return NULL;
}

/* DEV's file system mounted read-only, no journal replayed, in no mount
 * namespace: the fd of its root directory. */
static int mount_detached(const char *dev, const char *type)
{
	int fs = (int)syscall(SYS_fsopen, type, FSOPEN_CLOEXEC), mnt = -1, fd = -1;
	const char *nojournal = !strcmp(type, "xfs") ? "norecovery" : "noload";

	if (fs < 0)
		return cb_error_errno("cannot mount '%s' (%s)", dev, type);
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", dev, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, nojournal, NULL, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
	    (mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY |
				MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)) < 0) {
		cb_error_errno("cannot mount '%s' (%s) read-only", dev, type);
		close(fs);
		return -1;
	}
	close(fs);
	if ((fd = openat(mnt, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		cb_error_errno("cannot open the root of '%s'", dev);
	close(mnt);
	return fd;
}

int cb_ct_volume_mount_ro(const char *image, char *how, size_t len)
{
	struct stat st;
	char dev[64];
	const char *type;
	int dev_fd, fd = -1;

	if (stat(image, &st) < 0)
		return cb_error_errno("volume '%s'", image);
	if (S_ISBLK(st.st_mode)) {
		snprintf(dev, sizeof(dev), "%s", "");
		if ((dev_fd = open(image, O_RDONLY | O_CLOEXEC)) < 0)
			return cb_error_errno("cannot open block device '%s' (an LVM volume not "
					      "active? lvchange -ay it)", image);
	} else if ((dev_fd = loop_attach(image, dev, sizeof(dev))) < 0) {
		return -1;
	}
	if (!(type = fs_type(dev_fd)))
		cb_error("volume '%s' holds no ext2/3/4 or xfs file system", image);
	else if ((fd = mount_detached(dev[0] ? dev : image, type)) >= 0)
		snprintf(how, len, "%s on %s%s%s%s", type, dev[0] ? dev : image,
			 dev[0] ? " (a read-only loop device of '" : "", dev[0] ? image : "",
			 dev[0] ? "')" : "");
	/* the mount holds the device now; the loop goes when the mount does */
	close(dev_fd);
	return fd;
}

int cb_ct_volume_any(const struct cb_ct_volume *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (cb_ct_volume_is_image(v[i].src))
			return 1;
	return 0;
}

static void hold(struct cb_ct_volume *v, int fd)
{
	v->fd = fd;
	/* "/." : code that opens the root with O_NOFOLLOW follows the magic link */
	v->path = cb_xasprintf("/proc/self/fd/%d/.", fd);
}

/* Running: the init's root once, each image volume below it. */
static int attach_running(struct cb_ct_volume *v, size_t n, const char *id, const char *cgroup,
			  struct cb_log *log)
{
	struct cb_ctinit init;
	int root = -1, ret = -1;

	if (cb_ct_volume_find_init(id, cgroup, &init) < 0 || (root = cb_ct_volume_open_root(&init)) < 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		int fd;
		if (!cb_ct_volume_is_image(v[i].src))
			continue;
		if ((fd = i ? cb_ct_volume_open_in(root, v[i].target) : fcntl(root, F_DUPFD_CLOEXEC, 3)) < 0)
			goto out;
		hold(&v[i], fd);
		cb_info(log, "%s '%s': the running container's view, /proc/%d/root%s (its init, "
			"pid %d from %s, checked after the open)", i ? "mount point" : "root",
			v[i].src, (int)init.pid, i ? v[i].target + 1 : "", (int)init.pid, init.source);
	}
	ret = 0;
out:
	if (root >= 0)
		close(root);
	cb_ctinit_release(&init);
	return ret;
}

int cb_ct_volume_attach(struct cb_ct_volume *v, size_t n, const char *id, const char *cgroup,
		    int running, struct cb_log *log)
{
	char how[1024];
	int fd;

	for (size_t i = 0; i < n; i++) {
		v[i].fd = -1;
		v[i].path = NULL;
	}
	if (running)
		return attach_running(v, n, id, cgroup, log);
	for (size_t i = 0; i < n; i++) {
		if (!cb_ct_volume_is_image(v[i].src))
			continue;
		if ((fd = cb_ct_volume_mount_ro(v[i].src, how, sizeof(how))) < 0)
			return -1;
		hold(&v[i], fd);
		cb_info(log, "%s '%s': mounted read-only from %s, detached (in no mount namespace)",
			i ? "mount point" : "root", v[i].src, how);
	}
	return 0;
}

void cb_ct_volume_detach(struct cb_ct_volume *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		if (v[i].fd >= 0)
			close(v[i].fd);
		v[i].fd = -1;
		free(v[i].path);
		v[i].path = NULL;
	}
}
