/*
 * cb_imgstage: staging of VM disk images (regular files or block devices)
 * into DST/<base name>, in two passes like cb_stage:
 *   pass 1 (VM running): copy each image; holes and all-zero blocks stay
 *          holes in the staged copy; remember size, mtime, ctime, inode;
 *   pass 2 (VM stopped): re-read only images whose size, mtime or ctime
 *          changed (cb_stage_decide), compare block by block with the
 *          staged copy and write only the blocks that differ (punching
 *          holes where the source became zero).
 * Block devices have no reliable times: they are always compared in pass 2.
 */
#ifndef CB_IMGSTAGE_H
#define CB_IMGSTAGE_H

#include "cb_log.h"
#include "cb_progress.h"
#include "cb_stage.h"

struct cb_imgstage;

/* Images must have distinct base names. */
int cb_imgstage_new(struct cb_imgstage **out, const struct cb_strvec *images, const char *dst,
		    long bwlimit, struct cb_progress *progress, struct cb_log *log);
int cb_imgstage_pass1(struct cb_imgstage *st, struct cb_stage_stats *stats);
int cb_imgstage_pass2(struct cb_imgstage *st, struct cb_stage_stats *stats);
void cb_imgstage_free(struct cb_imgstage *st);

/* Allocated bytes of the images (their size for block devices). */
int cb_imgstage_estimate(const struct cb_strvec *images, uint64_t *bytes);

#endif
