/*
 * cb_reuse_trust: the trust map. See include/cb_reuse_trust.h.
 *
 * File: "CBTRUST2", the archive name's length (4 bytes, little endian)
 * and bytes, its catalog's SHA-256 in hex (64), the count (8), the records
 * (trust key 32, key 32, length 8), the count of the archive's SHA-256
 * states (8) and those (offset 8, state CB_SINK_STATE_LEN: cb_sink.h),
 * and the SHA-256 of all before it. "CBTRUST1" (before the states) is
 * read too, without states. Read only when cbackup's own (our uid, no
 * write bits for others, a regular file, not followed through a symlink).
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
#include "cb_sink.h"
#include "cb_util.h"

#define MAGIC "CBTRUST2"
#define MAGIC_V1 "CBTRUST1"
#define HEX 64
#define REC (2 * CB_SEG_KEY + 8)
#define SREC (8 + CB_SINK_STATE_LEN)
#define MAP_MAX (256u << 20)

struct cb_trust_map {
	struct cb_codec_trust *v;
	size_t n;
	struct cb_sink_state *states;
	size_t n_states;
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

/* The states after the records (CBTRUST2): 0, or -1 if they do not fill
 * the rest exactly. */
static int parse_states(struct cb_trust_map *m, const unsigned char *p, size_t left)
{
	uint64_t n;

	if (left < 8)
		return -1;
	n = get_le(p, 8);
	if (n != (left - 8) / SREC || (left - 8) % SREC)
		return -1;
	m->n_states = (size_t)n;
	m->states = cb_xcalloc(m->n_states + 1, sizeof(*m->states));
	for (size_t i = 0; i < m->n_states; i++) {
		const unsigned char *s = p + 8 + i * SREC;

		m->states[i].off = get_le(s, 8);
		memcpy(m->states[i].st, s + 8, CB_SINK_STATE_LEN);
		if (i > 0 && m->states[i].off <= m->states[i - 1].off)
			return -1;   /* sorted, as cb_sink_resume wants them */
	}
	return 0;
}

/* Parse and check buf: the records, or NULL with *why. */
static struct cb_trust_map *parse(const unsigned char *b, size_t len, const char *name,
				  const char *idx_hex, const char **why)
{
	unsigned char md[CB_SEG_KEY];
	size_t nl, head, body;
	uint64_t n;
	struct cb_trust_map *m;
	int v2;

	*why = "the trust map is damaged";
	if (len < 8 + 4 + HEX + 8 + CB_SEG_KEY || (memcmp(b, MAGIC, 8) && memcmp(b, MAGIC_V1, 8)))
		return NULL;
	v2 = !memcmp(b, MAGIC, 8);
	EVP_Digest(b, len - CB_SEG_KEY, md, NULL, EVP_sha256(), NULL);
	nl = (size_t)get_le(b + 8, 4);
	head = 12 + nl + HEX + 8;
	if (memcmp(md, b + len - CB_SEG_KEY, CB_SEG_KEY) || nl > len || head > len - CB_SEG_KEY)
		return NULL;
	n = get_le(b + head - 8, 8);
	body = len - CB_SEG_KEY - head;
	if (n > body / REC || (!v2 && n * REC != body))
		return NULL;
	*why = "it was written for another archive than the previous one";
	if (strlen(name) != nl || memcmp(b + 12, name, nl) || strlen(idx_hex) != HEX ||
	    memcmp(b + 12 + nl, idx_hex, HEX))
		return NULL;
	m = cb_xcalloc(1, sizeof(*m));
	if (v2 && parse_states(m, b + head + n * REC, body - n * REC) < 0) {
		*why = "the trust map is damaged";
		cb_trust_map_free(m);
		return NULL;
	}
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

const struct cb_sink_state *cb_trust_map_states(const struct cb_trust_map *m, size_t *n)
{
	*n = m ? m->n_states : 0;
	return *n ? m->states : NULL;
}

void cb_trust_map_free(struct cb_trust_map *m)
{
	if (!m)
		return;
	free(m->v);
	free(m->states);
	free(m);
}

int cb_trust_map_save(const char *path, const char *name, const char *idx_hex,
		      const struct cb_codec_trust *v, size_t n, const struct cb_sink_state *states,
		      size_t n_states)
{
	size_t nl = strlen(name), head = 12 + nl + HEX + 8, body = n * REC + 8 + n_states * SREC;
	size_t len = head + body + CB_SEG_KEY;
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
	put_le(b + head + n * REC, n_states, 8);
	for (size_t i = 0; i < n_states; i++) {
		unsigned char *p = b + head + n * REC + 8 + i * SREC;

		put_le(p, states[i].off, 8);
		memcpy(p + 8, states[i].st, CB_SINK_STATE_LEN);
	}
	EVP_Digest(b, len - CB_SEG_KEY, b + len - CB_SEG_KEY, NULL, EVP_sha256(), NULL);
	ret = cb_write_file_replace_bytes(path, b, len, 0600);
	free(b);
	return ret;
}
