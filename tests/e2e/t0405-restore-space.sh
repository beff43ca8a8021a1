#!/bin/bash
# Restore does not fill a disk blindly: the catalog (or a pass over the tar headers)
# sums what the entries need, and a destination too small for it (blocks or
# inodes) is refused before anything is written, with the need and the
# space available. A write error (here: --force past the check into a full
# tmpfs) names the file and the cause. A sparse file counts the data it
# holds, not its holes.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/e2e/lib-attacker.sh"

DUMP=$SCRATCH/dump
TMPD=$SCRATCH/tmp
SMALL=$SCRATCH/small

test_expect_success TMPFS 'setup: a 4 MiB guest, a 1 MiB tmpfs' '
	make_small_tree "$SCRATCH/src"
	head -c 4M /dev/urandom >"$SCRATCH/src/srv/data/big.bin"
	mkdir -p "$DUMP" "$TMPD"
	cbackup_run 0 backup --root "$SCRATCH/src" --id 101 --dumpdir "$DUMP" --tmpdir "$TMPD"
	mount_tmpfs "$SMALL" 1M
'

test_expect_success TMPFS 'restore into a too-small file system is refused, nothing written' '
	a=$(find_archive "$DUMP" ct 101 .zst)
	cbackup_run 1 restore "$a" "$SMALL/dest"
	test_has "$CB_ERR" "^ERROR: restore of .* failed - not enough space in .*small/dest.: the archive needs 4\.[0-9]MiB, (1(\.0)?MiB|[0-9]+KiB) available"
	dir_empty "$SMALL/dest"
'

test_expect_success TMPFS 'restore --path: the selection is measured from the catalog' '
	a=$(find_archive "$DUMP" ct 101 .zst)
	cbackup_run 1 restore "$a" "$SMALL/dest" --path ./srv/data
	test_has "$CB_ERR" "^ERROR: restore of .* failed - not enough space in .*small/dest.: the archive needs 4\.[0-9]MiB"
	dir_empty "$SMALL/dest"
	cbackup_run 0 restore "$a" "$SMALL/dest" --path ./etc
	test -d "$SMALL/dest/etc"
	rm -rf "$SMALL/dest"
'

test_expect_success TMPFS 'too few inodes is refused too' '
	umount "$SMALL"
	mount -t tmpfs -o size=64M,nr_inodes=5 tmpfs "$SMALL"
	a=$(find_archive "$DUMP" ct 101 .zst)
	cbackup_run 1 restore "$a" "$SMALL/dest"
	test_has "$CB_ERR" "not enough inodes in .*small/dest.: the archive has [0-9]+ entries"
	dir_empty "$SMALL/dest"
	umount "$SMALL"
	mount -t tmpfs -o size=1M tmpfs "$SMALL"
'

test_expect_success TMPFS 'a write error names the file and the cause' '
	a=$(find_archive "$DUMP" ct 101 .zst)
	mkdir "$SMALL/dest"
	touch "$SMALL/dest/x"
	cbackup_run 1 restore --force "$a" "$SMALL/dest"
	test_has "$CB_ERR" "^WARN: not enough space"
	test_has "$CB_ERR" "^ERROR: restore of .* failed - cannot restore .\./srv/data/big\.bin.: .*No space left on device"
'

test_expect_success TMPFS 'a sparse file counts its data, not its holes (whole and --path)' '
	rm -rf "$SMALL/dest"
	mkdir -p "$SCRATCH/sp/srv"
	# 64 MiB long: 2 MiB of data, the rest holes; and one of 4 KiB data
	truncate -s 64M "$SCRATCH/sp/srv/full.img" "$SCRATCH/sp/srv/thin.img"
	head -c 2M /dev/urandom | dd of="$SCRATCH/sp/srv/full.img" bs=1M seek=30 conv=notrunc 2>/dev/null
	printf "page" | dd of="$SCRATCH/sp/srv/thin.img" bs=4096 seek=9000 conv=notrunc 2>/dev/null
	cbackup_run 0 backup --root "$SCRATCH/sp" --id 102 --dumpdir "$DUMP" --tmpdir "$TMPD"
	a=$(find_archive "$DUMP" ct 102 .zst)
	cbackup_run 1 restore "$a" "$SMALL/dest"
	test_has "$CB_ERR" "not enough space in .*small/dest.: the archive needs 2\.[0-9]MiB"
	cbackup_run 1 restore "$a" "$SMALL/dest" --path ./srv/full.img
	test_has "$CB_ERR" "not enough space in .*small/dest.: the archive needs 2\.[0-9]MiB"
	dir_empty "$SMALL/dest"
	cbackup_run 0 restore "$a" "$SMALL/dest" --path ./srv/thin.img
	cmp "$SCRATCH/sp/srv/thin.img" "$SMALL/dest/srv/thin.img"
	rm -rf "$SMALL/dest"
'

test_expect_success TMPFS 'the same archive restores where it fits' '
	a=$(find_archive "$DUMP" ct 101 .zst)
	cbackup_run 0 restore "$a" "$SCRATCH/roomy"
	compare_trees --no-xattr --no-acl "$SCRATCH/src" "$SCRATCH/roomy"
'

test_done
