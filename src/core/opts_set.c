/*
 * cb_opts: finding a key in the schema table (src/core/opts.c), parsing and
 * checking a value by its type, and setting it in struct cb_opts: the one
 * setter the config file and the command line share. See include/cb_opts.h.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cb_enckey.h"
#include "cb_opts.h"
#include "cb_notes.h"
#include "cb_mailto.h"
#include "cb_prunerules.h"
#include "cb_util.h"

#define OFF(field) offsetof(struct cb_opts, field)
#define S CB_WHERE_STORAGE

const struct cb_opt_schema *cb_opt_find(const char *key)
{
	for (const struct cb_opt_schema *s = cb_opt_table; s->key; s++)
		if (!strcasecmp(s->key, key))
			return s;
	return NULL;
}

const struct cb_opt_schema *cb_opt_find_at(const char *key, unsigned where)
{
	for (const struct cb_opt_schema *s = cb_opt_table; s->key; s++)
		if (!strcasecmp(s->key, key) && (s->where & where))
			return s;
	return cb_opt_find(key);
}

unsigned cb_opt_places(const char *key)
{
	unsigned where = 0;

	for (const struct cb_opt_schema *s = cb_opt_table; s->key; s++)
		if (!strcasecmp(s->key, key))
			where |= s->where;
	return where;
}

static int parse_long(const struct cb_opt_schema *s, const char *value, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(value, &end, 10);
	if (errno || end == value || *end || v < s->min || v > s->max) {
		if (s->max == LONG_MAX / 1024 || s->max >= INT_MAX / 60)
			return cb_error("invalid value '%s' (accepted: a whole number %ld or more)",
					value, s->min);
		return cb_error("invalid value '%s' (accepted: %s)", value, s->accepted);
	}
	*out = v;
	return 0;
}

static int parse_double(const struct cb_opt_schema *s, const char *value, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(value, &end);
	if (errno || end == value || *end || v < (double)s->min || v > (double)s->max)
		return cb_error("invalid value '%s' (accepted: a number of %s from %ld)", value,
				s->accepted, s->min);
	*out = v;
	return 0;
}

static int parse_bool(const struct cb_opt_schema *s, const char *value, int *out)
{
	static const char *const yes[] = { "1", "yes", "true", "on", NULL };
	static const char *const no[] = { "0", "no", "false", "off", NULL };

	for (int i = 0; yes[i]; i++)
		if (!strcasecmp(value, yes[i]))
			return *out = 1, 0;
	for (int i = 0; no[i]; i++)
		if (!strcasecmp(value, no[i]))
			return *out = 0, 0;
	for (const struct cb_enum_name *n = s->names; n && n->name; n++)
		if (!strcasecmp(n->name, value))
			return *out = n->value, 0;
	return cb_error("invalid value '%s' (accepted: %s)", value, s->accepted);
}

static int parse_enum(const struct cb_opt_schema *s, const char *value, int *out)
{
	for (const struct cb_enum_name *n = s->names; n->name; n++)
		if (!strcasecmp(n->name, value))
			return *out = n->value, 0;
	return cb_error("invalid value '%s' (accepted: %s)", value, s->accepted);
}

static int set_string(char **field, const char *value)
{
	if (!*value)
		return cb_error("empty value");
	free(*field);
	*field = cb_xstrdup(value);
	return 0;
}

static int is_id_char(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-' || c == '.';
}

/* An ID names files in the dump, lock and staging directories: no '/',
 * no "..", nothing an option parser or a glob could take for something else. */
int cb_guest_id_check(const char *id)
{
	const char *p = id;

	if (!*id || *id == '.' || *id == '-')
		goto bad;
	for (; *p; p++)
		if (!is_id_char((unsigned char)*p))
			goto bad;
	return 0;
bad:
	return cb_error("invalid guest ID '%s' (accepted: letters, digits, '_', '-', '.', "
			"not starting with '.' or '-')", id);
}

static int check_prune(const char *value)
{
	struct cb_prune_rules rules;
	return cb_prune_parse(value, &rules);
}

