/*
 * cb_config: /etc/cbackup.conf (INI, read with iniparser) into entries that
 * remember their file and line, and resolution of one guest's options.
 *
 * File shape (DESIGN §4): keys before any section are global; sections are
 * [storage NAME], [ct ID], [vm ID]. vzdump's "key: value" lines are turned
 * into "key = value" before iniparser sees them, so /etc/vzdump.conf works.
 * Repeatable keys (disk, exclude-path) may appear several times.
 *
 * cb_config_load() validates every value through cb_opts_set(): a bad value
 * fails with "FILE:LINE: key 'KEY': invalid value ... (accepted: ...)".
 * Every error of the file is found in one load (cfg->errors, by line): a
 * bad line or value is left out and the next one checked; only a file
 * that is no text (binary data, a line over 64 KiB) or cannot be read
 * stops at the first. Warnings ("FILE:LINE: key 'KEY' repeats ...") are
 * collected in cfg->warnings (the caller logs them).
 */
#ifndef CB_CONFIG_H
#define CB_CONFIG_H

#include "cb_discover.h"
#include "cb_opts.h"

struct cb_config_entry {
	char *key;
	char *value;
	int line;
};

enum cb_section_kind { CB_SECTION_GLOBAL, CB_SECTION_STORAGE, CB_SECTION_CT, CB_SECTION_VM };

struct cb_config_section {
	enum cb_section_kind kind;
	char *name;                       /* storage name or guest ID; "" for global */
	int line;                         /* line of the [header] (0 for global) */
	struct cb_config_entry *entries;  /* in file order */
	size_t n_entries;
};

/* One error of the file, as printed: "FILE:LINE: key 'mode': ...". */
struct cb_config_error {
	int line;                         /* 0: not of one line (the file cannot be read) */
	char *key;                        /* NULL: not about one key (a section, a syntax error) */
	char *text;
};

struct cb_config {
	char *path;                       /* file loaded, or NULL when none */
	struct cb_config_section *sections; /* sections[0] is always the global one */
	size_t n_sections;
	struct cb_strvec warnings;        /* "FILE:LINE: key 'x' repeats line 3; ..." */
	struct cb_config_error *errors;   /* cb_config_open: every error, by line */
	size_t n_errors;
	/* the guests found on the host (cb_discover), not owned; NULL: none.
	 * A found guest resolves without a section: its keys come after the
	 * storage's and before its [ct ID]/[vm ID] section's. */
	const struct cb_found_list *found;
};

/* Load and validate. path NULL: use /etc/cbackup.conf if it exists, else an
 * empty config (built-in defaults). A path given explicitly must exist. */
int cb_config_load(struct cb_config *cfg, const char *path);
/* The same, but a file with errors is kept: -1 with cfg->errors (the
 * first also as the error set) and the keys that were valid (enough,
 * often, to say where the job's result goes); release cfg either way. */
int cb_config_open(struct cb_config *cfg, const char *path);
void cb_config_release(struct cb_config *cfg);

/* The [ct ID] or [vm ID] section, or NULL. */
const struct cb_config_section *cb_config_guest(const struct cb_config *cfg, const char *id);
const struct cb_config_section *cb_config_storage(const struct cb_config *cfg, const char *name);

/*
 * Resolve the options of guest `id` (may be NULL for an ad hoc backup):
 * defaults < global < storage < found on the host < guest section < cli (key/value pairs in
 * order, as the command line gave them). The storage is the one named by
 * the highest-precedence "storage" key; its "path" becomes dumpdir unless
 * a higher level sets dumpdir. An unknown storage name is an error.
 */
int cb_config_resolve(const struct cb_config *cfg, const char *id,
		      const struct cb_strvec *cli_kv, struct cb_opts *out);

/* Where guest ID's value of KEY comes from, for an error about it:
 * "option --root", "FILE:LINE: key 'root'", "FILE:LINE: [ct 101]" (the guest's
 * section, the key not set anywhere) or "default tmpdir". Malloc'ed. */
char *cb_config_origin(const struct cb_config *cfg, const char *id, const struct cb_strvec *cli_kv,
		       const char *key);

/* IDs of every guest section, in file order, then of every guest found
 * that has no section and is not skipped (for --all). */
void cb_config_guest_ids(const struct cb_config *cfg, struct cb_strvec *ids);

#endif
