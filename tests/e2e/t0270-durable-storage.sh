#!/bin/bash
# The archive is made durable while it is written (src/sink/syncer.c): a thread
# fdatasyncs the storage file every 32 MiB and drops what is on disk from
# the page cache, so the final fsync is short, dirty memory stays bounded
# and a backup does not push the guests' data out of the cache. A write
# error that only this background sync sees must still fail the backup
# cleanly (the kernel reports a writeback error once: the final fsync would
# not see it again).
. "$(dirname "$0")/lib.sh"

D=$SCRATCH/dump
TMPD=$SCRATCH/tmp

# 168 MiB of random data: an archive past 128 MiB + 32 MiB, so that the
# writer surely waits for a background sync before it reaches the final
# fsync (no timing involved)
test_expect_success 'setup: 168 MiB of random data' '
	mkdir -p "$SCRATCH/ct310/data" "$TMPD" "$D"
	head -c 168M /dev/urandom >"$SCRATCH/ct310/data/blob"
	echo small >"$SCRATCH/ct310/data/note"
'

backup() {  # RC ID [OPTIONS...]
	local rc=$1 id=$2
	shift 2
	cbackup_run "$rc" backup --root "$SCRATCH/ct310" --id "$id" --tmpdir "$TMPD" --dumpdir "$D" \
		--compress zstd "$@"
}

if [ "$(stat -f -c %T "$D")" = tmpfs ]; then
	test_skip 'a big archive ends on disk and out of the page cache' \
		"$D is on tmpfs, whose pages are the files: nothing to sync, no cache to leave"
else
	test_expect_success 'a big archive ends on disk and out of the page cache; it verifies' '
		backup 0 310
		a=$(find_archive "$D" ct 310 .zst)
		size=$(stat -c %s "$a")
		res=$(fincore --noheadings --bytes --output RES "$a")
		echo "archive: $size bytes, $res of them in the page cache"
		at_least "$size" $((168 * 1024 * 1024))
		[ "$res" -le $((size / 100)) ]
		(cd "$D" && sha256sum -c "$(basename "$a").sha256")
		cbackup_run 0 verify "$a"
	'
fi

test_expect_success 'EIO seen only by the background sync: ERROR, no .tmp, earlier archives untouched' '
	storage_snapshot "$D" "$SCRATCH/before"
	# the first sync of the archive is the syncer'"'"'s, at 32 MiB
	with_fault "fsync:EIO:$D/vzdump-lxc-311-" backup 1 311
	fault_fired "^fsync EIO .*vzdump-lxc-311-.*\.tmp"
	cat "$CB_ERR"
	error_names 311 "archive: " "cannot write .*vzdump-lxc-311-.*\.tmp.*Input/output error"
	no_tmp_files "$D"
	storage_unchanged "$D" "$SCRATCH/before"
	# the failed run keeps no copy (310 may keep its own: keep-staging
	# auto, when the file system of the tmpdir has room)
	find "$TMPD" >"$SCRATCH/left"
	test_lacks "$SCRATCH/left" "311"
	test_must_fail ls "$D"/vzdump-lxc-311-*.tar.zst
'

test_expect_success 'the next run of that guest works' '
	backup 0 311
	a=$(find_archive "$D" ct 311 .zst)
	cbackup_run 0 verify "$a"
'

test_done
