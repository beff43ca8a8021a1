/*
 * XXH64 (seed 0), as the zstd format's content checksum defines it: the
 * frames of raw blocks that codec_zstd.c writes itself carry the low 32
 * bits, as libzstd's own frames do, so that `zstd -t` and every decoder
 * check stored units too. libzstd keeps its copy private. Written from the
 * xxHash specification (doc/xxhash_spec.md).
 */
#include <string.h>

#include "codec_int.h"

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static uint64_t rotl(uint64_t x, int r) { return x << r | x >> (64 - r); }

/* little-endian loads (the format's byte order, whatever the host's) */
static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint32_t le32(const unsigned char *p)
{
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t round64(uint64_t acc, uint64_t in)
{
	return rotl(acc + in * P2, 31) * P1;
}

static uint64_t merge(uint64_t h, uint64_t v)
{
	return (h ^ round64(0, v)) * P1 + P4;
}

/* the 32-byte stripes of an input of at least 32 bytes; *pp past them */
static uint64_t stripes(const unsigned char **pp, const unsigned char *end)
{
	const unsigned char *p = *pp;
	uint64_t v1 = P1 + P2, v2 = P2, v3 = 0, v4 = 0 - P1, h;

	for (; end - p >= 32; p += 32) {
		v1 = round64(v1, le64(p));
		v2 = round64(v2, le64(p + 8));
		v3 = round64(v3, le64(p + 16));
		v4 = round64(v4, le64(p + 24));
	}
	h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
	h = merge(merge(merge(merge(h, v1), v2), v3), v4);
	*pp = p;
	return h;
}

uint64_t cb_xxh64(const void *buf, size_t len)
{
	const unsigned char *p = buf, *end = p + len;
	uint64_t h = len >= 32 ? stripes(&p, end) : P5;

	h += (uint64_t)len;
	for (; end - p >= 8; p += 8)
		h = rotl(h ^ round64(0, le64(p)), 27) * P1 + P4;
	if (end - p >= 4) {
		h = rotl(h ^ (uint64_t)le32(p) * P1, 23) * P2 + P3;
		p += 4;
	}
	for (; p < end; p++)
		h = rotl(h ^ *p * P5, 11) * P1;
	h ^= h >> 33;
	h *= P2;
	h ^= h >> 29;
	h *= P3;
	return h ^ h >> 32;
}
