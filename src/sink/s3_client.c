/*
 * The S3 client of cb_s3.h over libcurl: path-style requests
 * (ENDPOINT/BUCKET/KEY) on one keep-alive connection, each signed by
 * cb_s3_sign with the clock's time, retried on what a busy store answers
 * (5xx, 429 and SlowDown, timeouts, resets) with exponential backoff and
 * jitter, at most CB_S3_TRIES times.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "cb_dynlib.h"
#include "cb_s3.h"
#include "cb_util.h"

/* libcurl's functions, looked up when a client opens (cb_dynlib.h) */
struct curl_api {
	__typeof__(curl_global_init) *global_init;
	__typeof__(curl_easy_init) *easy_init;
	__typeof__(curl_easy_setopt) *easy_setopt;
	__typeof__(curl_easy_perform) *easy_perform;
	__typeof__(curl_easy_getinfo) *easy_getinfo;
	__typeof__(curl_easy_reset) *easy_reset;
	__typeof__(curl_easy_cleanup) *easy_cleanup;
	__typeof__(curl_easy_strerror) *easy_strerror;
	__typeof__(curl_slist_append) *slist_append;
	__typeof__(curl_slist_free_all) *slist_free_all;
};

struct cb_s3 {
	struct curl_api c;
	CURL *curl;
	char *endpoint, *bucket, *region, *access_key, *secret_key;
	char host[256];          /* the Host header curl sends: endpoint's authority */
	long timeout_s;
	unsigned page_size;      /* keys a listing page asks for; 0: the store's */
	char err[CURL_ERROR_SIZE];
};

/* One request and what came back. */
struct s3_req {
	const char *method;
	const char *key;                  /* NULL: the bucket itself */
	const struct cb_s3_pair *query;
	size_t n_query;
	const struct cb_s3_pair *headers; /* besides host, date, content sha */
	size_t n_headers;
	const void *body;
	size_t body_len;
	struct cb_s3_buf *out;            /* the body; NULL: dropped */
	long status;
	uint64_t length;                  /* Content-Length of the answer */
};

void cb_s3_buf_release(struct cb_s3_buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct s3_req *r = arg;

	if (r->out)
		cb_s3_buf_add(r->out, p, size * n);   /* NUL-ended: XML is read as text */
	return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct s3_req *r = arg;

	if (!strncasecmp(p, "Content-Length:", 15))
		r->length = strtoull(p + 15, NULL, 10);
	return size * n;
}

static int curl_load(struct curl_api *c)
{
	const struct cb_dynsym syms[] = {
		{ "curl_global_init", (void **)&c->global_init },
		{ "curl_easy_init", (void **)&c->easy_init },
		{ "curl_easy_setopt", (void **)&c->easy_setopt },
		{ "curl_easy_perform", (void **)&c->easy_perform },
		{ "curl_easy_getinfo", (void **)&c->easy_getinfo },
		{ "curl_easy_reset", (void **)&c->easy_reset },
		{ "curl_easy_cleanup", (void **)&c->easy_cleanup },
		{ "curl_easy_strerror", (void **)&c->easy_strerror },
		{ "curl_slist_append", (void **)&c->slist_append },
		{ "curl_slist_free_all", (void **)&c->slist_free_all },
	};

	return cb_dynlib_open("libcurl.so.4", "S3 storage", syms, sizeof(syms) / sizeof(syms[0]));
}

struct cb_s3 *cb_s3_open(const struct cb_s3_cfg *cfg)
{
	struct cb_s3 *s;
	const char *auth;
	size_t n;

