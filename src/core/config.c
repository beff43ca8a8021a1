/*
 * cb_config: /etc/cbackup.conf loader and option resolution.
 * See include/cb_config.h.
 *
 * iniparser keeps no line numbers, rejects vzdump's "key: value" lines and
 * keeps only the last of repeated keys. So a pre-pass of our own reads the
 * file line by line, checks the syntax (reporting FILE:LINE), and writes a
 * converted copy to a memfd in which every section is renamed "sN" and
 * every key "kLINE". iniparser then parses only the values (quotes, inline
 * comments), and each value is found again by its line number.
 *
 * One idea in 750 lines: reading a file into checked sections (resolving a
 * guest's options from them is config_resolve.c's); the pre-pass, the
 * iniparser pass and the checks share the line map.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iniparser.h>

#include "cb_config.h"
#include "cb_pve.h"
#include "cb_trust.h"
#include "config_int.h"

#define DEFAULT_CONFIG "/etc/cbackup.conf"

#define MAX_LINE (64 * 1024)   /* longer than this is not a config file */

#define MAX_VALUE 1000         /* iniparser reads lines of at most 1023 bytes */

#define SHOW_LINE 60           /* how much of a bad line an error quotes */

#define MAX_ERRORS 50          /* errors said of one file */

/* vzdump.conf keys that mean nothing to cbackup: a warning saying why, not
 * "unknown". cbackup.conf(5) has the same list in its vzdump table. */
static const struct {
	const char *key;
	const char *why;
} vzdump_ignored[] = {
	{ "notification-mode", "cbackup mails through sendmail only: set mailto" },
	{ "notification-policy", "Proxmox notification system; cbackup uses mailnotification" },
	{ "notification-target", "Proxmox notification system; cbackup uses mailto" },
	{ "node", "cbackup backs up guests of this host only" },
	{ "pool", "no Proxmox resource pools: give guest IDs or --all" },
	{ "performance", "cbackup sizes its own copy and compression workers" },
	{ "fleecing", "cbackup copies to a staging directory instead of fleecing images" },
	{ "pbs-change-detection-mode", "no Proxmox Backup Server target" },
	{ "size", "LVM snapshot size: cbackup takes no LVM snapshots" },
	{ "all", "give --all on the command line" },
	{ "exclude", "give --exclude ID,... on the command line" },
	{ "vmid", "give guest IDs on the command line" },
	{ "stop", "stops a running vzdump job; no meaning in a configuration" },
	{ "job-id", "set by the Proxmox scheduler" },
};

#define N_VZDUMP_IGNORED (sizeof(vzdump_ignored) / sizeof(vzdump_ignored[0]))

struct prepass {
	const char *path;
	struct cb_config *cfg;
	FILE *out;          /* the converted text (open_memstream) */
	int lineno;
	const char *key;    /* the line's key, for its error (NULL: none) */
	int skipping;       /* after a bad section header: its keys are left out */
};

/* ---- small helpers ---- */

static char *trim(char *s)
{
	char *end;

	while (*s == ' ' || *s == '\t')
		s++;
	end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
		*--end = '\0';
	return s;
}

static int is_name_char(int c)
{
	return isalnum(c) || c == '_' || c == '.' || c == '-';
}

static int is_name(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!is_name_char((unsigned char)*s))
			return 0;
	return 1;
}

static void lowercase(char *s)
{
	for (; *s; s++)
		*s = (char)tolower((unsigned char)*s);
}

static int syntax_error(const struct prepass *pp, const char *line)
{
	if (strlen(line) > SHOW_LINE)
		return cb_error("%s:%d: syntax error: %.*s...", pp->path, pp->lineno, SHOW_LINE, line);
	return cb_error("%s:%d: syntax error: %s", pp->path, pp->lineno, line);
}

const char *config_kind_name(enum cb_section_kind kind)
{
	static const char *const names[] = { "global", "storage", "ct", "vm" };
	return names[kind];
}

unsigned config_kind_where(enum cb_section_kind kind)
{
	if (kind == CB_SECTION_GLOBAL)
		return CB_WHERE_GLOBAL;
	return kind == CB_SECTION_STORAGE ? CB_WHERE_STORAGE : CB_WHERE_GUEST;
}

/* ---- building the config ---- */

