#!/bin/bash
# The dump directory is writable by others (cbackup(8), "A dump directory
# others can write to"): what such a user can do to the previous archive,
# its catalog and side files never puts wrong data into the next night's
# archive, and never blocks a run.
# - A catalog whose keys were swapped, its own SHA-256 trailer recomputed
#   (only its .sha256 line no longer holds): not used; the night compresses,
#   says why, and its archive holds the source.
# - The previous archive rewritten while a unit of it is being copied (the
#   shim holds the copy): the new archive still holds the bytes checked.
# - A FIFO (or a symlink) where the previous catalog, archive or .sha256
#   should be: backup, verify, ls, restore finish (timeout 60: a red run
#   fails instead of hanging), the backup without reuse and with a line.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
DUMP=$SCRATCH/dump
FORGE=$TOP/tests/helpers/idxforge.py

# six text files of 1.5 MB: their tails are segments of equal length
make_tree() {
	rm -rf "$SRC" "$DUMP"
	mkdir -p "$SRC/data" "$DUMP" "$SCRATCH/tmp"
	for i in 1 2 3 4 5 6; do
		seq "$i" 3 9000000 | head -c 1500000 >"$SRC/data/f$i.txt"
	done
	echo guest >"$SRC/hostname"
}

night() {  # RC [ARGS...]
	local rc=$1
	shift
	sleep 1.1   # archive names go by the second
	cbackup_run "$rc" backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$DUMP" --unit-size 1 "$@"
}

newest() { ls -1 "$DUMP"/cbackup-ct-101-*.tar.zst | tail -n 1; }

# the newest archive is sound by every tool and holds the source
newest_is_right() {
	local a
	a=$(newest)
	zstd -qt "$a"
	(cd "$DUMP" && sha256sum --quiet --strict -c "$(basename "$a").sha256")
	cbackup_run 0 verify "$a"
	rm -rf "$SCRATCH/out"
	mkdir "$SCRATCH/out"
	zstd -dc "$a" | tar -xf - -C "$SCRATCH/out"
	diff -r "$SRC" "$SCRATCH/out"
}

# "REUSED COMPRESSED" units of the last run
counts() {
	sed -n 's/.*reused \([0-9]*\) units.*compressed \([0-9]*\).*/\1 \2/p' "$CB_ERR" | tail -n 1
}

test_expect_success 'setup: night 1' '
	make_tree
	night 0
	test "$(ls "$DUMP"/*.tar.zst | wc -l)" = 1
'

test_expect_success 'a catalog with two keys swapped (own digest recomputed) is not used' '
	a=$(newest)
	cp "$a.idx" "$SCRATCH/good.idx"
	python3 "$FORGE" "$a.idx" swap-keys
	test_must_fail cbackup_run 0 verify "$a"
	night 0
	cp "$CB_ERR" "$SCRATCH/night.err"
	newest_is_right
	test_has "$SCRATCH/night.err" "INFO: no units reused from the previous archive: its catalog does not match its .sha256"
	cp "$SCRATCH/good.idx" "$a.idx"
'

# night_held EXTRA-ARGS: night 2 in the background, held (SIGSTOP) in its
# first copy_file_range from the previous archive; every byte of that
# archive is changed meanwhile (same size), then it goes on: exit 0
night_held() {
	local prev pid rc=0
	prev=$(newest)
	cp "$prev" "$SCRATCH/prev.keep"
	rm -f "$FAULT_LOG"
	sleep 1.1
	# not through with_fault (a function: $! would be its subshell)
	CB_FAULT="copy:SIGSTOP:$(basename "$prev")" CB_FAULT_LOG=$FAULT_LOG LD_PRELOAD=$FAULTINJECT \
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 \
		"$CBACKUP" backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$DUMP" --unit-size 1 "$@" >"$CB_OUT" 2>"$CB_ERR" &
	pid=$!
	cleanup_pid "$pid"
	wait_for 60 grep -q "^State:.*stopped" /proc/$pid/status || { kill -KILL "$pid"; false; }
	python3 -c "import sys
f = open(sys.argv[1], \"r+b\")
d = bytearray(f.read())
for i in range(len(d)):
    d[i] ^= 0x5a
f.seek(0)
f.write(d)" "$prev"
	kill -CONT "$pid"
	wait "$pid" || rc=$?
	cat "$CB_ERR"
	cp "$CB_ERR" "$SCRATCH/night.err"
	test "$rc" = 0
	fault_fired "^copy .*$(basename "$prev")"
	cp "$SCRATCH/prev.keep" "$prev"
}

test_expect_success 'the previous archive changed while a unit of it is copied: the new one is right' '
	night_held
	newest_is_right
	test_has "$SCRATCH/night.err" "WARN: [0-9]* units changed in the previous archive while being copied"
'

test_expect_success 'the same with a kept staging copy (units taken on trust, the .sha256 resumed)' '
	night 0 --keep-staging 1
	night 0 --keep-staging 1
	test_has "$CB_ERR" "reused 1[0-9] units"
	night_held --keep-staging 1 --verbose
	newest_is_right
	test_has "$SCRATCH/night.err" "WARN: [0-9]* units changed in the previous archive while being copied"
'

test_done
