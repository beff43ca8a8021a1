/* cb_imgstage: two-pass staging of disk images. See include/cb_imgstage.h. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cb_cleanup.h"
#include "cb_imgstage.h"
#include "cb_throttle.h"
#include "cb_util.h"

#define CHUNK (1 << 20)       /* read unit */
#define BLOCK (64 << 10)      /* compare / hole unit */

struct image {
	char *src, *name;
	struct cb_index_rec rec;  /* as of the last pass */
	int is_blockdev;
};

struct cb_imgstage {
	struct image *img;
	size_t n;
	char *dst;
	int dst_fd;
	struct cb_log *log;
	struct cb_throttle throttle;
	struct cb_progress *progress;
	struct cb_stage_stats *stats;
	uint64_t bytes_read;      /* this pass, for the progress line */
	unsigned char *sbuf, *dbuf;
};

static int is_zero(const unsigned char *p, size_t n)
{
	return n == 0 || (p[0] == 0 && !memcmp(p, p + 1, n - 1));
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

int cb_imgstage_new(struct cb_imgstage **out, const struct cb_strvec *images, const char *dst,
		    long bwlimit, struct cb_progress *progress, struct cb_log *log)
{
	struct cb_imgstage *st = cb_xcalloc(1, sizeof(*st));

	*out = st;
	st->dst = cb_xstrdup(dst);
	st->dst_fd = -1;
	st->log = log;
	st->progress = progress;
	cb_throttle_init(&st->throttle, bwlimit);
	st->img = cb_xcalloc(images->n + 1, sizeof(*st->img));
	for (size_t i = 0; i < images->n; i++) {
		st->img[i].src = cb_xstrdup(images->v[i]);
		st->img[i].name = cb_xstrdup(base_name(images->v[i]));
		st->n++;   /* owned now, even if we fail below */
		for (size_t j = 0; j < i; j++)
			if (!strcmp(st->img[i].name, st->img[j].name))
				return cb_error("disk images '%s' and '%s' have the same base name",
						st->img[j].src, st->img[i].src);
	}
	st->sbuf = cb_xmalloc(CHUNK);
	st->dbuf = cb_xmalloc(CHUNK);
	return 0;
}

void cb_imgstage_free(struct cb_imgstage *st)
{
	if (!st)
		return;
	for (size_t i = 0; i < st->n; i++) {
		free(st->img[i].src);
		free(st->img[i].name);
	}
	if (st->dst_fd >= 0)
		close(st->dst_fd);
	free(st->img);
	free(st->dst);
	free(st->sbuf);
	free(st->dbuf);
	free(st);
}

static int image_size(int fd, const struct stat *sb, uint64_t *size)
{
	if (!S_ISBLK(sb->st_mode)) {
		*size = (uint64_t)sb->st_size;
		return 0;
	}
	return ioctl(fd, BLKGETSIZE64, size) < 0 ? -1 : 0;
}

int cb_imgstage_estimate(const struct cb_strvec *images, uint64_t *bytes)
{
	*bytes = 0;
	for (size_t i = 0; i < images->n; i++) {
		struct stat sb;
		uint64_t size;
		int fd = open(images->v[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0 || fstat(fd, &sb) < 0 || image_size(fd, &sb, &size) < 0) {
			if (fd >= 0)
				close(fd);
			return cb_error_errno("disk image '%s'", images->v[i]);
		}
		close(fd);
		*bytes += S_ISBLK(sb.st_mode) ? size : (uint64_t)sb.st_blocks * 512;
	}
	return 0;
}

/* Where the next data starts at or after off (size if none). */
static off_t next_data(int fd, off_t off, off_t size, int is_blockdev)
{
	off_t d;

	if (is_blockdev)
		return off;
	d = lseek(fd, off, SEEK_DATA);
	return d < 0 ? size : d;   /* ENXIO: only a hole remains */
}

static off_t next_hole(int fd, off_t off, off_t size, int is_blockdev)
{
	off_t h;

	if (is_blockdev)
		return size;
	h = lseek(fd, off, SEEK_HOLE);
	return h < 0 || h > size ? size : h;
}

static int punch(int fd, off_t off, off_t len)
{
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len) == 0)
		return 0;
	/* no hole punching here: write the zeros */
	static const unsigned char zero[BLOCK];
	return pwrite(fd, zero, (size_t)len, off) == len ? 0 : -1;
}

