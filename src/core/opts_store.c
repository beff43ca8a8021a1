/*
 * The values of an S3 storage's keys (cb_store_value_check, cb_opts.h),
 * checked where every value is: an endpoint, a bucket or a prefix that
 * would make a request go elsewhere than the admin meant is refused with
 * the file and line, not found out at 3 a.m.
 */
#include <string.h>
#include <strings.h>

#include "cb_opts.h"

static int is_name_char(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-' || c == '.';
}

static int all_name_chars(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!is_name_char((unsigned char)s[i]))
			return 0;
	return 1;
}

/* http://HOST[:PORT] with nothing after but an optional '/'. */
static int check_endpoint(const char *v)
{
	const char *host = !strncmp(v, "http://", 7) ? v + 7 : !strncmp(v, "https://", 8) ? v + 8 : NULL;
	size_t n = host ? strcspn(host, "/?#") : 0;

	if (!host || !n || memchr(host, '@', n) ||
	    (host[n] && strcmp(host + n, "/")))
		return cb_error("invalid value '%s' (accepted: http://HOST[:PORT] or https://HOST[:PORT], "
				"nothing after; the bucket is key 'bucket')", v);
	return 0;
}

/* S3's bucket names, as loosely as radosgw takes them: 3 to 63 letters,
 * digits, '.', '-', '_', starting and ending with a letter or digit. */
static int check_bucket(const char *v)
{
	size_t n = strlen(v);

	if (n < 3 || n > 63 || !all_name_chars(v, n) || !is_name_char(v[0]) || v[0] == '.' ||
	    v[0] == '-' || v[0] == '_' || v[n - 1] == '.' || v[n - 1] == '-' || v[n - 1] == '_')
		return cb_error("invalid value '%s' (accepted: a bucket name, 3 to 63 letters, digits, "
				"'.', '-', '_')", v);
	return 0;
}

/* a/b/c: names of the store's own alphabet, no "." or "..", no empty part. */
static int check_prefix(const char *v)
{
	for (const char *p = v;; p++) {
		size_t n = strcspn(p, "/");
		if (!n || !all_name_chars(p, n) || (n == 1 && p[0] == '.') ||
		    (n == 2 && !strncmp(p, "..", 2)))
			return cb_error("invalid value '%s' (accepted: names of letters, digits, '.', "
					"'-', '_' joined by '/', no '.' or '..' part, no leading or "
					"trailing '/')", v);
		p += n;
		if (!*p)
			return 0;
	}
}

static int check_word(const char *v)
{
	if (!all_name_chars(v, strlen(v)))
		return cb_error("invalid value '%s' (accepted: letters, digits, '.', '-', '_')", v);
	return 0;
}

int cb_store_value_check(const char *key, const char *value)
{
	if (!strcasecmp(key, "endpoint"))
		return check_endpoint(value);
	if (!strcasecmp(key, "bucket"))
		return check_bucket(value);
	if (!strcasecmp(key, "prefix"))
		return check_prefix(value);
	if (!strcasecmp(key, "region") || !strcasecmp(key, "profile"))
		return check_word(value);
	return 0;
}
