/*
 * The pax extended header of an entry as GNU tar reads it. libarchive 3.6
 * writes three things GNU tar reads otherwise than meant:
 *
 *  - xattr names percent-encoded byte by byte (SCHILY.xattr.user.%C3%BC):
 *    GNU tar, and libarchive's own reader, take SCHILY.xattr names raw
 *    but for "%" and "=", which GNU tar writes as %25 and %3D (a pax key
 *    ends at the first "="). The names are rewritten that way.
 *  - a time before 1970 with a fraction as "-2.5" for -1.5 s (whole
 *    seconds rounded down, then the fraction added): POSIX and GNU tar
 *    read the decimal number, one second early. Rewritten as "-1.5".
 *  - ACL entries with ids >= 2^31 as id 0 (an int on the way): the ACL
 *    records are written here from the raw system.posix_acl_* values.
 *
 * Everything else of the header is libarchive's, byte for byte.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive_int.h"
#include "cb_util.h"

#define BLK 512

struct sbuf {
	char *p;
	size_t len, cap;
};

static void sb_add(struct sbuf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 1024;
		b->p = cb_xrealloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

/* "LEN key=value\n", LEN counting itself. */
static void add_record(struct sbuf *b, const char *key, size_t klen, const char *val, size_t vlen)
{
	size_t body = klen + vlen + 3, len = body + 1;
	char num[32];

	while (len != body + (size_t)snprintf(num, sizeof(num), "%zu", len))
		len = body + strlen(num);
	snprintf(num, sizeof(num), "%zu ", len);
	sb_add(b, num, strlen(num));
	sb_add(b, key, klen);
	sb_add(b, "=", 1);
	sb_add(b, val, vlen);
	sb_add(b, "\n", 1);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* SCHILY.xattr.NAME: libarchive's %XX undone, GNU tar's %25/%3D done. */
static void fix_xattr_key(struct sbuf *out, const char *k, size_t klen)
{
	for (size_t i = 0; i < klen; i++) {
		unsigned char c = (unsigned char)k[i];
		if (c == '%' && i + 2 < klen && hexval(k[i + 1]) >= 0 && hexval(k[i + 2]) >= 0) {
			c = (unsigned char)(hexval(k[i + 1]) * 16 + hexval(k[i + 2]));
			i += 2;
		}
		if (c == '%')
			sb_add(out, "%25", 3);
		else if (c == '=')
			sb_add(out, "%3D", 3);
		else
			sb_add(out, &c, 1);
	}
}

/* "-S.F" meaning -S + F (libarchive) -> the decimal number -(S - F). */
static int fix_time(const char *v, size_t vlen, char *out, size_t outlen)
{
	unsigned long long s = 0;
	long f = 0, scale = 100000000;
	size_t i = 1;

	if (vlen < 3 || v[0] != '-')
		return 0;
	for (; i < vlen && v[i] >= '0' && v[i] <= '9'; i++)
		s = s * 10 + (unsigned)(v[i] - '0');
	if (i == vlen || v[i] != '.' || s == 0)
		return 0;
	for (i++; i < vlen && v[i] >= '0' && v[i] <= '9'; i++, scale /= 10)
		f += scale * (v[i] - '0');
	if (i != vlen || f == 0)
		return 0;
	snprintf(out, outlen, "-%llu.%09ld", s - 1, 1000000000L - f);
	return 1;
}

static int key_is(const char *k, size_t klen, const char *name)
{
	return klen == strlen(name) && !memcmp(k, name, klen);
}

static void fix_record(struct sbuf *out, const char *k, size_t klen, const char *v, size_t vlen)
{
	char t[64];
	struct sbuf key = { 0 };

	if (klen > 13 && !memcmp(k, "SCHILY.xattr.", 13)) {
		sb_add(&key, k, 13);
		fix_xattr_key(&key, k + 13, klen - 13);
		add_record(out, key.p, key.len, v, vlen);
		free(key.p);
	} else if ((key_is(k, klen, "mtime") || key_is(k, klen, "atime") ||
		    key_is(k, klen, "ctime")) && fix_time(v, vlen, t, sizeof(t))) {
		add_record(out, k, klen, t, strlen(t));
	} else if (!key_is(k, klen, "SCHILY.acl.access") && !key_is(k, klen, "SCHILY.acl.default")) {
		add_record(out, k, klen, v, vlen);
	}
}

/* The records of an 'x' block, fixed; -1 if they do not parse. */
static int fix_records(struct sbuf *out, const char *p, size_t n, const struct paxfix *x)
{
	while (n > 0) {
		size_t len = 0, i = 0;
		const char *eq, *sp;

		while (i < n && p[i] >= '0' && p[i] <= '9')
			len = len * 10 + (size_t)(p[i++] - '0');
		if (len == 0 || len > n || p[len - 1] != '\n' || !(sp = memchr(p, ' ', len)) ||
		    !(eq = memchr(sp, '=', (size_t)(p + len - sp))))
			return -1;
		fix_record(out, sp + 1, (size_t)(eq - sp - 1), eq + 1, (size_t)(p + len - 1 - eq - 1));
		p += len;
		n -= len;
	}
	for (int i = 0; i < 2; i++)
		if (x->acl[i])
			add_record(out, i ? "SCHILY.acl.default" : "SCHILY.acl.access",
				   i ? 18 : 17, x->acl[i], strlen(x->acl[i]));
	return 0;
}

static unsigned long long octal(const unsigned char *p, size_t n)
{
	unsigned long long v = 0;

	for (size_t i = 0; i < n && p[i] >= '0' && p[i] <= '7'; i++)
		v = v * 8 + (p[i] - '0');
	return v;
}

static void set_checksum(unsigned char *h)
{
	unsigned sum = 0;

	memset(h + 148, ' ', 8);
	for (int i = 0; i < BLK; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

/* A new 'x' header for the file header h (no records before). */
static void make_x_header(unsigned char *x, const unsigned char *h)
{
	memcpy(x, h, BLK);
	memset(x, 0, 100);
	memcpy(x, "./PaxHeaders/entry", 18);
	memcpy(x + 100, "0000644", 8);
	memset(x + 157, 0, 100);    /* no link name */
	x[156] = 'x';
}

int paxfix_header(const unsigned char *in, size_t len, const struct paxfix *x, unsigned char **out,
		  size_t *outlen)
{
	struct sbuf recs = { 0 }, res = { 0 };
	unsigned char hdr[BLK];
	size_t used = 0, pad;
	int has_x = len >= BLK && in[156] == 'x';

	if (len < BLK)
		return -1;
	if (has_x) {
		unsigned long long size = octal(in + 124, 12);
		used = BLK + (size_t)((size + BLK - 1) / BLK) * BLK;
		if (used > len || fix_records(&recs, (const char *)in + BLK, (size_t)size, x) < 0) {
			free(recs.p);
			return -1;
		}
		memcpy(hdr, in, BLK);
	} else {
		fix_records(&recs, NULL, 0, x);
		make_x_header(hdr, in);
	}
	if (recs.len) {
		char size[32];
		snprintf(size, sizeof(size), "%011llo", (unsigned long long)recs.len & 077777777777ULL);
		memcpy(hdr + 124, size, 12);
		set_checksum(hdr);
		sb_add(&res, hdr, BLK);
		sb_add(&res, recs.p, recs.len);
		pad = (BLK - recs.len % BLK) % BLK;
		while (pad--)
			sb_add(&res, "", 1);
	}
	sb_add(&res, in + used, len - used);
	free(recs.p);
	*out = (unsigned char *)res.p;
	*outlen = res.len;
	return 0;
}

/* ---- POSIX ACLs from their raw xattr value (linux/posix_acl_xattr.h) ---- */

char *paxfix_acl_text(const unsigned char *v, size_t n)
{
	struct sbuf b = { 0 };

	if (n < 4 || (n - 4) % 8 || v[0] != 2)
		return NULL;
	for (size_t off = 4; off < n; off += 8) {
		unsigned tag = v[off] | v[off + 1] << 8, perm = v[off + 2] | v[off + 3] << 8;
		unsigned long id = (unsigned long)v[off + 4] | (unsigned long)v[off + 5] << 8 |
				   (unsigned long)v[off + 6] << 16 | (unsigned long)v[off + 7] << 24;
		char e[64];
		const char *name = tag == 1 || tag == 2 ? "user" : tag == 4 || tag == 8 ? "group"
				 : tag == 0x10 ? "mask" : tag == 0x20 ? "other" : NULL;

		if (!name) {
			free(b.p);
			return NULL;
		}
		snprintf(e, sizeof(e), "%s%s:", off > 4 ? "," : "", name);
		if (tag == 2 || tag == 8)
			snprintf(e + strlen(e), sizeof(e) - strlen(e), "%lu", id);
		snprintf(e + strlen(e), sizeof(e) - strlen(e), ":%c%c%c", perm & 4 ? 'r' : '-',
			 perm & 2 ? 'w' : '-', perm & 1 ? 'x' : '-');
		sb_add(&b, e, strlen(e));
	}
	sb_add(&b, "", 1);
	return b.p;
}
