/*
 * An S3 bucket behind cb_objstore.h: every name under the storage's
 * prefix, every request through the S3 client (cb_s3.h: signed, retried,
 * each upload with its MD5 and SHA-256), every error prefixed with the
 * storage's name so that a night's failure says which storage it was.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>

#include "cb_objstore.h"
#include "cb_opts.h"
#include "cb_s3.h"
#include "cb_util.h"

/* An object created only if absent is read back after when it is no
 * larger than this (manifests, locks). */
#define CHECK_AFTER_MAX (1024 * 1024)

struct s3_store {
	struct cb_objstore base;
	struct cb_s3 *s3;
	char *endpoint, *bucket, *region, *access_key, *secret_key;
	char *prefix;            /* "a/b/" or "" */
};

static const struct cb_objstore_ops s3_ops;

static int name_char(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-' || c == '/';
}

/* cb_objstore.h's names: '/'-separated parts of [A-Za-z0-9._-], never
 * empty, "." or ".."; a listing's prefix may end mid-part or be "". */
static int check_name(const struct s3_store *st, const char *op, const char *name, int is_prefix)
{
	const char *p = name;

	for (; *p; p++)
		if (!name_char((unsigned char)*p))
			goto bad;
	for (p = name; *p || !is_prefix;) {
		size_t n = strcspn(p, "/");
		if ((!n && (!is_prefix || p[n])) || (n == 1 && p[0] == '.') ||
		    (n == 2 && !strncmp(p, "..", 2) && (!is_prefix || p[n])))
			goto bad;
		if (!p[n])
			break;
		p += n + 1;
	}
	return 0;
bad:
	return cb_error("storage '%s': %s '%s': not a name of the store", st->base.label, op, name);
}

static char *full_key(const struct s3_store *st, const char *name)
{
	return cb_xasprintf("%s%s", st->prefix, name);
}

/* The client's error, said of this storage. */
static int said(const struct s3_store *st, int rc)
{
	if (rc < 0)
		cb_error_prefix("storage '%s'", st->base.label);
	return rc;
}

/* Our bytes are the object's: 0; another writer's landed last: 1. */
static int still_ours(struct s3_store *st, const char *key, const void *data, size_t len)
{
	struct cb_s3_buf b = { 0 };
	int rc = cb_s3_get(st->s3, key, 0, 0, &b);

	if (rc == 0)
		rc = b.len != len || (len && memcmp(b.data, data, len)) ? 1 : 0;
	else if (rc == 1)
		rc = cb_error("PUT '%s': the object was gone right after it was written", key);
	cb_s3_buf_release(&b);
	return rc;
}

/*
 * Only if absent: RGW ignores If-None-Match on versioned and object-lock
 * buckets and writes anyway, so the name is looked up first (then nothing
 * is sent) and a small object (a manifest, a lock) read back after: bytes
 * not ours mean another writer got there in between, and its object
 * stands. A unit is named by its content: another copy is the same bytes,
 * so it goes up in one request (CB_PUT_SAME_BYTES).
 */
static int put_if_absent(struct s3_store *st, const char *key, const void *data, size_t len)
{
	uint64_t size;
	int rc = cb_s3_head(st->s3, key, &size);

	if (rc == 0)
		return 1;
	if (rc == 1)
		rc = cb_s3_put(st->s3, key, data, len, 1);
	if (rc == 0 && len <= CHECK_AFTER_MAX)
		rc = still_ours(st, key, data, len);
	return rc;
}

static int s3_put(struct cb_objstore *s, const char *name, const void *data, size_t len, int if_absent)
{
	struct s3_store *st = (struct s3_store *)s;
	char *key;
	int rc;

	if (check_name(st, "PUT", name, 0) < 0)
		return -1;
	key = full_key(st, name);
	if (if_absent == CB_PUT_SAME_BYTES)
		rc = said(st, cb_s3_put(st->s3, key, data, len, 1));
	else
		rc = said(st, if_absent ? put_if_absent(st, key, data, len)
					: cb_s3_put(st->s3, key, data, len, 0));
	free(key);
	return rc;
}

static int s3_get(struct cb_objstore *s, const char *name, uint64_t off, uint64_t len,
		  struct cb_s3_buf *out)
{
	struct s3_store *st = (struct s3_store *)s;
	char *key;
	int rc;

	if (check_name(st, "GET", name, 0) < 0)
		return -1;
	key = full_key(st, name);
	rc = said(st, cb_s3_get(st->s3, key, off, len, out));
	free(key);
	return rc;
}

static int s3_head(struct cb_objstore *s, const char *name, uint64_t *size)
{
	struct s3_store *st = (struct s3_store *)s;
	char *key;
	int rc;

	if (check_name(st, "HEAD", name, 0) < 0)
		return -1;
	key = full_key(st, name);
	rc = said(st, cb_s3_head(st->s3, key, size));
	free(key);
	return rc;
}

static int s3_del(struct cb_objstore *s, const char *name)
{
	struct s3_store *st = (struct s3_store *)s;
	char *key;
	int rc;

	if (check_name(st, "DELETE", name, 0) < 0)
		return -1;
	key = full_key(st, name);
	rc = said(st, cb_s3_delete(st->s3, key));
	free(key);
	return rc;
}

