/*
 * idshift: an unprivileged container's IDs as the container sees them
 * (cb_idmap), as vzdump archives them: tar runs under lxc-usernsexec with
 * the container's map (pve-container src/PVE/VZDump/LXC.pm, archive()), so
 * owners, ACL entries and a namespaced file capability's root ID come out
 * shifted back; pct restore shifts them again. An ID the map has no place
 * for is an error naming the file: never an owner restored wrong.
 */
#include <string.h>
#include <archive_entry.h>

#include "archive_int.h"
#include "cb_idshift.h"
#include "cb_pvect.h"
#include "cb_util.h"

static int back(const struct cb_idmap *m, char type, unsigned long host, unsigned long *ct,
		const char *what, const char *arcname)
{
	if (cb_idmap_back(m, type, host, ct) == 0)
		return 0;
	return cb_error("'%s': %s %lu is outside the container's ID map (lxc.idmap): it cannot be "
			"archived as the container sees it", arcname, what, host);
}

int idshift_owner(const struct cb_idmap *m, struct archive_entry *e, const char *arcname)
{
	unsigned long uid, gid;

	if (back(m, 'u', (unsigned long)archive_entry_uid(e), &uid, "owner uid", arcname) < 0 ||
	    back(m, 'g', (unsigned long)archive_entry_gid(e), &gid, "group gid", arcname) < 0)
		return -1;
	archive_entry_set_uid(e, (la_int64_t)uid);
	archive_entry_set_gid(e, (la_int64_t)gid);
	return 0;
}

uint32_t cb_le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void cb_put_le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

int cb_idshift_acl_ids(unsigned char *v, size_t n, cb_idshift_fn *fn, const void *ctx)
{
	for (size_t at = 4; at + 8 <= n; at += 8) {
		unsigned tag = (unsigned)v[at] | (unsigned)v[at + 1] << 8;
		unsigned long id;
		if (tag != 2 && tag != 8)
			continue;
		if (fn(ctx, tag == 2 ? 'u' : 'g', cb_le32(v + at + 4), &id,
		       tag == 2 ? "ACL user" : "ACL group") < 0)
			return -1;
		cb_put_le32(v + at + 4, (uint32_t)id);
	}
	return 0;
}

struct back_ctx {
	const struct cb_idmap *m;
	const char *arcname;
};

static int back_id(const void *arg, char type, unsigned long in, unsigned long *out, const char *what)
{
	const struct back_ctx *c = arg;

	return back(c->m, type, in, out, what, c->arcname);
}

int idshift_acl(const struct cb_idmap *m, unsigned char *v, size_t n, const char *arcname)
{
	struct back_ctx c = { m, arcname };

	return cb_idshift_acl_ids(v, n, back_id, &c);
}

/* security.capability: a namespaced one (revision 3, 24 bytes, the host
 * uid of the namespace's root last) is what the container sees as a plain
 * revision 2 one when that root is its uid 0; *n may shrink. */
int idshift_caps(const struct cb_idmap *m, unsigned char *v, size_t *n, const char *arcname)
{
	enum { REV_MASK = 0xFF000000, REV2 = 0x02000000, REV3 = 0x03000000, V2_SIZE = 20,
	       V3_SIZE = 24 };
	uint32_t magic;
	unsigned long ct;

	if (*n != V3_SIZE || ((magic = cb_le32(v)) & REV_MASK) != REV3)
		return 0;
	if (back(m, 'u', cb_le32(v + V2_SIZE), &ct, "file capability root uid", arcname) < 0)
		return -1;
	if (ct == 0) {
		cb_put_le32(v, (magic & ~(uint32_t)REV_MASK) | REV2);
		*n = V2_SIZE;
	} else {
		cb_put_le32(v + V2_SIZE, (uint32_t)ct);
	}
	return 0;
}
