#!/bin/bash
# A full restore of a zstd archive decodes its units on several threads
# while one thread writes the tree in archive order (issue 38). Shown by
# the restore's own DEBUG count of the units each decoding thread took
# (a count, not a time): at least two threads, each with units, by the
# catalog's units and, without a catalog, by the seek table's; the tree
# the same as the source either way. A damaged unit still stops the
# restore cleanly, naming the unit: caught by its CRC-32 against the
# catalog, or without one by zstd itself; no DESTDIR is left behind.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
DUMP=$SCRATCH/dump
FLIP=$TOP/tests/helpers/flip.py

tree_list() { (cd "$1" && find . -mindepth 1 -printf '%p %y %m %s %T@ %l\n' | LC_ALL=C sort); }

# threads_used: the DEBUG line says >= 2 threads, every one with units
threads_used() {
	local line
	line=$(grep -E '^DEBUG: decoded [0-9]+ units on [0-9]+ threads' "$CB_ERR") || {
		echo "no DEBUG line of the decoding threads:"; cat "$CB_ERR"; return 1; }
	echo "$line"
	echo "$line" | awk '{ if ($5 < 2) exit 1; sub(/.*units each: /, ""); sub(/\).*/, "");
		n = split($0, c, " "); if (n < 2) exit 1; for (i = 1; i <= n; i++) if (c[i] < 1) exit 1 }'
}

# damaged: a copy of the archive (with its .idx, without its .sha256)
# with 4 bytes of stored.bin flipped where they are stored verbatim
damaged() {
	local a d
	a=$(cat "$SCRATCH/archive-name")
	d=$SCRATCH/d
	rm -rf "$d"
	mkdir "$d"
	cp "$a" "$a.idx" "$d/"
	python3 "$FLIP" "$d/$(basename "$a")" "$SRC/stored.bin" $((5 * 1024 * 1024)) >/dev/null
	echo "$d/$(basename "$a")"
}

test_expect_success 'setup: small files and 8 MiB stored raw, 1 MiB units' '
	make_small_tree "$SRC"
	for i in $(seq 200); do printf "file %s\n" "$i" >"$SRC/srv/data/f$i"; done
	head -c 8M /dev/urandom >"$SRC/stored.bin"
	mkdir -p "$DUMP" "$SCRATCH/tmp"
	cbackup_run 0 backup --root "$SRC" --id 488 --compress zstd --unit-size 1 \
		--dumpdir "$DUMP" --tmpdir "$SCRATCH/tmp"
	find_archive "$DUMP" ct 488 .zst >"$SCRATCH/archive-name"
	tree_list "$SRC" >"$SCRATCH/source"
'

test_expect_success 'by the catalog: the units decoded on several threads, the same tree' '
	CB_DEBUG=1 cbackup_run 0 restore "$(cat "$SCRATCH/archive-name")" "$SCRATCH/r1"
	threads_used
	tree_list "$SCRATCH/r1" >"$SCRATCH/restored"
	test_cmp "$SCRATCH/source" "$SCRATCH/restored"
	cmp "$SRC/stored.bin" "$SCRATCH/r1/stored.bin"
'

test_expect_success 'no catalog: by the seek table, on several threads, the same tree' '
	a=$(cat "$SCRATCH/archive-name")
	mv "$a.idx" "$SCRATCH/idx"
	test_when_finished "mv \"$SCRATCH/idx\" \"$a.idx\""
	CB_DEBUG=1 cbackup_run 0 restore "$a" "$SCRATCH/r2"
	threads_used
	tree_list "$SCRATCH/r2" >"$SCRATCH/restored"
	test_cmp "$SCRATCH/source" "$SCRATCH/restored"
'

test_expect_success 'a damaged unit, by the catalog: its CRC-32 names it, nothing left' '
	a=$(damaged)
	CB_DEBUG=1 cbackup_run 1 restore "$a" "$SCRATCH/r3"
	test_has "$CB_ERR" "^ERROR: .*unit [0-9]+ \(archive bytes [0-9]+-[0-9]+\) is damaged: its CRC-32"
	test_lacks "$CB_ERR" "^DEBUG: decoded"
	test ! -e "$SCRATCH/r3"
'

test_expect_success 'a damaged unit, no catalog: zstd catches it, the unit named, nothing left' '
	a=$(damaged)
	rm "$a.idx"
	CB_DEBUG=1 cbackup_run 1 restore "$a" "$SCRATCH/r4"
	test_has "$CB_ERR" "^ERROR: .*unit [0-9]+ \(archive bytes [0-9]+-[0-9]+\): corrupt zstd data"
	test ! -e "$SCRATCH/r4"
'

test_done
