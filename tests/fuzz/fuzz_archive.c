/*
 * libFuzzer target: the archive reader used by restore and verify
 * (cb_tarread: codec detection by magic, zstd/lzop/gzip/none decoding,
 * libarchive's tar parser) on arbitrary bytes. Walks every header and
 * reads every data block, as verify does, without writing anything.
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include <archive.h>
#include <archive_entry.h>

#include "cb_tarread.h"

/* A few bytes of zstd can expand to gigabytes: stop a walk early. */
#define MAX_OUTPUT (64u << 20)

static void walk(struct cb_tarread *t)
{
	struct archive_entry *e;
	uint64_t total = 0;
	const void *buf;
	size_t len;
	la_int64_t off;

	while (archive_read_next_header(t->a, &e) == ARCHIVE_OK) {
		(void)archive_entry_pathname(e);
		(void)archive_entry_hardlink(e);
		(void)archive_entry_symlink(e);
		while (archive_read_data_block(t->a, &buf, &len, &off) == ARCHIVE_OK) {
			total += len;
			if (total > MAX_OUTPUT)
				return;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cb_tarread t = { .fd = -1, .file_fd = -1 };
	char path[64];
	int fd = memfd_create("fuzz-archive", MFD_CLOEXEC);

	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (cb_tarread_open(&t, path, 0) == 0)
		walk(&t);
	cb_tarread_close(&t);
	close(fd);
	return 0;
}
