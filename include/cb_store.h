/*
 * cb_store: a unit store (DESIGN §5, docs/object-storage.md) over the
 * objects of a cb_objstore (a directory with layout = store, or S3).
 *
 * Names:
 *   units/XX/HEX   a unit: bytes of an archive, HEX the SHA-256 of those
 *                  bytes (XX its first two digits, so that no folder or
 *                  listing page holds them all); written once, shared by
 *                  every night and guest that has those bytes
 *   nights/NAME    a night's manifest (NAME: the archive's name,
 *                  cbackup-ct-101-2026_12_06-03_00_00.tar.zst), written
 *                  last and only if absent: a night without one does not
 *                  exist
 *
 * A manifest is text, one record a line (cbackup-manifest(5) in
 * docs/object-storage.md): the archive's size and SHA-256, its units in
 * order ("unit HEX LEN"), its catalog, log and notes (each a unit too),
 * and last the SHA-256 of every line before it. The units' bytes, in
 * order, are the archive: the same .tar.zst/.tar.gz/.tar.lzo as a
 * classic night of the same staged tree.
 */
#ifndef CB_STORE_H
#define CB_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "cb_catalog.h"
#include "cb_codec.h"
#include "cb_enckey.h"
#include "cb_objstore.h"
#include "cb_sink.h"

#define CB_STORE_NIGHTS "nights/"
#define CB_STORE_UNITS "units/"
#define CB_STORE_MARKS "marks/"
/* a mark older than this is a killed run's (store_gc.c) */
#define CB_STORE_MARK_TTL (24 * 3600)

/* An object named by the SHA-256 of its bytes (hex), len bytes long.
 * A sealed night's (store_enc.c) are one of two kinds: read with the key
 * (key set: hex and len are the plain unit's, the object is its sealed
 * frame named by the keyed id of those bytes), or as the clear record of
 * the object (sha set: hex is its name, len and sha its stored bytes'). */
struct cb_store_ref {
	char hex[65];
	uint64_t len;
	char sha[65];
	const struct cb_enckey *key;
};

struct cb_manifest {
	char *name;                    /* the archive's */
	uint64_t size;                 /* its bytes: the sum of its units' */
	char sha256[65];               /* of those bytes */
	time_t when;                   /* when the manifest was written */
	int protected_;                /* prune keeps it */
	struct cb_store_ref catalog, log, notes;   /* hex "": none */
	struct cb_store_ref *units;
	size_t n_units;
	/* a sealed night (store_enc.c): its fingerprint, and the objects it
	 * holds as clear records, sorted; without the right key units are
	 * those records, and catalog, log and notes are none */
	int sealed;
	unsigned char fp[32];
	const struct cb_enckey *key;   /* the key it was opened with, or NULL */
	struct cb_store_ref *objects;
	size_t n_objects;
};

/* Parse a manifest's text: 0, or -1 with the reason (the name given for
 * messages). */
int cb_manifest_parse(struct cb_manifest *m, const char *name, const char *text, size_t len);
/* Its text, malloc'd (with the closing digest line). */
char *cb_manifest_format(const struct cb_manifest *m);
void cb_manifest_release(struct cb_manifest *m);

/* The SHA-256 of n bytes at p in hex (65 bytes with the nul). */
void cb_store_sha256_hex(const void *p, size_t n, char *hex);
/* The closing "end HEX" line holds (HEX: the SHA-256 of the text before
 * it): 0 and the length before it in *body, or -1. */
int cb_manifest_check_end(const char *text, size_t len, size_t *body);

/* "units/ab/ab12...": out holds at least 74 bytes. */
void cb_store_unit_name(const char *hex, char *out);
/* "nights/NAME", malloc'd. */
char *cb_store_night_name(const char *name);

/* The manifest of night NAME: 0, 1 no such night, -1 damaged or failed. */
int cb_store_get_manifest(struct cb_objstore *s, const char *name, struct cb_manifest *m);
/* The object ref into out (appended), its length and SHA-256 checked: 0;
 * 1 no such object; -1 damaged (error names it) or failed. */
