/*
 * What the events cannot show, found by scanning the host at the freeze:
 * the mounts under the root, the files the guest's processes hold open
 * or mapped (chattr needs only a descriptor), and the loop devices whose
 * backing file is in the tree (the kernel writes those without an event).
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
#include "cb_util.h"
#include "track_int.h"

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
char *track_mounts_under(struct cb_track *t, void (*fn)(struct cb_track *, const char *))
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192], mp[4096];
	char *all = cb_xstrdup(""), *next;
	const char *r;

	while (f && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) != 1)
			continue;
		unescape(mp);
		if (!(r = track_rel_of(t, mp)) || !*r)
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
void track_add_mount(struct cb_track *t, const char *mp)
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
	b->rel = cb_xstrdup(track_rel_of(t, mp));
	/* its source as the events' handles name it: through the same
	 * open_by_handle_at and /proc link */
	fh.h.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(AT_FDCWD, mp, &fh.h, &mnt_id, 0) == 0 &&
	    ((p = track_place_handle(t, &fh.h, path, sizeof(path), &sb, &why)) == P_INSIDE ||
	     p == P_OUTSIDE)) {
		b->src = cb_xstrdup(path);
		b->src_len = strlen(path);
		cb_verbose(t->log, "change tracking: the bind mount '/%s' shows '%s'", b->rel, path);
	} else {
		track_widen(t, mp, "is a bind mount whose source cannot be placed", "its subtree walked");
	}
	t->n_binds++;
}


/* ---- what the guest's processes hold ---- */

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
	switch (track_place_of(t, link, &sb, path, sizeof(path), &why)) {
	case P_INSIDE:
		n = track_rels_of(t, path, rels, t->n_binds + 1);
		for (size_t i = 0; i < n; i++)
			cb_changes_add_path(c, rels[i]);
		break;
	case P_OUTSIDE:
		if (sb.st_nlink > 1)  /* another name of it may be under the root */
			track_add_ino(t, (uint64_t)sb.st_ino);
		break;
	case P_INODE:  /* the name it was opened by is gone (" (deleted)") */
		track_add_ino(t, (uint64_t)sb.st_ino);
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
void track_scan_cgroup(struct cb_track *t, struct cb_changes *c, const char *dir)
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
			track_scan_cgroup(t, c, sub);
			free(sub);
		}
	closedir(dp);
}

void track_scan_all(struct cb_track *t, struct cb_changes *c)
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
void track_scan_loops(struct cb_track *t)
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
			track_add_ino(t, li.lo_inode);
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
				track_add_ino(t, (uint64_t)sb.st_ino);
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

