/* cb_keepauto: keep-staging auto. See include/cb_keepauto.h. */
#include <stdio.h>
#include <sys/statvfs.h>

#include "cb_keepauto.h"
#include "cb_opts.h"
#include "cb_util.h"

/* "63%" of the file system, or "40MiB" when the rule is a size */
static void fmt_room(char *buf, size_t len, const struct cb_room *rule, uint64_t room,
		     uint64_t total)
{
	if (rule->pct >= 0)
		snprintf(buf, len, "%llu%%",
			 total ? (unsigned long long)(room * 100 / total) : 0ULL);
	else
		cb_fmt_bytes(buf, len, room);
}

int cb_keep_auto_decide(const char *tmpdir, const char *free_spec, uint64_t need, char *why,
			size_t len)
{
	struct cb_room rule;
	struct statvfs vfs;
	uint64_t total, avail, room;
	char room_s[32];
	int keep;

	if (cb_room_parse(free_spec, &rule) < 0)
		return -1;
	if (statvfs(tmpdir, &vfs) < 0)
		return cb_error_errno("cannot stat tmpdir '%s'", tmpdir);
	total = (uint64_t)vfs.f_blocks * vfs.f_frsize;
	avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	room = avail > need ? avail - need : 0;
	keep = rule.pct >= 0 ? (long double)room * 100 >= (long double)rule.pct * total
			     : room >= rule.bytes;
	fmt_room(room_s, sizeof(room_s), &rule, room, total);
	if (keep)
		snprintf(why, len, "keeping the staging copy (tmpdir %s free after it)", room_s);
	else
		snprintf(why, len, "the staging copy is not kept: tmpdir %s %s free, "
			 "keep-staging-free is %s", need ? "would have" : "has", room_s, free_spec);
	return keep;
}