static struct cb_config_section *add_section(struct cb_config *cfg, enum cb_section_kind kind,
					     const char *name, int line)
{
	struct cb_config_section *sec;

	cfg->sections = cb_xrealloc(cfg->sections, (cfg->n_sections + 1) * sizeof(*sec));
	sec = &cfg->sections[cfg->n_sections++];
	memset(sec, 0, sizeof(*sec));
	sec->kind = kind;
	sec->name = cb_xstrdup(name);
	sec->line = line;
	return sec;
}

static void add_entry(struct cb_config_section *sec, const char *key, int line)
{
	struct cb_config_entry *e;

	sec->entries = cb_xrealloc(sec->entries, (sec->n_entries + 1) * sizeof(*e));
	e = &sec->entries[sec->n_entries++];
	e->key = cb_xstrdup(key);
	lowercase(e->key);
	e->value = NULL;
	e->line = line;
}

static void release_section(struct cb_config_section *sec)
{
	for (size_t i = 0; i < sec->n_entries; i++) {
		free(sec->entries[i].key);
		free(sec->entries[i].value);
	}
	free(sec->entries);
	free(sec->name);
}

/* The error just set (cb_last_error) joins the file's list; a file with
 * more is no cbackup configuration (a script given as --config): the
 * rest are not said. */
static void note_error(struct cb_config *cfg, int line, const char *key)
{
	struct cb_config_error *e;

	if (cfg->n_errors > MAX_ERRORS)
		return;
	if (cfg->n_errors == MAX_ERRORS) {
		cb_error("%s:%d: more than %d errors: the rest are not reported", cfg->path, line,
			 MAX_ERRORS);
		key = NULL;
	}
	cfg->errors = cb_xrealloc(cfg->errors, (cfg->n_errors + 1) * sizeof(*e));
	e = &cfg->errors[cfg->n_errors++];
	e->line = line;
	e->key = key ? cb_xstrdup(key) : NULL;
	e->text = cb_xstrdup(cb_last_error());
}

void cb_config_release(struct cb_config *cfg)
{
	for (size_t i = 0; i < cfg->n_sections; i++)
		release_section(&cfg->sections[i]);
	for (size_t i = 0; i < cfg->n_errors; i++) {
		free(cfg->errors[i].key);
		free(cfg->errors[i].text);
	}
	free(cfg->errors);
	free(cfg->sections);
	free(cfg->path);
	cb_strvec_clear(&cfg->warnings);
	memset(cfg, 0, sizeof(*cfg));
}

static void start_empty(struct cb_config *cfg, const char *path)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->path = path ? cb_xstrdup(path) : NULL;
	add_section(cfg, CB_SECTION_GLOBAL, "", 0);
}

/* ---- pre-pass: one line at a time ---- */

/*
 * Read one line (without '\n') into buf of MAX_LINE + 1 bytes.
 * Returns 1, 0 at EOF, -1 when the line is too long, -2 on a read error.
 */
static int read_line(FILE *in, char *buf, size_t *len)
{
	int c;

	*len = 0;
	while ((c = getc_unlocked(in)) != EOF && c != '\n') {
		if (*len == MAX_LINE)
			return -1;
		buf[(*len)++] = (char)c;
	}
	buf[*len] = '\0';
	if (ferror(in))
		return -2;
	return c == EOF && *len == 0 ? 0 : 1;
}

/* NUL and other control bytes mean this is not a text file: say so early. */
static int check_bytes(const struct prepass *pp, const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];
		if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f)
			return cb_error("%s:%d: binary data (byte 0x%02x), not a text config file",
					pp->path, pp->lineno, c);
	}
	return 0;
}

static int parse_kind(const char *word, enum cb_section_kind *kind)
{
	if (!strcasecmp(word, "storage"))
		*kind = CB_SECTION_STORAGE;
	else if (!strcasecmp(word, "ct"))
		*kind = CB_SECTION_CT;
	else if (!strcasecmp(word, "vm"))
		*kind = CB_SECTION_VM;
	else
		return -1;
	return 0;
}

static int check_duplicate(const struct prepass *pp, enum cb_section_kind kind, const char *name)
{
	const struct cb_config *cfg = pp->cfg;
	int guest = kind == CB_SECTION_CT || kind == CB_SECTION_VM;

	for (size_t i = 1; i < cfg->n_sections; i++) {
		const struct cb_config_section *s = &cfg->sections[i];
		int s_guest = s->kind == CB_SECTION_CT || s->kind == CB_SECTION_VM;
		if (strcmp(s->name, name) || (guest ? !s_guest : s->kind != kind))
			continue;
		return cb_error("%s:%d: duplicate section '[%s %s]' (already defined as '[%s %s]' at line %d)",
				pp->path, pp->lineno, config_kind_name(kind), name, config_kind_name(s->kind),
				s->name, s->line);
	}
	return 0;
}

