#!/bin/bash
# keep-staging trusts its kept index only when it checks out (issue 16,
# item 1): a corrupted, truncated, foreign-version or foreign-root index
# each gives a WARN: naming why, a full first sync (every file copied
# again) and an archive equal to its source, even for a change a stale
# index would hide (content changed, size and mtime put back). An intact
# index is trusted: the next first sync copies only what changed.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
SRC2=$SCRATCH/src2
INDEX=$SCRATCH/tmp/cbackup/cbackup-700.stage.index
mkdir -p "$SCRATCH/tmp"

# the run number (test bodies are subshells: kept in a file)
run_no() { cat "$SCRATCH/run" 2>/dev/null || echo 0; }

# backup ROOT [ARGS]: a keep-staging backup of ROOT as guest 700 into dump-N
backup() {
	local run=$(($(run_no) + 1)) root=$1
	shift
	echo "$run" >"$SCRATCH/run"
	mkdir "$SCRATCH/dump-$run"
	cbackup_run 0 backup --root "$root" --id 700 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/dump-$run" --keep-staging 1 --freeze-cmd true --thaw-cmd true "$@"
}

# archive_equals ROOT: the last run's archive restores to ROOT
archive_equals() {
	local archive run
	run=$(run_no)
	archive=$(find_archive "$SCRATCH/dump-$run" ct 700 .zst)
	cbackup_run 0 restore "$archive" "$SCRATCH/r-$run"
	compare_trees "$1" "$SCRATCH/r-$run"
}

# first_sync_copied: "Number of files transferred" of the first sync
first_sync_copied() {
	grep -m1 "Number of files transferred:" "$CB_ERR" | sed "s/.*: //"
}

# regular inodes of ROOT (hardlinks once)
inodes() { find "$1" -type f -printf "%i\n" | sort -u | wc -l; }

# sneaky_change ROOT: new content, same size, mtime put back
sneaky_change() {
	printf "HELLO\n" >"$1/regular.txt"
	touch -d "2019-05-06 07:08:09.987654321" "$1/regular.txt"
}

test_expect_success ROOT,ACL,SETCAP 'setup: a first keep-staging run leaves an index' '
	make_full_tree "$SRC"
	backup "$SRC"
	test -s "$INDEX"
	archive_equals "$SRC"
'

test_expect_success ROOT,ACL,SETCAP 'an intact index is trusted: only the change is copied' '
	sneaky_change "$SRC"
	backup "$SRC"
	test_lacks "$CB_ERR" "^WARN: "
	test "$(first_sync_copied)" = 1
	archive_equals "$SRC"
'

test_expect_success ROOT,ACL,SETCAP 'a kept copy: no walk of the guest for an estimate, the dump disk checked after the first sync' '
	backup "$SRC" --verbose
	test_has "$CB_ERR" "^INFO: space estimate: by the first sync \(a kept staging copy\)$"
	test_lacks "$CB_ERR" "^INFO: space estimate: .* in [0-9]+ entries"
	# the dump disk is still checked, with what the first sync measured
	awk "/first sync finished/ { s = 1 } /dumpdir .* free for at most [1-9]/ { ok = s } END { exit !ok }" "$CB_ERR"
	archive_equals "$SRC"
'

# damaged KIND REASON: damage the index, change a file behind its back
damaged() {
	sneaky_change "$SRC"
	printf "again\n" >"$SRC/regular.txt"
	touch -d "2019-05-06 07:08:09.987654321" "$SRC/regular.txt"
	backup "$SRC"
	test_has "$CB_ERR" "^WARN: staging index .*$1.*: full first sync"
	test "$(first_sync_copied)" = "$(inodes "$SRC")"
	archive_equals "$SRC"
}

test_expect_success ROOT,ACL,SETCAP 'a corrupted index: WARN, full first sync, right archive' '
	size=$(stat -c %s "$INDEX")
	printf "\\377" | dd of="$INDEX" bs=1 seek=$((size / 2)) conv=notrunc status=none
	damaged "fails its checksum"
'

test_expect_success ROOT,ACL,SETCAP 'a truncated index: WARN, full first sync, right archive' '
	truncate -s -40 "$INDEX"
	damaged "is truncated"
'

test_expect_success ROOT,ACL,SETCAP 'an index of another format version: WARN, full first sync' '
	printf 9 | dd of="$INDEX" bs=1 seek=7 conv=notrunc status=none
	damaged "has format version 9"
'

test_expect_success ROOT,ACL,SETCAP 'an index of another guest root: WARN, full first sync' '
	cp -a "$SRC" "$SRC2"
	backup "$SRC2"
	test_has "$CB_ERR" "^WARN: staging index .*describes another guest root"
	test "$(first_sync_copied)" = "$(inodes "$SRC2")"
	archive_equals "$SRC2"
'

test_done
