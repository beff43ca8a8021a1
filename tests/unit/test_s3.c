/* Unit tests: the S3 client (cb_s3.h). SigV4 against AWS's published
 * examples (Amazon S3 API reference, "Signature Calculations for the
 * Authorization Header: Transferring Payload in a Single Chunk", the
 * GetObject example), the canonical query; and, when CB_S3_ENDPOINT,
 * AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY name a live store (t0800
 * starts a radosgw for it), every request against it: put, conditional
 * put, ranged get, head, list across pages, delete, a bad key, a missing
 * bucket. Without a store those are skipped, saying so. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "cb_s3.h"
#include "cb_util.h"

#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static void test_sign_get_object(void **state)
{
	const struct cb_s3_pair h[] = {
		{ "Host", "examplebucket.s3.amazonaws.com" },
		{ "Range", "bytes=0-9" },
		{ "x-amz-content-sha256", EMPTY_SHA },
		{ "x-amz-date", "20130524T000000Z" },
	};
	char *auth;

	(void)state;
	auth = cb_s3_sign(&(struct cb_s3_sign_req){
		.method = "GET", .path = "/test.txt", .headers = h, .n_headers = 4,
		.payload_sha256 = EMPTY_SHA, .region = "us-east-1",
		.access_key = "AKIAIOSFODNN7EXAMPLE",
		.secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		.amz_date = "20130524T000000Z" });
	assert_string_equal(auth, "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/"
			    "s3/aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
			    "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	free(auth);
}

/* Sorted by name, then value; every byte but the unreserved encoded, '/'
 * too: what curl 7.88's signer did not do. */
static void test_canonical_query(void **state)
{
	const struct cb_s3_pair q[] = {
		{ "prefix", "a b/c" }, { "list-type", "2" }, { "uploads", "" }, { "k~", "x+y" },
	};
	char *s = cb_s3_canonical_query(q, 4), *e;

	(void)state;
	assert_string_equal(s, "k~=x%2By&list-type=2&prefix=a%20b%2Fc&uploads=");
	free(s);
	s = cb_s3_canonical_query(NULL, 0);
	assert_string_equal(s, "");
	free(s);
	e = cb_s3_uri_encode("/b/ké y", 1);
	assert_string_equal(e, "/b/k%C3%A9%20y");
	free(e);
}

/* ---- against a live store ---- */

struct live {
	struct cb_s3 *s;
	char bucket[64];
};

static struct cb_s3 *open_bucket(const char *bucket, const char *secret)
{
	return cb_s3_open(&(struct cb_s3_cfg){
		.endpoint = getenv("CB_S3_ENDPOINT"), .bucket = bucket,
		.access_key = getenv("AWS_ACCESS_KEY_ID"),
		.secret_key = secret ? secret : getenv("AWS_SECRET_ACCESS_KEY"), .timeout_s = 60 });
}

static int live_setup(void **state)
{
	struct live *l;

	if (!getenv("CB_S3_ENDPOINT") || !getenv("AWS_ACCESS_KEY_ID") || !getenv("AWS_SECRET_ACCESS_KEY")) {
		*state = NULL;
		return 0;
	}
	l = cb_xcalloc(1, sizeof(*l));
	snprintf(l->bucket, sizeof(l->bucket), "cbtest-%d", (int)getpid());
	l->s = open_bucket(l->bucket, NULL);
	assert_non_null(l->s);
	assert_int_equal(cb_s3_create_bucket(l->s), 0);
	*state = l;
	return 0;
}

static int count_key(void *arg, const char *key, uint64_t size)
{
	(void)key;
	(void)size;
	(*(int *)arg)++;
	return 0;
}

static int delete_key(void *arg, const char *key, uint64_t size)
{
	(void)size;
	return cb_s3_delete(arg, key);
}

static int live_teardown(void **state)
{
	struct live *l = *state;

	if (!l)
		return 0;
	cb_s3_list(l->s, "", delete_key, l->s);
	cb_s3_free(l->s);
	free(l);
	return 0;
}

#define NEED_STORE(l) do { if (!(l)) { \
	print_message("skipped: no store (CB_S3_ENDPOINT unset; t0800 runs this against radosgw)\n"); \
	skip(); } } while (0)