/* "[kind name]", optionally followed by a comment. */
static int parse_section(struct prepass *pp, char *line)
{
	char *close = strchr(line, ']'), *rest, *inner, *name;
	enum cb_section_kind kind;

	if (!close)
		return syntax_error(pp, line);
	rest = trim(close + 1);
	if (*rest && *rest != '#' && *rest != ';')
		return syntax_error(pp, line);
	*close = '\0';
	inner = trim(line + 1);
	name = inner + strcspn(inner, " \t");
	if (*name)
		*name++ = '\0';
	name = trim(name);
	if (parse_kind(inner, &kind) == 0 && kind != CB_SECTION_STORAGE && *name &&
	    cb_guest_id_check(name) < 0)
		return cb_error_prefix("%s:%d", pp->path, pp->lineno);
	if (parse_kind(inner, &kind) < 0 || !is_name(name))
		return cb_error("%s:%d: unknown section '[%s%s%s]' (accepted: [storage NAME], [ct ID], [vm ID])",
				pp->path, pp->lineno, inner, *name ? " " : "", name);
	if (check_duplicate(pp, kind, name) < 0)
		return -1;
	pp->skipping = 0;
	add_section(pp->cfg, kind, name, pp->lineno);
	fprintf(pp->out, "[s%zu]\n", pp->cfg->n_sections - 1);
	return 0;
}

/* "key = value" or vzdump's "key: value": whichever separator comes first. */
/* "x or 'x without its closing quote (iniparser would take it literally). */
static int unterminated_quote(const char *value)
{
	return (value[0] == '"' || value[0] == '\'') && !strchr(value + 1, value[0]);
}

static int parse_keyvalue(struct prepass *pp, char *line)
{
	size_t k = strcspn(line, "=:");
	char *rest, *key;
	size_t vlen;

	if (!line[k])
		return syntax_error(pp, line);
	rest = line + k + 1;
	line[k] = '\0';
	key = trim(line);
	if (!is_name(key)) {
		line[k] = '=';
		return syntax_error(pp, line);
	}
	if (pp->skipping)
		return 0;
	pp->key = key;
	rest = trim(rest);
	vlen = strlen(rest);
	if (unterminated_quote(rest))
		return cb_error("%s:%d: key '%s': unterminated quote in %s", pp->path, pp->lineno, key,
				rest);
	if (vlen > MAX_VALUE)
		return cb_error("%s:%d: value of key '%s' is too long (%zu bytes, at most %d)",
				pp->path, pp->lineno, key, vlen, MAX_VALUE);
	add_entry(&pp->cfg->sections[pp->cfg->n_sections - 1], key, pp->lineno);
	/* A trailing '\' would make iniparser join the next line: end with an
	 * empty inline comment so that the backslash stays a plain character. */
	fprintf(pp->out, "k%d = %s%s\n", pp->lineno, rest,
		vlen && rest[vlen - 1] == '\\' ? " ;" : "");
	return 0;
}

static int classify_line(struct prepass *pp, char *buf)
{
	char *line = trim(buf);

	if (pp->lineno == 1 && !strncmp(line, "\xef\xbb\xbf", 3))
		line = trim(line + 3);  /* a UTF-8 byte order mark from a Windows editor */
	if (!*line || *line == '#' || *line == ';')
		return 0;
	if (*line == '[') {
		pp->skipping = 1;   /* until the header is found good */
		return parse_section(pp, line);
	}
	return parse_keyvalue(pp, line);
}

static int prepass_file(struct prepass *pp, FILE *in)
{
	char *buf = cb_xmalloc(MAX_LINE + 1);
	size_t len;
	int r, ret = -1;

	fputs("[s0]\n", pp->out);
	for (pp->lineno = 1;; pp->lineno++) {
		r = read_line(in, buf, &len);
		if (r == 0)
			break;
		if (r == -1) {
			cb_error("%s:%d: line too long (more than %d bytes)", pp->path, pp->lineno, MAX_LINE);
			goto out;
		}
		if (r == -2) {
			cb_error_errno("cannot read config '%s'", pp->path);
			goto out;
		}
		if (check_bytes(pp, buf, len) < 0)
			goto out;
		pp->key = NULL;
		/* a bad line is left out, and the next one checked */
		if (classify_line(pp, buf) < 0)
			note_error(pp->cfg, pp->lineno, pp->key);
	}
	ret = 0;
out:
	if (ret < 0)
		note_error(pp->cfg, pp->lineno, NULL);
	free(buf);
	return ret;
}

