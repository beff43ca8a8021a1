/* Unit tests: a sealed unit store (cb_store.h, store_enc.c): a manifest
 * sealed and opened again with its key (the plain units, each read with
 * the key); without the key or with another, its clear records stand for
 * the units and it is not readable (the one wrong-key error); nothing of
 * the plain manifest in its text; a changed clear header or sealed part
 * refused; a unit sealed into a frame on a directory store, read back,
 * and refused once a byte of it is flipped. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <openssl/evp.h>

#include "cb_store.h"
#include "cb_util.h"
#include "testlib.h"

#define NAME "cbackup-ct-101-2026_12_06-03_00_00.tar.zst"
#define H1 "1111111111111111111111111111111111111111111111111111111111111111"
#define H2 "2222222222222222222222222222222222222222222222222222222222222222"
#define O1 "aaaa111111111111111111111111111111111111111111111111111111111111"
#define O2 "bbbb111111111111111111111111111111111111111111111111111111111111"
#define S1 "cccc111111111111111111111111111111111111111111111111111111111111"
#define S2 "dddd111111111111111111111111111111111111111111111111111111111111"

static void key_of(unsigned char b, struct cb_enckey *k)
{
	memset(k, 0, sizeof(*k));
	memset(k->secret, b, sizeof(k->secret));
	assert_int_equal(cb_enckey_derive(k), 0);
}

static char *sealed(const struct cb_enckey *k, size_t *len)
{
	struct cb_store_ref u[2] = { { .hex = H1, .len = 10 }, { .hex = H2, .len = 5 } };
	struct cb_store_ref o[3] = { { .hex = O2, .len = 4096, .sha = S2 },
				     { .hex = O1, .len = 8192, .sha = S1 },
				     { .hex = O2, .len = 4096, .sha = S2 } };
	struct cb_manifest m = { .name = NAME, .size = 15, .when = 1796536952, .units = u,
				 .n_units = 2, .objects = o, .n_objects = 3 };
	char *text;

	strcpy(m.sha256, H2);
	text = cb_manifest_seal(&m, k, len);
	assert_non_null(text);
	return text;
}

static void test_sealed_manifest(void **state)
{
	struct cb_enckey k, other;
	struct cb_manifest m;
	size_t len;
	char *text;

	(void)state;
	key_of(1, &k);
	key_of(2, &other);
	text = sealed(&k, &len);
	assert_true(cb_manifest_is_sealed(text, len));
	assert_null(memmem(text, len, H1, 64));
	assert_null(memmem(text, len, H2, 64));
	assert_null(memmem(text, len, NAME, strlen(NAME)));
	/* with its key: the plain units, read with the key */
	assert_int_equal(cb_manifest_unseal(&m, NAME, text, len, &k), 0);
	assert_int_equal(m.n_units, 2);
	assert_string_equal(m.units[0].hex, H1);
	assert_ptr_equal(m.units[1].key, &k);
	assert_int_equal(m.n_objects, 2);   /* each object once, sorted */
	assert_string_equal(m.objects[0].hex, O1);
	assert_int_equal(cb_manifest_readable(&m, &k, NAME), 0);
	cb_manifest_release(&m);
	/* another key: the clear records, and the one error */
	assert_int_equal(cb_manifest_unseal(&m, NAME, text, len, &other), 0);
	assert_int_equal(m.n_units, 2);
	assert_string_equal(m.units[1].hex, O2);
	assert_string_equal(m.units[1].sha, S2);
	assert_null(m.units[1].key);
	assert_int_equal(m.size, 15);
	assert_int_equal(cb_manifest_readable(&m, &other, NAME), -1);
	assert_non_null(strstr(cb_last_error(), "archive was encrypted with key "));
	assert_int_equal(cb_manifest_readable(&m, NULL, NAME), -1);
	assert_non_null(strstr(cb_last_error(), "give its key with --encryption-key"));
	cb_manifest_release(&m);
	/* under another name: refused with the key */
	assert_int_equal(cb_manifest_unseal(&m, "cbackup-ct-102-2026_12_06-03_00_00.tar.zst", text, len, &k), -1);
	free(text);
}

