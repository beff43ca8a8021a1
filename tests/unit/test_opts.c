/* Unit tests: cb_opts values of keep-staging and keep-staging-free. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cb_opts.h"

static void test_room_parse(void **state)
{
	struct cb_room r;

	(void)state;
	assert_int_equal(cb_room_parse("20%", &r), 0);
	assert_int_equal(r.pct, 20);
	assert_int_equal(cb_room_parse("0%", &r), 0);
	assert_int_equal(r.pct, 0);
	assert_int_equal(cb_room_parse("100%", &r), 0);
	assert_int_equal(cb_room_parse("4096", &r), 0);
	assert_int_equal(r.pct, -1);
	assert_int_equal(r.bytes, 4096);
	assert_int_equal(cb_room_parse("10G", &r), 0);
	assert_true(r.bytes == 10ULL << 30);
	assert_int_equal(cb_room_parse("3MiB", &r), 0);
	assert_true(r.bytes == 3ULL << 20);
	assert_int_equal(cb_room_parse("2tb", &r), 0);
	assert_true(r.bytes == 2ULL << 40);
	static const char *const bad[] = { "", "%", "101%", "-1", " 5%", "5 %", "5X", "5GiBs",
					   "lots", "99999999999T", "20%%", NULL };
	for (int i = 0; bad[i]; i++)
		assert_int_equal(cb_room_parse(bad[i], NULL), -1);
}

static void test_keep_staging_values(void **state)
{
	static const struct { const char *value; int rc, keep; } cases[] = {
		{ "0", 0, CB_KEEP_OFF }, { "yes", 0, CB_KEEP_ON }, { "AUTO", 0, CB_KEEP_AUTO },
		{ "off", 0, CB_KEEP_OFF }, { "always", -1, CB_KEEP_OFF }, { "", -1, CB_KEEP_OFF },
	};
	struct cb_opts o;

	(void)state;
	cb_opts_init(&o);
	assert_int_equal(o.keep_staging, CB_KEEP_AUTO);
	assert_string_equal(o.keep_staging_free, "20%");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(cb_opts_set(&o, "keep-staging", cases[i].value, NULL), cases[i].rc);
		assert_int_equal(o.keep_staging, cases[i].keep);   /* a refused value changes nothing */
	}
	assert_int_equal(cb_opts_set(&o, "keep-staging-free", "5G", NULL), 0);
	assert_int_equal(cb_opts_set(&o, "keep-staging-free", "200%", NULL), -1);
	assert_string_equal(o.keep_staging_free, "5G");
	assert_int_equal(cb_opts_set(&o, "reuse", "auto", NULL), -1);   /* a plain boolean */
	cb_opts_release(&o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_room_parse),
		cmocka_unit_test(test_keep_staging_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