	if (strncmp(cfg->endpoint, "http://", 7) && strncmp(cfg->endpoint, "https://", 8)) {
		cb_error("endpoint '%s' is not an http:// or https:// address", cfg->endpoint);
		return NULL;
	}
	auth = strstr(cfg->endpoint, "://") + 3;
	n = strcspn(auth, "/");
	if (!n || n >= sizeof(s->host)) {
		cb_error("endpoint '%s' has no host", cfg->endpoint);
		return NULL;
	}
	s = cb_xcalloc(1, sizeof(*s));
	if (curl_load(&s->c) < 0) {
		free(s);
		return NULL;
	}
	s->c.global_init(CURL_GLOBAL_DEFAULT);
	memcpy(s->host, auth, n);
	s->endpoint = cb_xasprintf("%.*s", (int)(auth - cfg->endpoint + n), cfg->endpoint);
	s->bucket = cb_xstrdup(cfg->bucket);
	s->region = cb_xstrdup(cfg->region ? cfg->region : "us-east-1");
	s->access_key = cb_xstrdup(cfg->access_key);
	s->secret_key = cb_xstrdup(cfg->secret_key);
	s->timeout_s = cfg->timeout_s ? cfg->timeout_s : 300;
	s->curl = s->c.easy_init();
	if (!s->curl) {
		cb_s3_free(s);
		cb_error("cannot start libcurl");
		return NULL;
	}
	return s;
}

void cb_s3_free(struct cb_s3 *s)
{
	if (!s)
		return;
	if (s->curl)
		s->c.easy_cleanup(s->curl);
	if (s->secret_key)
		OPENSSL_cleanse(s->secret_key, strlen(s->secret_key));
	free(s->endpoint);
	free(s->bucket);
	free(s->region);
	free(s->access_key);
	free(s->secret_key);
	free(s);
}

static void payload_hashes(const void *body, size_t len, char sha_hex[65], char md5_b64[25])
{
	unsigned char md[16];
	unsigned int n = 0;

	cb_s3_sha256_hex(body, len, sha_hex);
	EVP_Digest(body, len, md, &n, EVP_md5(), NULL);
	EVP_EncodeBlock((unsigned char *)md5_b64, md, 16);
}

/* The path ("/bucket/key") and the URL of a request. */
static void request_path(const struct cb_s3 *s, const struct s3_req *r, char **path, char **url)
{
	char *enc, *query = cb_s3_canonical_query(r->query, r->n_query);

	*path = r->key ? cb_xasprintf("/%s/%s", s->bucket, r->key) : cb_xasprintf("/%s", s->bucket);
	enc = cb_s3_uri_encode(*path, 1);
	*url = cb_xasprintf("%s%s%s%s", s->endpoint, enc, *query ? "?" : "", query);
	free(enc);
	free(query);
}

/* One try: signs with the time now, sends, reads the answer. 0 an answer
 * came (r->status), -1 the transport failed (s->err). */
