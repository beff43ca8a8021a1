/* Unit tests: cb_json (the QMP reply reader, hostile input),
 * cb_vmsnap_archive_name and cb_vm_path_choose (which QEMU takes which path). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cb_json.h"
#include "cb_util.h"
#include "cb_vmsnap.h"

static struct cb_json *parse(const char *s)
{
	return cb_json_parse(s, strlen(s));
}

static void test_query_block_shape(void **state)
{
	const char *reply =
		"{\"return\": [{\"device\": \"virtio0\", \"qdev\": \"/machine/peripheral/vd0/virtio-backend\","
		" \"inserted\": {\"node-name\": \"#block115\", \"drv\": \"qcow2\", \"ro\": false,"
		" \"image\": {\"virtual-size\": 68719476736, \"filename\": \"/v/a \\\"b\\\".qcow2\"},"
		" \"dirty-bitmaps\": [{\"name\": \"cbackup-200\", \"recording\": true, \"count\": 0}]}},"
		" {\"device\": \"ide1-cd0\", \"removable\": true}], \"id\": \"cb-7\"}";
	struct cb_json *m = parse(reply);
	const struct cb_json *list, *bm;

	(void)state;
	assert_non_null(m);
	list = cb_json_get(m, "return");
	assert_int_equal(list->type, CB_JSON_ARR);
	assert_int_equal(list->n, 2);
	assert_string_equal(cb_json_str(list->items[0], "inserted.node-name"), "#block115");
	assert_string_equal(cb_json_str(list->items[0], "inserted.image.filename"), "/v/a \"b\".qcow2");
	assert_int_equal(cb_json_int(list->items[0], "inserted.image.virtual-size", 0), 68719476736LL);
	assert_int_equal(cb_json_int(list->items[0], "inserted.ro", 7), 0);
	bm = cb_json_get(list->items[0], "inserted.dirty-bitmaps");
	assert_int_equal(cb_json_int(bm->items[0], "recording", 0), 1);
	assert_null(cb_json_get(list->items[1], "inserted"));
	assert_null(cb_json_str(list->items[1], "inserted.node-name"));
	assert_string_equal(cb_json_str(m, "id"), "cb-7");
	cb_json_free(m);
}

static void test_escapes_and_scalars(void **state)
{
	struct cb_json *m = parse(" {\"a\":\"x\\u00e9\\n\\\\\",\"b\":null,\"c\":[],\"d\":{},\"e\":-1.5e3} ");

	(void)state;
	assert_non_null(m);
	assert_string_equal(cb_json_str(m, "a"), "x\xc3\xa9\n\\");
	assert_int_equal(cb_json_get(m, "b")->type, CB_JSON_NULL);
	assert_int_equal(cb_json_get(m, "c")->n, 0);
	assert_int_equal(cb_json_get(m, "d")->type, CB_JSON_OBJ);
	assert_true(cb_json_get(m, "e")->num == -1500.0);
	cb_json_free(m);
}

static void test_malformed(void **state)
{
	static const char *const bad[] = {
		"", "{", "{\"a\"}", "{\"a\":}", "[1,]", "{\"a\":1,}", "\"open", "tru", "{} x",
		"{\"a\":\"\\u12\"}", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]"
		"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", NULL
	};

	(void)state;
	for (int i = 0; bad[i]; i++) {
		struct cb_json *m = parse(bad[i]);
		if (m)
			fail_msg("accepted malformed JSON #%d: %s", i, bad[i]);
	}
	/* a string cut inside an escape never reads past the end */
	assert_null(cb_json_parse("\"ab\\", 4));
}

static void test_quote(void **state)
{
	char *q = cb_json_quote("a\"b\\c\nd\x01");

	(void)state;
	assert_string_equal(q, "\"a\\\"b\\\\c\\u000ad\\u0001\"");
	struct cb_json *back = cb_json_parse(q, strlen(q));
	assert_string_equal(back->str, "a\"b\\c\nd\x01");
	cb_json_free(back);
	free(q);
}

static void test_archive_name(void **state)
{
	char *n;

	(void)state;
	assert_string_equal(n = cb_vmsnap_archive_name("/var/lib/images/disk0.qcow2"), "disk0.raw");
	free(n);
	assert_string_equal(n = cb_vmsnap_archive_name("/x/data.raw"), "data.raw");
	free(n);
	assert_string_equal(n = cb_vmsnap_archive_name("/dev/vg0/vm-200-disk-0"), "vm-200-disk-0.raw");
	free(n);
	assert_string_equal(n = cb_vmsnap_archive_name("/x/.hidden"), ".hidden.raw");
	free(n);
}

/* Debian 12 has only QEMU 7.2: the versions below are this test's. */
static void test_vm_path_by_version(void **state)
{
	(void)state;
	/* auto: the version decides */
	assert_int_equal(cb_vm_path_choose(CB_VM_AUTO, 4, 1), CB_VMPATH_STAGE);
	assert_int_equal(cb_vm_path_choose(CB_VM_AUTO, 3, 9), CB_VMPATH_STAGE);
	assert_int_equal(cb_vm_path_choose(CB_VM_AUTO, 4, 2), CB_VMPATH_BACKUP);
	assert_int_equal(cb_vm_path_choose(CB_VM_AUTO, 6, 9), CB_VMPATH_BACKUP);
	assert_int_equal(cb_vm_path_choose(CB_VM_AUTO, 7, 0), CB_VMPATH_BACKUP);
	assert_int_equal(cb_vm_path_choose(CB_VM_AUTO, 7, 1), CB_VMPATH_CBW);
	assert_int_equal(cb_vm_path_choose(CB_VM_AUTO, 7, 2), CB_VMPATH_CBW);
	assert_int_equal(cb_vm_path_choose(CB_VM_AUTO, 8, 0), CB_VMPATH_CBW);
	assert_int_equal(cb_vm_path_choose(CB_VM_AUTO, 10, 0), CB_VMPATH_CBW);
	/* blockdev-backup asked for: taken from 4.2 on, never beyond what QEMU has */
	assert_int_equal(cb_vm_path_choose(CB_VM_BACKUP, 7, 2), CB_VMPATH_BACKUP);
	assert_int_equal(cb_vm_path_choose(CB_VM_BACKUP, 4, 2), CB_VMPATH_BACKUP);
	assert_int_equal(cb_vm_path_choose(CB_VM_BACKUP, 4, 1), CB_VMPATH_STAGE);
	/* stage: whatever the version */
	assert_int_equal(cb_vm_path_choose(CB_VM_STAGE, 7, 2), CB_VMPATH_STAGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query_block_shape),
		cmocka_unit_test(test_escapes_and_scalars),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_quote),
		cmocka_unit_test(test_archive_name),
		cmocka_unit_test(test_vm_path_by_version),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
