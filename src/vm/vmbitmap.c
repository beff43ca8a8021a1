/* cb_vmsnap with keep-staging: the dirty bitmaps that make a run read only
 * what changed since the kept image was made, bound to that image by a
 * generation. Each run starts a bitmap cbackup-ID@GEN (GEN: 64 random
 * bits) at its pause and records GEN beside the kept image once the read
 * is complete; the next run trusts a bitmap only under that very name. A
 * disk image put back at file level (a copy taken after an older run)
 * carries an older bitmap, consistent and recording, but of another
 * generation: the whole disk is read. See include/cb_vmsnap.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cb_json.h"
#include "cb_util.h"
#include "vmsnap_int.h"

enum { BM_NONE, BM_OK, BM_DISABLED, BM_INCONSISTENT };

void cb_vmbm_new_gen(char gen[VM_GEN_LEN + 1])
{
	unsigned char r[VM_GEN_LEN / 2];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		/* no entropy yet: time and pid still differ from run to run */
		struct timespec ts;
		unsigned long long x;
		clock_gettime(CLOCK_REALTIME, &ts);
		x = (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
		x ^= (unsigned long long)getpid() << 40;
		for (size_t i = 0; i < sizeof(r); i++)
			r[i] = (unsigned char)(x >> (8 * i));
	}
	for (size_t i = 0; i < sizeof(r); i++)
		snprintf(gen + 2 * i, 3, "%02x", r[i]);
}

static char *bitmap_name(const struct cb_vmsnap *v, const char *gen)
{
	return cb_xasprintf("%s@%s", v->bitmap, gen);
}

/* NAME is one of this guest's bitmaps: cbackup-ID@GEN, or the names of
 * earlier versions (cbackup-ID, cbackup-ID-t). IDs hold no '@'. */
static int ours(const char *prefix, const char *name)
{
	size_t n = strlen(prefix);

	return name && !strncmp(name, prefix, n) &&
	       (!name[n] || name[n] == '@' || !strcmp(name + n, "-t"));
}

static int bitmap_state(const struct cb_json *inserted, const char *name)
{
	const struct cb_json *bm = cb_json_get(inserted, "dirty-bitmaps");

	for (size_t k = 0; name && bm && k < bm->n; k++) {
		const char *n = cb_json_str(bm->items[k], "name");
		if (!n || strcmp(n, name))
			continue;
		if (cb_json_int(bm->items[k], "inconsistent", 0))
			return BM_INCONSISTENT;
		return cb_json_int(bm->items[k], "recording", 0) ? BM_OK : BM_DISABLED;
	}
	return BM_NONE;
}

static int remove_bitmap(struct cb_qmp_session *s, const char *node, const char *name)
{
	char *qn = cb_json_quote(node), *qb = cb_json_quote(name);
	int rc = cb_qmp_session_execf(s, NULL, "block-dirty-bitmap-remove", "{\"node\":%s,\"name\":%s}",
			       qn, qb);

	free(qn);
	free(qb);
	return rc;
}

/* Every bitmap of this guest that does not record (a snapshot bitmap of a
 * run that did not finish: its kept image was not recorded complete, the
 * next run reads the disks in full) goes, on every node. */
int cb_vmbm_sweep(struct cb_qmp_session *s, const char *prefix, int *count)
{
	struct cb_json *blocks = NULL;
	const struct cb_json *list;
	int rc = 0;

	if (!prefix)
		return 0;
	if (cb_qmp_session_exec(s, "query-block", NULL, &blocks) < 0)
		return -1;
	list = cb_json_get(blocks, "return");
	for (size_t i = 0; list && i < list->n; i++) {
		const struct cb_json *ins = cb_json_get(list->items[i], "inserted");
		const struct cb_json *bm = cb_json_get(ins, "dirty-bitmaps");
		const char *node = cb_json_str(ins, "node-name");
		for (size_t k = 0; node && bm && k < bm->n; k++) {
			const char *name = cb_json_str(bm->items[k], "name");
			if (!ours(prefix, name) || cb_json_int(bm->items[k], "recording", 0))
				continue;
			if (remove_bitmap(s, node, name) < 0)
				rc = -1;
			else
				(*count)++;
		}
	}
	cb_json_free(blocks);
	return rc;
}