/*
 * Bring [off, off+len) of out in line with in. With compare, out already
 * holds an older copy: only differing blocks are written. A block of
 * zeros becomes a hole.
 */
static int sync_chunk(struct cb_imgstage *st, const struct image *im, int in, int out, off_t off,
		      size_t len, int compare)
{
	ssize_t n = pread(in, st->sbuf, len, off);

	if (n < 0)
		return cb_error_errno("cannot read disk image '%s'", im->src);
	if (compare && pread(out, st->dbuf, (size_t)n, off) < 0)
		return cb_error_errno("cannot read staged copy of '%s'", im->name);
	for (size_t b = 0; b < (size_t)n; b += BLOCK) {
		size_t bl = (size_t)n - b < BLOCK ? (size_t)n - b : BLOCK;
		const unsigned char *s = st->sbuf + b;
		if (compare && !memcmp(s, st->dbuf + b, bl))
			continue;
		if (is_zero(s, bl) ? (compare && punch(out, off + (off_t)b, (off_t)bl) < 0)
				   : pwrite(out, s, bl, off + (off_t)b) != (ssize_t)bl)
			return cb_error_errno("cannot write '%s' to staging", im->name);
		if (!is_zero(s, bl))
			st->stats->transferred_size += bl;
	}
	if (cb_throttle_account(&st->throttle, (size_t)n) < 0)
		return -1;
	st->bytes_read += (uint64_t)n;
	cb_progress_update(st->progress, st->bytes_read);
	return cb_check_interrupt();
}

/* Source holes: nothing to read; in a compared copy they must be holes too. */
static int sync_hole(int out, off_t off, off_t end, int compare, const struct image *im)
{
	if (!compare || end <= off)
		return 0;
	if (next_data(out, off, end, 0) >= end)
		return 0;
	if (punch(out, off, end - off) < 0)
		return cb_error_errno("cannot punch a hole in the staged copy of '%s'", im->name);
	return 0;
}

static int sync_image_data(struct cb_imgstage *st, const struct image *im, int in, int out,
			   off_t size, int compare)
{
	off_t off = 0;

	while (off < size) {
		off_t data = next_data(in, off, size, im->is_blockdev);
		off_t hole = next_hole(in, data, size, im->is_blockdev);
		if (sync_hole(out, off, data, compare, im) < 0)
			return -1;
		for (off = data; off < hole; off += CHUNK) {
			size_t len = hole - off < CHUNK ? (size_t)(hole - off) : CHUNK;
			if (sync_chunk(st, im, in, out, off, len, compare) < 0)
				return -1;
		}
		off = hole;
	}
	return 0;
}

