/*
 * The cgroup freezers: v2's cgroup.freeze (its state in cgroup.events,
 * which notifies changes) and v1's freezer.state. Async-signal-safe
 * requests: open, openat, write, close.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include "cb_guest.h"
#include "cb_util.h"
#include "guest_int.h"

/* Write a short string to DIR/NAME; open/openat/write/close only. */
static int write_ctl(const char *dir, const char *name, const char *val)
{
	int dfd, fd, ret = -1;

	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	fd = openat(dfd, name, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		ret = write(fd, val, strlen(val)) < 0 ? -1 : 0;
		close(fd);
	}
	close(dfd);
	return ret;
}

/* The guest's cgroup directory no longer exists (access() is
 * async-signal-safe: the watchdog calls this too). */
int freezer_cgroup_gone(const struct cb_guest *g)
{
	return (g->kind == CB_FREEZER_CGROUP2 || g->kind == CB_FREEZER_CGROUP1) &&
	       access(g->path, F_OK) < 0 && errno == ENOENT;
}

static int cgroup_request(const struct cb_guest *g, int freeze)
{
	int v2 = g->kind == CB_FREEZER_CGROUP2;
	const char *file = v2 ? V2_FREEZE : V1_STATE;

	if (write_ctl(g->path, file, v2 ? (freeze ? "1" : "0") : (freeze ? "FROZEN" : "THAWED")) < 0) {
		/* a cgroup is removed only once it is empty: the guest stopped
		 * while frozen and nothing is left to thaw (retrying until
		 * thaw-timeout would only fail the backup) */
		if (!freeze && errno == ENOENT && freezer_cgroup_gone(g))
			return 0;
		return cb_error_errno("cannot write '%s/%s'", g->path, file);
	}
	return 0;
}

static int cgroup_freeze(const struct cb_guest *g, int wait_ms)
{
	(void)wait_ms;   /* the caller waits for the state */
	return cgroup_request(g, 1);
}

static int cgroup_thaw(const struct cb_guest *g)
{
	return cgroup_request(g, 0);
}

static int v2_is_frozen(const struct cb_guest *g)
{
	char buf[256];

	if (freezer_read_small(g->path, V2_EVENTS, buf, sizeof(buf)) < 0)
		return -1;
	return strstr(buf, "frozen 1") != NULL;
}

static int v1_is_frozen(const struct cb_guest *g)
{
	char buf[256];

	if (freezer_read_small(g->path, V1_STATE, buf, sizeof(buf)) < 0)
		return -1;
	return strncmp(buf, "FROZEN", 6) == 0;
}

const struct freezer_ops freezer_cgroup2 = {
	"cgroup2", cgroup_freeze, cgroup_thaw, v2_is_frozen, V2_EVENTS
};
const struct freezer_ops freezer_cgroup1 = {
	"cgroup1", cgroup_freeze, cgroup_thaw, v1_is_frozen, NULL
};
