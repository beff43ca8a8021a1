/*
 * fuse-hang MOUNTPOINT: a one-file FUSE file system whose reads never
 * answer, spoken straight over /dev/fuse (no libfuse needed). A process that
 * reads MOUNTPOINT/hang waits in the kernel for the answer; a cgroup freeze
 * cannot park such a task (after the freezer's wakeup FUSE waits killable,
 * not freezable), which is the "task in D state" of issue 12.
 *
 * Prints "ready" on stdout once mounted; serves until killed. The test
 * unmounts MOUNTPOINT (umount -l) and kills this process.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#define ROOT_INO 1
#define FILE_INO 2

static int fd;

static void reply(uint64_t unique, int error, const void *body, size_t len)
{
	char buf[sizeof(struct fuse_out_header) + 512];
	struct fuse_out_header *h = (void *)buf;

	h->len = (uint32_t)(sizeof(*h) + (error ? 0 : len));
	h->error = error;
	h->unique = unique;
	if (!error && len)
		memcpy(buf + sizeof(*h), body, len);
	if (write(fd, buf, h->len) < 0 && errno != ENOENT)
		perror("fuse-hang: write");
}

static void fill_attr(struct fuse_attr *a, uint64_t ino)
{
	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->mode = ino == ROOT_INO ? S_IFDIR | 0755 : S_IFREG | 0644;
	a->nlink = ino == ROOT_INO ? 2 : 1;
	a->size = ino == ROOT_INO ? 0 : 4096;
	a->blksize = 4096;
}

static void serve(const struct fuse_in_header *in, const char *arg)
{
	switch (in->opcode) {
	case FUSE_INIT: {
		struct fuse_init_out out = { .major = FUSE_KERNEL_VERSION,
					     .minor = FUSE_KERNEL_MINOR_VERSION,
					     .max_write = 4096, .max_readahead = 4096 };
		reply(in->unique, 0, &out, sizeof(out));
		break;
	}
	case FUSE_LOOKUP: {
		struct fuse_entry_out out = { .nodeid = FILE_INO };
		if (strcmp(arg, "hang")) {
			reply(in->unique, -ENOENT, NULL, 0);
			break;
		}
		fill_attr(&out.attr, FILE_INO);
		reply(in->unique, 0, &out, sizeof(out));
		break;
	}
	case FUSE_GETATTR: {
		struct fuse_attr_out out = { 0 };
		fill_attr(&out.attr, in->nodeid);
		reply(in->unique, 0, &out, sizeof(out));
		break;
	}
	case FUSE_OPEN: {
		struct fuse_open_out out = { .fh = 1, .open_flags = FOPEN_DIRECT_IO };
		reply(in->unique, 0, &out, sizeof(out));
		break;
	}
	case FUSE_READ:       /* never answered: the reader waits */
	case FUSE_INTERRUPT:  /* ignored: the read stays pending */
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
		break;
	case FUSE_RELEASE:
	case FUSE_FLUSH:
		reply(in->unique, 0, NULL, 0);
		break;
	default:
		reply(in->unique, -ENOSYS, NULL, 0);
	}
}

int main(int argc, char **argv)
{
	static char buf[1 << 17];
	char opts[128];

	if (argc != 2) {
		fprintf(stderr, "usage: fuse-hang MOUNTPOINT\n");
		return 2;
	}
	fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		perror("fuse-hang: /dev/fuse");
		return 1;
	}
	snprintf(opts, sizeof(opts), "fd=%d,rootmode=40000,user_id=0,group_id=0", fd);
	if (mount("fuse-hang", argv[1], "fuse.hang", MS_NOSUID | MS_NODEV, opts) < 0) {
		perror("fuse-hang: mount");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && (errno == EINTR || errno == ENOENT || errno == EAGAIN))
			continue;
		if (n < (ssize_t)sizeof(struct fuse_in_header))
			return 0;    /* unmounted */
		serve((const void *)buf, buf + sizeof(struct fuse_in_header));
	}
}