static int request_once(struct cb_s3 *s, struct s3_req *r)
{
	char sha[65] = "UNSIGNED-PAYLOAD", md5[25] = "", date[17], *path, *url, *auth, *line;
	struct cb_s3_pair *h = cb_xcalloc(r->n_headers + 4, sizeof(*h));
	struct curl_slist *list = NULL;
	size_t nh = 0;
	time_t now = time(NULL);
	struct tm tm;
	CURLcode rc;

	gmtime_r(&now, &tm);
	strftime(date, sizeof(date), "%Y%m%dT%H%M%SZ", &tm);
	if (r->body)
		payload_hashes(r->body, r->body_len, sha, md5);
	request_path(s, r, &path, &url);
	h[nh++] = (struct cb_s3_pair){ "host", s->host };
	h[nh++] = (struct cb_s3_pair){ "x-amz-date", date };
	h[nh++] = (struct cb_s3_pair){ "x-amz-content-sha256", sha };
	if (r->body)
		h[nh++] = (struct cb_s3_pair){ "content-md5", md5 };
	for (size_t i = 0; i < r->n_headers; i++)
		h[nh++] = r->headers[i];
	auth = cb_s3_sign(&(struct cb_s3_sign_req){
		.method = r->method, .path = path, .query = r->query, .n_query = r->n_query,
		.headers = h, .n_headers = nh, .payload_sha256 = sha, .region = s->region,
		.access_key = s->access_key, .secret_key = s->secret_key, .amz_date = date });
	for (size_t i = 1; i < nh; i++) {   /* curl sends Host itself */
		line = cb_xasprintf("%s: %s", h[i].name, h[i].value);
		list = s->c.slist_append(list, line);
		free(line);
	}
	line = cb_xasprintf("Authorization: %s", auth);
	list = s->c.slist_append(list, line);
	list = s->c.slist_append(list, "Expect:");   /* no 100-continue round trip */
	free(line);

	s->c.easy_reset(s->curl);
	s->c.easy_setopt(s->curl, CURLOPT_URL, url);
	s->c.easy_setopt(s->curl, CURLOPT_CUSTOMREQUEST, r->method);
	s->c.easy_setopt(s->curl, CURLOPT_HTTPHEADER, list);
	s->c.easy_setopt(s->curl, CURLOPT_WRITEFUNCTION, on_body);
	s->c.easy_setopt(s->curl, CURLOPT_WRITEDATA, r);
	s->c.easy_setopt(s->curl, CURLOPT_HEADERFUNCTION, on_header);
	s->c.easy_setopt(s->curl, CURLOPT_HEADERDATA, r);
	s->c.easy_setopt(s->curl, CURLOPT_ERRORBUFFER, s->err);
	s->c.easy_setopt(s->curl, CURLOPT_TIMEOUT, s->timeout_s);
	s->c.easy_setopt(s->curl, CURLOPT_CONNECTTIMEOUT, 20L);
	s->c.easy_setopt(s->curl, CURLOPT_NOSIGNAL, 1L);
	if (!strcmp(r->method, "HEAD"))
		s->c.easy_setopt(s->curl, CURLOPT_NOBODY, 1L);
	if (r->body) {
		s->c.easy_setopt(s->curl, CURLOPT_POSTFIELDS, r->body);
		s->c.easy_setopt(s->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
	}
	s->err[0] = '\0';
	r->length = 0;
	rc = s->c.easy_perform(s->curl);
	if (rc == CURLE_OK)
		s->c.easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &r->status);
	else if (!s->err[0])
		snprintf(s->err, sizeof(s->err), "%s", s->c.easy_strerror(rc));
	s->c.slist_free_all(list);
	free(auth);
	free(url);
	free(path);
	free(h);
	return rc == CURLE_OK ? 0 : -1;
}

static int retryable(long status)
{
	return status >= 500 || status == 429 || status == 408;
}

/* Sleeps before try n (1, 2, ...): 100 ms doubled each time, up to 10 s,
 * times a random factor in [0.5, 1.5). */
static void backoff(int n)
{
	unsigned char r = 0;
	double ms = 100.0 * (double)(1u << (n < 7 ? n - 1 : 6));

	if (ms > 10000)
		ms = 10000;
	RAND_bytes(&r, 1);
	ms *= 0.5 + r / 256.0;
	usleep((useconds_t)(ms * 1000));
}

/* A request with its retries: 0 an answer (r->status, maybe an error the
 * caller reads), -1 none came or the store kept failing (cb_error set). */
static int request(struct cb_s3 *s, struct s3_req *r)
{
	size_t keep = r->out ? r->out->len : 0;

	for (int n = 1;; n++) {
		r->status = 0;
		if (r->out)
			r->out->len = keep;
		if (request_once(s, r) == 0 && !retryable(r->status))
			return 0;
		if (n == CB_S3_TRIES)
			break;
		backoff(n);
	}
	if (r->status)
		return cb_error("%s '%s': the store answered HTTP %ld %d times", r->method,
				r->key ? r->key : s->bucket, r->status, CB_S3_TRIES);
	return cb_error("%s '%s': %s (%d tries)", r->method, r->key ? r->key : s->bucket, s->err,
			CB_S3_TRIES);
}

