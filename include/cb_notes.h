/*
 * cb_notes: vzdump's notes-template. The text written to ARCHIVE.notes
 * (shown by `cbackup list`, removed by prune with its archive) is the
 * template with {{cluster}} {{guestname}} {{node}} {{vmid}} (vzdump's) and
 * {{type}} (cbackup's: ct or vm) replaced, "\n" turned into a new line and
 * "\\" into a backslash. cbackup has no cluster: {{cluster}} is the host
 * name, as {{node}}.
 */
#ifndef CB_NOTES_H
#define CB_NOTES_H

struct cb_notes_vars {
	const char *cluster, *guestname, *node, *vmid, *type;
};

/* 0, or -1 naming the first unknown or unterminated {{variable}}. */
int cb_notes_check(const char *tmpl);
/* The expanded text (caller frees), ending with a new line. */
char *cb_notes_render(const char *tmpl, const struct cb_notes_vars *v);

#endif