/* prune-backups, or vzdump's deprecated maxfiles N: keep-last=N. */
static int set_retention(struct cb_opts *o, const struct cb_opt_schema *s, const char *value)
{
	char buf[64];
	long n;

	if (s->type == CB_OPT_STRING)
		return check_prune(value) < 0 ? -1 : set_string(&o->prune_backups, value);
	if (parse_long(s, value, &n) < 0)
		return -1;
	snprintf(buf, sizeof(buf), "keep-last=%ld", n);
	return set_string(&o->prune_backups, buf);
}

/* TARGET without its leading '/', each part a real name. */
static int check_target(const char *t)
{
	if (t[0] != '/')
		return cb_error("mount point target '%s' is not an absolute path", t);
	for (const char *p = t; *p;) {
		size_t n;
		p += strspn(p, "/");
		n = strcspn(p, "/");
		if ((n == 1 && p[0] == '.') || (n == 2 && !strncmp(p, "..", 2)))
			return cb_error("mount point target '%s' has a '.' or '..' part", t);
		p += n;
	}
	if (!t[strspn(t, "/")])
		return cb_error("mount point target '/' is the guest root (that is key 'root')");
	return 0;
}

/* "./a/b" from "/a//b/": the name the archive gives the target. */
static char *target_name(const char *t)
{
	char *out = cb_xmalloc(strlen(t) + 3), *o = out;

	*o++ = '.';
	for (const char *p = t; *(p += strspn(p, "/"));) {
		size_t n = strcspn(p, "/");
		*o++ = '/';
		memcpy(o, p, n);
		o += n;
		p += n;
	}
	*o = '\0';
	return out;
}

int cb_mp_split(const char *value, char **source, char **target)
{
	const char *comma = strchr(value, ',');

	if (!comma || strchr(comma + 1, ','))
		return cb_error("invalid value '%s' (accepted: SOURCE,TARGET)", value);
	if (value[0] != '/')
		return cb_error("mount point source '%.*s' is not an absolute path",
				(int)(comma - value), value);
	if (check_target(comma + 1) < 0)
		return -1;
	if (source)
		*source = cb_xasprintf("%.*s", (int)(comma - value), value);
	if (target)
		*target = target_name(comma + 1);
	return 0;
}

/* K, M, G, T alone or with "iB" or "B": binary multiples all */
static int size_shift(const char *unit, int *shift)
{
	static const char letters[] = "KMGT";
	const char *l = *unit ? strchr(letters, toupper((unsigned char)*unit)) : NULL;

	if (!*unit)
		return *shift = 0, 0;
	if (!l || (unit[1] && strcasecmp(unit + 1, "iB") && strcasecmp(unit + 1, "B")))
		return -1;
	*shift = 10 * (int)(l - letters + 1);
	return 0;
}

int cb_room_parse(const char *value, struct cb_room *out)
{
	struct cb_room r = { -1, 0 };
	char *end;
	unsigned long long v;
	int shift;

	errno = 0;
	v = isdigit((unsigned char)*value) ? strtoull(value, &end, 10) : (end = (char *)value, 0);
	if (end == value || errno)
		goto bad;
	if (!strcmp(end, "%")) {
		if (v > 100)
			goto bad;
		r.pct = (int)v;
	} else if (size_shift(end, &shift) < 0 || (shift && v > UINT64_MAX >> shift)) {
		goto bad;
	} else {
		r.bytes = (uint64_t)v << shift;
	}
	if (out)
		*out = r;
	return 0;
bad:
	return cb_error("invalid value '%s' (accepted: a percentage 0%%-100%% or a size such as "
			"10G)", value);
}

/* vzdump's exclude-path is a list split on blanks ("/tmp/?* /var/cache/?*"). */
static int split_blanks(struct cb_strvec *v, const char *value)
{
	char *copy = cb_xstrdup(value), *save = NULL;

	for (char *t = strtok_r(copy, " \t", &save); t; t = strtok_r(NULL, " \t", &save))
		cb_strvec_push(v, t);
	free(copy);
	return 0;
}

/* A key named in the config or on the command line is checked when it is
 * read: a bad one is a usage error before anything is touched. */
static int check_key_file(const char *path)
{
	struct cb_enckey k;
	int ret = cb_enckey_load(path, &k);

	cb_enckey_wipe(&k);
	return ret;
}

