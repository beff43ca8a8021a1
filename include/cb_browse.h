/*
 * cb_browse: the archive's contents from its catalog (cb_index.h).
 *
 * `cbackup ls ARCHIVE [PATH...]`: entries like `tar -tv` (numeric owners,
 * sizes, "YYYY-MM-DD HH:MM" local times, "-> target", "link to target"),
 * or with json one JSON object per line; a PATH lists that entry and,
 * for a directory, its subtree. From the .idx alone (a scan of the archive
 * when there is none).
 *
 * `cbackup index ARCHIVE`: rebuild ARCHIVE.idx from the archive alone and
 * write it (.tmp, rename).
 */
#ifndef CB_BROWSE_H
#define CB_BROWSE_H

#include <stdio.h>
#include "cb_log.h"

int cb_ls_run(const char *archive, char *const *paths, size_t n_paths, int json, FILE *out,
	      struct cb_log *log);
/* dry_run: the catalog is built and checked, not written. */
int cb_index_run(const char *archive, int dry_run, struct cb_log *log);

#endif