/* ---- iniparser: the values ---- */

static int quiet_errback(const char *fmt, ...)
{
	(void)fmt;
	return 0;
}

static dictionary *load_converted(const char *path, const char *text, size_t len)
{
	dictionary *d = NULL;
	char procpath[64];
	int fd = memfd_create("cbackup-config", MFD_CLOEXEC);

	if (fd < 0) {
		cb_error_errno("cannot parse config '%s': memfd_create", path);
		return NULL;
	}
	if (cb_write_all(fd, text, len) < 0) {
		cb_error_errno("cannot parse config '%s': write", path);
		goto out;
	}
	snprintf(procpath, sizeof(procpath), "/proc/self/fd/%d", fd);
	/* The pre-pass already reported every syntax error with its line;
	 * iniparser's own stderr messages would only confuse. */
	iniparser_set_error_callback(quiet_errback);
	d = iniparser_load(procpath);
	iniparser_set_error_callback(NULL);
	if (!d)
		cb_error("cannot parse config '%s' (is /proc mounted?)", path);
out:
	close(fd);
	return d;
}

static int fill_values(struct cb_config *cfg, const dictionary *d)
{
	char ikey[64];

	for (size_t i = 0; i < cfg->n_sections; i++) {
		struct cb_config_section *sec = &cfg->sections[i];
		for (size_t j = 0; j < sec->n_entries; j++) {
			const char *v;
			snprintf(ikey, sizeof(ikey), "s%zu:k%d", i, sec->entries[j].line);
			v = iniparser_getstring(d, ikey, NULL);
			if (!v)
				return cb_error("%s:%d: internal: value of key '%s' lost by iniparser",
						cfg->path, sec->entries[j].line, sec->entries[j].key);
			sec->entries[j].value = cb_xstrdup(v);
		}
	}
	return 0;
}

/* ---- validation ---- */

static int vzdump_ignored_index(const char *key)
{
	for (size_t i = 0; i < N_VZDUMP_IGNORED; i++)
		if (!strcmp(vzdump_ignored[i].key, key))
			return (int)i;
	return -1;
}

/* An unknown key is an error (a typo would silently change the backup:
 * "compres = zstd" ran uncompressed), with the key it most looks like. */
static int unknown_key(const struct cb_config *cfg, const struct cb_config_entry *e)
{
	const char **cands;
	const char *near;
	size_t n = 0;

	for (const struct cb_opt_schema *s = cb_opt_table; s->key; s++)
		n++;
	cands = cb_xcalloc(n + N_VZDUMP_IGNORED + 1, sizeof(*cands));
	n = 0;
	for (const struct cb_opt_schema *s = cb_opt_table; s->key; s++)
		if (s->where != CB_WHERE_CLI)
			cands[n++] = s->key;
	near = cb_closest_word(e->key, cands, n);
	free(cands);
	if (near)
		return cb_error("%s:%d: unknown key '%s' (did you mean '%s'?)", cfg->path, e->line,
				e->key, near);
	return cb_error("%s:%d: unknown key '%s' (the keys are in cbackup.conf(5))", cfg->path,
			e->line, e->key);
}

/* A vzdump key cbackup knows but does not apply: a warning saying why. */
static void warn_vzdump(struct cb_config *cfg, const struct cb_config_entry *e, int i)
{
	char *w = cb_xasprintf("%s:%d: key '%s' is a vzdump option cbackup ignores (%s)", cfg->path,
			       e->line, e->key, vzdump_ignored[i].why);

	cb_strvec_push(&cfg->warnings, w);
	free(w);
}

/* Paths in the file are absolute: cron and systemd start cbackup in a
 * directory that is not the admin's. */
static int check_absolute(const struct cb_config *cfg, const struct cb_config_entry *e,
			  const struct cb_opt_schema *s)
{
	/* mp checks its SOURCE itself (cb_mp_split) */
	static const char *const path_kinds[] = { "DIR", "FILE", "SOCKET", NULL };

	if (s->type != CB_OPT_STRING && s->type != CB_OPT_LIST)
		return 0;
	for (int i = 0; path_kinds[i]; i++)
		if (!strcmp(s->accepted, path_kinds[i]) && e->value[0] && e->value[0] != '/')
			return cb_error("%s:%d: key '%s': relative path '%s' (write it from '/': cron "
					"and systemd run cbackup in another directory)", cfg->path, e->line,
					e->key, e->value);
	return 0;
}

