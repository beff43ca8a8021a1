/*
 * cb_encarchive: encrypted directory archives (docs/encryption.md).
 *
 * An encrypted archive NAME.tar.zst.cbenc is the plain archive NAME.tar.zst
 * cut into frames at its units' boundaries (the catalog's segments, else
 * its units), each frame sealed on its own (cb_enckey.h: its key derived
 * from its bytes under the secret, so a night's unchanged units give the
 * same frames, which are copied from the previous archive). Beside it:
 *   NAME.tar.zst.cbenc.idx     the frame table in clear (offsets, sizes,
 *                              keyed ids, SHA-256 of each stored frame) and,
 *                              sealed behind it, the plain catalog, the
 *                              plain .sha256 (a backup's: the catalog's
 *                              line only) and the archive's own name;
 *   NAME.tar.zst.cbenc.sha256  `sha256sum -c` lines of both files.
 * A backup seals each segment as the codec writes it (cb_enc_writer); no
 * plain archive is written anywhere, the plain catalog waits in a private
 * directory on the tmpdir. Readers decrypt into a private directory
 * (a "view") and run the plain code on it: every frame's tag, its id and
 * its place in the authenticated frame table are checked before any byte
 * of it is written there.
 */
#ifndef CB_ENCARCHIVE_H
#define CB_ENCARCHIVE_H

#include <stdint.h>
#include "cb_enckey.h"
#include "cb_log.h"
#include "cb_opts.h"

#define CB_ENC_SUFFIX ".cbenc"

/* NAME ends with .cbenc */
int cb_enc_is_encrypted(const char *name);

struct cb_enc_seal_stats {
	uint64_t frames, frames_copied;   /* copied: cloned from the previous archive */
	uint64_t resumed;                 /* bytes of its SHA-256 taken from a state */
	uint64_t bytes;                   /* the encrypted archive's size */
	char sha256[65];                  /* its SHA-256 */
};

/*
 * Seal a plain archive file PLAIN (with PLAIN.idx and PLAIN.sha256 beside
 * it) into OUT: OUT.idx,
 * OUT.sha256, then OUT (written as OUT.tmp, fsynced, renamed without
 * replacing). prev: the previous encrypted archive under the same key to
 * copy identical frames from (NULL: none). 0, or -1 with nothing left.
 */
int cb_enc_seal_archive(const struct cb_enckey *k, const char *plain, const char *out,
			const char *prev, struct cb_enc_seal_stats *st);

/*
 * The writer a backup seals its archive with as the codec writes it: OUT
 * (the .cbenc path, written as OUT.tmp, fsynced, renamed without
 * replacing) gets a sealed frame per segment the codec writes and, per
 * segment copied from prev (the previous encrypted archive, NULL: none),
 * prev's frame itself: looked up by the segment's key in prev's sealed
 * catalog, its tag checked, cloned (copy_file_range) and read back. Its
 * plaintext goes to the codec's own checks, never to a file: no plain
 * archive is written anywhere.
 *
 *   cb_enc_writer_open()      OUT's names checked free, prev's catalog
 *                             opened (*why: the reason there is none to
 *                             copy from, "" when there is simply none)
 *   cb_enc_writer_sink()      the codec's sink (the plain stream, no
 *                             SHA-256 of its own: every frame has its tag;
 *                             a view makes the plain .sha256 as it decrypts)
 *   cb_enc_writer_attach()    the codec copies from prev, cuts frames
 *   cb_enc_writer_prev()      prev's plain catalog, as a reuse (its name
 *                             and catalog digest name a trust map)
 *   cb_enc_writer_resume()    before the first byte: OUT's SHA-256 resumes
 *                             from the states kept at enc_trust (naming
 *                             prev) where OUT starts with prev's frames
 *   cb_enc_writer_finish()    after the codec and the plain sink are done
 *                             (PLAIN.idx, PLAIN.sha256 with the catalog's
 *                             line, written): the last frames, OUT.idx,
 *                             OUT.sha256, OUT; enc_trust (NULL: none) made
 *                             again for the next night
 */
