/*
 * ARCHIVE.idx: build, write, load, look up. See include/cb_index.h; the
 * format is documented in man/cbackup-idx.5. All numbers little-endian:
 *
 *   header   64 bytes: magic "CBIDX\0\0\1", u32 version 2 (1 is read
 *            too), u32 codec, u64 entries, u64 units, u64 string table
 *            bytes, u64 tar size, u64 archive size, u64 flags (0)
 *   entries  64 bytes each, archive order (ENT_* below)
 *   order    u32 per entry: entry numbers sorted by path key, padded to 8
 *   units    24 bytes each: u64 uncompressed offset, u64 compressed offset,
 *            u32 CRC-32 of the unit's archive bytes, u32 0 (version 1:
 *            16 bytes, no CRC)
 *   strings  NUL-terminated paths and link targets
 *   keys     (flags bit 0) u64 count, then 96 bytes per segment: u64
 *            uncompressed offset, u64 length, u64 compressed offset, u64
 *            length, its key, the SHA-256 of its compressed bytes
 *   digest   SHA-256 of everything before it
 *
 * One idea in 635 lines: the file format, built, written, loaded and
 * checked by the same offsets (questions to a loaded catalog are
 * index_query.c's).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "cb_index.h"
#include "cb_private.h"
#include "cb_util.h"
#include "index_int.h"

static const unsigned char MAGIC[8] = { 'C', 'B', 'I', 'D', 'X', 0, 0, 1 };

static void put16(unsigned char *p, uint32_t v) { p[0] = v & 0xff; p[1] = (v >> 8) & 0xff; }

static void put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (v >> (8 * i)) & 0xff; }

static void put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (v >> (8 * i)) & 0xff; }

static uint32_t get16(const unsigned char *p) { return p[0] | (uint32_t)p[1] << 8; }

uint32_t idx_get32(const unsigned char *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint64_t idx_get64(const unsigned char *p)
{
	return idx_get32(p) | (uint64_t)idx_get32(p + 4) << 32;
}

/* ---- the list the scanner fills ---- */

static void put_entry(unsigned char *e, const struct cb_idx_rec *r, uint64_t path_off,
		      uint64_t link_off, size_t path_len, size_t link_len)
{
	put64(e + ENT_HDR, r->hdr_off);
	put64(e + ENT_SIZE, r->size);
	put64(e + ENT_MTIME, (uint64_t)r->mtime);
	put32(e + ENT_NSEC, r->mtime_nsec);
	put32(e + ENT_MODE, r->mode);
	put32(e + ENT_UID, r->uid);
	put32(e + ENT_GID, r->gid);
	put32(e + ENT_PATH, (uint32_t)path_off);
	put32(e + ENT_LINK, (uint32_t)link_off);
	put32(e + ENT_HLEN, (uint32_t)(r->data_off - r->hdr_off));
	put16(e + ENT_PLEN, (uint32_t)path_len);
	put16(e + ENT_LLEN, (uint32_t)link_len);
	put32(e + ENT_DEV, (r->dev_major & 0xfff) << 20 | (r->dev_minor & 0xfffff));
	put32(e + ENT_FLAGS, r->flags);
}

static uint64_t add_str(struct cb_idx_list *l, const char *s, size_t *len)
{
	size_t n = strlen(s);
	uint64_t off = l->str_len;

	if (l->str_len + n + 1 > l->str_cap) {
		l->str_cap = (l->str_len + n + 1) * 3 / 2;  /* memory goes by entries */
		l->str = cb_xrealloc(l->str, l->str_cap);
	}
	memcpy(l->str + l->str_len, s, n + 1);
	l->str_len += n + 1;
	*len = n;
	return off;
}

/* Packed as the .idx holds it; what the format cannot hold is noted here
 * and refused when the .idx is built. */
void cb_idx_list_add(struct cb_idx_list *l, const struct cb_idx_rec *r, const char *path,
		     const char *link)
{
	size_t plen, llen;
	uint64_t poff, loff;

	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap + l->cap / 2 : 1024;
		l->ent = cb_xrealloc(l->ent, l->cap * ENT);
	}
	poff = add_str(l, path, &plen);
	loff = add_str(l, link, &llen);
	if (!l->too_long && (plen > PATH_MAX_IDX || llen > PATH_MAX_IDX ||
			     r->data_off - r->hdr_off > UINT32_MAX))
		l->too_long = l->n + 1;
	put_entry(l->ent + l->n * ENT, r, poff, loff, plen, llen);
	l->n++;
}

