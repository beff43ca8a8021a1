/*
 * cb_json: a small JSON reader for QMP replies (query-block and friends
 * are a few KiB of nested objects), and the quoting of strings put into
 * QMP commands. A parsed value is a tree of struct cb_json; objects keep
 * their members in order. Numbers are kept as doubles and as long long.
 */
#ifndef CB_JSON_H
#define CB_JSON_H

#include <stddef.h>

enum cb_json_type { CB_JSON_NULL, CB_JSON_BOOL, CB_JSON_NUM, CB_JSON_STR, CB_JSON_ARR, CB_JSON_OBJ };

struct cb_json {
	enum cb_json_type type;
	char *str;                  /* STR (NUL-terminated, unescaped) */
	double num;                 /* NUM; BOOL: 0 or 1 */
	long long inum;             /* NUM as an integer */
	size_t n;                   /* ARR, OBJ: number of items */
	char **keys;                /* OBJ: n keys */
	struct cb_json **items;     /* ARR, OBJ: n values */
};

/* NULL on a syntax error or trailing garbage (cb_error set). */
struct cb_json *cb_json_parse(const char *text, size_t len);
void cb_json_free(struct cb_json *v);

/* Member KEY of an object; KEY may be a dotted path "inserted.node-name".
 * NULL when missing or when v is not an object. */
const struct cb_json *cb_json_get(const struct cb_json *v, const char *key);
/* The string at KEY (dotted), or NULL if missing or not a string. */
const char *cb_json_str(const struct cb_json *v, const char *key);
/* The number (or bool) at KEY, or def. */
long long cb_json_int(const struct cb_json *v, const char *key, long long def);

/* s as a JSON string literal with its quotes, malloc'd. */
char *cb_json_quote(const char *s);

#endif
