/*
 * restore --map-ids CONFIG: an archive of an unprivileged container holds
 * its IDs as the container sees them (vzdump's way, and cbackup's: see
 * src/archive/idshift.c); restored into such a container's root outside
 * pct, they are shifted to the host's IDs by the container's map, as
 * pct restore's tar under lxc-usernsexec does: owners, the named users and
 * groups of ACLs, and a file capability (a plain revision 2 one becomes the
 * namespaced revision 3 one the kernel stores for the container's root).
 * An ID the map has no place for fails the restore naming the entry.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <archive_entry.h>

#include "cb_idshift.h"
#include "cb_pvect.h"
#include "cb_util.h"
#include "restore_int.h"

static int forward(const struct restore_job *r, char type, unsigned long ct, unsigned long *host,
		   const char *what, const char *name)
{
	if (cb_idmap_forward(r->idmap, type, ct, host) == 0)
		return 0;
	return cb_error("'%s': %s %lu is outside the ID map of --map-ids", name, what, ct);
}

struct forward_ctx {
	const struct restore_job *r;
	const char *name;
};

static int forward_id(const void *arg, char type, unsigned long in, unsigned long *out,
		      const char *what)
{
	const struct forward_ctx *c = arg;

	return forward(c->r, type, in, out, what, c->name);
}

/* security.capability of revision 2 (20 bytes): the revision 3 value (24
 * bytes, the host uid of the container's root last) into out; 0 when there
 * is nothing to shift (another revision), 1 when out holds the value. */
static int map_caps(const struct restore_job *r, const unsigned char *v, size_t n, unsigned char out[24],
		    const char *name)
{
	enum { REV_MASK = 0xFF000000, REV2 = 0x02000000, REV3 = 0x03000000, V2_SIZE = 20 };
	unsigned long root;
	uint32_t magic;

	if (n != V2_SIZE || ((magic = cb_le32(v)) & REV_MASK) != REV2)
		return 0;
	if (forward(r, 'u', 0, &root, "the root uid of a file capability", name) < 0)
		return -1;
	memcpy(out, v, V2_SIZE);
	cb_put_le32(out, (magic & ~(uint32_t)REV_MASK) | REV3);
	cb_put_le32(out + V2_SIZE, (uint32_t)root);
	return 1;
}

/* The entry's xattrs again, its capability shifted. */
static int map_xattrs(const struct restore_job *r, struct archive_entry *e, const char *name)
{
	struct { char *name; void *val; size_t len; } *x = NULL;
	size_t n = 0, len;
	const char *xn;
	const void *val;
	unsigned char caps[24];
	int ret = 0, c;

	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &xn, &val, &len) == ARCHIVE_OK) {
		x = cb_xrealloc(x, (n + 1) * sizeof(*x));
		x[n].name = cb_xstrdup(xn);
		x[n].val = cb_xmalloc(len ? len : 1);
		memcpy(x[n].val, val, len);
		x[n++].len = len;
	}
	archive_entry_xattr_clear(e);
	for (size_t i = 0; i < n; i++) {
		c = 0;
		if (ret == 0 && !strcmp(x[i].name, "security.capability") &&
		    (c = map_caps(r, x[i].val, x[i].len, caps, name)) < 0)
			ret = -1;
		archive_entry_xattr_add_entry(e, x[i].name, c > 0 ? caps : x[i].val,
					      c > 0 ? sizeof(caps) : x[i].len);
		free(x[i].name);
		free(x[i].val);
	}
	free(x);
	return ret;
}

int restore_map_ids(struct restore_job *r, struct archive_entry *e, const char *name)
{
	struct forward_ctx c = { r, name };
	unsigned long uid, gid;

	if (!r->idmap)
		return 0;
	if (archive_entry_acl_count(e, ARCHIVE_ENTRY_ACL_TYPE_ACCESS |
				       ARCHIVE_ENTRY_ACL_TYPE_DEFAULT) > 0)
		return cb_error("'%s': its ACL is in the archive only as text, which --map-ids "
				"does not shift (restore without it, then shift the IDs)", name);
	if (forward(r, 'u', (unsigned long)archive_entry_uid(e), &uid, "owner uid", name) < 0 ||
	    forward(r, 'g', (unsigned long)archive_entry_gid(e), &gid, "group gid", name) < 0)
		return -1;
	archive_entry_set_uid(e, (la_int64_t)uid);
	archive_entry_set_gid(e, (la_int64_t)gid);

	for (int k = 0; k < 2; k++)
		if (r->acl[k] && cb_idshift_acl_ids(r->acl[k], r->acl_len[k], forward_id, &c) < 0)
			return -1;
	return map_xattrs(r, e, name);
}