void cb_idx_list_release(struct cb_idx_list *l)
{
	free(l->ent);
	free(l->str);
	memset(l, 0, sizeof(*l));
}

/* ---- keys: "./a/b/" (and "/a/b") is "a/b"; '/' sorts first, so a subtree is one run ---- */

const char *cb_idx_key(const char *path, size_t *len)
{
	size_t n;

	while (*path == '/')
		path++;
	while (path[0] == '.' && path[1] == '/')
		for (path += 2; *path == '/'; path++)
			;
	if (path[0] == '.' && path[1] == '\0')
		path++;
	n = strlen(path);
	while (n > 0 && path[n - 1] == '/')
		n--;
	*len = n;
	return path;
}

int idx_key_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	size_t n = al < bl ? al : bl;

	for (size_t i = 0; i < n; i++) {
		unsigned ca = a[i] == '/' ? 1 : (unsigned char)a[i];
		unsigned cb = b[i] == '/' ? 1 : (unsigned char)b[i];

		if (ca != cb)
			return ca < cb ? -1 : 1;
	}
	return al < bl ? -1 : al > bl;
}

/* ---- building ---- */

static int order_cmp(const void *a, const void *b, void *ctx)
{
	const struct cb_idx_list *l = ctx;
	const unsigned char *ea = l->ent + (uint64_t)*(const uint32_t *)a * ENT;
	const unsigned char *eb = l->ent + (uint64_t)*(const uint32_t *)b * ENT;
	size_t al, bl;
	const char *ka = cb_idx_key(l->str + idx_get32(ea + ENT_PATH), &al);
	const char *kb = cb_idx_key(l->str + idx_get32(eb + ENT_PATH), &bl);
	int c = idx_key_cmp(ka, al, kb, bl);

	/* equal keys (a name twice): archive order, so the sort is stable */
	if (c == 0) {
		uint64_t ha = idx_get64(ea + ENT_HDR), hb = idx_get64(eb + ENT_HDR);

		c = ha < hb ? -1 : ha > hb;
	}
	return c;
}

static int check_list(const struct cb_idx_list *l)
{
	if (l->n > UINT32_MAX || l->str_len > UINT32_MAX)
		return cb_error("catalog: too many entries or names for the .idx format");
	if (l->too_long)
		return cb_error("catalog: entry '%s' too long for the .idx format",
				l->str + idx_get32(l->ent + (l->too_long - 1) * ENT + ENT_PATH));
	return 0;
}

static void sha256(const unsigned char *buf, size_t len, unsigned char *md)
{
	unsigned int n = 0;

	EVP_Digest(buf, len, md, &n, EVP_sha256(), NULL);
}

static void put_header(unsigned char *b, const struct cb_idx_list *l, uint64_t n_units,
		       enum cb_compress type, uint64_t tar_size, uint64_t archive_size, int keys)
{
	memcpy(b, MAGIC, 8);
	put32(b + 8, VERSION);
	put32(b + 12, (uint32_t)type);
	put64(b + 16, l->n);
	put64(b + 24, n_units);
	put64(b + 32, l->str_len);
	put64(b + 40, tar_size);
	put64(b + 48, archive_size);
	put64(b + 56, keys ? FLAG_KEYS : 0);
}

/* The .idx before its digest, in file order: header, entries and strings
 * as the scanner holds them, the path order and units made here. */
enum { P_HDR, P_ENT, P_ORDER, P_UNITS, P_STR, P_KEYS, N_PARTS };

struct idx_parts {
	unsigned char hdr[HDR];
	uint32_t *order;
	unsigned char *units, *keys;
	struct iovec v[N_PARTS];
	size_t len;
};

/* Entry numbers sorted by path key, as u32 little-endian, zero-padded to 8 bytes. */
static uint32_t *sorted_order(const struct cb_idx_list *l, size_t *len)
{
	uint32_t *order = cb_xcalloc(l->n + 2, sizeof(*order));

	for (uint64_t i = 0; i < l->n; i++)
		order[i] = (uint32_t)i;
	qsort_r(order, l->n, sizeof(*order), order_cmp, (void *)l);
	for (uint64_t i = 0; i < l->n; i++)
		put32((unsigned char *)&order[i], order[i]);
	*len = (l->n * 4 + 7) / 8 * 8;
	return order;
}