struct s3_listing {
	size_t strip;            /* the storage prefix's length */
	cb_objstore_list_fn *fn;
	void *arg;
	int stopped;             /* the callback's value, kept apart from a failure */
};

static int s3_list_one(void *arg, const char *key, uint64_t size)
{
	struct s3_listing *l = arg;
	int rc = l->fn(l->arg, key + l->strip, size);

	if (rc)
		l->stopped = rc;
	return rc;
}

static int s3_list(struct cb_objstore *s, const char *prefix, cb_objstore_list_fn *fn, void *arg)
{
	struct s3_store *st = (struct s3_store *)s;
	struct s3_listing l = { strlen(st->prefix), fn, arg, 0 };
	char *key;
	int rc;

	if (check_name(st, "LIST", prefix, 1) < 0)
		return -1;
	key = full_key(st, prefix);
	rc = cb_s3_list(st->s3, key, s3_list_one, &l);
	free(key);
	if (l.stopped)
		return l.stopped;
	return said(st, rc);
}

static int s3_check(struct cb_objstore *s)
{
	return said((struct s3_store *)s, cb_s3_check(((struct s3_store *)s)->s3));
}

static struct cb_objstore *s3_clone(struct cb_objstore *s)
{
	struct s3_store *st = (struct s3_store *)s;
	struct cb_s3_cfg cfg = { .endpoint = st->endpoint, .bucket = st->bucket, .region = st->region,
				 .access_key = st->access_key, .secret_key = st->secret_key };
	char *prefix = st->prefix[0] ? cb_xasprintf("%.*s", (int)strlen(st->prefix) - 1, st->prefix)
				     : NULL;
	struct cb_objstore *c = cb_objstore_open_s3(st->base.label, &cfg, prefix);

	free(prefix);
	return c;
}

static void forget(char *secret)
{
	if (secret)
		OPENSSL_cleanse(secret, strlen(secret));
	free(secret);
}

static void s3_close(struct cb_objstore *s)
{
	struct s3_store *st = (struct s3_store *)s;

	if (!st)
		return;
	cb_s3_free(st->s3);
	free(st->base.label);
	free(st->endpoint);
	free(st->bucket);
	free(st->region);
	free(st->access_key);
	forget(st->secret_key);
	free(st->prefix);
	free(st);
}

static const struct cb_objstore_ops s3_ops = {
	.kind = "s3", .put = s3_put, .get = s3_get, .head = s3_head, .del = s3_del,
	.list = s3_list, .check = s3_check, .clone = s3_clone, .close = s3_close,
};

struct cb_objstore *cb_objstore_open_s3(const char *label, const struct cb_s3_cfg *cfg, const char *prefix)
{
	struct s3_store *st = cb_xcalloc(1, sizeof(*st));

	st->base.ops = &s3_ops;
	st->base.label = cb_xstrdup(label);
	st->endpoint = cb_xstrdup(cfg->endpoint);
	st->bucket = cb_xstrdup(cfg->bucket);
	st->region = cb_xstrdup(cfg->region ? cfg->region : "us-east-1");
	st->access_key = cb_xstrdup(cfg->access_key);
	st->secret_key = cb_xstrdup(cfg->secret_key);
	st->prefix = prefix && *prefix ? cb_xasprintf("%s/", prefix) : cb_xstrdup("");
	st->s3 = cb_s3_open(cfg);
	if (!st->s3) {
		cb_error_prefix("storage '%s'", label);
		s3_close(&st->base);
		return NULL;
	}
	return &st->base;
}

/* The storage's keys: its credentials file, else the environment. */
static int s3_keys(const struct cb_opts *o, char **access, char **secret)
{
	const char *a = getenv("AWS_ACCESS_KEY_ID"), *s = getenv("AWS_SECRET_ACCESS_KEY");

	if (o->s3_credentials)
		return cb_s3_credentials_load(o->s3_credentials, o->s3_profile, access, secret);
	if (!a || !*a || !s || !*s)
		return cb_error("no keys: set credentials = FILE in [storage %s], or "
				"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", o->storage);
	*access = cb_xstrdup(a);
	*secret = cb_xstrdup(s);
	return 0;
}

int cb_objstore_s3_from_opts(const struct cb_opts *o, struct cb_objstore **out)
{
	char *access = NULL, *secret = NULL;

	*out = NULL;
	if (o->storage_type != CB_STORAGE_S3)
		return 0;
	if (!o->storage)   /* type = s3 comes from a [storage NAME] only */
		return cb_error("internal: an S3 storage without a name");
	if (s3_keys(o, &access, &secret) < 0)
		return cb_error_prefix("storage '%s'", o->storage);
	*out = cb_objstore_open_s3(o->storage, &(struct cb_s3_cfg){
		.endpoint = o->s3_endpoint, .bucket = o->s3_bucket, .region = o->s3_region,
		.access_key = access, .secret_key = secret }, o->s3_prefix);
	free(access);
	forget(secret);
	return *out ? 0 : -1;
}
