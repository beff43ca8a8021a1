/*
 * cb_trust: is a file root may act on trustworthy? A configuration names
 * a hook script that runs as root; a file another user can write, or
 * replace, would run that user's commands as root. As sshd's StrictModes:
 * running as root, the file must be owned by root and writable by no group
 * and no other, and so must every directory above it (a sticky directory
 * such as /tmp may be writable by all: others cannot rename root's files
 * in it). Running as another user, the file and directories must be that
 * user's or root's, with the same modes.
 */
#ifndef CB_TRUST_H
#define CB_TRUST_H

#include <sys/stat.h>

/* fd is PATH opened; what: "config" in the message. 0, or -1 with an
 * error naming the file (or directory), its owner and its mode. Only
 * enforced when running as root (euid 0); always 0 otherwise. */
int cb_trust_file(int fd, const char *path, const char *what);

/* The same, but writable by group root (gid 0) too: lxc-create makes each
 * container's directory 0770 root:root, and group root is root's. */
int cb_trust_file_root_group(int fd, const char *path, const char *what);

#endif