/* text with from replaced by to and its closing digest made to hold */
static void forge(char *text, size_t len, const char *from, const char *to)
{
	char *at = memmem(text, len, from, strlen(from)), *end;
	unsigned char d[32];
	char hex[65];

	assert_non_null(at);
	memcpy(at, to, strlen(to));
	end = strstr(text, "\nend ") + 1;
	EVP_Digest(text, (size_t)(end - text), d, NULL, EVP_sha256(), NULL);
	cb_store_hex(d, hex);
	memcpy(end + 4, hex, 64);
}

static void test_sealed_forged(void **state)
{
	struct cb_enckey k;
	struct cb_manifest m;
	size_t len;
	char *text, *b64;

	(void)state;
	key_of(1, &k);
	text = sealed(&k, &len);
	forge(text, len, "\nprotected 0\n", "\nprotected 1\n");
	assert_int_equal(cb_manifest_unseal(&m, NAME, text, len, NULL), 0);   /* no key: not seen */
	assert_int_equal(m.protected_, 1);
	cb_manifest_release(&m);
	assert_int_equal(cb_manifest_unseal(&m, NAME, text, len, &k), -1);
	assert_non_null(strstr(cb_last_error(), "does not authenticate"));
	free(text);
	text = sealed(&k, &len);
	b64 = strstr(text, "\nsealed ") + 20;
	*b64 = *b64 == 'A' ? 'B' : 'A';
	assert_int_equal(cb_manifest_unseal(&m, NAME, text, len, &k), -1);
	assert_non_null(strstr(cb_last_error(), "closing digest"));
	free(text);
}

/* A unit sealed, put, read back with its key; a flipped byte refused. */
static void test_sealed_unit(void **state)
{
	char dir[] = "/tmp/cb-store-enc-XXXXXX", name[80];
	const char plain[] = "the bytes of a unit";
	struct cb_store_ref ref = { .len = sizeof(plain) }, obj, got;
	struct cb_s3_buf b = { 0 };
	struct cb_objstore *s;
	unsigned char d[32], *frame;
	struct cb_enckey k;
	size_t flen;

	(void)state;
	key_of(1, &k);
	ref.key = &k;
	assert_non_null(mkdtemp(dir));
	s = cb_objstore_open_dir("t", dir);
	assert_non_null(s);
	EVP_Digest(plain, sizeof(plain), d, NULL, EVP_sha256(), NULL);
	cb_store_hex(d, ref.hex);
	assert_int_equal(cb_store_seal_unit(&k, plain, sizeof(plain), d, &frame, &flen, &obj), 0);
	assert_int_equal(flen % 4096, 0);
	assert_string_not_equal(obj.hex, ref.hex);   /* named by its keyed id */
	cb_store_ref_object(&ref, name);
	assert_string_equal(strrchr(name, '/') + 1, obj.hex);
	assert_int_equal(s->ops->put(s, name, frame, flen, 1), 0);
	assert_int_equal(cb_store_get_ref(s, &ref, &b), 0);
	assert_int_equal(b.len, sizeof(plain));
	assert_memory_equal(b.data, plain, sizeof(plain));
	b.len = 0;
	assert_int_equal(cb_store_get_sealed(s, &ref, &b, &got), 0);
	assert_string_equal(got.sha, obj.sha);
	frame[60] ^= 1;
	run("rm -f %s/%s", dir, name);
	assert_int_equal(s->ops->put(s, name, frame, flen, 1), 0);
	b.len = 0;
	assert_int_equal(cb_store_get_ref(s, &ref, &b), -1);
	assert_non_null(strstr(cb_last_error(), "is damaged"));
	free(frame);
	cb_s3_buf_release(&b);
	cb_objstore_close(s);
	run("rm -rf %s", dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sealed_manifest),
		cmocka_unit_test(test_sealed_forged),
		cmocka_unit_test(test_sealed_unit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
