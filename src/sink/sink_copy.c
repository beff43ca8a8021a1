/*
 * A range copied by the kernel (copy_file_range: a clone or server-side
 * copy where the storage can) from a file others may write to: the bytes
 * it wrote are read back and compared with the bytes the caller read and
 * checked before; a part that differs (the source changed in between) is
 * written again from those. The copy keeps its clone wherever the source
 * did not change. See sink_int.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cb_util.h"
#include "sink_int.h"

#define CHECK_CHUNK (1u << 20)

int sink_reopen_read(int fd)
{
	char link[64];

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	return open(link, O_RDONLY | O_CLOEXEC);   /* the magic link is the file itself */
}

/* Chunk [at, at + n) of the file (rfd, to read; fd, to write) holds want. */
static int fix_chunk(int fd, int rfd, uint64_t at, size_t n, const unsigned char *want,
		     unsigned char *have, int *fixed)
{
	if (rfd >= 0 && cb_pread_all(rfd, have, n, at) == 0 && !memcmp(have, want, n))
		return 0;
	*fixed = 1;
	for (size_t done = 0; done < n;) {
		ssize_t w = pwrite(fd, want + done, n - done, (off_t)(at + done));

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		done += (size_t)w;
	}
	return 0;
}

int sink_copy_check(int fd, int rfd, uint64_t at, uint64_t len, const unsigned char *want,
		    int *fixed)
{
	unsigned char *have = rfd >= 0 ? cb_xmalloc(CHECK_CHUNK) : NULL;
	int ret = 0;

	*fixed = 0;
	for (uint64_t off = 0; ret == 0 && off < len; off += CHECK_CHUNK) {
		size_t n = len - off < CHECK_CHUNK ? (size_t)(len - off) : CHECK_CHUNK;

		ret = fix_chunk(fd, rfd, at + off, n, want + off, have, fixed);
	}
	free(have);
	return ret;
}
