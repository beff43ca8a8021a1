/*
 * The job's preflight of its S3 storages (cb_job_check_stores, cb_job.h):
 * a missing bucket, refused keys or an endpoint that does not answer are
 * found before any guest is frozen or copied, once per storage however
 * many guests go there, and fail those guests as a configuration error
 * does (exit 2, nothing touched).
 */
#include <stdlib.h>
#include <string.h>

#include "cb_job.h"
#include "cb_objstore.h"
#include "cb_util.h"

/* What one storage's check said: NULL, it is fine. */
struct store_seen {
	char *name;
	char *error;
};

/* 0 the storage is there and usable; -1 with the error naming it. */
static int check_store(const struct cb_opts *o)
{
	struct cb_objstore *s = NULL;
	int rc = cb_objstore_s3_from_opts(o, &s);

	if (rc == 0 && s)
		rc = s->ops->check(s);
	if (s)
		s->ops->close(s);
	return rc;
}

static const char *seen_error(struct store_seen *seen, size_t *n_seen, const struct cb_opts *o)
{
	for (size_t k = 0; k < *n_seen; k++)
		if (!strcmp(seen[k].name, o->storage))
			return seen[k].error;
	seen[*n_seen].name = cb_xstrdup(o->storage);
	seen[*n_seen].error = check_store(o) < 0 ? cb_xstrdup(cb_last_error()) : NULL;
	return seen[(*n_seen)++].error;
}

void cb_job_check_stores(const struct cb_opts *guests, size_t n, char **errors)
{
	struct store_seen *seen = cb_xcalloc(n + 1, sizeof(*seen));
	size_t n_seen = 0;

	for (size_t i = 0; i < n; i++) {
		const char *err;
		if (errors[i] || guests[i].storage_type != CB_STORAGE_S3 || guests[i].to_stdout)
			continue;
		err = guests[i].storage ? seen_error(seen, &n_seen, &guests[i])
					: "internal: an S3 storage without a name";
		if (err)
			errors[i] = cb_xstrdup(err);
	}
	for (size_t k = 0; k < n_seen; k++) {
		free(seen[k].name);
		free(seen[k].error);
	}
	free(seen);
}