/* The keys section: count, then the segments. */
static unsigned char *keys_part(const struct cb_codec_segs *segs, size_t *len)
{
	unsigned char *k;

	*len = 0;
	if (!segs)
		return NULL;
	*len = 8 + segs->n * SEG;
	k = cb_xmalloc(*len);
	put64(k, segs->n);
	for (size_t i = 0; i < segs->n; i++) {
		unsigned char *r = k + 8 + i * SEG;

		put64(r, segs->v[i].u_off);
		put64(r + 8, segs->v[i].u_len);
		put64(r + 16, segs->v[i].c_off);
		put64(r + 24, segs->v[i].c_len);
		memcpy(r + 32, segs->v[i].key, 32);
		memcpy(r + 64, segs->v[i].cdig, 32);
	}
	return k;
}

static int make_parts(const struct cb_idx_list *l, uint64_t tar_size,
		      const struct cb_codec_units *units, const struct cb_codec_segs *segs,
		      enum cb_compress type, uint64_t archive_size, struct idx_parts *p)
{
	uint64_t nu = units && type != CB_COMPRESS_NONE ? units->n : 0;
	size_t order_len, keys_len;

	memset(p, 0, sizeof(*p));
	if (check_list(l) < 0)
		return -1;
	segs = type != CB_COMPRESS_NONE ? segs : NULL;
	put_header(p->hdr, l, nu, type, tar_size, archive_size, segs != NULL);
	p->keys = keys_part(segs, &keys_len);
	p->order = sorted_order(l, &order_len);
	p->units = cb_xmalloc(nu ? nu * UNIT : 1);
	for (uint64_t i = 0; i < nu; i++) {
		put64(p->units + i * UNIT, units->v[i].u_off);
		put64(p->units + i * UNIT + 8, units->v[i].c_off);
		put32(p->units + i * UNIT + 16, units->v[i].crc);
		put32(p->units + i * UNIT + 20, 0);
	}
	p->v[P_HDR] = (struct iovec){ p->hdr, HDR };
	p->v[P_ENT] = (struct iovec){ l->ent, l->n * ENT };
	p->v[P_ORDER] = (struct iovec){ p->order, order_len };
	p->v[P_UNITS] = (struct iovec){ p->units, nu * UNIT };
	p->v[P_STR] = (struct iovec){ l->str, l->str_len };
	p->v[P_KEYS] = (struct iovec){ p->keys, keys_len };
	for (int i = 0; i < N_PARTS; i++)
		p->len += p->v[i].iov_len;
	return 0;
}

static void free_parts(struct idx_parts *p)
{
	free(p->order);
	free(p->units);
	free(p->keys);
}

int cb_idx_build_list(const struct cb_idx_list *l, uint64_t tar_size,
		      const struct cb_codec_units *units, enum cb_compress type,
		      uint64_t archive_size, unsigned char **buf, size_t *len)
{
	struct idx_parts p;
	unsigned char *b;
	size_t at = 0;

	if (make_parts(l, tar_size, units, NULL, type, archive_size, &p) < 0)
		return -1;
	b = cb_xmalloc(p.len + DIGEST);
	for (int i = 0; i < N_PARTS; i++) {
		if (p.v[i].iov_len)
			memcpy(b + at, p.v[i].iov_base, p.v[i].iov_len);
		at += p.v[i].iov_len;
	}
	sha256(b, p.len, b + p.len);
	free_parts(&p);
	*buf = b;
	*len = p.len + DIGEST;
	return 0;
}

