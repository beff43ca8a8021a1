/*
 * cb_list: `cbackup list [ID]`: a table per guest of the backups in a dump
 * directory: date, size, codec, protected, checksum, verified, name.
 */
#ifndef CB_LIST_H
#define CB_LIST_H

#include <stdio.h>

int cb_list_run(const char *dumpdir, const char *id, FILE *out);

#endif
