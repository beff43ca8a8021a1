/*
 * cb_qcow2: find the compressed clusters of a qcow2 image. See
 * include/cb_qcow2.h. Written from the format description only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cb_qcow2.h"
#include "cb_util.h"

#define QCOW2_MAGIC 0x514649fbu          /* "QFI\xfb" */
#define HDR_V2_LEN 72
#define HDR_V3_LEN 104
#define L1_MAX_BYTES (32u * 1024 * 1024) /* qemu's own limit */
#define RANGES_MAX (1u << 22)
#define ENTRY_COMPRESSED (1ull << 62)
#define L1_OFFSET_MASK 0x00fffffffffffe00ull
#define INCOMPAT_EXTERNAL_DATA (1ull << 2)
#define INCOMPAT_EXTENDED_L2 (1ull << 4)
#define INCOMPAT_KNOWN 0x1full
#define SNAPSHOTS_MAX 65536u               /* qemu's own limit */
#define SNAP_FIXED 40                      /* fixed part of a snapshot table entry */
#define L1_TOTAL_MAX (256u * 1024 * 1024)  /* all L1 tables read together */

struct qcow2 {
	int fd;
	uint64_t file_size, cluster_size;
	unsigned cluster_bits, entry_size;
	struct cb_qcow2_info *info;
	size_t cap;
	/* host offsets of the L2 tables of every L1 (active and snapshots);
	 * snapshots share most of them, so each is read once */
	uint64_t *l2s;
	size_t n_l2s, cap_l2s;
	uint64_t l1_bytes;               /* all L1 tables read so far */
};

static uint64_t be(const unsigned char *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* Read exactly len bytes at off, which the caller checked lie in the file. */
static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, off + done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return cb_error_errno("qcow2: cannot read");
		if (n == 0)
			return cb_error("qcow2: file shorter than its size");
		done += n;
	}
	return 0;
}

static int in_file(const struct qcow2 *q, uint64_t off, uint64_t len)
{
	return off <= q->file_size && len <= q->file_size - off;
}

static int add_range(struct qcow2 *q, uint64_t off, uint64_t end)
{
	struct cb_qcow2_info *in = q->info;
	struct cb_range *last = in->n_ranges ? &in->ranges[in->n_ranges - 1] : NULL;

	/* qemu writes compressed clusters one after the other: merge on the
	 * fly so the list stays short */
	if (last && off >= last->off && off <= last->off + last->len) {
		if (end > last->off + last->len)
			last->len = end - last->off;
		return 0;
	}
	if (in->n_ranges == RANGES_MAX)
		return cb_error("qcow2: too many compressed ranges");
	if (in->n_ranges == q->cap) {
		q->cap = q->cap ? 2 * q->cap : 256;
		in->ranges = cb_xrealloc(in->ranges, q->cap * sizeof(*in->ranges));
	}
	in->ranges[in->n_ranges++] = (struct cb_range){ off, end - off };
	return 0;
}

/* Compressed cluster descriptor: host offset in the low x bits, then the
 * number of 512-byte sectors after the one holding the offset. */
static int compressed_entry(struct qcow2 *q, uint64_t e)
{
	unsigned x = 62 - (q->cluster_bits - 8);
	uint64_t off = e & ((1ull << x) - 1);
	uint64_t sectors = (e & ((1ull << 62) - 1)) >> x;
	uint64_t end = (off & ~511ull) + (sectors + 1) * 512;

	if (off >= q->file_size)
		return cb_error("qcow2: compressed cluster at %llu past the end",
				(unsigned long long)off);
	q->info->compressed_clusters++;
	/* the last sector may be partly used and may reach past a truncated
	 * tail: the range never leaves the file */
	return add_range(q, off, end < q->file_size ? end : q->file_size);
}

