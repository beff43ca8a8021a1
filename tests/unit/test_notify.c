/* Unit tests: cb_notes (notes-template), cb_jobstatus (JSON) and cb_notify
 * (the mail message; sending is tested end to end in t0600). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "cb_jobstatus.h"
#include "cb_mailto.h"
#include "cb_notes.h"
#include "cb_notify.h"

static void test_notes_render(void **state)
{
	struct cb_notes_vars v = { "pve", "web", "node1", "101", "ct" };
	char *t;
	(void)state;

	t = cb_notes_render("{{guestname}} {{vmid}} {{type}} on {{node}}/{{cluster}}\\nx\\\\n {{ y", &v);
	assert_string_equal(t, "web 101 ct on node1/pve\nx\\n {{ y\n");
	free(t);
	assert_int_equal(cb_notes_check("{{guestname}}\\n{{vmid}}"), 0);
	assert_int_equal(cb_notes_check("a {{vmname}} b"), -1);
	assert_string_equal(cb_last_error(), "unknown variable '{{vmname}}' (accepted: {{cluster}}, "
			    "{{guestname}}, {{node}}, {{vmid}}, {{type}})");
	assert_int_equal(cb_notes_check("a {{vmid"), -1);
}

static char *capture_json_string(const char *s)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cb_json_string(f, s);
	fclose(f);
	return text;
}

static void test_json_string(void **state)
{
	char *t;
	(void)state;

	t = capture_json_string("a\"b\\c\nd\x01\x7f\xc3\xbc");
	assert_string_equal(t, "\"a\\\"b\\\\c\\nd\\u0001\\u007f\xc3\xbc\"");
	free(t);
	t = capture_json_string(NULL);
	assert_string_equal(t, "null");
	free(t);
}

static void test_mailto(void **state)
{
	(void)state;
	assert_int_equal(cb_mailto_check("root@example.com, a@b.c;d@e f"), 0);
	assert_int_equal(cb_mailto_check("root@x\nBcc: evil@y"), -1);
	assert_int_equal(cb_mailto_check(" , "), -1);
}

static void test_compose(void **state)
{
	struct cb_job_status js;
	struct cb_guest_result *g;
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	(void)state;

	cb_jobstatus_init(&js, "cbackup 101 102");
	snprintf(js.host, sizeof(js.host), "node1");
	g = cb_jobstatus_add(&js, "101", CB_GUEST_CT);
	g->result = CB_RESULT_OK;
	g->archive = strdup("/d/a.tar.zst");
	g->size = 3 * 1024 * 1024;
	g->seconds = 95;
	g = cb_jobstatus_add(&js, "102", CB_GUEST_VM);
	g->result = CB_RESULT_FAILED;
	g->error = strdup("first sync: boom");
	f = open_memstream(&text, &len);
	cb_notify_compose(&js, "a@b,c@d", f);
	fclose(f);
	assert_non_null(strstr(text, "To: a@b, c@d\nSubject: cbackup backup status (node1): backup failed\n"));
	assert_non_null(strstr(text, "\n101      -                    ok       00:01:35  3MB       /d/a.tar.zst\n"));
	assert_non_null(strstr(text, "\n102      -                    failed   -         -         first sync: boom\n"));
	assert_non_null(strstr(text, "\nTOTAL    2 guest(s), 1 not ok          00:01:35  3MB"));
	assert_non_null(strstr(text, "\n101: no log file\n"));
	free(text);
	cb_jobstatus_release(&js);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_notes_render),
		cmocka_unit_test(test_json_string),
		cmocka_unit_test(test_mailto),
		cmocka_unit_test(test_compose),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