int cb_store_get_ref(struct cb_objstore *s, const struct cb_store_ref *ref, struct cb_s3_buf *out);
/* The ref of len bytes: their SHA-256 and length. */
void cb_store_ref_of(const void *data, size_t len, struct cb_store_ref *ref);
/* Put bytes as a unit (named by their SHA-256, hex set in ref): 0 written
 * or there already, -1 failed. replace: write even if the name exists (a
 * damaged copy is mended). */
int cb_store_put_ref(struct cb_objstore *s, const void *data, size_t len, int replace,
		     struct cb_store_ref *ref);

/* The nights in the store as backups (cb_catalog.h: sorted by id, then
 * newest first; path is "STORAGE:NAME", has_checksum 1 for every night,
 * size and protection from the manifests when want_manifests). id NULL:
 * every guest. */
int cb_store_catalog(struct cb_objstore *s, const char *id, int want_manifests, struct cb_catalog *cat);

/* The units in the store (one listing): their digests, sorted. */
struct cb_store_set {
	unsigned char (*v)[32];
	size_t n, cap;
	uint64_t bytes;                /* their sizes added up */
	int sorted;
};
int cb_store_list_units(struct cb_objstore *s, struct cb_store_set *set);
void cb_store_set_add(struct cb_store_set *set, const unsigned char *dig);
int cb_store_set_has(struct cb_store_set *set, const unsigned char *dig);
void cb_store_set_release(struct cb_store_set *set);
/* hex (64 digits) to 32 bytes: 0, or -1 when it is not that. */
int cb_store_unhex(const char *hex, unsigned char *dig);
void cb_store_hex(const unsigned char *dig, char *hex);

/* ---- marks and the garbage collection (store_gc.c) ---- */

/* marks/KIND/TAG with this host, process and time: the object's name
 * (malloc'd), or NULL with the error set. */
char *cb_store_mark_put(struct cb_objstore *s, const char *kind, const char *tag);
/* Remove it (and free the name); NULL is fine. */
void cb_store_mark_drop(struct cb_objstore *s, char *obj);
/* How many marks of KIND are live (skip: one's own, not counted), the
 * first one said in who; stale ones (a killed run's) are removed. -1 if
 * they cannot be listed. */
int cb_store_marks_live(struct cb_objstore *s, const char *kind, const char *skip, char *who,
			size_t who_len);
/*
 * Remove every unit no manifest names, unless a night is being written
 * (its mark is live: then nothing, said in the log). dry_run: print
 * "remove UNIT" lines instead. 0, or -1 (a manifest that cannot be read
 * stops it before anything is removed).
 */
struct cb_log;
int cb_store_gc(struct cb_objstore *s, int dry_run, struct cb_log *log);

/* ---- a night being written (store_night.c) ---- */

struct cb_store_night;
struct cb_store_night_stats {
	uint64_t units, written_units, written_bytes;   /* new objects */
	uint64_t present_units, present_bytes;          /* in the store already */
	uint64_t copied_units;                          /* neither compressed nor written */
	uint64_t cached_units;                          /* read from the local cache */
	/* where the wall went: opening (mark, listings, previous catalog),
	 * the codec waiting for room in the upload queue, the last uploads
	 * after the codec ended, the catalog, log and manifest */
	double open_s, wait_s, drain_s, commit_s;
};

/*
 * Start night name of guest (type, id) with codec on s: writes its mark
 * (store_gc.c), waits up to gc_wait seconds for a running garbage
 * collection to end (then fails naming it), lists the store's units once,
 * starts writers threads that write the units (each on a clone of s), takes the newest night of the guest with that codec as the
 * catalog whose units need not be compressed again (*prev_why says why
 * none when there is none to use), and opens the sink the codec writes
 * to (owned by the night). 0 or -1.
 */
int cb_store_night_open(struct cb_store_night **out, struct cb_objstore *s, const char *name,
			enum cb_guest_type type, const char *id, enum cb_compress codec,
			double gc_wait, unsigned writers, const char **prev_why);
struct cb_sink *cb_store_night_sink(struct cb_store_night *n);
/* Keep the night's units in DIR and read copied ones from there first
 * (cb_unit_cache.h): 0, or -1 (error set; the night goes on without). */
