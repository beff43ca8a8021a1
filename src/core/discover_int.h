/* cb_discover's parts shared by its LXC and Proxmox readers. */
#ifndef CB_DISCOVER_INT_H
#define CB_DISCOVER_INT_H

#include <stdio.h>

#include "cb_discover.h"

/* A new guest at the end of the list (its fields zeroed but id and file). */
struct cb_found *found_add(struct cb_found_list *list, const char *id, int is_vm, const char *file);
void found_key(struct cb_found *f, const char *key, const char *value, const char *file, int line);
/* The guest's error (the first one counts): "FILE:LINE: key 'K': MSG". */
void found_error(struct cb_found *f, const char *key, const char *file, int line, const char *msg);
void found_note(struct cb_found *f, const char *fmt, ...) CB_PRINTF(2, 3);
/* $CBACKUP_CGROUP_DIR/REL, or REL (relative to the cgroup mount). Malloc'ed. */
char *found_cgroup(const char *rel);

/* A guest's configuration file opened for reading when it is a regular
 * file root may trust (cb_trust); NULL with *why (malloc'ed) saying why
 * not, or with *why NULL when there is no such file. */
FILE *found_fopen(const char *file, char **why);

void discover_pve(struct cb_found_list *list);

#endif
