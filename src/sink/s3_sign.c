/*
 * AWS Signature Version 4 for S3 requests (cb_s3.h): the canonical
 * request, the string to sign, the signing key and the Authorization
 * header, over libcrypto's HMAC and SHA-256. Written here because curl
 * 7.88's CURLOPT_AWS_SIGV4 sends no x-amz-content-sha256, does not sort or
 * encode the query (`?uploads`, a '/' in a prefix) and signs
 * x-amz-copy-source-range out of order: RGW refuses all three.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "cb_s3.h"
#include "cb_util.h"

void cb_s3_buf_add(struct cb_s3_buf *b, const void *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->data = cb_xrealloc(b->data, b->cap);
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

/* A growing string. */
#define sbuf cb_s3_buf
#define sb_add cb_s3_buf_add

static void sb_str(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

/* The string a buffer holds, handed over ("" for an empty one). */
static char *sb_take(struct sbuf *b)
{
	if (!b->data)
		sb_add(b, "", 0);
	return (char *)b->data;
}

static void hex(const unsigned char *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

void cb_s3_sha256_hex(const void *s, size_t n, char out[65])
{
	unsigned char md[32];
	unsigned int len = 0;

	EVP_Digest(s, n, md, &len, EVP_sha256(), NULL);
	hex(md, 32, out);
}

static void hmac(const unsigned char *key, size_t key_len, const char *msg, unsigned char out[32])
{
	unsigned int len = 32;

	HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char *)msg, strlen(msg), out, &len);
}

char *cb_s3_uri_encode(const char *s, int keep_slash)
{
	struct sbuf b = { 0 };
	char pct[4];

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (isalnum(*p) || *p == '-' || *p == '.' || *p == '_' || *p == '~' ||
		    (keep_slash && *p == '/')) {
			sb_add(&b, (const char *)p, 1);
		} else {
			snprintf(pct, sizeof(pct), "%%%02X", *p);
			sb_add(&b, pct, 3);
		}
	}
	return sb_take(&b);
}

struct enc_pair {
	char *name, *value;
};

static int cmp_enc_pair(const void *a, const void *b)
{
	const struct enc_pair *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

char *cb_s3_canonical_query(const struct cb_s3_pair *q, size_t n)
{
	struct enc_pair *v = cb_xcalloc(n ? n : 1, sizeof(*v));
	struct sbuf b = { 0 };

	for (size_t i = 0; i < n; i++) {
		v[i].name = cb_s3_uri_encode(q[i].name, 0);
		v[i].value = cb_s3_uri_encode(q[i].value ? q[i].value : "", 0);
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_enc_pair);
	for (size_t i = 0; i < n; i++) {
		if (i)
			sb_str(&b, "&");
		sb_str(&b, v[i].name);
		sb_str(&b, "=");
		sb_str(&b, v[i].value);
		free(v[i].name);
		free(v[i].value);
	}
	free(v);
	return sb_take(&b);
}

struct lc_header {
	char *name;
	const char *value;
};

static int cmp_lc_header(const void *a, const void *b)
{
	return strcmp(((const struct lc_header *)a)->name, ((const struct lc_header *)b)->name);
}

/* "name:value\n" for each header, lowercased, trimmed, sorted; the
 * signed-headers list into *signed_out. */
static void canonical_headers(const struct cb_s3_sign_req *r, struct sbuf *b, char **signed_out)
{
	struct lc_header *h = cb_xcalloc(r->n_headers ? r->n_headers : 1, sizeof(*h));
	struct sbuf names = { 0 };

	for (size_t i = 0; i < r->n_headers; i++) {
		h[i].name = cb_xstrdup(r->headers[i].name);
		for (char *p = h[i].name; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		h[i].value = r->headers[i].value;
	}
	if (r->n_headers)
		qsort(h, r->n_headers, sizeof(*h), cmp_lc_header);
	for (size_t i = 0; i < r->n_headers; i++) {
		const char *v = h[i].value, *end = v + strlen(v);

		while (*v == ' ' || *v == '\t')
			v++;
		while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
			end--;
		sb_str(b, h[i].name);
		sb_str(b, ":");
		sb_add(b, v, (size_t)(end - v));
		sb_str(b, "\n");
		if (i)
			sb_str(&names, ";");
		sb_str(&names, h[i].name);
		free(h[i].name);
	}
	free(h);
	*signed_out = sb_take(&names);
}

char *cb_s3_sign(const struct cb_s3_sign_req *r)
{
	struct sbuf creq = { 0 };
	char *uri = cb_s3_uri_encode(r->path, 1), *query = cb_s3_canonical_query(r->query, r->n_query);
	char *signed_headers, creq_hash[65], date[9], *scope, *to_sign, sig[65];
	unsigned char k[32];
	char *secret = cb_xasprintf("AWS4%s", r->secret_key), *auth;

	sb_str(&creq, r->method);
	sb_str(&creq, "\n");
	sb_str(&creq, uri);
	sb_str(&creq, "\n");
	sb_str(&creq, query);
	sb_str(&creq, "\n");
	canonical_headers(r, &creq, &signed_headers);
	sb_str(&creq, "\n");
	sb_str(&creq, signed_headers);
	sb_str(&creq, "\n");
	sb_str(&creq, r->payload_sha256);
	cb_s3_sha256_hex(creq.data, creq.len, creq_hash);

	snprintf(date, sizeof(date), "%.8s", r->amz_date);
	scope = cb_xasprintf("%s/%s/s3/aws4_request", date, r->region);
	to_sign = cb_xasprintf("AWS4-HMAC-SHA256\n%s\n%s\n%s", r->amz_date, scope, creq_hash);
	hmac((const unsigned char *)secret, strlen(secret), date, k);
	hmac(k, 32, r->region, k);
	hmac(k, 32, "s3", k);
	hmac(k, 32, "aws4_request", k);
	hmac(k, 32, to_sign, k);
	hex(k, 32, sig);
	auth = cb_xasprintf("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
			    r->access_key, scope, signed_headers, sig);
	OPENSSL_cleanse(secret, strlen(secret));
	free(secret);
	free(uri);
	free(query);
	free(signed_headers);
	free(scope);
	free(to_sign);
	free(creq.data);
	return auth;
}
