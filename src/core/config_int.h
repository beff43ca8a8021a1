/*
 * config_int.h: what config.c (loading and checking a file) and
 * config_resolve.c (a guest's options from it) share. Not a public header.
 */
#ifndef CB_CONFIG_INT_H
#define CB_CONFIG_INT_H

#include "cb_config.h"

const char *config_kind_name(enum cb_section_kind kind);
/* The place (enum cb_opt_where) of a section's keys. */
unsigned config_kind_where(enum cb_section_kind kind);
/* A [storage]'s keys that only make sense together (config_storage.c):
 * its next problem from *pos (0 at first) on: 1 with the error set, its
 * line and key; 0 when there is none left. */
int config_storage_next(const struct cb_config *cfg, const struct cb_config_section *sec,
			size_t *pos, int *line, const char **key);

#endif
