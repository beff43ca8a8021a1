/*
 * SHA-256 states of an archive, saved at segment ends and loaded to resume
 * the next archive's .sha256 (include/cb_sink.h). OpenSSL's EVP interface
 * cannot hand a state out; its SHA256_CTX (deprecated in OpenSSL 3, kept,
 * the same SHA-NI code under it) is a plain struct that can. A state is
 * stored field by field, little endian, and checked when loaded against
 * the offset it claims: the bit count, the bytes of the partial block.
 */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <stdlib.h>
#include <string.h>
#include <openssl/sha.h>

#include "cb_sink.h"
#include "sink_int.h"

static void put32(unsigned char **p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		*(*p)++ = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char **p)
{
	uint32_t v = 0;

	for (int i = 3; i >= 0; i--)
		v = v << 8 | (*p)[i];
	*p += 4;
	return v;
}

void sink_state_save(const SHA256_CTX *c, uint64_t off, struct cb_sink_state *out)
{
	unsigned char *p = out->st;

	out->off = off;
	for (int i = 0; i < 8; i++)
		put32(&p, c->h[i]);
	put32(&p, c->Nl);
	put32(&p, c->Nh);
	memcpy(p, c->data, sizeof(c->data));   /* bytes of the partial block */
	p += sizeof(c->data);
	put32(&p, c->num);
	put32(&p, c->md_len);
}

int sink_state_load(const struct cb_sink_state *in, SHA256_CTX *c)
{
	const unsigned char *p = in->st;
	uint64_t bits = in->off * 8;

	SHA256_Init(c);
	for (int i = 0; i < 8; i++)
		c->h[i] = get32(&p);
	c->Nl = get32(&p);
	c->Nh = get32(&p);
	memcpy(c->data, p, sizeof(c->data));
	p += sizeof(c->data);
	c->num = get32(&p);
	c->md_len = get32(&p);
	if (c->Nl != (uint32_t)bits || c->Nh != (uint32_t)(bits >> 32) ||
	    c->num != in->off % SHA256_CBLOCK || c->md_len != SHA256_DIGEST_LENGTH) {
		SHA256_Init(c);
		return -1;
	}
	return 0;
}

static int cmp_off(const void *key, const void *elem)
{
	uint64_t k = *(const uint64_t *)key, o = ((const struct cb_sink_state *)elem)->off;

	return k < o ? -1 : k > o;
}

const struct cb_sink_state *sink_state_find(const struct cb_sink_state *v, size_t n, uint64_t off)
{
	return n ? bsearch(&off, v, n, sizeof(*v), cmp_off) : NULL;
}
