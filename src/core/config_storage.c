/*
 * A [storage NAME] section's keys that only make sense together
 * (config_int.h): a type = s3 storage needs its endpoint and bucket, and
 * a directory's section refuses the keys of a bucket (a forgotten "type =
 * s3" would otherwise write the night to a local directory and say
 * nothing). Each problem is one error of the file, with its line and key.
 */
#include <string.h>

#include "config_int.h"

/* The keys that mean something only for an S3 storage. */
static const char *const s3_keys[] = { "endpoint", "bucket", "prefix", "region", "credentials",
				       "profile", NULL };

/* What a type = s3 section must have, and why. */
static const char *const s3_needs[][2] = {
	{ "endpoint", "the store's address: endpoint = http://HOST:PORT" },
	{ "bucket", "the bucket the backups go to: bucket = NAME" },
};
#define N_NEEDS (sizeof(s3_needs) / sizeof(s3_needs[0]))

static const struct cb_config_entry *last_entry(const struct cb_config_section *sec, const char *key)
{
	const struct cb_config_entry *e = NULL;

	for (size_t i = 0; i < sec->n_entries; i++)
		if (!strcmp(sec->entries[i].key, key))
			e = &sec->entries[i];
	return e;
}

static int is_s3_key(const char *key)
{
	for (int k = 0; s3_keys[k]; k++)
		if (!strcmp(key, s3_keys[k]))
			return 1;
	return 0;
}

/* *pos: first the needed keys of an S3 section, then (of a directory's)
 * its entries, one by one. */
int config_storage_next(const struct cb_config *cfg, const struct cb_config_section *sec,
			size_t *pos, int *line, const char **key)
{
	const struct cb_config_entry *type = last_entry(sec, "type");
	int s3 = type && !strcmp(type->value, "s3");

	for (; s3 && *pos < N_NEEDS; ++*pos) {
		if (last_entry(sec, s3_needs[*pos][0]))
			continue;
		*line = sec->line;
		*key = s3_needs[*pos][0];
		cb_error("%s:%d: [storage %s] is type = s3 (line %d) but has no key '%s' (%s)",
			 cfg->path, sec->line, sec->name, type->line, *key, s3_needs[*pos][1]);
		++*pos;
		return 1;
	}
	for (; !s3 && *pos < sec->n_entries; ++*pos) {
		const struct cb_config_entry *e = &sec->entries[*pos];
		if (!is_s3_key(e->key))
			continue;
		*line = e->line;
		*key = e->key;
		cb_error("%s:%d: key '%s': only an S3 storage has it, and [storage %s] is a directory "
			 "(add type = s3)", cfg->path, e->line, e->key, sec->name);
		++*pos;
		return 1;
	}
	return 0;
}
