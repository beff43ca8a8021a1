/*
 * cb_qcow2: just enough of qemu's qcow2 format (docs/interop/qcow2.txt) to
 * tell the compression stage which bytes of an image are already
 * compressed: the host ranges of compressed clusters reachable from the
 * active L1 table or from an internal snapshot's, or the whole image when
 * it is encrypted.
 *
 * Nothing in the file is trusted: every offset and size is checked against
 * the file size, tables are capped (L1 at qemu's 32 MiB, all L2 tables
 * together at the file size), and anything odd makes cb_qcow2_probe() fail
 * with a reason, so the caller falls back to its generic handling. An L2
 * table shared by several L1 tables is read once.
 */
#ifndef CB_QCOW2_H
#define CB_QCOW2_H

#include <stddef.h>
#include <stdint.h>

struct cb_range {
	uint64_t off, len;
};

struct cb_qcow2_info {
	uint32_t version, cluster_bits;
	int encrypted;                 /* crypt_method != 0: all data clusters */
	uint64_t compressed_clusters;  /* L2 entries with the compressed bit */
	struct cb_range *ranges;       /* host bytes of compressed data: sorted, merged */
	size_t n_ranges;
};

/* 0 on success; -1 if the file is no qcow2 we can map (cb_last_error()
 * says why: "not a qcow2 image", "l1_size ... past the end", ...). */
int cb_qcow2_probe(int fd, uint64_t file_size, struct cb_qcow2_info *info);
void cb_qcow2_release(struct cb_qcow2_info *info);

#endif
