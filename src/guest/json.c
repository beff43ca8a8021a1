/* cb_json: a small recursive-descent JSON reader. See include/cb_json.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cb_json.h"
#include "cb_util.h"

struct jp {
	const char *p, *end;
	int depth;
};

#define JSON_MAX_DEPTH 64

static void skip_ws(struct jp *j)
{
	while (j->p < j->end && strchr(" \t\r\n", *j->p))
		j->p++;
}

static int lit(struct jp *j, const char *word)
{
	size_t n = strlen(word);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n))
		return 0;
	j->p += n;
	return 1;
}

/* \uXXXX as UTF-8 (surrogate pairs are rare in QMP: each half as is). */
static void put_utf8(char **o, unsigned c)
{
	if (c < 0x80) {
		*(*o)++ = (char)c;
	} else if (c < 0x800) {
		*(*o)++ = (char)(0xc0 | c >> 6);
		*(*o)++ = (char)(0x80 | (c & 0x3f));
	} else {
		*(*o)++ = (char)(0xe0 | c >> 12);
		*(*o)++ = (char)(0x80 | ((c >> 6) & 0x3f));
		*(*o)++ = (char)(0x80 | (c & 0x3f));
	}
}

static char *parse_string(struct jp *j)
{
	const char *s = ++j->p;
	char *out, *o;

	while (j->p < j->end && *j->p != '"')
		j->p += *j->p == '\\' ? 2 : 1;
	if (j->p >= j->end)
		return NULL;
	o = out = cb_xmalloc((size_t)(j->p - s) + 1);
	for (const char *q = s; q < j->p; q++) {
		if (*q != '\\') {
			*o++ = *q;
			continue;
		}
		switch (*++q) {
		case 'n': *o++ = '\n'; break;
		case 't': *o++ = '\t'; break;
		case 'r': *o++ = '\r'; break;
		case 'b': *o++ = '\b'; break;
		case 'f': *o++ = '\f'; break;
		case 'u': {
			unsigned c = 0;
			if (j->p - q < 5 || sscanf(q + 1, "%4x", &c) != 1) {
				free(out);
				return NULL;
			}
			put_utf8(&o, c);
			q += 4;
			break;
		}
		default: *o++ = *q;
		}
	}
	*o = '\0';
	j->p++;
	return out;
}

static struct cb_json *parse_value(struct jp *j);

static int parse_items(struct jp *j, struct cb_json *v, int object)
{
	char close = object ? '}' : ']';

	j->p++;
	skip_ws(j);
	if (j->p < j->end && *j->p == close) {
		j->p++;
		return 0;
	}
	for (;;) {
		char *key = NULL;
		struct cb_json *item;
		skip_ws(j);
		if (object) {
			if (j->p >= j->end || *j->p != '"' || !(key = parse_string(j)))
				return -1;
			skip_ws(j);
			if (j->p >= j->end || *j->p++ != ':') {
				free(key);
				return -1;
			}
		}
		if (!(item = parse_value(j))) {
			free(key);
			return -1;
		}
		v->items = cb_xrealloc(v->items, (v->n + 1) * sizeof(*v->items));
		if (object)
			v->keys = cb_xrealloc(v->keys, (v->n + 1) * sizeof(*v->keys));
		v->items[v->n] = item;
		if (object)
			v->keys[v->n] = key;
		v->n++;
		skip_ws(j);
		if (j->p < j->end && *j->p == ',') {
			j->p++;
			continue;
		}
		if (j->p < j->end && *j->p == close) {
			j->p++;
			return 0;
		}
		return -1;
	}
}

static struct cb_json *parse_value(struct jp *j)
{
	struct cb_json *v = cb_xcalloc(1, sizeof(*v));
	char *numend;
	int ok = 1;

	skip_ws(j);
	if (j->p >= j->end || ++j->depth > JSON_MAX_DEPTH) {
		ok = 0;
	} else if (*j->p == '{' || *j->p == '[') {
		v->type = *j->p == '{' ? CB_JSON_OBJ : CB_JSON_ARR;
		ok = parse_items(j, v, v->type == CB_JSON_OBJ) == 0;
	} else if (*j->p == '"') {
		v->type = CB_JSON_STR;
		ok = (v->str = parse_string(j)) != NULL;
	} else if (lit(j, "true") || lit(j, "false")) {
		v->type = CB_JSON_BOOL;
		v->num = v->inum = j->p[-1] == 'e' && j->p[-2] == 'u';
	} else if (lit(j, "null")) {
		v->type = CB_JSON_NULL;
	} else {
		/* the reply is NUL-terminated by the reader, so strtod stops */
		v->type = CB_JSON_NUM;
		v->num = strtod(j->p, &numend);
		v->inum = strtoll(j->p, NULL, 10);
		ok = numend != j->p && numend <= j->end;
		j->p = numend;
	}
	j->depth--;
	if (!ok) {
		cb_json_free(v);
		return NULL;
	}
	return v;
}

struct cb_json *cb_json_parse(const char *text, size_t len)
{
	struct jp j = { text, text + len, 0 };
	struct cb_json *v = parse_value(&j);

	skip_ws(&j);
	if (v && j.p == j.end)
		return v;
	cb_json_free(v);
	cb_error("malformed JSON near byte %zu", (size_t)(j.p - text));
	return NULL;
}

void cb_json_free(struct cb_json *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n; i++) {
		cb_json_free(v->items[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->items);
	free(v->keys);
	free(v->str);
	free(v);
}

const struct cb_json *cb_json_get(const struct cb_json *v, const char *key)
{
	while (v && v->type == CB_JSON_OBJ && key) {
		const char *dot = strchr(key, '.');
		size_t k = dot ? (size_t)(dot - key) : strlen(key);
		const struct cb_json *next = NULL;
		for (size_t i = 0; i < v->n && !next; i++)
			if (strlen(v->keys[i]) == k && !memcmp(v->keys[i], key, k))
				next = v->items[i];
		if (!dot)
			return next;
		v = next;
		key = dot + 1;
	}
	return NULL;
}

const char *cb_json_str(const struct cb_json *v, const char *key)
{
	const struct cb_json *s = cb_json_get(v, key);

	return s && s->type == CB_JSON_STR ? s->str : NULL;
}

long long cb_json_int(const struct cb_json *v, const char *key, long long def)
{
	const struct cb_json *n = cb_json_get(v, key);

	return n && (n->type == CB_JSON_NUM || n->type == CB_JSON_BOOL) ? n->inum : def;
}

char *cb_json_quote(const char *s)
{
	char *out = cb_xmalloc(strlen(s) * 6 + 3), *o = out;

	*o++ = '"';
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			*o++ = '\\';
			*o++ = (char)c;
		} else if (c < 0x20) {
			o += sprintf(o, "\\u%04x", c);
		} else {
			*o++ = (char)c;
		}
	}
	*o++ = '"';
	*o = '\0';
	return out;
}