/* The <Code> of an S3 error body, or "" */
static void error_code(const struct cb_s3_buf *b, char *out, size_t len)
{
	const char *p = b->data ? strstr((const char *)b->data, "<Code>") : NULL, *e;

	out[0] = '\0';
	if (p && (e = strstr(p, "</Code>")) && (size_t)(e - p - 6) < len)
		snprintf(out, len, "%.*s", (int)(e - p - 6), p + 6);
}

static int failed(const struct s3_req *r, const struct cb_s3 *s, const struct cb_s3_buf *body)
{
	char code[64];

	error_code(body, code, sizeof(code));
	return cb_error("%s '%s' on bucket '%s': HTTP %ld%s%s", r->method, r->key ? r->key : "",
			s->bucket, r->status, *code ? " " : "", code);
}

int cb_s3_put(struct cb_s3 *s, const char *key, const void *data, size_t len, int if_absent)
{
	struct cb_s3_pair h[] = { { "if-none-match", "*" } };
	struct cb_s3_buf body = { 0 };
	struct s3_req r = { .method = "PUT", .key = key, .headers = h, .n_headers = if_absent,
			    .body = data ? data : "", .body_len = len, .out = &body };
	int rc = request(s, &r);

	if (rc == 0 && r.status == 412)
		rc = 1;
	else if (rc == 0 && r.status != 200)
		rc = failed(&r, s, &body);
	cb_s3_buf_release(&body);
	return rc;
}

int cb_s3_get(struct cb_s3 *s, const char *key, uint64_t off, uint64_t len, struct cb_s3_buf *out)
{
	char range[64];
	struct cb_s3_pair h[] = { { "range", range } };
	struct s3_req r = { .method = "GET", .key = key, .headers = h, .n_headers = 1, .out = out };
	size_t keep = out->len;
	int rc;

	if (len)
		snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)off,
			 (unsigned long long)(off + len - 1));
	else
		snprintf(range, sizeof(range), "bytes=%llu-", (unsigned long long)off);
	if (!off && !len)
		r.n_headers = 0;
	rc = request(s, &r);
	if (rc == 0 && r.status == 404) {
		out->len = keep;
		return 1;
	}
	if (rc == 0 && r.status != 200 && r.status != 206) {
		struct cb_s3_buf err = { out->data + keep, out->len - keep, 0 };
		rc = failed(&r, s, &err);
		out->len = keep;
	}
	return rc;
}

int cb_s3_head(struct cb_s3 *s, const char *key, uint64_t *size)
{
	struct s3_req r = { .method = "HEAD", .key = key };
	struct cb_s3_buf none = { 0 };

	if (request(s, &r) < 0)
		return -1;
	if (r.status == 404)
		return 1;
	if (r.status != 200)
		return failed(&r, s, &none);
	*size = r.length;
	return 0;
}

int cb_s3_delete(struct cb_s3 *s, const char *key)
{
	struct cb_s3_buf body = { 0 };
	struct s3_req r = { .method = "DELETE", .key = key, .out = &body };
	int rc = request(s, &r);

	if (rc == 0 && r.status != 204 && r.status != 200 && r.status != 404)
		rc = failed(&r, s, &body);
	cb_s3_buf_release(&body);
	return rc;
}

/* The text between <tag> and </tag> after *p, moving *p past it; NULL at
 * the end. Keys come XML-escaped: &amp; &lt; &gt; &quot; &apos; undone. */
