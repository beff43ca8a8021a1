/* Unit tests: cb_text (names as bytes: UTF-8, GNU tar quoting, JSON). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <locale.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cb_text.h"

static void test_utf8(void **state)
{
	(void)state;
	assert_true(cb_utf8_valid("plain ünïcödé ファイル 😀"));
	assert_false(cb_utf8_valid("caf\xe9"));
	assert_false(cb_utf8_valid("\xc0\xaf"));          /* overlong '/' */
	assert_false(cb_utf8_valid("\xed\xa0\x80"));      /* a surrogate */
	assert_false(cb_utf8_valid("\xf4\x90\x80\x80"));  /* past U+10FFFF */
	assert_false(cb_utf8_valid("\xe2\x82"));          /* truncated */
}

/* the same as `tar -tf` prints under C.UTF-8 (t0480 compares them whole) */
static void test_quote(void **state)
{
	static const char *const cases[][2] = {
		{ "a\nb", "a\\nb" }, { "e\033[2J", "e\\033[2J" }, { "t\tx", "t\\tx" },
		{ "bs\\x", "bs\\\\x" }, { "\a\b\f\r\v", "\\a\\b\\f\\r\\v" }, { "del\x7f", "del\\177" },
		{ "c1\xc2\x85", "c1\\302\\205" }, { "ü-ok", "ü-ok" }, { "inv\xe9", "inv\\351" },
		{ "sp ace \"'?", "sp ace \"'?" }, { "\xe2\x82", "\\342\\202" },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *q = cb_quote(cases[i][0]);
		assert_string_equal(q, cases[i][1]);
		free(q);
	}
}

static char *capture(const char *key, const char *s, const char *sep)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cb_json_member(f, "", key, s, sep);
	fclose(f);
	return text;
}

static void test_json_member(void **state)
{
	char *t;
	(void)state;
	t = capture("path", "ok\n\x01\xc2\x85", "");
	assert_string_equal(t, "\"path\":\"ok\\n\\u0001\\u0085\"");
	free(t);
	t = capture("path", "./caf\xe9", "");
	assert_string_equal(t, "\"path\":\"./caf\\ufffd\",\"path_b64\":\"Li9jYWbp\"");
	free(t);
	t = capture("n", "\xff\xfe", "\n");
	assert_string_equal(t, "\"n\": \"\\ufffd\\ufffd\",\n\"n_b64\": \"//4=\"");
	free(t);
	t = capture("n", NULL, "");
	assert_string_equal(t, "\"n\":null");
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_utf8),
		cmocka_unit_test(test_quote),
		cmocka_unit_test(test_json_member),
	};
	setlocale(LC_CTYPE, "C.UTF-8");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