struct cb_enc_writer;
struct cb_codec_writer;
struct cb_reuse;
int cb_enc_writer_open(const struct cb_enckey *k, const char *out, const char *prev,
		       enum cb_compress codec, struct cb_enc_writer **w, const char **why);
struct cb_sink *cb_enc_writer_sink(struct cb_enc_writer *w);
void cb_enc_writer_attach(struct cb_enc_writer *w, struct cb_codec_writer *codec);
const struct cb_reuse *cb_enc_writer_prev(const struct cb_enc_writer *w);
void cb_enc_writer_resume(struct cb_enc_writer *w, const char *enc_trust);
int cb_enc_writer_finish(struct cb_enc_writer *w, const char *plain, const char *enc_trust,
			 struct cb_enc_seal_stats *st);
void cb_enc_writer_free(struct cb_enc_writer *w);

/*
 * The fingerprint recorded in ARCHIVE's catalog: 0, or -1 (error set).
 * cb_enc_check_key: the same compared with k's: -1 with the error
 * "archive was encrypted with key 3f9a…, this key is 71c2…".
 */
int cb_enc_archive_fp(const char *archive, unsigned char fp[CB_ENC_FP]);
int cb_enc_check_key(const char *archive, const struct cb_enckey *k);

/* A decrypted copy of ARCHIVE in a new private directory below tmpdir. */
struct cb_enc_view;
int cb_enc_view_open(const struct cb_enckey *k, const char *archive, const char *tmpdir,
		     struct cb_enc_view **out);
/* What a view is for: restore --path decrypts only the frames holding
 * those members (the rest are holes the plain restore never reads);
 * --salvage decrypts what authenticates, says each unit that does not in
 * log (its members are then lost, and named, by the plain salvage). */
struct cb_enc_view_opts {
	char *const *paths;
	size_t n_paths;
	int salvage;
	struct cb_log *log;
	/* 1: a frame is taken on its tag alone, its id not recomputed from its
	 * bytes (one SHA-256 pass less): for the previous archive a backup
	 * copies from, whose every copied unit is checked against its
	 * (sealed) catalog anyway */
	int tag_only;
};
int cb_enc_view_open_opts(const struct cb_enckey *k, const char *archive, const char *tmpdir,
			  const struct cb_enc_view_opts *o, struct cb_enc_view **out);
/* The plain archive in it (PATH.idx and PATH.sha256 beside). */
const char *cb_enc_view_path(const struct cb_enc_view *v);
/* The units decrypted into it (*total: the archive's). */
uint64_t cb_enc_view_frames(const struct cb_enc_view *v, uint64_t *total);
/* Remove the directory and everything in it. NULL is fine. */
void cb_enc_view_free(struct cb_enc_view *v);
/* Views below tmpdir left by readers that were killed (their owner gone:
 * its lock on the view is free) are removed, each said in log; a live
 * reader's view is left alone. */
void cb_enc_views_sweep(const char *tmpdir, struct cb_log *log);

/*
 * Without the key: ARCHIVE.sha256 against the archive and its catalog,
 * and every frame's stored SHA-256 against the frame table. 0, or -1
 * naming the first frame (or file) found damaged.
 */
int cb_enc_check_stored(const char *archive, uint64_t *frames);

/*
 * `cbackup index` of an encrypted archive: ARCHIVE.idx and ARCHIVE.sha256
 * made again from the archive alone (every frame checked, decrypted into
 * a private directory below tmpdir and scanned); dry_run writes nothing.
 * *frames: the units found. 0, or -1 naming the first bad frame.
 */
int cb_enc_rebuild_catalog(const struct cb_enckey *k, const char *archive, const char *tmpdir,
			   int dry_run, uint64_t *frames);

/* The newest complete encrypted archive of the guest in dumpdir written
 * with this codec (malloc'ed path), or NULL. */
char *cb_enc_prev_archive(const char *dumpdir, enum cb_guest_type type, const char *id,
			  enum cb_compress codec);

/* Notes sealed under the key (NAME.notes beside an encrypted archive). */
int cb_enc_notes_write(const struct cb_enckey *k, int dirfd, const char *name, const char *text);

#endif
