/*
 * cb_magic: what a file's bytes are, for the compression policy. Known
 * compressed formats are recognised by their magic numbers (never by file
 * name): gzip, zstd, xz, bzip2, lzop, lz4, zip (jar, docx, odt, apk), 7z,
 * rar, jpeg, png, gif, webp, mp3, ogg, flac, mp4/mov (ftyp box),
 * matroska/webm, Debian packages whose data.tar member is compressed, and
 * qcow2 images with compressed clusters (mapped by cb_qcow2) or encryption.
 *
 * The result is a plan over the file's offsets: a kind for each byte, which
 * the archive writer passes to cb_codec_hint() as it copies the data.
 */
#ifndef CB_MAGIC_H
#define CB_MAGIC_H

#include <stddef.h>
#include <stdint.h>
#include "cb_codec.h"
#include "cb_qcow2.h"

/* Smaller files are not worth a look: the codec compresses short runs. */
#define CB_MAGIC_MIN_SIZE (16 * 1024)

struct cb_data_plan {
	enum cb_data_kind kind;        /* bytes outside the ranges */
	enum cb_data_kind range_kind;  /* bytes inside the ranges */
	struct cb_range *ranges;       /* sorted, disjoint; owned */
	size_t n_ranges;
	const char *format;            /* "gzip", "qcow2", ...; NULL: nothing known */
	char note[160];                /* for the verbose log, e.g. a malformed qcow2 */
};

/* Name of the compressed format the buffer starts with, or NULL. */
const char *cb_magic_format(const void *buf, size_t len);

/* Plan for the open file of the given size. Read errors only make the plan
 * say nothing (kind CB_DATA_UNKNOWN); the copy will report them. */
void cb_magic_plan(int fd, uint64_t size, struct cb_data_plan *plan);
/* Kind at off, and in *run how many bytes from off keep it. */
enum cb_data_kind cb_magic_plan_at(const struct cb_data_plan *plan, uint64_t off, uint64_t *run);
void cb_magic_plan_release(struct cb_data_plan *plan);

#endif
