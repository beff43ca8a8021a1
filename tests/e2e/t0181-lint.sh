#!/bin/bash
# tests/lint.sh rejects timing thresholds (issue 29): every line marked BAD
# in tests/lint-fixtures/timing-bad.sh (main's t0650, t0310 and t0300 forms
# among them) is named, and the lower bounds, timeouts and plain
# comparisons of timing-good.sh pass; the whole suite passes the lint.
. "$(dirname "$0")/lib.sh"

FIX=$TOP/tests/lint-fixtures

test_expect_success 'every timing threshold of the bad fixture is named, and only those' '
	test_must_fail sh "$TOP/tests/lint.sh" "$FIX/timing-bad.sh" >out
	cat out
	grep -n "# BAD" "$FIX/timing-bad.sh" | cut -d: -f1 | sort -n >want
	sed -n "s|^.*timing-bad.sh:\([0-9]*\): a timing threshold.*|\1|p" out | sort -n >got
	test_cmp want got
'

test_expect_success 'lower bounds, timeouts and plain comparisons pass' '
	sh "$TOP/tests/lint.sh" "$FIX/timing-good.sh"
'

test_expect_success 'the e2e scripts pass the lint' '
	sh "$TOP/tests/lint.sh"
'

test_expect_success 'test_when_finished: newest first, after a pass and after a failure; a failing one fails the test' '
	test_must_fail bash "$FIX/lib-when-finished.sh" "$SCRATCH/order" >out
	test_has out "^ok 1 - a body that passes"
	test_has out "^not ok 2 - a body that fails"
	test_has out "^not ok 3 - a cleanup that fails"
	printf "pass-2\npass-1\nfail-1\n" >want
	test_cmp want "$SCRATCH/order"
'

test_expect_success 'a .c file over 800 lines fails the lint, naming it; the sources pass' '
	mkdir -p big/sub
	seq 801 | sed "s/^/int v/;s/\$/;/" >big/sub/long.c
	seq 800 | sed "s/^/int w/;s/\$/;/" >big/sub/fits.c
	test_must_fail sh "$TOP/scripts/filesize.sh" big >out
	test_has out "^big/sub/long.c: 801 lines, over 800"
	test_lacks out "fits.c"
	(cd "$TOP" && sh scripts/filesize.sh)
'

test_done
