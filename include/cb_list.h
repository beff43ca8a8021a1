/*
 * cb_list: `cbackup list [ID]`: a table per guest of the backups in a dump
 * directory: date, size, codec, protected, checksum, verified, name and
 * the first line of its notes; with json one JSON array of objects (id,
 * type, time, epoch, size, codec, protected, checksum, verified, archive,
 * notes), documented in cbackup(8).
 */
#ifndef CB_LIST_H
#define CB_LIST_H

#include <stdio.h>

int cb_list_run(const char *dumpdir, const char *id, int json, FILE *out);
/* The same for the nights of a unit store (cb_store.h). */
struct cb_objstore;
int cb_list_store(struct cb_objstore *s, const char *id, int json, FILE *out);

#endif
