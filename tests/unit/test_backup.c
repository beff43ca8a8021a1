/* Unit tests: archive naming and vzdump's size format (cb_backup). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "cb_backup.h"
#include "cb_catalog.h"
#include "cb_util.h"

static void test_archive_name(void **state)
{
	static const struct {
		enum cb_guest_type type;
		const char *id;
		enum cb_compress c;
		enum cb_archive_name naming;
		const char *want;
	} cases[] = {
		{ CB_GUEST_CT, "101", CB_COMPRESS_ZSTD, CB_NAME_VZDUMP,
		  "vzdump-lxc-101-2026_12_02-10_14_07.tar.zst" },
		{ CB_GUEST_CT, "101", CB_COMPRESS_ZSTD, CB_NAME_CBACKUP,
		  "cbackup-ct-101-2026_12_02-10_14_07.tar.zst" },
		{ CB_GUEST_CT, "999999999", CB_COMPRESS_LZO, CB_NAME_VZDUMP,
		  "vzdump-lxc-999999999-2026_12_02-10_14_07.tar.lzo" },
		/* PVE's VMIDs are 100-999999999 without a leading zero */
		{ CB_GUEST_CT, "1000000000", CB_COMPRESS_LZO, CB_NAME_VZDUMP,
		  "cbackup-ct-1000000000-2026_12_02-10_14_07.tar.lzo" },
		{ CB_GUEST_CT, "0101", CB_COMPRESS_LZO, CB_NAME_VZDUMP,
		  "cbackup-ct-0101-2026_12_02-10_14_07.tar.lzo" },
		{ CB_GUEST_VM, "200", CB_COMPRESS_LZO, CB_NAME_VZDUMP,
		  "cbackup-vm-200-2026_12_02-10_14_07.tar.lzo" },
		{ CB_GUEST_CT, "7", CB_COMPRESS_GZIP, CB_NAME_VZDUMP,
		  "cbackup-ct-7-2026_12_02-10_14_07.tar.gz" },
		{ CB_GUEST_CT, "7", CB_COMPRESS_NONE, CB_NAME_VZDUMP,
		  "cbackup-ct-7-2026_12_02-10_14_07.tar" },
	};
	struct tm tm = { .tm_year = 126, .tm_mon = 11, .tm_mday = 2, .tm_hour = 10, .tm_min = 14,
			 .tm_sec = 7, .tm_isdst = -1 };
	time_t when;
	(void)state;
	setenv("TZ", "UTC", 1);
	tzset();
	when = mktime(&tm);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *n = cb_backup_archive_name(cases[i].type, cases[i].id, when, cases[i].c,
						 cases[i].naming);
		assert_string_equal(n, cases[i].want);
		free(n);
	}
}

/* IDs may contain '-': the name is parsed from the right. */
static void test_parse_name(void **state)
{
	static const char *const suffix_tmp[] = { ".tmp", NULL };
	enum cb_guest_type type;
	enum cb_compress c;
	time_t when;
	char *id;
	(void)state;
	assert_int_equal(cb_catalog_parse_name("cbackup-ct-web-1-2026_12_02-10_14_07.tar.zst", &type,
					       &id, &when, &c), 0);
	assert_string_equal(id, "web-1");
	assert_int_equal(c, CB_COMPRESS_ZSTD);
	free(id);
	assert_int_equal(cb_catalog_parse_name("cbackup-vm-a.tar-2026_12_02-10_14_07.tar", &type, &id,
					       &when, &c), 0);
	assert_string_equal(id, "a.tar");
	assert_int_equal(type, CB_GUEST_VM);
	free(id);
	assert_int_equal(cb_catalog_parse_name("cbackup-ct-2026_12_02-10_14_07.tar.zst", &type, &id,
					       &when, &c), -1);
	assert_int_equal(cb_catalog_parse_name("cbackup-ct-../x-2026_12_02-10_14_07.tar", &type, &id,
					       &when, &c), -1);
	assert_int_equal(cb_catalog_parse_name("cbackup-ct-web-2026_12_02-10_14_07.tar.zst.tmp",
					       &type, &id, &when, &c), -1);
	assert_true(cb_catalog_is_guest_file("cbackup-ct-web-2026_12_02-10_14_07.tar.zst.tmp",
					     CB_GUEST_CT, "web", suffix_tmp));
	assert_false(cb_catalog_is_guest_file("cbackup-ct-web-1-2026_12_02-10_14_07.tar.zst.tmp",
					      CB_GUEST_CT, "web", suffix_tmp));
	assert_false(cb_catalog_is_guest_file("cbackup-vm-web-2026_12_02-10_14_07.tar.zst.tmp",
					      CB_GUEST_CT, "web", suffix_tmp));
	id = cb_catalog_base("/d/cbackup-ct-a.tar-2026_12_02-10_14_07.tar.gz");
	assert_string_equal(id, "/d/cbackup-ct-a.tar-2026_12_02-10_14_07");
	free(id);
}

static void test_vzsize(void **state)
{
	char b[32];
	(void)state;
	cb_fmt_vzsize(b, sizeof(b), 600000000ULL);
	assert_string_equal(b, "572MB");
	cb_fmt_vzsize(b, sizeof(b), 2048);
	assert_string_equal(b, "2KB");
	cb_fmt_vzsize(b, sizeof(b), 1320702444ULL);
	assert_string_equal(b, "1.23GB");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_archive_name),
		cmocka_unit_test(test_parse_name),
		cmocka_unit_test(test_vzsize),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