/* "global, [storage], [ct]/[vm]" for a where bit set. */
static void where_text(unsigned where, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	if (where & CB_WHERE_GLOBAL)
		n += (size_t)snprintf(buf + n, len - n, "%sglobal", n ? ", " : "");
	if ((where & CB_WHERE_STORAGE) && n < len)
		n += (size_t)snprintf(buf + n, len - n, "%s[storage]", n ? ", " : "");
	if ((where & CB_WHERE_GUEST) && n < len)
		n += (size_t)snprintf(buf + n, len - n, "%s[ct], [vm]", n ? ", " : "");
	if (!n)
		snprintf(buf, len, "command line only");
}

static int check_where(const struct cb_config *cfg, const struct cb_config_section *sec,
		       const struct cb_config_entry *e, const struct cb_opt_schema *s)
{
	char allowed[64];

	if (s->where & config_kind_where(sec->kind))
		return 0;
	where_text(cb_opt_places(s->key), allowed, sizeof(allowed));
	if (sec->kind == CB_SECTION_GLOBAL)
		return cb_error("%s:%d: key '%s' is not allowed in the global section (allowed: %s)",
				cfg->path, e->line, e->key, allowed);
	return cb_error("%s:%d: key '%s' is not allowed in a [%s] section (allowed: %s)",
			cfg->path, e->line, e->key, config_kind_name(sec->kind), allowed);
}

/*
 * A repeated single-valued key is legal (the last wins) but often a slip.
 * Entries [0, kept) are the valid ones seen so far.
 */
static void warn_repeat(struct cb_config *cfg, const struct cb_config_section *sec,
			const struct cb_config_entry *e, size_t kept)
{
	for (size_t i = 0; i < kept; i++) {
		if (strcmp(sec->entries[i].key, e->key))
			continue;
		char *w = cb_xasprintf("%s:%d: key '%s' repeats line %d; the last value wins",
				       cfg->path, e->line, e->key, sec->entries[i].line);
		cb_strvec_push(&cfg->warnings, w);
		free(w);
		return;
	}
}

/*
 * Check one entry. *keep = 0 for keys that are only warned about (they are
 * dropped, so that resolution sees only valid keys).
 */
static int check_entry(struct cb_config *cfg, const struct cb_config_section *sec, size_t j,
		       size_t kept, struct cb_opts *scratch, int *keep)
{
	const struct cb_config_entry *e = &sec->entries[j];
	const struct cb_opt_schema *s = cb_opt_find_at(e->key, config_kind_where(sec->kind));

	*keep = s != NULL;
	if (!s && vzdump_ignored_index(e->key) >= 0) {
		warn_vzdump(cfg, e, vzdump_ignored_index(e->key));
		return 0;
	}
	if (!s)
		return unknown_key(cfg, e);
	if (check_where(cfg, sec, e, s) < 0 || check_absolute(cfg, e, s) < 0)
		return -1;
	if (cb_opts_set_at(scratch, s->key, s->where, e->value, NULL) < 0)
		return cb_error_prefix("%s:%d: key '%s'", cfg->path, e->line, e->key);
	if (s->type != CB_OPT_LIST)
		warn_repeat(cfg, sec, e, kept);
	return 0;
}

static const struct cb_config_entry *section_entry(const struct cb_config_section *sec,
						    const char *key)
{
	for (size_t i = 0; i < sec->n_entries; i++)
		if (!strcmp(sec->entries[i].key, key))
			return &sec->entries[i];
	return NULL;
}

/* vzdump's deprecated maxfiles: a warning alone, an error beside prune-backups. */
static int check_maxfiles(struct cb_config *cfg, const struct cb_config_section *sec)
{
	const struct cb_config_entry *m = section_entry(sec, "maxfiles");
	const struct cb_config_entry *p = section_entry(sec, "prune-backups");
	char *w;

	if (!m)
		return 0;
	if (p)
		return cb_error("%s:%d: keys 'maxfiles' and 'prune-backups' are both set (the other "
				"at line %d); keep only prune-backups", cfg->path, m->line > p->line ? m->line : p->line,
				m->line > p->line ? p->line : m->line);
	w = cb_xasprintf("%s:%d: key 'maxfiles' is deprecated: it means prune-backups = keep-last=%s; "
			 "write that instead", cfg->path, m->line, m->value);
	cb_strvec_push(&cfg->warnings, w);
	free(w);
	return 0;
}

