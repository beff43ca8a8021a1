/* Unit tests: a unit store's manifests and names (cb_store.h): a manifest
 * formatted and parsed back; one whose closing digest does not hold, whose
 * units do not add up to its size, that names another night, or that has
 * a malformed line, refused; unit names; the digest set; marks and the
 * collection on a real directory store; how a night streams (the units
 * fetched at once and held ahead, by their size). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "cb_log.h"
#include "cb_store.h"
#include "cb_store_ops.h"
#include "cb_util.h"
#include "testlib.h"

#define NAME "cbackup-ct-101-2026_12_06-03_00_00.tar.zst"
#define H1 "1111111111111111111111111111111111111111111111111111111111111111"
#define H2 "2222222222222222222222222222222222222222222222222222222222222222"

static char *sample(void)
{
	struct cb_store_ref u[2] = { { .hex = H1, .len = 10 }, { .hex = H2, .len = 5 } };
	struct cb_manifest m = { .name = NAME, .size = 15, .when = 1796536952, .protected_ = 1,
				 .units = u, .n_units = 2 };

	strcpy(m.sha256, H2);
	strcpy(m.catalog.hex, H1);
	m.catalog.len = 7;
	return cb_manifest_format(&m);
}

static void test_round_trip(void **state)
{
	char *text = sample();
	struct cb_manifest m;

	(void)state;
	assert_int_equal(cb_manifest_parse(&m, NAME, text, strlen(text)), 0);
	assert_string_equal(m.name, NAME);
	assert_int_equal(m.size, 15);
	assert_int_equal(m.n_units, 2);
	assert_string_equal(m.units[1].hex, H2);
	assert_int_equal(m.units[0].len, 10);
	assert_string_equal(m.catalog.hex, H1);
	assert_int_equal(m.catalog.len, 7);
	assert_string_equal(m.log.hex, "");
	assert_int_equal(m.protected_, 1);
	assert_int_equal(m.when, 1796536952);
	cb_manifest_release(&m);
	free(text);
}

/* text with the first occurrence of from replaced by to, its closing
 * digest made to hold again (a forger's manifest) */
