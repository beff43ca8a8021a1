/*
 * The catalog's tar scanner: a push parser over the uncompressed stream
 * (ustar headers, pax 'x' records, GNU 'L'/'K' long names, pax sparse 1.0
 * names and sizes), that records per member what cb_index.h lists. It
 * reads only headers and pax records; data is skipped by its size. What it
 * recorded becomes the .idx here too (cb_idx_build, cb_idx_write_scan), by
 * the builder of index.c, which knows nothing of the scanner.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cb_index.h"
#include "cb_util.h"
#include "index_int.h"

#define BLOCK 512
#define PAX_MAX (16u * 1024 * 1024)   /* more pax text than this is not ours */

enum scan_state { S_HEADER, S_META, S_SKIP, S_END };

struct cb_tarscan {
	enum scan_state state;
	uint64_t off;               /* stream offset of the next byte fed */
	unsigned char hdr[BLOCK];
	size_t hlen;
	char meta_type;             /* 'x', 'L', 'K' being collected */
	char *meta;
	size_t meta_len, meta_want;
	uint64_t skip;              /* bytes of data (and padding) to pass over */
	int zero_blocks;
	/* the member being assembled from its headers */
	int have_start;
	uint64_t start;
	char *pax_path, *pax_link, *gnu_name, *gnu_link, *sparse_name;
	int have_size, have_uid, have_gid, have_mtime, sparse;
	uint64_t size, realsize, uid, gid;
	int64_t mtime;
	uint32_t nsec;
	struct cb_idx_list list;
};

struct cb_tarscan *cb_tarscan_new(void)
{
	return cb_xcalloc(1, sizeof(struct cb_tarscan));
}

static void member_reset(struct cb_tarscan *s)
{
	free(s->pax_path);
	free(s->pax_link);
	free(s->gnu_name);
	free(s->gnu_link);
	free(s->sparse_name);
	s->pax_path = s->pax_link = s->gnu_name = s->gnu_link = s->sparse_name = NULL;
	s->have_start = s->have_size = s->have_uid = s->have_gid = s->have_mtime = s->sparse = 0;
}

void cb_tarscan_free(struct cb_tarscan *s)
{
	if (!s)
		return;
	member_reset(s);
	free(s->meta);
	cb_idx_list_release(&s->list);
	free(s);
}

uint64_t cb_tarscan_entries(const struct cb_tarscan *s)
{
	return s->list.n;
}

int cb_idx_build(const struct cb_tarscan *s, const struct cb_codec_units *units,
		 enum cb_compress type, uint64_t archive_size, unsigned char **buf, size_t *len)
{
	return cb_idx_build_list(&s->list, s->off, units, type, archive_size, buf, len);
}

int cb_idx_write_scan(const char *idx_path, const struct cb_tarscan *s,
		      const struct cb_codec_units *units, const struct cb_codec_segs *segs,
		      enum cb_compress type, uint64_t archive_size, char *sha256)
{
	return cb_idx_write_list(idx_path, &s->list, s->off, units, segs, type, archive_size,
				 sha256);
}

/* Octal (spaces/NULs around), or base-256 with the high bit set. */
static int num(const unsigned char *f, size_t len, uint64_t *v)
{
	size_t i = 0;

	*v = 0;
	if (f[0] & 0x80) {
		if (f[0] & 0x40)
			return -1;             /* negative: not for sizes and ids */
		*v = f[0] & 0x3f;
		for (i = 1; i < len; i++) {
			if (*v >> 56)
				return -1;
			*v = *v << 8 | f[i];
		}
		return 0;
	}
	while (i < len && f[i] == ' ')
		i++;
	for (; i < len && f[i] >= '0' && f[i] <= '7'; i++) {
		if (*v >> 60)
			return -1;
		*v = *v << 3 | (uint64_t)(f[i] - '0');
	}
	for (; i < len; i++)
		if (f[i] != ' ' && f[i] != 0)
			return -1;
	return 0;
}

static int checksum_ok(const unsigned char *h)
{
	uint64_t want, got = 0;

	if (num(h + 148, 8, &want) < 0)
		return 0;
	for (int i = 0; i < BLOCK; i++)
		got += (i >= 148 && i < 156) ? ' ' : h[i];
	return got == want;
}

static int all_zero(const unsigned char *h)
{
	for (int i = 0; i < BLOCK; i++)
		if (h[i])
			return 0;
	return 1;
}