/* The line check_maxfiles names: the later of the two keys. */
static int maxfiles_line(const struct cb_config_section *sec)
{
	const struct cb_config_entry *m = section_entry(sec, "maxfiles");
	const struct cb_config_entry *p = section_entry(sec, "prune-backups");

	return m && p && p->line > m->line ? p->line : m ? m->line : 0;
}

static void validate_section(struct cb_config *cfg, struct cb_config_section *sec)
{
	struct cb_opts scratch;
	size_t kept = 0, j;
	int keep, line;
	const char *key;

	cb_opts_init(&scratch);
	for (j = 0; j < sec->n_entries; j++) {
		/* a bad entry is left out: the file's other errors are still found */
		if (check_entry(cfg, sec, j, kept, &scratch, &keep) < 0) {
			note_error(cfg, sec->entries[j].line, sec->entries[j].key);
			keep = 0;
		}
		if (keep) {
			sec->entries[kept++] = sec->entries[j];
		} else {
			free(sec->entries[j].key);
			free(sec->entries[j].value);
		}
	}
	sec->n_entries = kept;
	cb_opts_release(&scratch);
	if (check_maxfiles(cfg, sec) < 0)
		note_error(cfg, maxfiles_line(sec), "maxfiles");
	for (size_t pos = 0; sec->kind == CB_SECTION_STORAGE &&
	     config_storage_next(cfg, sec, &pos, &line, &key);)
		note_error(cfg, line, key);
}

static void validate(struct cb_config *cfg)
{
	for (size_t i = 0; i < cfg->n_sections; i++)
		validate_section(cfg, &cfg->sections[i]);
}

/* ---- loading ---- */

static int parse_file(struct cb_config *cfg, FILE *in)
{
	struct prepass pp = { .path = cfg->path, .cfg = cfg };
	char *text = NULL;
	size_t len = 0;
	dictionary *d = NULL;
	int ret = -1;

	pp.out = open_memstream(&text, &len);
	if (!pp.out)
		return cb_error_errno("cannot parse config '%s'", cfg->path);
	if (prepass_file(&pp, in) < 0) {
		fclose(pp.out);
		goto out;
	}
	if (fclose(pp.out) != 0) {
		cb_error_errno("cannot parse config '%s'", cfg->path);
		goto out;
	}
	d = load_converted(cfg->path, text, len);
	if (d && fill_values(cfg, d) == 0) {
		validate(cfg);
		ret = 0;
	}
out:
	if (d)
		iniparser_freedict(d);
	free(text);
	return ret;
}

/* A regular file (a FIFO would block the job, a device feed it anything),
 * that root may trust (cb_trust) when running as root. */
static FILE *open_config(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	FILE *in = NULL;

	if (fd < 0) {
		cb_error_errno("cannot read config '%s'", path);
		return NULL;
	}
	if (fstat(fd, &st) < 0)
		cb_error_errno("cannot stat config '%s'", path);
	else if (!S_ISREG(st.st_mode))
		cb_error("config '%s' is not a regular file (%s)", path,
			 S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)
			 ? "a device" : S_ISDIR(st.st_mode) ? "a directory" : "a special file");
	else if (cb_trust_file(fd, path, "config") == 0 && !(in = fdopen(fd, "r")))
		cb_error_errno("cannot read config '%s'", path);
	if (!in)
		close(fd);
	return in;
}

static int by_line(const void *a, const void *b)
{
	const struct cb_config_error *x = a, *y = b;

	return (x->line > y->line) - (x->line < y->line);
}

int cb_config_open(struct cb_config *cfg, const char *path)
{
	FILE *in;

	if (!path && access(DEFAULT_CONFIG, F_OK) < 0 && errno == ENOENT) {
		start_empty(cfg, NULL);
		return 0;
	}
	start_empty(cfg, path ? path : DEFAULT_CONFIG);
	in = open_config(cfg->path);
	if (!in) {
		note_error(cfg, 0, NULL);
	} else {
		if (parse_file(cfg, in) < 0 && !cfg->n_errors)
			note_error(cfg, 0, NULL);
		fclose(in);
	}
	if (!cfg->n_errors)
		return 0;
	/* the syntax errors were found first: said in the file's order */
	qsort(cfg->errors, cfg->n_errors, sizeof(*cfg->errors), by_line);
	return cb_error("%s", cfg->errors[0].text);
}

int cb_config_load(struct cb_config *cfg, const char *path)
{
	int ret = cb_config_open(cfg, path);

	if (ret < 0)
		cb_config_release(cfg);
	return ret;
}
