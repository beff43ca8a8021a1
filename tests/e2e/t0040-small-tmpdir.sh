#!/bin/bash
# A tmpdir too small for the guest: the preflight estimate stops the backup
# before anything is copied or frozen, with a clear error about space.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src

test_expect_success ROOT,TMPFS 'setup: an 8 MiB tree, a 2 MiB tmpfs as tmpdir' '
	mkdir -p "$SRC/sub" "$SCRATCH/dump"
	head -c 6M /dev/urandom >"$SRC/big"
	head -c 2M /dev/urandom >"$SRC/sub/more"
	echo small >"$SRC/small"
	mount_tmpfs "$SCRATCH/tmp" 2m
'

test_expect_success ROOT,TMPFS 'backup fails before the freeze, nothing left behind' '
	cbackup_run 1 backup --root "$SRC" --id 401 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/dump" --compress zstd --mode suspend \
		--freeze-cmd "touch $SCRATCH/froze" --thaw-cmd "touch $SCRATCH/thawed"
	cat "$CB_ERR"
	grep -E "^ERROR: .*(space|ENOSPC)" "$CB_ERR"
	grep "^ERROR: Backup of VM 401 failed - " "$CB_ERR"
	test ! -e "$SCRATCH/froze" || { echo "the guest was frozen"; false; }
	test -z "$(ls -A "$SCRATCH/tmp")" || { echo "left in tmpdir:"; ls -la "$SCRATCH/tmp"; false; }
	no_tmp_files "$SCRATCH/dump"
	test -z "$(ls "$SCRATCH/dump" | grep "\.tar")" || { ls -la "$SCRATCH/dump"; false; }
'

test_expect_success ROOT,TMPFS 'the same tree fits a larger tmpdir' '
	umount "$SCRATCH/tmp"
	mount -t tmpfs -o size=64m tmpfs "$SCRATCH/tmp"
	cbackup_run 0 backup --root "$SRC" --id 402 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/dump" --compress zstd --mode suspend \
		--freeze-cmd "touch $SCRATCH/froze" --thaw-cmd "touch $SCRATCH/thawed"
	test -e "$SCRATCH/froze"
	test -e "$SCRATCH/thawed"
	find_archive "$SCRATCH/dump" ct 402 .zst
'

test_expect_success ROOT,TMPFS 'storage full while writing the archive: clean failure, guest thawed' '
	mount_tmpfs "$SCRATCH/smalldump" 2m
	rm -f "$SCRATCH/froze" "$SCRATCH/thawed"
	cbackup_run 1 backup --root "$SRC" --id 403 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/smalldump" --compress zstd --mode suspend \
		--freeze-cmd "touch $SCRATCH/froze" --thaw-cmd "touch $SCRATCH/thawed"
	cat "$CB_ERR"
	grep -E "^ERROR: Backup of VM 403 failed - .*space" "$CB_ERR"
	# frozen or not (a preflight may catch it first), never left frozen
	test ! -e "$SCRATCH/froze" || test -e "$SCRATCH/thawed"
	no_tmp_files "$SCRATCH/smalldump"
	test -z "$(ls "$SCRATCH/smalldump" | grep "\.tar")" || { ls -la "$SCRATCH/smalldump"; false; }
	# 402 above kept its copy (keep-staging auto); a failed run keeps none
	ls -A "$SCRATCH/tmp/cbackup" >"$SCRATCH/left"
	test_lacks "$SCRATCH/left" "403"
'

test_done
