/*
 * cb_reuse_trust: the trust map. See include/cb_reuse_trust.h.
 *
 * File: "CBTRUST1", the archive name's length (4 bytes, little endian)
 * and bytes, its catalog's SHA-256 in hex (64), the count (8), the records
 * (trust key 32, key 32, length 8) and the SHA-256 of all before it. Read
 * only when cbackup's own (our uid, no write bits for others, a regular
 * file, not followed through a symlink).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "cb_private.h"
#include "cb_reuse_trust.h"
#include "cb_util.h"

#define MAGIC "CBTRUST1"
#define HEX 64
#define REC (2 * CB_SEG_KEY + 8)
#define MAP_MAX (256u << 20)

struct cb_trust_map {
	struct cb_codec_trust *v;
	size_t n;
};

static uint64_t get_le(const unsigned char *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static void put_le(unsigned char *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static int cmp_tkey(const void *a, const void *b)
{
	return memcmp(a, b, CB_SEG_KEY);
}

/* The file's bytes (*len), or NULL with *why. */
static unsigned char *read_map(const char *path, size_t *len, const char **why)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	unsigned char *buf = NULL;
	struct stat st;

	*why = "";
	if (fd < 0) {
		if (errno != ENOENT)
			*why = "the trust map cannot be opened";
		return NULL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022) || st.st_size < 8 || (uint64_t)st.st_size > MAP_MAX)
		*why = "the trust map is not cbackup's own";
	else if (cb_read_all(fd, (buf = cb_xmalloc((size_t)st.st_size)), (size_t)st.st_size) < 0) {
		*why = "the trust map cannot be read";
		free(buf);
		buf = NULL;
	}
	*len = buf ? (size_t)st.st_size : 0;
	close(fd);
	return buf;
}

/* Parse and check buf: the records, or NULL with *why. */
static struct cb_trust_map *parse(const unsigned char *b, size_t len, const char *name,
				  const char *idx_hex, const char **why)
{
	unsigned char md[CB_SEG_KEY];
	size_t nl, head;
	uint64_t n;
	struct cb_trust_map *m;

	*why = "the trust map is damaged";
	if (len < 8 + 4 + HEX + 8 + CB_SEG_KEY || memcmp(b, MAGIC, 8))
		return NULL;
	EVP_Digest(b, len - CB_SEG_KEY, md, NULL, EVP_sha256(), NULL);
	nl = (size_t)get_le(b + 8, 4);
	head = 12 + nl + HEX + 8;
	if (memcmp(md, b + len - CB_SEG_KEY, CB_SEG_KEY) || nl > len || head > len - CB_SEG_KEY)
		return NULL;
	n = get_le(b + head - 8, 8);
	if (n != (len - CB_SEG_KEY - head) / REC || (len - CB_SEG_KEY - head) % REC)
		return NULL;
	*why = "it was written for another archive than the previous one";
	if (strlen(name) != nl || memcmp(b + 12, name, nl) || strlen(idx_hex) != HEX ||
	    memcmp(b + 12 + nl, idx_hex, HEX))
		return NULL;
	m = cb_xcalloc(1, sizeof(*m));
	m->n = (size_t)n;
	m->v = cb_xcalloc(m->n + 1, sizeof(*m->v));
	for (size_t i = 0; i < m->n; i++) {
		const unsigned char *p = b + head + i * REC;

		memcpy(m->v[i].tkey, p, CB_SEG_KEY);
		memcpy(m->v[i].key, p + CB_SEG_KEY, CB_SEG_KEY);
		m->v[i].u_len = get_le(p + 2 * CB_SEG_KEY, 8);
	}
	qsort(m->v, m->n, sizeof(*m->v), cmp_tkey);
	*why = "";
	return m;
}

struct cb_trust_map *cb_trust_map_load(const char *path, const char *name, const char *idx_hex,
				       const char **why)
{
	size_t len;
	unsigned char *buf = read_map(path, &len, why);
	struct cb_trust_map *m = buf ? parse(buf, len, name, idx_hex, why) : NULL;

	free(buf);
	return m;
}

static int lookup(void *ctx, const unsigned char *tkey, uint64_t u_len, unsigned char *key)
{
	const struct cb_trust_map *m = ctx;
	const struct cb_codec_trust *t = bsearch(tkey, m->v, m->n, sizeof(*m->v), cmp_tkey);

	if (!t || t->u_len != u_len)
		return 0;
	memcpy(key, t->key, CB_SEG_KEY);
	return 1;
}

void cb_trust_map_attach(struct cb_trust_map *m, struct cb_codec_writer *w)
{
	cb_codec_set_trust(w, lookup, m);
}

void cb_trust_map_free(struct cb_trust_map *m)
{
	if (!m)
		return;
	free(m->v);
	free(m);
}

int cb_trust_map_save(const char *path, const char *name, const char *idx_hex,
		      const struct cb_codec_trust *v, size_t n)
{
	size_t nl = strlen(name), head = 12 + nl + HEX + 8, len = head + n * REC + CB_SEG_KEY;
	unsigned char *b;
	int ret;

	if (strlen(idx_hex) != HEX)
		return cb_error("no catalog digest for the trust map");
	b = cb_xmalloc(len);
	memcpy(b, MAGIC, 8);
	put_le(b + 8, nl, 4);
	memcpy(b + 12, name, nl);
	memcpy(b + 12 + nl, idx_hex, HEX);
	put_le(b + head - 8, n, 8);
	for (size_t i = 0; i < n; i++) {
		unsigned char *p = b + head + i * REC;

		memcpy(p, v[i].tkey, CB_SEG_KEY);
		memcpy(p + CB_SEG_KEY, v[i].key, CB_SEG_KEY);
		put_le(p + 2 * CB_SEG_KEY, v[i].u_len, 8);
	}
	EVP_Digest(b, len - CB_SEG_KEY, b + len - CB_SEG_KEY, NULL, EVP_sha256(), NULL);
	ret = cb_write_file_replace_bytes(path, b, len, 0600);
	free(b);
	return ret;
}