/* ---- the kept state: WORK_DIR/NAME.state ------------------------------- */

/* "PATH SIZE GEN": the kept image NAME holds the disk as of the pause
 * that started bitmap cbackup-ID@GEN. Written after a complete read,
 * removed before the next one begins. */
static char *state_text(const struct vmdisk *d, const char *gen)
{
	return cb_xasprintf("%s %llu %s\n", d->path, (unsigned long long)d->size, gen);
}

/* The generation of D's kept image into GEN: 1, or 0 (none recorded, or
 * for another path or size). The state goes either way. */
static int state_gen(int wfd, const struct vmdisk *d, char gen[VM_GEN_LEN + 1])
{
	char name[PATH_MAX], buf[PATH_MAX + 64], *head = state_text(d, "");
	size_t hn = strlen(head) - 1;   /* without the newline */
	int fd, ok = 0;
	ssize_t n;

	snprintf(name, sizeof(name), "%s.state", d->name);
	fd = openat(wfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0 && (n = read(fd, buf, sizeof(buf) - 1)) > 0) {
		buf[n] = '\0';
		ok = (size_t)n == hn + VM_GEN_LEN + 1 && !strncmp(buf, head, hn) &&
		     strspn(buf + hn, "0123456789abcdef") == VM_GEN_LEN && buf[n - 1] == '\n';
		if (ok)
			snprintf(gen, VM_GEN_LEN + 1, "%s", buf + hn);
	}
	if (fd >= 0)
		close(fd);
	unlinkat(wfd, name, 0);
	free(head);
	return ok;
}

void cb_vmbm_state_write(struct cb_vmsnap *v, const struct vmdisk *d)
{
	char *path = cb_xasprintf("%s/%s.state", v->work_dir, d->name);
	char *text = state_text(d, v->gen);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0 || cb_write_all(fd, text, strlen(text)) < 0)
		cb_warn(v->o->log, "cannot record the kept image of '%s' (%s): the next run reads "
			"it all", d->path, strerror(errno));
	if (fd >= 0)
		close(fd);
	free(path);
	free(text);
}