/* "123.456789" (or "-1.25") -> seconds (floor) and nanoseconds. */
static void parse_time(const char *v, int64_t *sec, uint32_t *nsec)
{
	int neg = *v == '-';
	int64_t s = 0;
	uint32_t ns = 0, scale = 100000000;

	v += neg;
	for (; *v >= '0' && *v <= '9'; v++)
		s = s < INT64_MAX / 10 ? s * 10 + (*v - '0') : s;
	if (*v == '.')
		for (v++; *v >= '0' && *v <= '9' && scale; v++, scale /= 10)
			ns += (uint32_t)(*v - '0') * scale;
	if (neg && ns) {
		s = -s - 1;
		ns = 1000000000u - ns;
	} else if (neg) {
		s = -s;
	}
	*sec = s;
	*nsec = ns;
}

static void set_str(char **dst, const char *v, size_t len)
{
	free(*dst);
	*dst = cb_xmalloc(len + 1);
	memcpy(*dst, v, len);
	(*dst)[len] = '\0';
}

static void pax_record(struct cb_tarscan *s, const char *k, const char *v, size_t vlen)
{
	uint64_t n = strtoull(v, NULL, 10);

	if (!strcmp(k, "path"))
		set_str(&s->pax_path, v, vlen);
	else if (!strcmp(k, "linkpath"))
		set_str(&s->pax_link, v, vlen);
	else if (!strcmp(k, "GNU.sparse.name"))
		set_str(&s->sparse_name, v, vlen);
	else if (!strcmp(k, "size"))
		s->have_size = 1, s->size = n;
	else if (!strcmp(k, "uid"))
		s->have_uid = 1, s->uid = n;
	else if (!strcmp(k, "gid"))
		s->have_gid = 1, s->gid = n;
	else if (!strcmp(k, "mtime"))
		s->have_mtime = 1, parse_time(v, &s->mtime, &s->nsec);
	else if (!strcmp(k, "GNU.sparse.realsize") || !strcmp(k, "GNU.sparse.size"))
		s->sparse = 1, s->realsize = n;
}

/* "LEN key=value\n" records. */
static int parse_pax(struct cb_tarscan *s, const char *p, size_t len)
{
	while (len > 0) {
		char *end, *eq;
		unsigned long rl = strtoul(p, &end, 10);

		if (end == p || *end != ' ' || rl > len || rl < 5 || p[rl - 1] != '\n')
			return cb_error("bad pax record at offset %llu", (unsigned long long)s->off);
		eq = memchr(end + 1, '=', (size_t)(p + rl - 1 - (end + 1)));
		if (!eq)
			return cb_error("bad pax record at offset %llu", (unsigned long long)s->off);
		*eq = '\0';
		pax_record(s, end + 1, eq + 1, (size_t)(p + rl - 1 - (eq + 1)));
		*eq = '=';
		p += rl;
		len -= rl;
	}
	return 0;
}

/* The name of a ustar header: prefix "/" name (or name alone). */
static char *ustar_name(const unsigned char *h)
{
	size_t nl = strnlen((const char *)h, 100);
	size_t pl = memcmp(h + 257, "ustar", 5) == 0 ? strnlen((const char *)h + 345, 155) : 0;

	if (pl)
		return cb_xasprintf("%.*s/%.*s", (int)pl, (const char *)h + 345, (int)nl, (const char *)h);
	return cb_xasprintf("%.*s", (int)nl, (const char *)h);
}

static uint32_t type_bits(char t)
{
	switch (t) {
	case '2': return S_IFLNK;
	case '3': return S_IFCHR;
	case '4': return S_IFBLK;
	case '5': return S_IFDIR;
	case '6': return S_IFIFO;
	default:  return S_IFREG;
	}
}

static int header_fields(struct cb_tarscan *s, struct cb_idx_rec *r, uint64_t *size)
{
	const unsigned char *h = s->hdr;
	uint64_t mode, v;

	if (num(h + 100, 8, &mode) < 0 || num(h + 124, 12, size) < 0)
		return cb_error("bad tar header at offset %llu", (unsigned long long)s->off - BLOCK);
	r->mode = (uint32_t)(mode & 07777) | type_bits((char)h[156]);
	r->flags = h[156] == '1' ? CB_IDX_HARDLINK : 0;
	r->uid = s->have_uid ? s->uid : (num(h + 108, 8, &v) < 0 ? 0 : v);
	r->gid = s->have_gid ? s->gid : (num(h + 116, 8, &v) < 0 ? 0 : v);
	if (s->have_mtime) {
		r->mtime = s->mtime;
		r->mtime_nsec = s->nsec;
	} else {
		r->mtime = num(h + 136, 12, &v) < 0 ? 0 : (int64_t)v;
	}
	if (h[156] == '3' || h[156] == '4') {
		r->dev_major = num(h + 329, 8, &v) < 0 ? 0 : (uint32_t)v;
		r->dev_minor = num(h + 337, 8, &v) < 0 ? 0 : (uint32_t)v;
	}
	if (s->have_size)
		*size = s->size;
	r->size = r->flags & CB_IDX_HARDLINK ? 0 : s->sparse ? s->realsize : *size;
	if (s->sparse)
		r->flags |= CB_IDX_SPARSE;
	return 0;
}