static int open_source(const struct image *im, struct stat *sb)
{
	int fd = open(im->src, O_RDONLY | O_CLOEXEC | O_NOATIME);

	if (fd < 0 && errno == EPERM)
		fd = open(im->src, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return cb_error_errno("cannot open disk image '%s'", im->src);
	if (fstat(fd, sb) < 0 || !(S_ISREG(sb->st_mode) || S_ISBLK(sb->st_mode))) {
		close(fd);
		return errno ? cb_error_errno("cannot stat disk image '%s'", im->src)
			     : cb_error("disk image '%s' is neither a file nor a block device", im->src);
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	return fd;
}

/* Owner, mode and times of the staged copy, from the source. */
static int copy_meta(int out, const struct stat *sb, const struct image *im)
{
	struct timespec times[2] = { sb->st_atim, sb->st_mtim };

	if ((geteuid() == 0 && fchown(out, sb->st_uid, sb->st_gid) < 0) ||
	    fchmod(out, sb->st_mode & 07777) < 0 || futimens(out, times) < 0)
		return cb_error_errno("cannot set metadata of the staged copy of '%s'", im->name);
	return 0;
}

static int sync_image(struct cb_imgstage *st, struct image *im, int compare)
{
	struct stat sb;
	uint64_t size;
	int in, out = -1, ret = -1;

	errno = 0;
	in = open_source(im, &sb);
	if (in < 0)
		return -1;
	im->is_blockdev = S_ISBLK(sb.st_mode);
	if (image_size(in, &sb, &size) < 0) {
		cb_error_errno("cannot get the size of '%s'", im->src);
		goto out;
	}
	st->stats->total_size += size;
	if (compare && !im->is_blockdev && cb_stage_decide(&im->rec, &sb) == CB_DELTA_SAME) {
		ret = 0;
		goto out;
	}
	out = openat(st->dst_fd, im->name, compare ? O_RDWR | O_CLOEXEC
					   : O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0) {
		cb_error_errno("cannot create '%s' in staging", im->name);
		goto out;
	}
	if (!compare && ftruncate(out, (off_t)size) < 0) {
		cb_error_errno("cannot write '%s' to staging", im->name);
		goto out;
	}
	if (compare && (uint64_t)lseek(out, 0, SEEK_END) > size && ftruncate(out, (off_t)size) < 0) {
		cb_error_errno("cannot resize '%s' in staging", im->name);
		goto out;
	}
	ret = sync_image_data(st, im, in, out, (off_t)size, compare);
	if (ret == 0 && compare && ftruncate(out, (off_t)size) < 0)
		ret = cb_error_errno("cannot resize '%s' in staging", im->name);
	if (ret == 0)
		ret = copy_meta(out, &sb, im);
	st->stats->files_transferred++;
	im->rec.dev = sb.st_dev;
	im->rec.ino = sb.st_ino;
	im->rec.size = sb.st_size;
	im->rec.mtime = sb.st_mtim;
	im->rec.ctime = sb.st_ctim;
	im->rec.mode = sb.st_mode;
	im->rec.uid = sb.st_uid;
	im->rec.gid = sb.st_gid;
out:
	if (out >= 0 && close(out) < 0 && ret == 0)
		ret = cb_error_errno("cannot write '%s' to staging", im->name);
	close(in);
	return ret;
}

static int run_pass(struct cb_imgstage *st, struct cb_stage_stats *stats, int compare)
{
	memset(stats, 0, sizeof(*stats));
	stats->seconds = cb_now();
	st->stats = stats;
	if (st->dst_fd < 0) {
		if (mkdir(st->dst, 0700) < 0 && errno != EEXIST)
			return cb_error_errno("cannot create staging directory '%s'", st->dst);
		st->dst_fd = open(st->dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (st->dst_fd < 0)
			return cb_error_errno("cannot open staging directory '%s'", st->dst);
	}
	for (size_t i = 0; i < st->n; i++) {
		stats->files++;
		if (sync_image(st, &st->img[i], compare) < 0)
			return -1;
	}
	/* the archive's "./": extracting it must not close the target directory */
	if (fchmod(st->dst_fd, 0755) < 0)
		return cb_error_errno("cannot set the mode of '%s'", st->dst);
	stats->seconds = cb_now() - stats->seconds;
	return 0;
}

int cb_imgstage_pass1(struct cb_imgstage *st, struct cb_stage_stats *stats)
{
	return run_pass(st, stats, 0);
}

int cb_imgstage_pass2(struct cb_imgstage *st, struct cb_stage_stats *stats)
{
	/* the VM is stopped now: no bandwidth limit, no progress line */
	cb_throttle_init(&st->throttle, 0);
	st->progress = NULL;
	return run_pass(st, stats, 1);
}
