/*
 * cb_guest_check_stopped: a container its freeze backend calls stopped is
 * asked again, of its manager where it has one (pct, lxc-info), else of
 * the processes of the host. See include/cb_guest.h.
 *
 * A freeze-cgroup that does not exist or holds no process reads as a
 * stopped guest; a mistyped one reads the same, and the running guest
 * would be backed up unfrozen, then prune would remove good backups.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_discover.h"
#include "cb_guest.h"
#include "cb_pve.h"
#include "cb_run.h"
#include "cb_util.h"

#define MANAGER_TIMEOUT_MS 10000

struct state_line {
	const char *key;   /* "status:" (pct) or "State:" (lxc-info) */
	char word[32];
};

static void on_state_line(void *arg, const char *line)
{
	struct state_line *s = arg;
	size_t n = strlen(s->key);

	if (!strncmp(line, s->key, n))
		sscanf(line + n, " %31s", s->word);
}

/* The state word KEY's line of argv's output, "" when none. */
static void ask(char *const argv[], const char *key, char *word, size_t len)
{
	struct state_line s = { .key = key };
	struct cb_run run = { .what = argv[0], .timeout_ms = MANAGER_TIMEOUT_MS,
			      .on_line = on_state_line, .arg = &s };

	if (cb_run_argv(&run, argv) < 0)
		s.word[0] = '\0';
	snprintf(word, len, "%s", s.word);
}

static int file_exists(char *path)
{
	int ok = access(path, F_OK) == 0;

	free(path);
	return ok;
}

/* What the container's manager says: 1 running, 0 stopped, -1 no manager
 * (or no answer). The same managers mode stop uses: pct for a Proxmox
 * container, lxc-info for one in the LXC directory. how says who said. */
static int manager_state(const struct cb_opts *o, char *how, size_t len)
{
	char *pct = cb_find_on_path("pct"), *lxc = cb_find_on_path("lxc-info"), word[32] = "";

	if (pct && file_exists(cb_xasprintf("%s/lxc/%s.conf", cb_pve_dir(), o->id))) {
		char *argv[] = { pct, "status", o->id, NULL };
		ask(argv, "status:", word, sizeof(word));
		snprintf(how, len, "'pct status %s' says %s", o->id, word);
	} else if (lxc && file_exists(cb_xasprintf("%s/%s/config", cb_lxc_dir(), o->id))) {
		char *argv[] = { lxc, "-P", (char *)cb_lxc_dir(), "-n", o->id, "-s", NULL };
		ask(argv, "State:", word, sizeof(word));
		snprintf(how, len, "'lxc-info -n %s -s' says %s", o->id, word);
	}
	free(pct);
	free(lxc);
	if (!word[0])
		return -1;
	return strcasecmp(word, "stopped") != 0;
}

static int same_dir(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* The root of process PID is the directory `root` or below it. Walked up
 * with ".." from /proc/PID/root (the magic link: a bind mount of the root,
 * a root in another mount namespace are the directories they are), until
 * cbackup's own root or the top of that tree. */
static int root_within(const char *pid, const struct stat *root, const struct stat *top)
{
	char path[300];
	struct stat st, prev = { 0 };
	int fd, up, in = 0;

	snprintf(path, sizeof(path), "/proc/%s/root", pid);
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	for (int depth = 0; fd >= 0 && depth < 4096 && fstat(fd, &st) == 0; depth++) {
		if ((in = same_dir(&st, root)) || same_dir(&st, top) || (depth && same_dir(&st, &prev)))
			break;
		prev = st;
		up = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		fd = up;
	}
	if (fd >= 0)
		close(fd);
	return in;
}

/* A process of the host whose root lies in the guest's root directory:
 * its pid, 0 when there is none (or the root is no directory: an image
 * is reached through the manager alone). */
static long root_process(const char *root_path)
{
	struct stat root, top;
	struct dirent *d;
	DIR *proc;
	long pid = 0;

	if (stat(root_path, &root) < 0 || !S_ISDIR(root.st_mode) || stat("/", &top) < 0 ||
	    same_dir(&root, &top) || !(proc = opendir("/proc")))
		return 0;
	while (!pid && (d = readdir(proc)))
		if (d->d_name[0] >= '1' && d->d_name[0] <= '9' && root_within(d->d_name, &root, &top))
			pid = strtol(d->d_name, NULL, 10);
	closedir(proc);
	return pid;
}

int cb_guest_check_stopped(const struct cb_opts *o, const char *why)
{
	char how[320], path[64], where[4096];
	ssize_t n;
	long pid;

	if (o->type != CB_GUEST_CT)
		return 0;
	switch (manager_state(o, how, sizeof(how))) {
	case 1:
		return cb_error("%s, but CT %s runs: %s (a mistyped freeze setting? a running "
				"guest is not backed up unfrozen)", why, o->id, how);
	case 0:
		return 0;
	default:
		break;
	}
	if (!o->root || !(pid = root_process(o->root)))
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/root", pid);
	if ((n = readlink(path, where, sizeof(where) - 1)) < 0)
		n = snprintf(where, sizeof(where), "%s", o->root);
	where[n] = '\0';
	return cb_error("%s, but CT %s runs: pid %ld has its root in '%s' (a mistyped freeze "
			"setting? a running guest is not backed up unfrozen)", why, o->id, pid, where);
}
