/* Private to src/archive/: the hardlink map (linkmap.c). */
#ifndef CB_ARCHIVE_INT_H
#define CB_ARCHIVE_INT_H

#include <stddef.h>
#include <stdint.h>

struct lm_slot {
	uint64_t dev, ino;
	char *name;                 /* archive name of the first link; NULL: free */
	uint32_t left;              /* names still to come */
};

struct linkmap {
	struct lm_slot *slots;
	size_t cap, n;
};

/*
 * An inode with nlink names, now met under name: NULL the first time
 * (remembered; write its data), else the first name to link to. *last: that
 * was its last name; the returned string is then the caller's to free.
 */
char *linkmap_link(struct linkmap *m, uint64_t dev, uint64_t ino, uint64_t nlink,
		   const char *name, int *last);
void linkmap_release(struct linkmap *m);

/* paxfix.c: an entry's header bytes as libarchive wrote them, rewritten
 * for GNU tar (see there); acl: SCHILY.acl.access/default texts to write
 * (NULL: none), replacing libarchive's. */
struct paxfix {
	char *acl[2];
};
int paxfix_header(const unsigned char *in, size_t len, const struct paxfix *x, unsigned char **out,
		  size_t *outlen);
/* "user::rw-,user:3000000002:r--,..." from a system.posix_acl_* value. */
char *paxfix_acl_text(const unsigned char *v, size_t n);

#endif
