/*
 * cb_magic: known compressed formats by magic number, and the plan of a
 * file's bytes for the compression policy. See include/cb_magic.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cb_magic.h"
#include "cb_util.h"

#define HEAD_LEN 64
#define AR_HDR 60
#define AR_MAX_MEMBERS 8

struct magic {
	size_t off;
	const char *bytes;
	size_t len;
	const char *name;
};

/* Formats whose payload is compressed as a whole. Containers that may hold
 * stored members (tar, cpio, iso) are not here: the trial handles them. */
static const struct magic magics[] = {
	{ 0, "\x1f\x8b\x08", 3, "gzip" },
	{ 0, "\x28\xb5\x2f\xfd", 4, "zstd" },
	{ 0, "\xfd" "7zXZ\x00", 6, "xz" },
	{ 0, "\x89LZO\x00\r\n\x1a\n", 9, "lzop" },
	{ 0, "\x04\x22\x4d\x18", 4, "lz4" },
	{ 0, "PK\x03\x04", 4, "zip" },
	{ 0, "7z\xbc\xaf\x27\x1c", 6, "7z" },
	{ 0, "Rar!\x1a\x07", 6, "rar" },
	{ 0, "\xff\xd8\xff", 3, "jpeg" },
	{ 0, "\x89PNG\r\n\x1a\n", 8, "png" },
	{ 0, "GIF87a", 6, "gif" },
	{ 0, "GIF89a", 6, "gif" },
	{ 0, "ID3", 3, "mp3" },
	{ 0, "\xff\xfb", 2, "mp3" },
	{ 0, "\xff\xf3", 2, "mp3" },
	{ 0, "\xff\xf2", 2, "mp3" },
	{ 0, "OggS", 4, "ogg" },
	{ 0, "fLaC", 4, "flac" },
	{ 4, "ftyp", 4, "mp4" },
	{ 0, "\x1a\x45\xdf\xa3", 4, "matroska" },
};

static int has(const unsigned char *b, size_t len, size_t off, const char *bytes, size_t n)
{
	return len >= off + n && memcmp(b + off, bytes, n) == 0;
}

const char *cb_magic_format(const void *buf, size_t len)
{
	const unsigned char *b = buf;

	for (size_t i = 0; i < sizeof(magics) / sizeof(magics[0]); i++)
		if (has(b, len, magics[i].off, magics[i].bytes, magics[i].len))
			return magics[i].name;
	if (has(b, len, 0, "BZh", 3) && len > 3 && b[3] >= '1' && b[3] <= '9')
		return "bzip2";
	if (has(b, len, 0, "RIFF", 4) && has(b, len, 8, "WEBP", 4))
		return "webp";
	return NULL;
}

static ssize_t read_head(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	do
		n = pread(fd, buf, len, off);
	while (n < 0 && errno == EINTR);
	return n;
}

/* ar member size: ten ASCII decimal digits, space padded. */
static int ar_size(const unsigned char *h, uint64_t *size)
{
	uint64_t v = 0;
	int digits = 0;

	for (int i = 48; i < 58 && h[i] != ' '; i++, digits++) {
		if (h[i] < '0' || h[i] > '9')
			return -1;
		v = v * 10 + (h[i] - '0');
	}
	if (digits == 0 || h[58] != '`' || h[59] != '\n')
		return -1;
	*size = v;
	return 0;
}

/* A .deb is an ar archive: debian-binary, control.tar.*, data.tar.*. It is
 * compressed data when its data.tar member is. */
static const char *deb_format(int fd, uint64_t size)
{
	unsigned char h[AR_HDR + HEAD_LEN];
	uint64_t off = 8, len;

	for (int i = 0; i < AR_MAX_MEMBERS && off + AR_HDR <= size; i++) {
		ssize_t n = read_head(fd, h, sizeof(h), off);

		if (n < AR_HDR || ar_size(h, &len) < 0)
			return NULL;
		if (memcmp(h, "data.tar", 8) == 0)
			return cb_magic_format(h + AR_HDR, n - AR_HDR) ? "deb" : NULL;
		off += AR_HDR + len + (len & 1);
	}
	return NULL;
}

static void plan_qcow2(int fd, uint64_t size, struct cb_data_plan *plan)
{
	struct cb_qcow2_info qi;

	plan->format = "qcow2";
	if (cb_qcow2_probe(fd, size, &qi) < 0) {
		snprintf(plan->note, sizeof(plan->note), "%s", cb_last_error());
		return;
	}
	if (qi.encrypted) {
		plan->kind = CB_DATA_QCOW2;
		snprintf(plan->note, sizeof(plan->note), "encrypted qcow2");
		return;
	}
	plan->range_kind = CB_DATA_QCOW2;
	plan->ranges = qi.ranges;
	plan->n_ranges = qi.n_ranges;
	snprintf(plan->note, sizeof(plan->note), "qcow2 v%u with %llu compressed clusters",
		 qi.version, (unsigned long long)qi.compressed_clusters);
}

void cb_magic_plan(int fd, uint64_t size, struct cb_data_plan *plan)
{
	unsigned char h[HEAD_LEN];
	ssize_t n;

	memset(plan, 0, sizeof(*plan));
	if (size < CB_MAGIC_MIN_SIZE)
		return;
	n = read_head(fd, h, sizeof(h), 0);
	if (n <= 0)
		return;
	if (has(h, n, 0, "QFI\xfb", 4)) {
		plan_qcow2(fd, size, plan);
		return;
	}
	if (has(h, n, 0, "!<arch>\ndebian-binary", 21))
		plan->format = deb_format(fd, size);
	else
		plan->format = cb_magic_format(h, n);
	if (plan->format)
		plan->kind = CB_DATA_COMPRESSED;
}

enum cb_data_kind cb_magic_plan_at(const struct cb_data_plan *plan, uint64_t off, uint64_t *run)
{
	size_t lo = 0, hi = plan->n_ranges;

	/* first range that ends after off */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct cb_range *r = &plan->ranges[mid];

		if (r->off + r->len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == plan->n_ranges) {
		*run = UINT64_MAX;
		return plan->kind;
	}
	if (plan->ranges[lo].off <= off) {
		*run = plan->ranges[lo].off + plan->ranges[lo].len - off;
		return plan->range_kind;
	}
	*run = plan->ranges[lo].off - off;
	return plan->kind;
}

void cb_magic_plan_release(struct cb_data_plan *plan)
{
	free(plan->ranges);
	plan->ranges = NULL;
	plan->n_ranges = 0;
}
