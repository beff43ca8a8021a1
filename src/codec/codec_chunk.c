/*
 * The chunker of the writer (codec_int.h): the bytes of a segment, as
 * codec_seg.c replays them, cut into chunks of one class (compress, trial,
 * stored: the policy and the archive writer's hints decide) and handed to
 * the codec's writer, never across the end of a unit.
 */
#include <stdint.h>
#include <string.h>

#include "cb_codec.h"
#include "cb_util.h"
#include "codec_int.h"

static int emit_chunk(struct cb_codec_writer *w);

int cb_codec_inner_hint(struct cb_codec_writer *w, enum cb_data_kind kind, uint64_t nbytes)
{
	if (w->policy == CB_POLICY_ALWAYS || w->type == CB_COMPRESS_NONE)
		return 0;
	if (kind != CB_DATA_UNKNOWN && nbytes < w->ops->min_store)
		kind = CB_DATA_UNKNOWN;
	w->hint_kind = kind;
	w->hint_left = nbytes;
	/* a long run starts a chunk of its own, so the trial sees the run
	 * alone rather than straddled with what came before */
	if (nbytes >= CB_CODEC_CHUNK / 2 && w->cm.len > 0)
		return emit_chunk(w);
	return 0;
}

void cb_codec_inner_begin_file(struct cb_codec_writer *w)
{
	w->file_id++;
}

/* Bytes from the end of the chunk being filled to the end of the unit (the
 * segment being replayed, see codec_seg.c). */
static uint64_t unit_room(const struct cb_codec_writer *w)
{
	return w->unit_end_at - (w->chunked + w->cm.len);
}

static int emit_chunk(struct cb_codec_writer *w)
{
	int ret;

	w->cm.unit_end = unit_room(w) == 0;
	ret = w->ops->chunk(w->st, &w->cm);
	w->chunked += w->cm.len;
	w->cbuf = NULL;
	w->cm.len = 0;
	if (ret < 0)
		w->failed = 1;
	return ret;
}

/* Class and store reason of the next bytes, and for how many bytes. */
static enum cb_chunk_class next_class(const struct cb_codec_writer *w, enum cb_store_reason *why,
				      uint64_t *run)
{
	*run = UINT64_MAX;
	*why = CB_STORED_TRIAL;
	if (w->policy == CB_POLICY_ALWAYS)
		return CB_CHUNK_COMPRESS;
	if (w->hint_left == 0)
		return CB_CHUNK_TRIAL;
	*run = w->hint_left;
	if (w->hint_kind == CB_DATA_UNKNOWN)
		return CB_CHUNK_TRIAL;
	*why = w->hint_kind == CB_DATA_QCOW2 ? CB_STORED_QCOW2 : CB_STORED_MAGIC;
	return CB_CHUNK_STORE;
}

/* A stored run for a writer that takes it in place: what is pending goes
 * first, then the run, with no copy into a chunk. */
static int store_direct(struct cb_codec_writer *w, enum cb_store_reason why, const unsigned char *p,
			size_t len)
{
	if (w->cm.len > 0 && emit_chunk(w) < 0)
		return -1;
	while (len > 0) {
		uint64_t room = unit_room(w);
		size_t k = room < len ? (size_t)room : len;
		struct cb_chunk_meta m = { k, CB_CHUNK_STORE, why, w->file_id, w->file_id, k == room };

		if (w->ops->store(w->st, &m, p) < 0) {
			w->failed = 1;
			return -1;
		}
		w->chunked += k;
		p += k;
		len -= k;
	}
	return 0;
}

/* Append len bytes of one class to chunks, emitting full ones and cutting
 * where the class changes (a chunk has one class). */
static int append(struct cb_codec_writer *w, enum cb_chunk_class cls, enum cb_store_reason why,
		  const unsigned char *p, size_t len)
{
	while (len > 0) {
		size_t k;

		if (w->cm.len > 0 && (w->cm.cls != cls || w->cm.reason != why) && emit_chunk(w) < 0)
			return -1;
		if (!w->cbuf && !(w->cbuf = w->ops->chunk_buf(w->st))) {
			w->failed = 1;
			return -1;
		}
		if (w->cm.len == 0)
			w->cm = (struct cb_chunk_meta){ 0, cls, why, w->file_id, 0, 0 };
		k = CB_CODEC_CHUNK - w->cm.len < len ? CB_CODEC_CHUNK - w->cm.len : len;
		if (unit_room(w) < k)
			k = (size_t)unit_room(w);
		/* bytes read in place (cb_codec_write_buffer) are already there;
		 * anything else may overlap the chunk (a part of such bytes) */
		if (p != w->cbuf + w->cm.len) {
			memmove(w->cbuf + w->cm.len, p, k);
			w->chunk_copied += k;
		}
		w->cm.len += k;
		w->cm.last_file = w->file_id;
		p += k;
		len -= k;
		if ((w->cm.len == CB_CODEC_CHUNK || unit_room(w) == 0) &&
		    emit_chunk(w) < 0)
			return -1;
	}
	return 0;
}

/* Bytes of the segment being replayed (codec_seg.c), in runs of one class. */
int cb_codec_inner_write(struct cb_codec_writer *w, const unsigned char *p, size_t len)
{
	while (len > 0) {
		enum cb_store_reason why;
		uint64_t run;
		enum cb_chunk_class cls = next_class(w, &why, &run);
		size_t k = run < len ? (size_t)run : len;
		int direct = cls == CB_CHUNK_STORE && w->ops->store;

		if ((direct ? store_direct(w, why, p, k) : append(w, cls, why, p, k)) < 0)
			return -1;
		if (w->hint_left)
			w->hint_left -= k;
		p += k;
		len -= k;
	}
	return 0;
}

int cb_codec_inner_flush(struct cb_codec_writer *w)
{
	return w->cm.len > 0 ? emit_chunk(w) : 0;
}
