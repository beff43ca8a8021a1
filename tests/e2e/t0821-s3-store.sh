#!/bin/bash
# The S3 side of a unit store (tests/unit/test_objstore_s3.c), on a real
# radosgw: the S3 backend of cb_objstore.h (names under the storage's
# prefix, names outside the alphabet refused, errors naming the storage,
# clone, check, a put only if absent that never replaces an object, also
# on a versioned bucket where RGW ignores If-None-Match), the lock across hosts (one lock object a guest, the
# second host told who holds it and since when, stale locks replaced, a
# lock taken over found lost, release only while ours), and the upload
# pool (every object there, never more than depth + threads buffers held,
# a failing put fails the pool naming the object). The lock cases run
# first on a directory store, without radosgw.
. "$(dirname "$0")/lib.sh"

BIN=$TOP/build/rel/tests/test_objstore_s3

test_expect_success 'without a store: locks on a directory store; the S3 cases say they are skipped' '
	(unset CB_S3_ENDPOINT; "$BIN") >out 2>&1 || { cat out; exit 1; }
	cat out
	test_has out "OK .* test_lock_two_hosts"
	test_has out "OK .* test_lock_stale"
	test_has out "OK .* test_lock_renew_lost"
	test_has out "OK .* test_from_opts"
	test_has out "skipped: no store"
'

need_rgw 'the S3 store on a real radosgw'

test_expect_success 'on radosgw: the S3 backend, locks across hosts, the upload pool' '
	"$BIN" >out 2>&1 || { cat out; exit 1; }
	cat out
	test_lacks out "SKIPPED|skipped"
	test "$(grep -c "OK .* test_lock_two_hosts" out)" = 2
	test "$(grep -c "OK .* test_lock_renew_lost" out)" = 2
	test_has out "OK .* test_s3_backend"
	test_has out "OK .* test_s3_if_absent_versioned"
	test_has out "OK .* test_pool_all_bounded"
	test_has out "pool: 40 objects, 2621440 bytes, peak [1-5] buffers"
	test_has out "OK .* test_pool_s3_bucket_gone"
'

test_done