static char *xml_next(const char **p, const char *tag)
{
	char open[64], close[64], *v, *w;
	const char *a, *b;

	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	if (!(a = strstr(*p, open)) || !(b = strstr(a, close)))
		return NULL;
	a += strlen(open);
	v = w = cb_xasprintf("%.*s", (int)(b - a), a);
	for (const char *q = v; *q;) {
		static const char *const ent[][2] = { { "&amp;", "&" }, { "&lt;", "<" }, { "&gt;", ">" },
						      { "&quot;", "\"" }, { "&apos;", "'" } };
		size_t k = 0;
		for (; k < 5; k++)
			if (!strncmp(q, ent[k][0], strlen(ent[k][0])))
				break;
		if (k < 5) {
			*w++ = ent[k][1][0];
			q += strlen(ent[k][0]);
		} else {
			*w++ = *q++;
		}
	}
	*w = '\0';
	*p = b + strlen(close);
	return v;
}

/* One page of ListObjectsV2 to fn; *token gets the next page's token
 * (NULL: the last page). */
static int list_page(struct cb_s3 *s, const char *prefix, char **token, cb_s3_list_fn *fn, void *arg)
{
	char max[16];
	struct cb_s3_pair q[4] = { { "list-type", "2" }, { "prefix", prefix } };
	struct cb_s3_buf body = { 0 };
	struct s3_req r = { .method = "GET", .query = q, .n_query = 2, .out = &body };
	const char *p;
	char *key, *size;
	int rc;

	if (s->page_size) {
		snprintf(max, sizeof(max), "%u", s->page_size);
		q[r.n_query++] = (struct cb_s3_pair){ "max-keys", max };
	}
	if (*token)
		q[r.n_query++] = (struct cb_s3_pair){ "continuation-token", *token };
	rc = request(s, &r);
	free(*token);
	*token = NULL;
	if (rc == 0 && r.status != 200)
		rc = failed(&r, s, &body);
	for (p = body.data ? (const char *)body.data : ""; rc == 0 && (key = xml_next(&p, "Key"));) {
		size = xml_next(&p, "Size");
		rc = fn(arg, key, size ? strtoull(size, NULL, 10) : 0);
		free(key);
		free(size);
	}
	if (rc == 0 && body.data && strstr((const char *)body.data, "<IsTruncated>true</IsTruncated>")) {
		p = (const char *)body.data;
		*token = xml_next(&p, "NextContinuationToken");
		if (!*token)
			rc = cb_error("listing '%s' on bucket '%s': a truncated page without a "
				      "continuation token", prefix, s->bucket);
	}
	cb_s3_buf_release(&body);
	return rc;
}

int cb_s3_list(struct cb_s3 *s, const char *prefix, cb_s3_list_fn *fn, void *arg)
{
	char *token = NULL;
	int rc;

	do
		rc = list_page(s, prefix, &token, fn, arg);
	while (rc == 0 && token);
	free(token);
	return rc;
}

void cb_s3_set_page_size(struct cb_s3 *s, unsigned keys)
{
	s->page_size = keys;
}

int cb_s3_check(struct cb_s3 *s)
{
	struct cb_s3_buf body = { 0 };
	struct s3_req r = { .method = "HEAD", .out = &body };
	int rc = request(s, &r);

	if (rc < 0)
		return cb_error("endpoint %s %s: %s", s->endpoint,
				r.status ? "keeps failing" : "does not answer", cb_last_error());
	if (r.status == 404)
		rc = cb_error("bucket '%s' does not exist at %s", s->bucket, s->endpoint);
	else if (r.status == 403)
		rc = cb_error("bucket '%s' at %s: access denied (wrong keys, or not the bucket's "
			      "owner)", s->bucket, s->endpoint);
	else if (r.status != 200)
		rc = failed(&r, s, &body);
	cb_s3_buf_release(&body);
	return rc;
}

int cb_s3_create_bucket(struct cb_s3 *s)
{
	struct cb_s3_buf body = { 0 };
	struct s3_req r = { .method = "PUT", .out = &body };
	char code[64];
	int rc = request(s, &r);

	error_code(&body, code, sizeof(code));
	if (rc == 0 && r.status != 200 && strcmp(code, "BucketAlreadyOwnedByYou"))
		rc = failed(&r, s, &body);
	cb_s3_buf_release(&body);
	return rc;
}