static void hex_digest(const unsigned char *md, char *hex)
{
	for (int i = 0; i < DIGEST; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

int cb_idx_write_file(const char *idx_path, const unsigned char *buf, size_t len, char *hex)
{
	unsigned char md[DIGEST];

	sha256(buf, len, md);
	hex_digest(md, hex);
	/* what the archive gives away (names, owners), with its mode */
	return cb_write_file_replace_bytes(idx_path, buf, len, 0640);
}

/* Writing the parts straight from the scanner's memory: the body's digest
 * (the trailer) and the whole file's (for the .sha256) as they pass. */
struct idx_out {
	const struct idx_parts *p;
	unsigned char file_md[DIGEST];
};

static int digest_two(EVP_MD_CTX *body, EVP_MD_CTX *file, const void *buf, size_t len)
{
	return EVP_DigestUpdate(body, buf, len) && EVP_DigestUpdate(file, buf, len);
}

static int write_parts(int fd, void *ctx)
{
	struct idx_out *o = ctx;
	EVP_MD_CTX *body = EVP_MD_CTX_new(), *file = EVP_MD_CTX_new();
	unsigned char md[DIGEST];
	int ret = -1;

	errno = ENOMEM;
	if (!body || !file || !EVP_DigestInit_ex(body, EVP_sha256(), NULL) ||
	    !EVP_DigestInit_ex(file, EVP_sha256(), NULL))
		goto out;
	for (int i = 0; i < N_PARTS; i++)
		if (!digest_two(body, file, o->p->v[i].iov_base, o->p->v[i].iov_len) ||
		    cb_write_all(fd, o->p->v[i].iov_base, o->p->v[i].iov_len) < 0)
			goto out;
	if (!EVP_DigestFinal_ex(body, md, NULL) || !EVP_DigestUpdate(file, md, DIGEST) ||
	    cb_write_all(fd, md, DIGEST) < 0 || !EVP_DigestFinal_ex(file, o->file_md, NULL))
		goto out;
	ret = 0;
out:
	EVP_MD_CTX_free(body);
	EVP_MD_CTX_free(file);
	return ret;
}

int cb_idx_write_list(const char *idx_path, const struct cb_idx_list *l, uint64_t tar_size,
		      const struct cb_codec_units *units, const struct cb_codec_segs *segs,
		      enum cb_compress type, uint64_t archive_size, char *hex)
{
	struct idx_parts p;
	struct idx_out o = { &p, { 0 } };
	int ret;

	if (make_parts(l, tar_size, units, segs, type, archive_size, &p) < 0)
		return -1;
	ret = cb_write_file_replace_with(idx_path, 0640, write_parts, &o);
	if (ret == 0)
		hex_digest(o.file_md, hex);
	free_parts(&p);
	return ret;
}

/* ---- loading: every number checked before it is used ---- */

static int bad(const char *what)
{
	return cb_error("damaged catalog: %s", what);
}

static int check_sizes(struct cb_idx *x)
{
	uint64_t rest, need;

	if (x->size < HDR + DIGEST || memcmp(x->map, MAGIC, 8) != 0)
		return bad("not a cbackup .idx (magic)");
	x->version = idx_get32(x->map + 8);
	if (x->version != VERSION && x->version != 1)
		return bad("unknown version");
	x->unit_len = x->version == 1 ? UNIT_V1 : UNIT;
	x->codec = (enum cb_compress)idx_get32(x->map + 12);
	x->n_entries = idx_get64(x->map + 16);
	x->n_units = idx_get64(x->map + 24);
	x->strtab_len = idx_get64(x->map + 32);
	x->tar_size = idx_get64(x->map + 40);
	x->flags = idx_get64(x->map + 56);
	rest = x->size - HDR - DIGEST;
	if (x->flags & ~(uint64_t)FLAG_KEYS)
		return bad("unknown flags");
	if (x->codec > CB_COMPRESS_ZSTD || x->n_entries > rest / (ENT + 4) ||
	    x->n_units > rest / x->unit_len || x->strtab_len > rest)
		return bad("counts exceed the file");
	need = x->n_entries * ENT + (x->n_entries * 4 + 7) / 8 * 8 + x->n_units * x->unit_len +
	       x->strtab_len;
	if (x->flags & FLAG_KEYS) {
		if (need > rest || rest - need < 8)
			return bad("counts exceed the file");
		x->n_segs = idx_get64(x->map + HDR + need);
		if (x->n_segs > (rest - need - 8) / SEG)
			return bad("counts exceed the file");
		x->segs = x->map + HDR + need + 8;
		need += 8 + x->n_segs * SEG;
	}
	if (need != rest)
		return bad("sections do not add up to the file size");
	x->entries = x->map + HDR;
	x->order = x->entries + x->n_entries * ENT;
	x->units = x->order + (x->n_entries * 4 + 7) / 8 * 8;
	x->strtab = x->units + x->n_units * x->unit_len;
	return 0;
}

static int check_str(const struct cb_idx *x, uint32_t off, uint32_t len)
{
	return (uint64_t)off + len < x->strtab_len && x->strtab[off + len] == '\0' &&
	       memchr(x->strtab + off, '\0', len) == NULL;
}

/* The member's data, as the tar stream holds it, lies in the stream: what
 * a reader (mount) reads by the catalog's word alone. A sparse member's
 * size is its real size (its stored data is smaller: libarchive reads it
 * by its map); a hardlink has no data of its own. */
static int size_fits(const struct cb_idx *x, const unsigned char *e, uint64_t data_off)
{
	uint64_t size = idx_get64(e + ENT_SIZE), flags = idx_get32(e + ENT_FLAGS);

	if (flags & (CB_IDX_SPARSE | CB_IDX_HARDLINK))
		return !(flags & CB_IDX_HARDLINK) || size == 0;
	return size <= x->tar_size - data_off;
}

static int check_entries(const struct cb_idx *x)
{
	uint64_t prev = 0;

	for (uint64_t i = 0; i < x->n_entries; i++) {
		const unsigned char *e = x->entries + i * ENT;
		uint64_t h = idx_get64(e + ENT_HDR), hl = idx_get32(e + ENT_HLEN);

		if (!check_str(x, idx_get32(e + ENT_PATH), get16(e + ENT_PLEN)) || get16(e + ENT_PLEN) == 0 ||
		    !check_str(x, idx_get32(e + ENT_LINK), get16(e + ENT_LLEN)))
			return bad("entry name outside the string table");
		if ((i > 0 && h <= prev) || h > x->tar_size || hl < 512 || hl > x->tar_size - h ||
		    idx_get32(e + ENT_NSEC) >= 1000000000u)
			return bad("entry offsets out of order or beyond the archive");
		if (!size_fits(x, e, h + hl))
			return bad("entry data runs past the tar stream");
		prev = h;
	}
	return 0;
}

static int check_order(const struct cb_idx *x)
{
	unsigned char *seen = cb_xcalloc(x->n_entries / 8 + 1, 1);
	int ret = 0;
	size_t pl = 0, kl;
	const char *prev = NULL, *k;

	for (uint64_t i = 0; i < x->n_entries && ret == 0; i++) {
		uint32_t v = idx_get32(x->order + 4 * i);
		struct cb_idx_entry e;

		if (v >= x->n_entries || (seen[v / 8] & (1u << (v % 8)))) {
			ret = bad("path order is not a permutation");
			break;
		}
		seen[v / 8] |= 1u << (v % 8);
		cb_idx_entry(x, v, &e);
		k = cb_idx_key(e.path, &kl);
		if (prev && idx_key_cmp(prev, pl, k, kl) > 0)
			ret = bad("path order is not sorted");
		prev = k;
		pl = kl;
	}
	free(seen);
	return ret;
}

static int check_units(const struct cb_idx *x)
{
	for (uint64_t i = 0; i < x->n_units; i++) {
		const unsigned char *u = x->units + i * x->unit_len;
		uint64_t uo = idx_get64(u), co = idx_get64(u + 8);

		if ((i == 0 && uo != 0) || uo >= x->tar_size || co >= x->archive_size)
			return bad("unit offset beyond the archive");
		if (x->version > 1 && idx_get32(u + 20) != 0)
			return bad("reserved unit field set");
		if (i > 0 && (uo <= idx_get64(u - x->unit_len) || co <= idx_get64(u - x->unit_len + 8)))
			return bad("unit table out of order");
	}
	return 0;
}

/* Segments: ascending and contiguous from 0, within the tar stream and
 * the archive. */
static int check_segs(const struct cb_idx *x)
{
	uint64_t u = 0, c = 0;

	for (uint64_t i = 0; i < x->n_segs; i++) {
		struct cb_codec_seg g;

		cb_idx_seg(x, i, &g);
		if (g.u_off != u || g.u_len == 0 || g.u_len > x->tar_size - u || g.c_off < c ||
		    g.c_len == 0 || g.c_off > x->archive_size || g.c_len > x->archive_size - g.c_off)
			return bad("segment table out of order or beyond the archive");
		u = g.u_off + g.u_len;
		c = g.c_off + g.c_len;
	}
	if (x->n_segs && u != x->tar_size)
		return bad("segments do not cover the tar stream");
	return 0;
}

static int check_all(struct cb_idx *x, uint64_t archive_size)
{
	if (check_sizes(x) < 0)
		return -1;
	x->archive_size = idx_get64(x->map + 48);
	if (archive_size && x->archive_size != archive_size)
		return cb_error("catalog is of another archive (it says %llu bytes, the archive has %llu)",
				(unsigned long long)x->archive_size, (unsigned long long)archive_size);
	return check_entries(x) < 0 || check_order(x) < 0 || check_units(x) < 0 || check_segs(x) < 0
	       ? -1 : 0;
}

int cb_idx_load(struct cb_idx *x, unsigned char *buf, size_t len, uint64_t archive_size)
{
	memset(x, 0, sizeof(*x));
	x->map = buf;
	x->size = len;
	if (check_all(x, archive_size) < 0) {
		cb_idx_close(x);
		return -1;
	}
	return 0;
}

int cb_idx_open(struct cb_idx *x, const char *path, uint64_t archive_size)
{
	struct stat st;
	int fd = cb_open_regular(path, 0, "catalog", &st);
	unsigned char *buf;

	memset(x, 0, sizeof(*x));
	if (fd < 0)
		return -1;
	/* Read, not mapped: a catalog in a dump directory others can write
	 * may be truncated or rewritten while it is in use (a mount holds it
	 * for days); a mapping would then raise SIGBUS or change bytes under
	 * what check_all() checked. The checks touch every byte anyway. */
	if (st.st_size <= 0 || (uint64_t)st.st_size > SIZE_MAX) {
		close(fd);
		return cb_error("catalog '%s' is empty", path);
	}
	buf = cb_xmalloc((size_t)st.st_size);
	errno = 0;
	if (cb_pread_all(fd, buf, (size_t)st.st_size, 0) < 0) {
		int e = errno;
		close(fd);
		free(buf);
		return cb_error("catalog '%s' cannot be read whole: %s", path,
				e ? strerror(e) : "it got shorter while read");
	}
	close(fd);
	x->map = buf;
	x->size = (size_t)st.st_size;
	if (check_all(x, archive_size) < 0) {
		cb_idx_close(x);
		return cb_error_prefix("'%s'", path);
	}
	return 0;
}

void cb_idx_seg(const struct cb_idx *x, uint64_t i, struct cb_codec_seg *g)
{
	const unsigned char *r = x->segs + i * SEG;

	g->u_off = idx_get64(r);
	g->u_len = idx_get64(r + 8);
	g->c_off = idx_get64(r + 16);
	g->c_len = idx_get64(r + 24);
	memcpy(g->key, r + 32, 32);
	memcpy(g->cdig, r + 64, 32);
}

int cb_idx_check_digest(const struct cb_idx *x)
{
	unsigned char md[DIGEST];

	sha256(x->map, x->size - DIGEST, md);
	if (memcmp(md, x->map + x->size - DIGEST, DIGEST))
		return bad("its SHA-256 does not match its contents");
	return 0;
}

void cb_idx_close(struct cb_idx *x)
{
	free((void *)x->map);
	memset(x, 0, sizeof(*x));
}

void cb_idx_entry(const struct cb_idx *x, uint64_t i, struct cb_idx_entry *e)
{
	const unsigned char *p = x->entries + i * ENT;
	uint32_t dev = idx_get32(p + ENT_DEV);

	e->path = (const char *)x->strtab + idx_get32(p + ENT_PATH);
	e->link = (const char *)x->strtab + idx_get32(p + ENT_LINK);
	e->hdr_off = idx_get64(p + ENT_HDR);
	e->data_off = e->hdr_off + idx_get32(p + ENT_HLEN);
	e->size = idx_get64(p + ENT_SIZE);
	e->mtime = (int64_t)idx_get64(p + ENT_MTIME);
	e->mtime_nsec = idx_get32(p + ENT_NSEC);
	e->mode = idx_get32(p + ENT_MODE);
	e->uid = idx_get32(p + ENT_UID);
	e->gid = idx_get32(p + ENT_GID);
	e->dev_major = dev >> 20;
	e->dev_minor = dev & 0xfffff;
	e->flags = idx_get32(p + ENT_FLAGS);
}
