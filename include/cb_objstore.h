/*
 * cb_objstore.h: where a unit store keeps its objects, behind one table (as
 * the codecs and the freezers): a plain directory (src/sink/objstore_dir.c)
 * or an S3 bucket (src/sink/objstore_s3.c, over cb_s3.h). The store above
 * it (manifests, units, dedup, garbage collection) sees only names and
 * bytes.
 *
 * Names are relative, '/'-separated, made of [A-Za-z0-9._-] components,
 * never "." or ".." (the store makes them; a backend refuses others).
 * An object, once written, is never overwritten with other bytes: put with
 * if_absent is how manifests and locks are created.
 *
 * A handle is used by one thread at a time: clone() gives another one (a
 * new connection for S3, the same directory for a dir).
 */
#ifndef CB_OBJSTORE_H
#define CB_OBJSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "cb_s3.h"

struct cb_opts;
struct cb_objstore;

/* Each name under a prefix, in byte order, with its size; returning
 * non-zero stops the listing with that value. */
typedef int cb_objstore_list_fn(void *arg, const char *name, uint64_t size);

/* put's if_absent: 0 write; CB_PUT_IF_ABSENT only where the name is
 * free, checked (manifests, locks); CB_PUT_SAME_BYTES the same, but the
 * name is the digest of the bytes (a unit): an object already under it
 * holds those bytes, so a store that may write anyway (S3: RGW ignores
 * If-None-Match on versioned buckets) is neither asked first nor read
 * back. */
#define CB_PUT_IF_ABSENT 1
#define CB_PUT_SAME_BYTES 2

struct cb_objstore_ops {
	const char *kind; /* "dir", "s3" */
	/* 0 written; 1 if_absent and the name existed (nothing written);
	 * -1 failed, cb_error naming the storage, the operation and the name.
	 * A dir writes a temporary file, fsyncs it and links it into place
	 * (a reader never sees half an object). */
	int (*put)(struct cb_objstore *s, const char *name, const void *data, size_t len, int if_absent);
	/* The bytes [off, off + len) appended to out (len 0: to the end).
	 * 0; 1 no such object; -1 failed. */
	int (*get)(struct cb_objstore *s, const char *name, uint64_t off, uint64_t len, struct cb_s3_buf *out);
	/* 0 and its size; 1 no such object; -1 failed. */
	int (*head)(struct cb_objstore *s, const char *name, uint64_t *size);
	/* 0, also when there was no such object; -1 failed. */
	int (*del)(struct cb_objstore *s, const char *name);
	/* 0; the callback's non-zero value; -1 failed. */
	int (*list)(struct cb_objstore *s, const char *prefix, cb_objstore_list_fn *fn, void *arg);
	/* 0 the storage is there and usable (S3: endpoint answers, keys
	 * accepted, bucket exists; dir: a directory we may write); -1 with
	 * cb_error saying which, naming the storage. */
	int (*check)(struct cb_objstore *s);
	/* Another handle on the same storage, for another thread; NULL with
	 * cb_error set. */
	struct cb_objstore *(*clone)(struct cb_objstore *s);
	void (*close)(struct cb_objstore *s);
};

/* Every backend's handle starts with this. */
struct cb_objstore {
	const struct cb_objstore_ops *ops;
	char *label; /* the storage's name, as errors say it: "offsite" */
	/* the store above seals and opens with it (cb_store_use_key), wiped
	 * and freed by cb_objstore_close; NULL plain; a clone has none */
	struct cb_enckey *key;
};

/* A directory store rooted at dir (created 0700 if missing). */
struct cb_objstore *cb_objstore_open_dir(const char *label, const char *dir);
/* An S3 store: the bucket of cfg, every name under prefix (NULL: none). */
struct cb_objstore *cb_objstore_open_s3(const char *label, const struct cb_s3_cfg *cfg, const char *prefix);
/* The store the options name: a [storage] with type = s3, or a dir
 * storage with layout = store; 0 and *out = NULL when the options name
 * no store (the classic one-file-a-night layout); -1 with cb_error set. */
int cb_objstore_open_for(const struct cb_opts *o, struct cb_objstore **out);

/* The name the store of a night with these options goes by (its label:
 * the storage's name, or the directory --dumpdir gave a layout = store),
 * NULL when the night writes an archive file. */
const char *cb_objstore_label_for(const struct cb_opts *o);
/* The dumpdir of a night with these options: NULL for an S3 storage,
 * whose nights use none (vzdump gives a backup server's hooks none). */
const char *cb_objstore_dumpdir_for(const struct cb_opts *o);
/* The S3 store of the options' storage (type = s3: its endpoint, bucket,
 * prefix, region and keys, from its credentials file or the environment),
 * opened, not checked: 0 and *out = NULL when the storage is no S3 one;
 * -1 with cb_error naming the storage. cb_objstore_open_for's S3 half. */
int cb_objstore_s3_from_opts(const struct cb_opts *o, struct cb_objstore **out);
void cb_objstore_close(struct cb_objstore *s);

#endif