static char *edit(const char *from, const char *to, int fix_digest)
{
	char *text = sample(), *at = strstr(text, from), *out, *end;

	assert_non_null(at);
	out = cb_xasprintf("%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	free(text);
	if (fix_digest) {
		struct cb_store_ref r;

		end = strstr(out, "\nend ") + 1;
		cb_store_ref_of(out, (size_t)(end - out), &r);
		memcpy(end + 4, r.hex, 64);
	}
	return out;
}

static void refused(char *text, const char *name, const char *why)
{
	struct cb_manifest m;

	assert_int_equal(cb_manifest_parse(&m, name, text, strlen(text)), -1);
	assert_non_null(strstr(cb_last_error(), why));
	assert_null(m.units);
	free(text);
}

static void test_refused(void **state)
{
	char *text = sample();

	(void)state;
	/* a byte changed: the closing digest no longer holds */
	refused(edit("unit " H2 " 5", "unit " H2 " 6", 0), NAME, "damaged");
	/* made to hold, but the units do not add up to the size */
	refused(edit("unit " H2 " 5", "unit " H2 " 6", 1), NAME, "incomplete");
	/* a unit name that is no digest: never a path */
	refused(edit("unit " H1, "unit ../../../etc/passwd", 1), NAME, "line 8 is malformed");
	/* another night's manifest under this name */
	refused(cb_xstrdup(text), "cbackup-ct-101-2026_12_07-03_00_00.tar.zst", "another night");
	/* cut short */
	refused(cb_xasprintf("%.*s", (int)(strlen(text) - 30), text), NAME, "damaged");
	free(text);
}

static void test_names_and_set(void **state)
{
	char name[80];
	unsigned char a[32], b[32];
	struct cb_store_set set = { 0 };

	(void)state;
	cb_store_unit_name(H1, name);
	assert_string_equal(name, "units/11/" H1);
	assert_int_equal(cb_store_unhex(H1, a), 0);
	assert_int_equal(cb_store_unhex("11", b), -1);
	assert_int_equal(cb_store_unhex(H1 "0", b), -1);
	assert_int_equal(cb_store_unhex("G111111111111111111111111111111111111111111111111111111111111111", b), -1);
	assert_int_equal(cb_store_unhex(H2, b), 0);
	cb_store_set_add(&set, a);
	assert_int_equal(cb_store_set_has(&set, a), 1);
	assert_int_equal(cb_store_set_has(&set, b), 0);
	cb_store_set_add(&set, b);
	assert_int_equal(cb_store_set_has(&set, b), 1);
	cb_store_set_release(&set);
}

/* A collection on a real directory store: a unit no manifest names goes,
 * one a manifest names stays; with a night's live mark, nothing goes. */
static void test_gc(void **state)
{
	char dir[] = "/tmp/cb-store-XXXXXX", *text, *obj;
	struct cb_objstore *s;
	struct cb_store_ref kept, orphan;
	struct cb_manifest m = { .name = NAME, .when = 1 };
	struct cb_log log;
	char n[80];
	uint64_t size;

	(void)state;
	cb_log_init(&log);
	assert_non_null(mkdtemp(dir));
	s = cb_objstore_open_dir("t", dir);
	assert_non_null(s);
	assert_int_equal(cb_store_put_ref(s, "kept", 4, 0, &kept), 0);
	assert_int_equal(cb_store_put_ref(s, "orphan", 6, 0, &orphan), 0);
	m.units = &kept;
	m.n_units = 1;
	m.size = 4;
	strcpy(m.sha256, H1);
	text = cb_manifest_format(&m);
	obj = cb_store_night_name(NAME);
	assert_int_equal(s->ops->put(s, obj, text, strlen(text), 1), 0);
	free(obj);
	free(text);
	/* a night running (its mark, this process's): nothing collected */
	obj = cb_store_mark_put(s, "night", "x");
	assert_non_null(obj);
	assert_int_equal(cb_store_gc(s, 0, &log), 0);
	cb_store_unit_name(orphan.hex, n);
	assert_int_equal(s->ops->head(s, n, &size), 0);
	cb_store_mark_drop(s, obj);
	assert_int_equal(cb_store_gc(s, 0, &log), 0);
	assert_int_equal(s->ops->head(s, n, &size), 1);
	cb_store_unit_name(kept.hex, n);
	assert_int_equal(s->ops->head(s, n, &size), 0);
	cb_objstore_close(s);
	run("rm -rf %s", dir);
}

/* plan N LEN: threads and depth for a night of N units of LEN bytes */
static void plan(size_t n, uint64_t len, unsigned *threads, unsigned *depth)
{
	struct cb_store_ref *u = calloc(n, sizeof(*u));
	struct cb_manifest m = { .units = u, .n_units = n };

	for (size_t k = 0; k < n; k++)
		u[k].len = len;
	cb_store_stream_plan(&m, threads, depth);
	free(u);
}

/* A restore from a store is bound by each request's round trip: a night
 * of 1 MiB units has 8 fetches in flight and 24 units ahead (it had 4 and
 * 8: 0.92x restic's wall, now 0.58x); larger units fewer, about 24 MiB
 * held, never fewer than two. */
static void test_stream_plan(void **state)
{
	unsigned t, d;

	(void)state;
	plan(760, 1 << 20, &t, &d);
	assert_int_equal(t, 8);
	assert_int_equal(d, 24);
	plan(100, 4 << 20, &t, &d);
	assert_int_equal(t, 6);
	assert_int_equal(d, 6);
	plan(10, 64 << 20, &t, &d);
	assert_int_equal(t, 2);
	assert_int_equal(d, 2);
	plan(3, 1000, &t, &d);
	assert_int_equal(t, 8);
	assert_int_equal(d, 24);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_names_and_set),
		cmocka_unit_test(test_gc),
		cmocka_unit_test(test_stream_plan),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