int cb_store_night_cache(struct cb_store_night *n, const char *dir);
/* The previous night units are copied from, or NULL. */
const char *cb_store_night_prev(const struct cb_store_night *n);
/* The guest's own previous night's catalog (what a trust map kept with
 * the staging copy names, cb_reuse_trust.h), or NULL. */
struct cb_reuse;
const struct cb_reuse *cb_store_night_own_prev(const struct cb_store_night *n);
/* Let the codec copy units the store has and cut units where its
 * segments end. */
void cb_store_night_attach(struct cb_store_night *n, struct cb_codec_writer *w);
/*
 * After cb_codec_finish() and cb_sink_prepare(): the last unit, the
 * catalog (file idx_path, may be NULL), the log so far (file log_path,
 * may be NULL), notes (NULL: none), then the manifest, only if no night
 * of that name exists. 0, or -1: the night does not exist (its units stay
 * for the next night to use, or for prune to remove).
 */
int cb_store_night_commit(struct cb_store_night *n, const char *idx_path, const char *log_path,
			  const char *notes, int protected_);
void cb_store_night_stats(const struct cb_store_night *n, struct cb_store_night_stats *st);
void cb_store_night_free(struct cb_store_night *n);

/* ---- a sealed store (store_enc.c, docs/encryption.md) ---- */

/* Seal what s writes and open what it reads with the key in file path
 * (NULL or "none": none), owned by s from now on. 0, or -1 (the key file
 * refused, error set). */
int cb_store_use_key(struct cb_objstore *s, const char *path);
const struct cb_enckey *cb_store_key(const struct cb_objstore *s);
/* A sealed manifest's text (starts with its magic). */
int cb_manifest_is_sealed(const char *text, size_t len);
/* Parse it into m: the clear part always; the sealed part too when key
 * is the one it was sealed with. 0, or -1 (damaged, error naming it). */
int cb_manifest_unseal(struct cb_manifest *m, const char *name, const char *text, size_t len,
		       const struct cb_enckey *key);
/* m (with its clear records in objects) sealed under key: malloc'd text. */
char *cb_manifest_seal(const struct cb_manifest *m, const struct cb_enckey *key, size_t *len);
/* 0 when m can be read (plain, or opened with its key); else -1 with the
 * one error: the key it needs, or that it was sealed with another. */
int cb_manifest_readable(const struct cb_manifest *m, const struct cb_enckey *key, const char *name);
/* A night's manifest readable with s's key: 0; -1 it is not (error set:
 * no key or another key); 1 it cannot be told (no such night, damaged). */
int cb_store_night_key_check(struct cb_objstore *s, const char *name);
/* The object a ref names: "units/XX/HEX" (out: 80 bytes). */
void cb_store_ref_object(const struct cb_store_ref *r, char *out);
/* A unit sealed: the frame (malloc'd, *flen bytes) and its clear record
 * (obj: the object's name hex, length and SHA-256). dig: the SHA-256 of
 * the plain bytes. 0 or -1. */
int cb_store_seal_unit(const struct cb_enckey *k, const void *plain, size_t len,
		       const unsigned char dig[32], unsigned char **frame, size_t *flen,
		       struct cb_store_ref *obj);
/* The sealed object of ref (key set) appended to out as its plain bytes,
 * checked (tag, id, length, SHA-256); *obj (may be NULL) its clear record.
 * 0, or -1 missing or damaged (the object named) or failed. */
int cb_store_get_sealed(struct cb_objstore *s, const struct cb_store_ref *ref, struct cb_s3_buf *out,
			struct cb_store_ref *obj);

/* Clear records by name (a night's writer: what each object it names
 * holds, for its manifest's clear part). */
struct cb_store_objmap {
	struct cb_store_ref *v;
	size_t n, cap;
	int sorted;
};
void cb_store_objmap_add(struct cb_store_objmap *map, const struct cb_store_ref *obj);
const struct cb_store_ref *cb_store_objmap_find(struct cb_store_objmap *map, const char *hex);
void cb_store_objmap_release(struct cb_store_objmap *map);

#endif
