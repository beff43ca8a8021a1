/* Unit tests: cb_enckey (derivations, sealing) and the encrypted archive's
 * framing (cb_encarchive). The known answers come from Python's
 * cryptography package (the reference decrypter's), not from this code. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include <openssl/sha.h>

#include "cb_encarchive.h"
#include "cb_enckey.h"
#include "testlib.h"

static void hex(const unsigned char *b, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static void key_0_31(struct cb_enckey *k)
{
	for (int i = 0; i < CB_ENC_SECRET; i++)
		k->secret[i] = (unsigned char)i;
	assert_int_equal(cb_enckey_derive(k), 0);
}

static void test_known_answers(void **state)
{
	struct cb_enckey k;
	unsigned char id[CB_ENC_ID], key[32], ct[5], tag[CB_ENC_TAG], zero[CB_ENC_NONCE] = { 0 };
	char h[2 * 64 + 1];

	(void)state;
	key_0_31(&k);
	hex(k.fp, CB_ENC_FP, h);
	assert_string_equal(h, "0b9fe219871c7b362b046d22ec554d07f1f94708ee5226673ae2c91d6c97ea51");
	assert_int_equal(cb_enc_unit_id(&k, "hello", 5, id), 0);
	hex(id, CB_ENC_ID, h);
	assert_string_equal(h, "0ec068cd8e67da320cce8a387f9d28ce735d66756c6e84c1eff21aac38cb8a07");
	assert_int_equal(cb_enc_unit_key(&k, id, key), 0);
	assert_int_equal(cb_enc_seal(key, zero, "aad", 3, "hello", 5, ct, tag), 0);
	hex(ct, 5, h);
	hex(tag, CB_ENC_TAG, h + 10);
	assert_string_equal(h, "6ddb898b5b0b1ed43168441d86f39701f1d3114bdb");
}

static void test_ids_are_keyed(void **state)
{
	struct cb_enckey a, b;
	unsigned char ia[CB_ENC_ID], ia2[CB_ENC_ID], ib[CB_ENC_ID], plain[32];

	(void)state;
	key_0_31(&a);
	key_0_31(&b);
	b.secret[0] ^= 1;
	assert_int_equal(cb_enckey_derive(&b), 0);
	cb_enc_unit_id(&a, "unit bytes", 10, ia);
	cb_enc_unit_id(&a, "unit bytes", 10, ia2);
	cb_enc_unit_id(&b, "unit bytes", 10, ib);
	assert_memory_equal(ia, ia2, CB_ENC_ID);       /* same unit, same id */
	assert_memory_not_equal(ia, ib, CB_ENC_ID);    /* another key, another id */
	SHA256((const unsigned char *)"unit bytes", 10, plain);
	assert_memory_not_equal(ia, plain, CB_ENC_ID); /* never the plain hash */
	assert_memory_not_equal(a.fp, b.fp, CB_ENC_FP);
	/* from a catalog's SHA-256 of the bytes: the same id */
	assert_int_equal(cb_enc_unit_id_sha(&a, plain, ib), 0);
	assert_memory_equal(ia, ib, CB_ENC_ID);
}

static void test_tag_checked(void **state)
{
	struct cb_enckey k;
	unsigned char key[32], ct[16], out[16], tag[CB_ENC_TAG], n[CB_ENC_NONCE] = { 0 };

	(void)state;
	key_0_31(&k);
	cb_enc_unit_key(&k, k.fp, key);
	assert_int_equal(cb_enc_seal(key, n, "h", 1, "sixteen bytes!!!", 16, ct, tag), 0);
	assert_int_equal(cb_enc_open(key, n, "h", 1, ct, 16, out, tag), 0);
	assert_memory_equal(out, "sixteen bytes!!!", 16);
	ct[3] ^= 1;
	assert_int_equal(cb_enc_open(key, n, "h", 1, ct, 16, out, tag), -1);
	ct[3] ^= 1;
	assert_int_equal(cb_enc_open(key, n, "H", 1, ct, 16, out, tag), -1);   /* aad */
	tag[0] ^= 1;
	assert_int_equal(cb_enc_open(key, n, "h", 1, ct, 16, out, tag), -1);
}

