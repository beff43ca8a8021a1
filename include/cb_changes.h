/*
 * cb_changes.h: the list of what the final sync (pass 2) re-checks, as
 * change tracking (cb_track.h) found it: the directories in which
 * something changed, by path, or by inode where no path could be placed,
 * and inodes to look up. Plain data, owned by whoever holds it
 * (cb_changes_free).
 */
#ifndef CB_CHANGES_H
#define CB_CHANGES_H

#include <stddef.h>
#include <stdint.h>

/* A directory in which something changed. Where the events only changed
 * entries (content, attributes), not made, removed or renamed one, pass 2
 * re-checks just those names; else it lists the directory. */
struct cb_changed_dir {
	char *rel;          /* "" (the root) or "a/b"; NULL in by_ino */
	char **names;       /* the entries that changed (none: the directory's
			     * own inode only); NULL: list it */
	size_t n_names;
	int deep;           /* walk its whole subtree (it was moved in: what
			     * changed in it while outside is unknown) */
	uint64_t ino;       /* by_ino: the directory's inode */
};

/* What pass 2 re-checks. Owned by the caller (cb_changes_free). */
struct cb_changes {
	struct cb_changed_dir *dirs;   /* cb_changes_sort */
	size_t n_dirs, cap_dirs;
	uint64_t *inos;     /* inodes of the root's file system to look up */
	size_t n_inos;
	/* directories that could not be placed by a path: pass 2
	 * finds them in its index by inode */
	struct cb_changed_dir *by_ino;
	size_t n_by_ino, cap_by_ino;
	uint64_t events;    /* events read, for the log */
};

void cb_changes_free(struct cb_changes *c);
/* rel is to be listed whole. */
void cb_changes_add_dir(struct cb_changes *c, const char *rel);
/* Only these names of rel changed (copied). */
void cb_changes_add_names(struct cb_changes *c, const char *rel, char *const *names, size_t n);
/* Sort the directories by strcmp (parents first), each once: a directory
 * named twice is listed if either says so, else gets both names. */
void cb_changes_sort(struct cb_changes *c);
/* "a/b/c": only c of "a/b" changed ("c" alone: c of the root). path is
 * cut at its last slash. */
void cb_changes_add_path(struct cb_changes *c, char *path);
/* A directory found by inode (by_ino), with its names as for
 * cb_changes_add_names. */
struct cb_changed_dir *cb_changes_add_by_ino(struct cb_changes *c, uint64_t ino, char *const *names,
					     size_t n);
/* Free a list of names and empty it. */
void cb_changes_names_free(char ***names, size_t *n);

#endif