/* A member's last header is complete: record it, skip its data. */
static int member(struct cb_tarscan *s)
{
	struct cb_idx_rec r = { 0 };
	uint64_t size;
	char *name, *link;

	if (header_fields(s, &r, &size) < 0)
		return -1;
	r.hdr_off = s->have_start ? s->start : s->off - BLOCK;
	r.data_off = s->off;
	name = s->sparse && s->sparse_name ? cb_xstrdup(s->sparse_name)
	     : s->pax_path ? cb_xstrdup(s->pax_path)
	     : s->gnu_name ? cb_xstrdup(s->gnu_name) : ustar_name(s->hdr);
	link = s->pax_link ? cb_xstrdup(s->pax_link) : s->gnu_link ? cb_xstrdup(s->gnu_link)
	     : cb_xasprintf("%.*s", (int)strnlen((const char *)s->hdr + 157, 100),
			    (const char *)s->hdr + 157);
	cb_idx_list_add(&s->list, &r, name, link);
	free(name);
	free(link);
	member_reset(s);
	s->skip = (size + BLOCK - 1) / BLOCK * BLOCK;
	s->state = s->skip ? S_SKIP : S_HEADER;
	return 0;
}

static int header(struct cb_tarscan *s)
{
	char t = (char)s->hdr[156];
	uint64_t size;

	if (all_zero(s->hdr)) {
		if (++s->zero_blocks == 2)
			s->state = S_END;
		return 0;
	}
	if (s->zero_blocks || !checksum_ok(s->hdr))
		return cb_error("not a tar header at offset %llu", (unsigned long long)s->off - BLOCK);
	if (!s->have_start && t != 'g') {
		s->have_start = 1;
		s->start = s->off - BLOCK;
	}
	if (t != 'x' && t != 'g' && t != 'L' && t != 'K')
		return member(s);
	if (num(s->hdr + 124, 12, &size) < 0 || size > PAX_MAX)
		return cb_error("tar header at offset %llu: bad size", (unsigned long long)s->off - BLOCK);
	s->meta_type = t;
	s->meta_want = (size_t)size;
	s->meta_len = 0;
	s->meta = cb_xrealloc(s->meta, s->meta_want + 1);
	s->skip = (size + BLOCK - 1) / BLOCK * BLOCK - size;
	s->state = S_META;
	return 0;
}

static int meta_done(struct cb_tarscan *s)
{
	s->meta[s->meta_len] = '\0';
	s->state = s->skip ? S_SKIP : S_HEADER;
	if (s->meta_type == 'x')
		return parse_pax(s, s->meta, s->meta_len);
	if (s->meta_type == 'L')
		set_str(&s->gnu_name, s->meta, strnlen(s->meta, s->meta_len));
	else if (s->meta_type == 'K')
		set_str(&s->gnu_link, s->meta, strnlen(s->meta, s->meta_len));
	return 0;
}

/* Consume from p (at most len bytes) in the current state; bytes used. */
static ssize_t step(struct cb_tarscan *s, const unsigned char *p, size_t len)
{
	size_t k;

	switch (s->state) {
	case S_END:
		return (ssize_t)len;
	case S_SKIP:
		k = s->skip < len ? (size_t)s->skip : len;
		s->skip -= k;
		if (!s->skip)
			s->state = S_HEADER;
		return (ssize_t)k;
	case S_META:
		k = s->meta_want - s->meta_len < len ? s->meta_want - s->meta_len : len;
		memcpy(s->meta + s->meta_len, p, k);
		s->meta_len += k;
		s->off += k;
		if (s->meta_len == s->meta_want && meta_done(s) < 0)
			return -1;
		s->off -= k;
		return (ssize_t)k;
	case S_HEADER:
		k = BLOCK - s->hlen < len ? BLOCK - s->hlen : len;
		memcpy(s->hdr + s->hlen, p, k);
		s->hlen += k;
		if (s->hlen < BLOCK)
			return (ssize_t)k;
		s->hlen = 0;
		s->off += k;
		if (header(s) < 0)
			return -1;
		s->off -= k;
		return (ssize_t)k;
	}
	return -1;
}

int cb_tarscan_feed(void *scan, const void *buf, size_t len)
{
	struct cb_tarscan *s = scan;
	const unsigned char *p = buf;

	while (len > 0) {
		ssize_t k = step(s, p, len);

		if (k < 0)
			return -1;
		s->off += (uint64_t)k;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

int cb_tarscan_end(struct cb_tarscan *s)
{
	if (s->state != S_END)
		return cb_error("the tar stream ends before its end-of-archive blocks (offset %llu)",
				(unsigned long long)s->off);
	return 0;
}