static int set_field(struct cb_opts *o, const struct cb_opt_schema *s, const char *value)
{
	char *field = (char *)o + s->offset;
	long l;

	if (s->offset == OFF(prune_backups))
		return set_retention(o, s, value);
	switch (s->type) {
	case CB_OPT_STRING:
		if (s->offset == OFF(notes_template) && cb_notes_check(value) < 0)
			return -1;
		if (s->offset == OFF(mailto) && cb_mailto_check(value) < 0)
			return -1;
		if (s->offset == OFF(id) && cb_guest_id_check(value) < 0)
			return -1;
		if (s->offset == OFF(keep_staging_free) && cb_room_parse(value, NULL) < 0)
			return -1;
		if (s->offset == OFF(encryption_key) && strcmp(value, "none") && check_key_file(value) < 0)
			return -1;
		if (s->where == S && cb_store_value_check(s->key, value) < 0)
			return -1;
		return set_string((char **)field, value);
	case CB_OPT_INT:
		if (parse_long(s, value, &l) < 0)
			return -1;
		*(int *)field = (int)l;
		return 0;
	case CB_OPT_LONG:
		return parse_long(s, value, (long *)field);
	case CB_OPT_DOUBLE:
		return parse_double(s, value, (double *)field);
	case CB_OPT_BOOL:
		return parse_bool(s, value, (int *)field);
	case CB_OPT_ENUM:
		return parse_enum(s, value, (int *)field);
	case CB_OPT_LIST:
		if (!*value)
			return cb_error("empty value");
		if (s->offset == OFF(mps) && cb_mp_split(value, NULL, NULL) < 0)
			return -1;
		if (s->offset == OFF(exclude_paths))
			return split_blanks((struct cb_strvec *)field, value);
		cb_strvec_push((struct cb_strvec *)field, value);
		return 0;
	}
	return cb_error("internal: bad option type");
}

int cb_opts_set(struct cb_opts *o, const char *key, const char *value, int *unknown)
{
	return cb_opts_set_at(o, key, CB_WHERE_ANY, value, unknown);
}

int cb_opts_set_at(struct cb_opts *o, const char *key, unsigned where, const char *value,
		   int *unknown)
{
	const struct cb_opt_schema *s = cb_opt_find_at(key, where);

	if (unknown)
		*unknown = !s;
	if (!s)
		return cb_error("unknown key '%s'", key);
	if (!value)   /* a line a broken file left without one */
		return cb_error("no value");
	return set_field(o, s, value);
}

void cb_opts_init(struct cb_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->zstd_level = 3;
	for (const struct cb_opt_schema *s = cb_opt_table; s->key; s++)
		if (s->def && set_field(o, s, s->def) < 0)
			abort();  /* a broken built-in default is a programming error */
}

void cb_opts_release(struct cb_opts *o)
{
	for (const struct cb_opt_schema *s = cb_opt_table; s->key; s++) {
		char *field = (char *)o + s->offset;
		if (s->type == CB_OPT_STRING) {
			free(*(char **)field);
			*(char **)field = NULL;
		} else if (s->type == CB_OPT_LIST) {
			cb_strvec_clear((struct cb_strvec *)field);
		}
	}
}

/* Two keys may share a field ("path" and "dumpdir"): the first one owns it. */
static int first_of_field(const struct cb_opt_schema *s)
{
	for (const struct cb_opt_schema *t = cb_opt_table; t < s; t++)
		if (t->offset == s->offset)
			return 0;
	return 1;
}

void cb_opts_copy(struct cb_opts *dst, const struct cb_opts *src)
{
	*dst = *src;
	for (const struct cb_opt_schema *s = cb_opt_table; s->key; s++) {
		char *field = (char *)dst + s->offset;
		if (!first_of_field(s))
			continue;
		if (s->type == CB_OPT_STRING && *(char **)field) {
			*(char **)field = cb_xstrdup(*(char **)field);
		} else if (s->type == CB_OPT_LIST) {
			struct cb_strvec copy = CB_STRVEC_INIT;
			cb_strvec_copy(&copy, (const struct cb_strvec *)((const char *)src + s->offset));
			*(struct cb_strvec *)field = copy;
		}
	}
}