static int kept_image_fits(int dfd, const struct vmdisk *d)
{
	struct stat st;

	return fstatat(dfd, d->name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
	       (uint64_t)st.st_size == d->size;
}

/* ---- choosing, at the pause, after the read ---------------------------- */

/* The first bitmap of this guest on the node other than WANT, or NULL. */
static const char *other_bitmap(const struct cb_vmsnap *v, const struct cb_json *ins,
				const char *want)
{
	const struct cb_json *bm = cb_json_get(ins, "dirty-bitmaps");

	for (size_t k = 0; bm && k < bm->n; k++) {
		const char *n = cb_json_str(bm->items[k], "name");
		if (ours(v->bitmap, n) && (!want || strcmp(n, want)))
			return n;
	}
	return NULL;
}

/* Why disk D is read in full although a kept image was there to update. */
static void say_why(struct cb_vmsnap *v, const struct vmdisk *d, const struct cb_json *ins,
		    const char *want, int state)
{
	static const char *const what[] = { "missing", "", "disabled", "inconsistent" };
	const char *other = other_bitmap(v, ins, want);

	if (!want)
		cb_warn(v->o->log, "disk '%s': no kept image recorded complete: the whole disk is "
			"read", d->path);
	else if (state == BM_NONE && other)
		cb_info(v->o->log, "disk '%s': bitmap '%s' is of another state of the disk than the "
			"kept copy (its bitmap is '%s': the image was replaced or rolled back): the "
			"whole disk is read", d->path, other, want);
	else
		cb_warn(v->o->log, "disk '%s': bitmap '%s' is %s: the whole disk is read", d->path,
			want, what[state]);
}

/* Every bitmap of this guest on D's node but the one this run reads goes
 * (another generation's, an unusable one, an older version's). */
static int drop_others(struct cb_vmsnap *v, const struct vmdisk *d, const struct cb_json *ins)
{
	const struct cb_json *bm = cb_json_get(ins, "dirty-bitmaps");

	for (size_t k = 0; bm && k < bm->n; k++) {
		const char *n = cb_json_str(bm->items[k], "name");
		if (ours(v->bitmap, n) && (!d->snap_bm || strcmp(n, d->snap_bm)) &&
		    remove_bitmap(&v->s, d->node, n) < 0)
			return cb_error_prefix("disk '%s': dropping bitmap '%s'", d->path, n);
	}
	return 0;
}

static const struct cb_json *inserted_of(const struct cb_json *blocks, const char *node)
{
	const struct cb_json *list = cb_json_get(blocks, "return");

	for (size_t i = 0; list && i < list->n; i++) {
		const struct cb_json *ins = cb_json_get(list->items[i], "inserted");
		const char *n = cb_json_str(ins, "node-name");
		if (n && !strcmp(n, node))
			return ins;
	}
	return NULL;
}

/* One disk: incremental when its kept image is complete and the bitmap of
 * that image's generation records on the node. */
static int choose_disk(struct cb_vmsnap *v, int wfd, int dfd, int reused, struct vmdisk *d,
		       const struct cb_json *ins)
{
	char gen[VM_GEN_LEN + 1];
	char *want = wfd >= 0 && state_gen(wfd, d, gen) && kept_image_fits(dfd, d)
			     ? bitmap_name(v, gen) : NULL;
	int state = bitmap_state(ins, want);

	if (reused && want && state == BM_OK) {
		d->snap_bm = want;
		d->incremental = 1;
		cb_info(v->o->log, "disk '%s': only the extents bitmap '%s' marks dirty are read",
			d->path, want);
	} else {
		if (reused)
			say_why(v, d, ins, want, state);
		free(want);
	}
	return drop_others(v, d, ins);
}

int cb_vmbm_choose(struct cb_vmsnap *v, int dfd, int reused)
{
	struct cb_json *blocks = NULL;
	int wfd, rc = 0;

	if (!v->bitmap)
		return 0;
	if (cb_qmp_session_exec(&v->s, "query-block", NULL, &blocks) < 0)
		return -1;
	wfd = open(v->work_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	for (size_t i = 0; i < v->n && rc == 0; i++)
		rc = choose_disk(v, wfd, dfd, reused, &v->d[i], inserted_of(blocks, v->d[i].node));
	if (wfd >= 0)
		close(wfd);
	cb_json_free(blocks);
	return rc;
}

/* While paused: this run's bitmap starts recording; the kept copy's stops
 * (it is what the read takes: the changes since that copy, up to now). */
int cb_vmbm_at_pause(struct cb_vmsnap *v, const struct vmdisk *d)
{
	char *qn = cb_json_quote(d->node), *name = bitmap_name(v, v->gen);
	char *qb = cb_json_quote(name), *qs = d->snap_bm ? cb_json_quote(d->snap_bm) : NULL;
	const char *persistent = !strcmp(d->drv, "qcow2") ? "true" : "false";
	int rc;

	if (qs)
		rc = cb_qmp_session_execf(&v->s, NULL, "transaction", "{\"actions\":["
			"{\"type\":\"block-dirty-bitmap-add\",\"data\":{\"node\":%s,\"name\":%s,"
			"\"persistent\":%s}},"
			"{\"type\":\"block-dirty-bitmap-disable\",\"data\":{\"node\":%s,\"name\":%s}}]}",
			qn, qb, persistent, qn, qs);
	else
		rc = cb_qmp_session_execf(&v->s, NULL, "block-dirty-bitmap-add",
				   "{\"node\":%s,\"name\":%s,\"persistent\":%s}", qn, qb, persistent);
	free(qn);
	free(name);
	free(qb);
	free(qs);
	return rc;
}

/* After a complete read (the exports that held them gone): the kept
 * copy's bitmaps go; this run's record what changes from now on. */
int cb_vmbm_hand_over(struct cb_vmsnap *v)
{
	for (size_t i = 0; i < v->n; i++)
		if (v->d[i].snap_bm && remove_bitmap(&v->s, v->d[i].node, v->d[i].snap_bm) < 0)
			return -1;
	return 0;
}