static int scan_l2(struct qcow2 *q, unsigned char *l2, uint64_t l2_off)
{
	if ((l2_off & (q->cluster_size - 1)) || !in_file(q, l2_off, q->cluster_size))
		return cb_error("qcow2: L2 table at %llu is misaligned or past the end",
				(unsigned long long)l2_off);
	if (read_at(q->fd, l2, q->cluster_size, l2_off) < 0)
		return -1;
	for (uint64_t i = 0; i < q->cluster_size; i += q->entry_size) {
		uint64_t e = be(l2 + i, 8);

		if ((e & ENTRY_COMPRESSED) && compressed_entry(q, e) < 0)
			return -1;
	}
	return 0;
}

static int range_cmp(const void *a, const void *b)
{
	const struct cb_range *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* L2 tables in any host order: sort and merge what the fly merge missed. */
static void normalise(struct cb_qcow2_info *in)
{
	size_t n = 0;

	if (in->n_ranges < 2)
		return;
	qsort(in->ranges, in->n_ranges, sizeof(*in->ranges), range_cmp);
	for (size_t i = 1; i < in->n_ranges; i++) {
		struct cb_range *cur = &in->ranges[n], *r = &in->ranges[i];

		if (r->off <= cur->off + cur->len) {
			if (r->off + r->len > cur->off + cur->len)
				cur->len = r->off + r->len - cur->off;
		} else {
			in->ranges[++n] = *r;
		}
	}
	in->n_ranges = n + 1;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Sort and drop duplicates; more distinct L2 tables than the file holds
 * clusters (each takes one of its own) means a hostile image. */
static int unique_l2s(struct qcow2 *q)
{
	size_t n = 0;

	if (q->n_l2s) {
		qsort(q->l2s, q->n_l2s, sizeof(*q->l2s), u64_cmp);
		for (size_t i = 1; i < q->n_l2s; i++)
			if (q->l2s[i] != q->l2s[n])
				q->l2s[++n] = q->l2s[i];
		q->n_l2s = n + 1;
	}
	if (q->n_l2s > q->file_size / q->cluster_size)
		return cb_error("qcow2: more L2 tables than clusters");
	return 0;
}

/* Note the L2 tables an L1 table refers to. */
static int collect_l1(struct qcow2 *q, uint64_t l1_off, uint32_t l1_size)
{
	uint64_t bytes = (uint64_t)l1_size * 8;
	unsigned char *l1;

	if (bytes > L1_MAX_BYTES || (l1_off & (q->cluster_size - 1)) || !in_file(q, l1_off, bytes))
		return cb_error("qcow2: L1 table (%u entries at %llu) is too big, misaligned or past the end",
				l1_size, (unsigned long long)l1_off);
	if ((q->l1_bytes += bytes) > L1_TOTAL_MAX)
		return cb_error("qcow2: L1 tables of the snapshots too big together");
	l1 = cb_xmalloc(bytes ? bytes : 1);
	if (read_at(q->fd, l1, bytes, l1_off) < 0) {
		free(l1);
		return -1;
	}
	for (uint32_t i = 0; i < l1_size; i++) {
		uint64_t l2_off = be(l1 + 8 * (size_t)i, 8) & L1_OFFSET_MASK;

		if (l2_off == 0)
			continue;
		if (q->n_l2s == q->cap_l2s) {
			q->cap_l2s = q->cap_l2s ? 2 * q->cap_l2s : 256;
			q->l2s = cb_xrealloc(q->l2s, q->cap_l2s * sizeof(*q->l2s));
		}
		q->l2s[q->n_l2s++] = l2_off;
	}
	free(l1);
	/* keep the list bounded by the file, not by what the L1s repeat */
	if (q->n_l2s > 2 * (q->file_size / q->cluster_size) + 1024)
		return unique_l2s(q);
	return 0;
}

/* Internal snapshots (qemu-img snapshot, Proxmox's qcow2 snapshots) keep
 * L1 tables of their own: clusters compressed before a snapshot and since
 * overwritten are reachable only from there. */
static int collect_snapshots(struct qcow2 *q, uint32_t count, uint64_t table)
{
	uint64_t pos = table;

	if (count > SNAPSHOTS_MAX)
		return cb_error("qcow2: %u snapshots (qemu allows %u)", count, SNAPSHOTS_MAX);
	if (count && (table & (q->cluster_size - 1)))
		return cb_error("qcow2: snapshot table misaligned");
	for (uint32_t i = 0; i < count; i++) {
		unsigned char e[SNAP_FIXED];
		uint64_t len;

		if (!in_file(q, pos, SNAP_FIXED))
			return cb_error("qcow2: snapshot table past the end");
		if (read_at(q->fd, e, SNAP_FIXED, pos) < 0)
			return -1;
		/* the fixed part, extra data, id string, name; padded to 8 */
		len = SNAP_FIXED + be(e + 36, 4) + be(e + 12, 2) + be(e + 14, 2);
		len = (len + 7) & ~7ull;
		if (!in_file(q, pos, len))
			return cb_error("qcow2: snapshot table past the end");
		if (collect_l1(q, be(e, 8), be(e + 8, 4)) < 0)
			return -1;
		pos += len;
	}
	return 0;
}

static int scan_l2s(struct qcow2 *q)
{
	unsigned char *l2 = cb_xmalloc(q->cluster_size);
	int ret = unique_l2s(q);

	for (size_t i = 0; i < q->n_l2s && ret == 0; i++)
		ret = scan_l2(q, l2, q->l2s[i]);
	free(l2);
	return ret;
}

/* Check the header; fills q and says where the L1 table is. */
static int parse_header(struct qcow2 *q, const unsigned char *h, uint64_t *l1_off, uint32_t *l1_size)
{
	uint32_t version = be(h + 4, 4), bits = be(h + 20, 4);
	uint64_t incompat = version >= 3 ? be(h + 72, 8) : 0;

	if (be(h, 4) != QCOW2_MAGIC)
		return cb_error("not a qcow2 image");
	if (version != 2 && version != 3)
		return cb_error("qcow2: unsupported version %u", version);
	if (version == 3 && q->file_size < HDR_V3_LEN)
		return cb_error("qcow2: truncated header");
	if (bits < 9 || bits > 21)
		return cb_error("qcow2: cluster_bits %u out of range", bits);
	if (incompat & ~INCOMPAT_KNOWN)
		return cb_error("qcow2: unknown incompatible features 0x%llx", (unsigned long long)incompat);
	q->info->version = version;
	q->info->cluster_bits = q->cluster_bits = bits;
	q->cluster_size = 1ull << bits;
	q->entry_size = incompat & INCOMPAT_EXTENDED_L2 ? 16 : 8;
	q->info->encrypted = be(h + 32, 4) != 0;
	*l1_size = be(h + 36, 4);
	*l1_off = be(h + 40, 8);
	/* an external data file holds the guest data: nothing compressed here */
	if (incompat & INCOMPAT_EXTERNAL_DATA)
		*l1_size = 0;
	return 0;
}

int cb_qcow2_probe(int fd, uint64_t file_size, struct cb_qcow2_info *info)
{
	unsigned char h[HDR_V3_LEN] = { 0 };
	struct qcow2 q = { .fd = fd, .file_size = file_size, .info = info };
	uint64_t l1_off = 0;
	uint32_t l1_size = 0;

	memset(info, 0, sizeof(*info));
	if (file_size < HDR_V2_LEN)
		return cb_error("qcow2: truncated header");
	if (read_at(fd, h, file_size < HDR_V3_LEN ? HDR_V2_LEN : HDR_V3_LEN, 0) < 0 ||
	    parse_header(&q, h, &l1_off, &l1_size) < 0)
		return -1;
	if (info->encrypted)
		return 0;
	if (collect_l1(&q, l1_off, l1_size) < 0 ||
	    (l1_size && collect_snapshots(&q, be(h + 60, 4), be(h + 64, 8)) < 0) || scan_l2s(&q) < 0) {
		free(q.l2s);
		cb_qcow2_release(info);
		return -1;
	}
	free(q.l2s);
	normalise(info);
	return 0;
}

void cb_qcow2_release(struct cb_qcow2_info *info)
{
	free(info->ranges);
	info->ranges = NULL;
	info->n_ranges = 0;
}