static void test_blob(void **state)
{
	struct cb_enckey k;
	unsigned char *b, *p;
	size_t blen, plen;

	(void)state;
	key_0_31(&k);
	assert_int_equal(cb_enc_blob_seal(&k, "hdr", 3, "catalog", 7, &b, &blen), 0);
	assert_int_equal(blen, 7 + CB_ENC_BLOB_OVER);
	assert_int_equal(cb_enc_blob_open(&k, "hdr", 3, b, blen, &p, &plen), 0);
	assert_int_equal(plen, 7);
	assert_memory_equal(p, "catalog", 7);
	free(p);
	assert_int_equal(cb_enc_blob_open(&k, "hdX", 3, b, blen, &p, &plen), -1);
	assert_int_equal(cb_enc_blob_open(&k, "hdr", 3, b, blen - 1, &p, &plen), -1);
	assert_int_equal(cb_enc_blob_open(&k, "hdr", 3, b, 5, &p, &plen), -1);
	free(b);
}

static void test_key_file(void **state)
{
	char dir[] = "/tmp/cb-test-enc.XXXXXX", path[64];
	struct cb_enckey a, b;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/key", dir);
	assert_int_equal(cb_enckey_create(path, &a), 0);
	assert_int_equal(cb_enckey_create(path, &b), -1);   /* never over a file */
	assert_int_equal(cb_enckey_load(path, &b), 0);
	assert_memory_equal(a.secret, b.secret, CB_ENC_SECRET);
	assert_memory_equal(a.fp, b.fp, CB_ENC_FP);
	chmod(path, 0640);
	assert_int_equal(cb_enckey_load(path, &b), -1);
	assert_non_null(strstr(cb_last_error(), "accessible by group or others"));
	assert_int_equal(cb_enckey_load(dir, &b), -1);
	assert_non_null(strstr(cb_last_error(), "is a directory"));
	run("rm -rf %s", dir);
}

/* A plain file without a catalog is sealed in 4 MiB frames: header,
 * "CBUF" frames at 4 KiB multiples; a view gives the bytes back. */
static void test_archive_framing(void **state)
{
	char dir[] = "/tmp/cb-test-enc.XXXXXX", plain[96], out[96], back[8];
	struct cb_enckey k;
	struct cb_enc_seal_stats st;
	struct cb_enc_view *v;
	struct stat sb;
	FILE *f;

	(void)state;
	key_0_31(&k);
	assert_non_null(mkdtemp(dir));
	snprintf(plain, sizeof(plain), "%s/a.tar", dir);
	snprintf(out, sizeof(out), "%s/a.tar.cbenc", dir);
	assert_int_equal(run("head -c 5000000 /dev/urandom >%s", plain), 0);
	assert_int_equal(cb_enc_seal_archive(&k, plain, out, NULL, &st), 0);
	assert_int_equal(st.frames, 2);
	assert_int_equal(stat(out, &sb), 0);
	assert_int_equal(sb.st_size % 4096, 0);
	assert_int_equal((uint64_t)sb.st_size, st.bytes);
	f = fopen(out, "rb");
	assert_int_equal(fread(back, 1, 8, f), 8);
	assert_memory_equal(back, "CBENC\0\0\1", 8);
	fseek(f, 4096, SEEK_SET);
	assert_int_equal(fread(back, 1, 4, f), 4);
	assert_memory_equal(back, "CBUF", 4);
	fclose(f);
	assert_int_equal(cb_enc_seal_archive(&k, plain, out, NULL, &st), -1);   /* never replaces */
	if (cb_enc_view_open(&k, out, dir, &v) < 0)
		fail_msg("%s", cb_last_error());
	assert_int_equal(run("cmp -s %s %s", plain, cb_enc_view_path(v)), 0);
	cb_enc_view_free(v);
	run("rm -rf %s", dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_answers),
		cmocka_unit_test(test_ids_are_keyed),
		cmocka_unit_test(test_tag_checked),
		cmocka_unit_test(test_blob),
		cmocka_unit_test(test_key_file),
		cmocka_unit_test(test_archive_framing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
