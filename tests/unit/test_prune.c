/* Unit tests: retention marking with Proxmox's prune-backups semantics. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "cb_prune.h"
#include "cb_util.h"

static time_t at(int y, int mo, int d, int h)
{
	struct tm tm = { .tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h, .tm_isdst = -1 };
	return mktime(&tm);
}

/* Marks `n` backups with `spec`; returns a string of K/R/P, newest first. */
static char *run(const char *spec, const time_t *when, const int *prot, size_t n)
{
	struct cb_prune_item items[32];
	struct cb_prune_rules r;
	char *out = cb_xcalloc(n + 1, 1);

	memset(items, 0, sizeof(items));
	for (size_t i = 0; i < n; i++) {
		items[i].when = when[i];
		items[i].is_protected = prot ? prot[i] : 0;
	}
	assert_int_equal(cb_prune_parse(spec, &r), 0);
	cb_prune_mark(items, n, &r);
	for (size_t i = 0; i < n; i++)
		out[i] = items[i].mark == CB_PRUNE_KEEP ? 'K' : items[i].mark == CB_PRUNE_REMOVE ? 'R' : 'P';
	return out;
}

#define EXPECT(spec, when, prot, want) do { \
	char *got = run(spec, when, prot, sizeof(when) / sizeof(when[0])); \
	assert_string_equal(got, want); free(got); } while (0)

static void test_parse(void **state)
{
	struct cb_prune_rules r;
	(void)state;
	assert_int_equal(cb_prune_parse("keep-last=3,keep-daily=7 keep-weekly=4", &r), 0);
	assert_int_equal(r.last, 3);
	assert_int_equal(r.daily, 7);
	assert_int_equal(r.weekly, 4);
	assert_int_equal(r.all, 0);
	assert_int_equal(cb_prune_parse(NULL, &r), 0);
	assert_int_equal(r.all, 1);
	assert_int_equal(cb_prune_parse("keep-last=x", &r), -1);
	assert_int_equal(cb_prune_parse("keep-often=3", &r), -1);
	assert_non_null(strstr(cb_last_error(), "keep-often"));
	assert_int_equal(cb_prune_parse("keep-last", &r), -1);
	/* a rule set that keeps nothing would delete the backup just written */
	assert_int_equal(cb_prune_parse("keep-last=0", &r), -1);
	assert_non_null(strstr(cb_last_error(), "keep no backup"));
	assert_int_equal(cb_prune_parse("keep-last=0,keep-daily=0", &r), -1);
	assert_int_equal(cb_prune_parse("keep-all=0", &r), -1);
	assert_int_equal(cb_prune_parse("keep-last=0,keep-all=1", &r), 0);
}

static void test_keep_last(void **state)
{
	/* given oldest-first on purpose: marking sorts newest first */
	const time_t w[] = { at(2026, 1, 1, 3), at(2026, 1, 2, 3), at(2026, 1, 3, 3), at(2026, 1, 4, 3) };
	(void)state;
	EXPECT("keep-last=2", w, NULL, "KKRR");
	EXPECT("keep-all=1", w, NULL, "KKKK");
	EXPECT("", w, NULL, "KKKK");
}

static void test_hourly_daily(void **state)
{
	const time_t w[] = { at(2026, 3, 5, 10), at(2026, 3, 5, 10) + 600, at(2026, 3, 5, 8),
			     at(2026, 3, 4, 10), at(2026, 3, 4, 8), at(2026, 3, 3, 23) };
	(void)state;
	/* newest first: 5/10:10, 5/10:00, 5/08, 4/10, 4/08, 3/23 */
	EXPECT("keep-hourly=3", w, NULL, "KRKKRR");
	EXPECT("keep-daily=2", w, NULL, "KRRKRR");
	/* keep-last takes 5/10:10; the 5th is kept already, so daily=2 takes the 4th and 3rd */
	EXPECT("keep-last=1,keep-daily=2", w, NULL, "KRRKRK");
}

static void test_weekly_iso(void **state)
{
	/* 2027-01-01 (Fri) and 2026-12-28 (Mon) are both ISO week 2026-W53;
	 * 2026-12-27 (Sun) is W52; 2026-12-20 (Sun) is W51. */
	const time_t w[] = { at(2026, 12, 20, 1), at(2026, 12, 27, 1), at(2026, 12, 28, 1), at(2027, 1, 1, 1) };
	(void)state;
	EXPECT("keep-weekly=2", w, NULL, "KRKR");
	EXPECT("keep-weekly=3", w, NULL, "KRKK");
}

static void test_monthly_yearly(void **state)
{
	const time_t w[] = { at(2024, 6, 1, 0), at(2025, 2, 1, 0), at(2025, 11, 3, 0), at(2025, 11, 20, 0),
			     at(2026, 1, 9, 0) };
	(void)state;
	/* newest first: 2026-01-09, 2025-11-20, 2025-11-03, 2025-02-01, 2024-06-01 */
	EXPECT("keep-monthly=3", w, NULL, "KKRKR");
	EXPECT("keep-yearly=2", w, NULL, "KKRRR");
	EXPECT("keep-monthly=1,keep-yearly=3", w, NULL, "KKRRK");
}

static void test_protected(void **state)
{
	const time_t w[] = { at(2026, 1, 1, 0), at(2026, 1, 2, 0), at(2026, 1, 3, 0) };
	const int p[] = { 0, 0, 1 };  /* the newest is protected */
	(void)state;
	EXPECT("keep-last=1", w, p, "PKR");
	EXPECT("keep-all=1", w, p, "PKK");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_keep_last),
		cmocka_unit_test(test_hourly_daily),
		cmocka_unit_test(test_weekly_iso),
		cmocka_unit_test(test_monthly_yearly),
		cmocka_unit_test(test_protected),
	};
	setenv("TZ", "UTC", 1);
	tzset();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
