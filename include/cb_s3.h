/*
 * cb_s3.h: an S3 client for object storage (tested on Ceph's RADOS
 * Gateway): requests signed with AWS Signature Version 4 by cbackup itself
 * (src/sink/s3_sign.c, over libcrypto: curl 7.88's own signer sends no
 * x-amz-content-sha256 and neither sorts nor encodes the query, which RGW
 * refuses), carried by libcurl (src/sink/s3_client.c: one keep-alive
 * connection a client, path-style addressing).
 *
 * Every upload carries Content-MD5 and its signed SHA-256, so that a byte
 * changed on the way is refused by the store; every request is retried with
 * backoff and jitter on 5xx, 429/SlowDown, timeouts and resets, at most
 * CB_S3_TRIES times; what still fails names the operation and the key.
 *
 * A client is not shared between threads: open one a thread.
 */
#ifndef CB_S3_H
#define CB_S3_H

#include <stddef.h>
#include <stdint.h>

#define CB_S3_TRIES 5

/* A name and a value: a header, or a query parameter (raw, not encoded). */
struct cb_s3_pair {
	const char *name;
	const char *value;
};

/* A response body, or an object's bytes. */
struct cb_s3_buf {
	unsigned char *data;
	size_t len, cap;
};
void cb_s3_buf_release(struct cb_s3_buf *b);
/* Appends n bytes, keeping a NUL after them (an answer is read as text). */
void cb_s3_buf_add(struct cb_s3_buf *b, const void *p, size_t n);
/* The SHA-256 of n bytes, in hex: the signed payload hash. */
void cb_s3_sha256_hex(const void *p, size_t n, char out[65]);

/* ---- signing (pure: no clock, no network) ---- */

struct cb_s3_sign_req {
	const char *method;               /* "GET", "PUT", ... */
	const char *path;                 /* "/bucket/key", not encoded */
	const struct cb_s3_pair *query;   /* raw names and values, any order */
	size_t n_query;
	const struct cb_s3_pair *headers; /* every header to sign, host and
					   * x-amz-date among them, any order */
	size_t n_headers;
	const char *payload_sha256;       /* hex, or "UNSIGNED-PAYLOAD" */
	const char *region;
	const char *access_key, *secret_key;
	const char *amz_date;             /* "20130524T000000Z" */
};

/* The Authorization header's value ("AWS4-HMAC-SHA256 Credential=...");
 * malloc'd. */
char *cb_s3_sign(const struct cb_s3_sign_req *r);
/* RFC 3986 percent-encoding as SigV4 wants it: every byte but A-Z a-z 0-9
 * - . _ ~ (and '/' when keep_slash). malloc'd. */
char *cb_s3_uri_encode(const char *s, int keep_slash);
/* The canonical query string of pairs (sorted, encoded); malloc'd. */
char *cb_s3_canonical_query(const struct cb_s3_pair *q, size_t n);

/* ---- the client ---- */

struct cb_s3_cfg {
	const char *endpoint;    /* "http://127.0.0.1:7480" */
	const char *bucket;
	const char *region;      /* NULL: us-east-1 */
	const char *access_key;
	const char *secret_key;
	long timeout_s;          /* a request's limit; 0: 300 */
};

struct cb_s3;

/* NULL with cb_error set (a bad endpoint). Copies cfg's strings. */
struct cb_s3 *cb_s3_open(const struct cb_s3_cfg *cfg);
void cb_s3_free(struct cb_s3 *s);

/* Creates the object key with len bytes (Content-MD5 and the signed
 * SHA-256 sent). if_absent: only if no object has that name (If-None-Match:
 * *); 1 when one had it already (412), nothing written. 0 written, -1
 * failed (cb_error names the key and what the store said). */
int cb_s3_put(struct cb_s3 *s, const char *key, const void *data, size_t len, int if_absent);
/* The bytes [off, off + len) of key into out (appended); len 0: to the end.
 * 0, 1 no such key, -1 failed. */
int cb_s3_get(struct cb_s3 *s, const char *key, uint64_t off, uint64_t len, struct cb_s3_buf *out);
/* 0 and its size, 1 no such key, -1 failed. */
int cb_s3_head(struct cb_s3 *s, const char *key, uint64_t *size);
/* 0 (also when there was no such key), -1 failed. */
int cb_s3_delete(struct cb_s3 *s, const char *key);
/* Every key under prefix, in order, to fn (ListObjectsV2, page by page);
 * fn returning non-zero stops the listing with that value. 0, -1 failed. */
typedef int cb_s3_list_fn(void *arg, const char *key, uint64_t size);
int cb_s3_list(struct cb_s3 *s, const char *prefix, cb_s3_list_fn *fn, void *arg);
/* Listings ask for pages of this many keys (tests; 0: the store's
 * default, 1000 on RGW and AWS). */
void cb_s3_set_page_size(struct cb_s3 *s, unsigned keys);
/* 0 the bucket exists and the keys may use it; -1 with cb_error saying
 * which: unreachable endpoint, wrong keys, no such bucket. */
int cb_s3_check(struct cb_s3 *s);
/* Creates the bucket (tests, the bench): 0, also when it exists. */
int cb_s3_create_bucket(struct cb_s3 *s);

/* ---- keys ---- */

/* The keys of PROFILE (NULL: "default") in an AWS shared-credentials
 * file (INI: [PROFILE], aws_access_key_id = ..., aws_secret_access_key =
 * ...), malloc'd. The file is refused as a key file is: not a regular
 * file, owned by another than root or this user, any group or other
 * permission bit, or (as root) a directory above it others may write.
 * 0, or -1 with cb_error naming the file (and its line). */
int cb_s3_credentials_load(const char *path, const char *profile, char **access_key,
			   char **secret_key);

#endif
