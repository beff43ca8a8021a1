/*
 * libFuzzer target: the qcow2 parser (cb_qcow2_probe) on arbitrary bytes
 * presented as an image file. Every range it returns must lie inside the
 * file and the ranges must be sorted and merged, as cb_qcow2.h promises.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cb_qcow2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cb_qcow2_info info = { 0 };
	int fd = memfd_create("fuzz-qcow2", MFD_CLOEXEC);

	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size)
		goto out;
	if (cb_qcow2_probe(fd, size, &info) == 0) {
		for (size_t i = 0; i < info.n_ranges; i++) {
			const struct cb_range *r = &info.ranges[i];
			if (r->len == 0 || r->off > size || r->len > size - r->off)
				abort();   /* a range outside the file */
			if (i && r->off <= info.ranges[i - 1].off + info.ranges[i - 1].len)
				abort();   /* not sorted and merged */
		}
		cb_qcow2_release(&info);
	}
out:
	close(fd);
	return 0;
}
