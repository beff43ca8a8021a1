#!/bin/bash
# Object storage, the ground floor: scripts/rgw.sh starts a throwaway
# one-node Ceph with a RADOS Gateway on 127.0.0.1 and stops it leaving
# nothing; cbackup's S3 client (src/sink/s3_*.c: its own SigV4 signer,
# libcurl for transport) does every request it needs against that real
# radosgw (tests/unit/test_s3.c, run here with the store's address); and
# retries: a stand-in store (tests/helpers/s3fake.py) answering 503, 429,
# 500, resets and a slow answer: each retried with backoff, at most 5 tries,
# then an error naming the operation and the key; and
# the documented way out with stock tools works on the same store: curl
# with --aws-sigv4 and an explicit x-amz-content-sha256 header (curl 7.88
# sends none, and RGW refuses the request without it); and the recipe of
# docs/object-storage.md: a night kept as objects in order, found by a
# listing, concatenated by curl, checked by sha256sum, restored by zstd -d
# and GNU tar to the tree that was backed up.
. "$(dirname "$0")/lib.sh"

# fake_store FAULTS: tests/helpers/s3fake.py on a port of its own, its
# requests logged to $SCRATCH/fake.log; FAKE=its address
fake_store() {
	rm -f "$SCRATCH/fake.port"
	python3 "$TOP/tests/helpers/s3fake.py" "$SCRATCH/fake.port" "$1" 2>"$SCRATCH/fake.log" &
	cleanup_pid $!
	wait_for 10 test -s "$SCRATCH/fake.port"
	FAKE=http://127.0.0.1:$(cat "$SCRATCH/fake.port")
}

test_expect_success 'a store that answers 503, 429, 500 and resets the connection: the put goes through, each fault retried' '
	fake_store 503,429,reset,500
	CB_S3_FAKE=$FAKE CB_S3_FAKE_WANT=ok "$TOP/build/rel/tests/test_s3" >out 2>&1 || { cat out; exit 1; }
	cat "$SCRATCH/fake.log"
	test_has out "OK .* test_fake_retries"
	test "$(grep -c "^PUT /b/units/x" "$SCRATCH/fake.log")" = 5
	test_has "$SCRATCH/fake.log" "^PUT /b/units/x -> 200"
'

test_expect_success 'a store that keeps failing: the put fails after 5 tries, naming the operation and the key' '
	fake_store 503,503,503,503,503,503
	CB_S3_FAKE=$FAKE CB_S3_FAKE_WANT=fail "$TOP/build/rel/tests/test_s3" >out 2>&1 || { cat out; exit 1; }
	cat out
	test_has out "error: PUT .units/x.: the store answered HTTP 503 5 times"
	test "$(grep -c "^PUT /b/units/x" "$SCRATCH/fake.log")" = 5
'

test_expect_success 'an answer slower than the timeout is retried like a reset' '
	fake_store slow
	CB_S3_FAKE=$FAKE CB_S3_FAKE_WANT=ok "$TOP/build/rel/tests/test_s3" >out 2>&1 || { cat out; exit 1; }
	test_has out "OK .* test_fake_retries"
'

need_rgw 'object storage on a real radosgw'

test_expect_success 'the S3 client against radosgw: put, conditional put, ranged get, head, pages of a listing, delete, clear errors' '
	"$TOP/build/rel/tests/test_s3" >out 2>&1 || { cat out; exit 1; }
	cat out
	test_has out "OK .* test_live_put_get_head_delete"
	test_has out "OK .* test_live_list_pages"
	test_has out "OK .* test_live_check"
'

test_expect_success 'the way out: stock curl reads and writes the store (SigV4, explicit payload header)' '
	sig=(--aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"
	     -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
	curl -sf "${sig[@]}" -X PUT "$CB_S3_ENDPOINT/wayout" >/dev/null
	echo "a night" >night
	curl -sf "${sig[@]}" -T night "$CB_S3_ENDPOINT/wayout/night.tar.zst" >/dev/null
	curl -sf "${sig[@]}" -o back "$CB_S3_ENDPOINT/wayout/night.tar.zst"
	test_cmp night back
	# without the header radosgw refuses curl 7.88 (what the docs warn of)
	rc=0
	curl -sf --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-o /dev/null "$CB_S3_ENDPOINT/wayout/night.tar.zst" || rc=$?
	test "$rc" != 0
'

test_expect_success 'the way out, docs/object-storage.md: a night as objects in order, found by a listing, concatenated by curl, checked by sha256sum, restored by zstd -d and GNU tar' '
	sig=(--aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"
	     -H "x-amz-content-sha256: UNSIGNED-PAYLOAD")
	make_small_tree root web1
	mkdir -p dump tmp
	cbackup_run 0 backup --root "$SCRATCH/root" --id 9 --dumpdir "$SCRATCH/dump" --tmpdir "$SCRATCH/tmp"
	archive=$(find_archive dump ct 9 .zst)
	name=$(basename "$archive")
	# the night as a store keeps it: its units as objects, a list of them
	# in order (the manifest), the .sha256 of the whole archive
	split -b 24K -d -a 4 "$archive" piece.
	ls piece.* >pieces
	test "$(wc -l <pieces)" -ge 2
	for p in $(cat pieces); do
		curl -sf "${sig[@]}" -T "$p" "$CB_S3_ENDPOINT/wayout/units/$name.$p" >/dev/null
		echo "units/$name.$p" >>order
	done
	curl -sf "${sig[@]}" -T order "$CB_S3_ENDPOINT/wayout/nights/$name.units" >/dev/null
	curl -sf "${sig[@]}" -T "$archive.sha256" "$CB_S3_ENDPOINT/wayout/nights/$name.sha256" >/dev/null
	mkdir night-back
	cd night-back
	# the recipe, as documented
	curl -sf "${sig[@]}" "$CB_S3_ENDPOINT/wayout?list-type=2&prefix=nights%2F" |
		grep -o "<Key>[^<]*</Key>" | sed "s/<[^>]*>//g" >nights
	test_has nights "^nights/$name.units$"
	curl -sf "${sig[@]}" -o units "$CB_S3_ENDPOINT/wayout/nights/$name.units"
	: >"$name"
	while read -r key; do
		curl -sf "${sig[@]}" "$CB_S3_ENDPOINT/wayout/$key" >>"$name"
	done <units
	curl -sf "${sig[@]}" -o "$name.sha256" "$CB_S3_ENDPOINT/wayout/nights/$name.sha256"
	grep " $name\$" "$name.sha256" | sha256sum -c
	mkdir restored
	zstd -dc "$name" | tar --xattrs --xattrs-include="*" --acls --numeric-owner -xpf - -C restored
	cd ..
	test_cmp "$archive" "night-back/$name"
	compare_trees --no-xattr root night-back/restored
'

test_expect_success 'rgw.sh stop ends every daemon it started and removes its directory' '
	pids=$(cat "$RGW_DIR"/run/*.pid)
	test -n "$pids"
	bash "$TOP/scripts/rgw.sh" stop "$RGW_DIR"
	test ! -e "$RGW_DIR"
	for p in $pids; do
		test_must_fail kill -0 "$p" 2>/dev/null
	done
'

test_done
