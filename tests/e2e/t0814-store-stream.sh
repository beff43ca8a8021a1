#!/bin/bash
# A whole restore of a unit store's night streams it (issue 41): its
# units are fetched a few ahead and unpacked as they come, each checked
# against its digest first; no copy of the night is made in the tmpdir,
# so a tmpdir smaller than the night is enough. A unit missing or
# damaged fails the restore naming it, with nothing restored.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
STORE=$SCRATCH/store
CONF=$SCRATCH/cbackup.conf

nights() { ls -1 "$STORE/nights/" | grep "^cbackup-ct-$1-"; }

test_expect_success ROOT,TMPFS 'setup: a night of ~12 MiB in a directory store' '
	store_setup 200
	head -c 12M /dev/urandom >"$SRC/var/big.bin"
	cbackup_run 0 backup --config "$CONF" --storage offsite --root "$SRC" --id 101 --type ct \
		--unit-size 1
	n=$(nights 101)
	test "$(grep -c "^unit " "$STORE/nights/$n")" -gt 8
	mount_tmpfs "$SCRATCH/small" 4m
'

test_expect_success ROOT,TMPFS 'a whole restore needs no tmpdir room for the night' '
	n=$(nights 101)
	cbackup_run 0 restore --config "$CONF" --tmpdir "$SCRATCH/small" "offsite:$n" "$SCRATCH/r1"
	diff -r "$SRC" "$SCRATCH/r1"
	test_lacks <(ls -A "$SCRATCH/small/cbackup") "cbackup-ct-101"
'

test_expect_success ROOT,TMPFS 'a unit missing mid-night: the restore fails naming it, nothing restored' '
	n=$(nights 101)
	h=$(grep "^unit " "$STORE/nights/$n" | sed -n 5p | cut -d" " -f2)
	mv "$STORE/units/${h:0:2}/$h" "$SCRATCH/hidden"
	cbackup_run 1 restore --config "$CONF" --tmpdir "$SCRATCH/small" "offsite:$n" "$SCRATCH/r2"
	test_has "$CB_ERR" "^ERROR: restore of .offsite:$n. failed - storage .offsite.: unit .units/${h:0:2}/$h. is missing"
	test ! -e "$SCRATCH/r2"
	test_lacks <(ls -A "$SCRATCH/small/cbackup") "cbackup-ct-101"
	mv "$SCRATCH/hidden" "$STORE/units/${h:0:2}/$h"
'

test_expect_success ROOT,TMPFS 'a damaged unit: named, none of its bytes restored' '
	n=$(nights 101)
	h=$(grep "^unit " "$STORE/nights/$n" | sed -n 3p | cut -d" " -f2)
	f=$STORE/units/${h:0:2}/$h
	cp "$f" "$SCRATCH/good"
	printf "\xff" | dd of="$f" bs=1 seek=100 conv=notrunc 2>/dev/null
	cbackup_run 1 restore --config "$CONF" --tmpdir "$SCRATCH/small" "offsite:$n" "$SCRATCH/r3"
	test_has "$CB_ERR" "^ERROR: restore of .offsite:$n. failed - .*$h"
	test ! -e "$SCRATCH/r3"
	cp "$SCRATCH/good" "$f"
'

test_expect_success ROOT,TMPFS 'a restore refused before it reads (DESTDIR not empty) stops the stream' '
	n=$(nights 101)
	mkdir -p "$SCRATCH/r4"
	echo keep >"$SCRATCH/r4/keep"
	cbackup_run 1 restore --config "$CONF" --tmpdir "$SCRATCH/small" "offsite:$n" "$SCRATCH/r4"
	test_has "$CB_ERR" "not empty"
	test "$(ls -A "$SCRATCH/r4")" = keep
'

test_expect_success ROOT,TMPFS 'a gzip night streams too (one decoder, in order)' '
	sleep 1.1
	cbackup_run 0 backup --config "$CONF" --storage offsite --root "$SRC" --id 102 --type ct \
		--unit-size 1 --compress gzip
	n=$(nights 102)
	cbackup_run 0 restore --config "$CONF" --tmpdir "$SCRATCH/small" "offsite:$n" "$SCRATCH/r5"
	diff -r "$SRC" "$SCRATCH/r5"
'

test_expect_success ROOT,TMPFS 'a night with a sparse file streams too: holes kept, no copy in the tmpdir' '
	sleep 1.1
	cp -a "$SRC" "$SCRATCH/src-sparse"
	truncate -s 64M "$SCRATCH/src-sparse/var/db.img"
	printf "page one" | dd of="$SCRATCH/src-sparse/var/db.img" bs=4096 seek=100 conv=notrunc 2>/dev/null
	printf "page two" | dd of="$SCRATCH/src-sparse/var/db.img" bs=4096 seek=9000 conv=notrunc 2>/dev/null
	cbackup_run 0 backup --config "$CONF" --storage offsite --root "$SCRATCH/src-sparse" --id 103 \
		--type ct --unit-size 1
	n=$(nights 103)
	cbackup_run 0 restore --config "$CONF" --tmpdir "$SCRATCH/small" "offsite:$n" "$SCRATCH/r6"
	diff -r "$SCRATCH/src-sparse" "$SCRATCH/r6"
	test "$(stat -c %b "$SCRATCH/r6/var/db.img")" -lt 1024
	test_lacks <(ls -A "$SCRATCH/small/cbackup") "cbackup-ct-103"
'

test_done