static void test_live_put_get_head_delete(void **state)
{
	struct live *l = *state;
	struct cb_s3_buf b = { 0 };
	uint64_t size = 0;
	const char *key = "units/ab/c d+é~";   /* a space, a plus, UTF-8: all encoded */

	NEED_STORE(l);
	assert_int_equal(cb_s3_put(l->s, key, "0123456789", 10, 0), 0);
	assert_int_equal(cb_s3_head(l->s, key, &size), 0);
	assert_int_equal(size, 10);
	assert_int_equal(cb_s3_get(l->s, key, 0, 0, &b), 0);
	assert_int_equal(b.len, 10);
	assert_memory_equal(b.data, "0123456789", 10);
	b.len = 0;
	assert_int_equal(cb_s3_get(l->s, key, 3, 4, &b), 0);
	assert_int_equal(b.len, 4);
	assert_memory_equal(b.data, "3456", 4);
	b.len = 0;
	assert_int_equal(cb_s3_get(l->s, key, 7, 0, &b), 0);
	assert_memory_equal(b.data, "789", 3);
	cb_s3_buf_release(&b);
	/* created only if absent: the second put writes nothing */
	assert_int_equal(cb_s3_put(l->s, "manifest", "one", 3, 1), 0);
	assert_int_equal(cb_s3_put(l->s, "manifest", "two", 3, 1), 1);
	assert_int_equal(cb_s3_get(l->s, "manifest", 0, 0, &b), 0);
	assert_memory_equal(b.data, "one", 3);
	cb_s3_buf_release(&b);
	assert_int_equal(cb_s3_delete(l->s, key), 0);
	assert_int_equal(cb_s3_head(l->s, key, &size), 1);
	assert_int_equal(cb_s3_get(l->s, key, 0, 0, &b), 1);
	assert_int_equal(cb_s3_delete(l->s, key), 0);   /* gone already: fine */
	cb_s3_buf_release(&b);
}

/* More keys than a page holds (pages of 7 here): every one is listed once. */
static void test_live_list_pages(void **state)
{
	struct live *l = *state;
	char key[64];
	int n = 0;

	NEED_STORE(l);
	cb_s3_set_page_size(l->s, 7);
	for (int i = 0; i < 22; i++) {
		snprintf(key, sizeof(key), "list/%04d", i);
		assert_int_equal(cb_s3_put(l->s, key, "", 0, 0), 0);
	}
	assert_int_equal(cb_s3_put(l->s, "other/x", "x", 1, 0), 0);
	assert_int_equal(cb_s3_list(l->s, "list/", count_key, &n), 0);
	assert_int_equal(n, 22);
	n = 0;
	assert_int_equal(cb_s3_list(l->s, "", count_key, &n), 0);
	assert_int_equal(n, 23);
}

/* One clear error for each thing an admin gets wrong. */
static void test_live_check(void **state)
{
	struct live *l = *state;
	struct cb_s3 *s;

	NEED_STORE(l);
	assert_int_equal(cb_s3_check(l->s), 0);
	s = open_bucket("cbtest-no-such-bucket", NULL);
	assert_int_equal(cb_s3_check(s), -1);
	assert_non_null(strstr(cb_last_error(), "bucket 'cbtest-no-such-bucket' does not exist"));
	cb_s3_free(s);
	s = open_bucket(l->bucket, "not-the-secret");
	assert_int_equal(cb_s3_check(s), -1);
	assert_non_null(strstr(cb_last_error(), "access denied"));
	cb_s3_free(s);
}

/* Against tests/helpers/s3fake.py (t0800 starts it with a script of
 * faults: 503, 429, 500, resets, a slow answer): a put and a get go
 * through after the faults (CB_S3_FAKE_WANT=ok), or fail after
 * CB_S3_TRIES naming the operation and the key (=fail). */
static void test_fake_retries(void **state)
{
	const char *ep = getenv("CB_S3_FAKE"), *want = getenv("CB_S3_FAKE_WANT");
	struct cb_s3_buf b = { 0 };
	struct cb_s3 *s;
	int rc;

	(void)state;
	if (!ep || !want) {
		print_message("skipped: no stand-in store (CB_S3_FAKE unset; t0800 sets it)\n");
		skip();
	}
	s = cb_s3_open(&(struct cb_s3_cfg){ .endpoint = ep, .bucket = "b", .access_key = "k",
					     .secret_key = "s", .timeout_s = 2 });
	assert_non_null(s);
	rc = cb_s3_put(s, "units/x", "abc", 3, 0);
	if (!strcmp(want, "ok")) {
		assert_int_equal(rc, 0);
		assert_int_equal(cb_s3_get(s, "units/x", 0, 0, &b), 0);
		assert_int_equal(b.len, 3);
	} else {
		assert_int_equal(rc, -1);
		print_message("error: %s\n", cb_last_error());
		assert_non_null(strstr(cb_last_error(), "PUT 'units/x'"));
	}
	cb_s3_buf_release(&b);
	cb_s3_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sign_get_object),
		cmocka_unit_test(test_canonical_query),
		cmocka_unit_test_setup_teardown(test_live_put_get_head_delete, live_setup, live_teardown),
		cmocka_unit_test_setup_teardown(test_live_list_pages, live_setup, live_teardown),
		cmocka_unit_test_setup_teardown(test_live_check, live_setup, live_teardown),
		cmocka_unit_test(test_fake_retries),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
