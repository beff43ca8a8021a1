/*
 * cb_idshift.h: the IDs inside a system.posix_acl_* value shifted through
 * a map, and the little-endian words of ACLs and file capabilities. One
 * walk serves the backup (IDs shifted back to the container's view,
 * src/archive/idshift.c) and restore --map-ids (to the host's,
 * src/ops/restore_idmap.c); each side says its own errors.
 */
#ifndef CB_IDSHIFT_H
#define CB_IDSHIFT_H

#include <stddef.h>
#include <stdint.h>

uint32_t cb_le32(const unsigned char *p);
void cb_put_le32(unsigned char *p, uint32_t v);

/* in through the caller's map into *out: 0, or -1 with the error set
 * (what: "ACL user", "ACL group") */
typedef int cb_idshift_fn(const void *ctx, char type, unsigned long in, unsigned long *out,
			  const char *what);
/* A system.posix_acl_* value (version, then tag:16 perm:16 id:32 entries,
 * little-endian): the ids of named users (tag 2, type 'u') and groups (tag
 * 8, 'g') through fn, in place. 0, or fn's -1. */
int cb_idshift_acl_ids(unsigned char *v, size_t n, cb_idshift_fn *fn, const void *ctx);

#endif
