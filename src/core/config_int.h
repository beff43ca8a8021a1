/*
 * config_int.h: what config.c (loading and checking a file) and
 * config_resolve.c (a guest's options from it) share. Not a public header.
 */
#ifndef CB_CONFIG_INT_H
#define CB_CONFIG_INT_H

#include "cb_config.h"

const char *config_kind_name(enum cb_section_kind kind);

#endif
