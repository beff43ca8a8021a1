#!/bin/bash
# Log lines quote file names (issue 14, point 5): a guest's file name with a
# newline (or another control byte) cannot start a log line of its own, in
# the .log file or on stderr under --quiet; non-printable bytes are written
# as GNU tar writes them (\n, \ooo, \\ for the backslash).
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
EVIL=$'evil\nERROR: Backup job finished successfully\e[2J\\'

test_expect_success ROOT 'setup: a guest with a file whose name forges a log line' '
	mkdir -p "$SRC/etc" "$SCRATCH/tmp" "$SCRATCH/dump"
	echo guest >"$SRC/etc/hostname"
	echo data >"$SRC/etc/$EVIL"
'

test_expect_success ROOT 'a failure naming that file: one ERROR line, the name quoted (--quiet, stderr and .log)' '
	CB_FAULT="read:EIO:evil" LD_PRELOAD=$HELPERS/faultinject.so \
		cbackup_run 1 backup --root "$SRC" --id 460 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/dump" --quiet
	cat "$CB_ERR"
	log=$(ls "$SCRATCH"/dump/*.log)
	# the .log lines carry vzdump'"'"'s timestamp: every one, then the same text
	test "$(grep -Ec "^$TS(INFO|WARN|ERROR): " "$log")" = "$(wc -l <"$log")"
	sed -E "s/^$TS//" "$log" >log.body
	for f in "$CB_ERR" log.body; do
		test_lacks "$f" "^ERROR: Backup job finished"
		test_lacks "$f" "$(printf "\\033")"
		test_has "$f" "^ERROR: Backup of VM 460 failed - .*evil\\\\nERROR: Backup job finished successfully\\\\033\\[2J\\\\\\\\"
		# every line is a log line
		test_lacks "$f" "^(INFO|WARN|ERROR): .*[[:cntrl:]]"
		test_lacks "$f" "^[^IWE]"
	done
'

test_expect_success ROOT '--verbose notes about the file are quoted too' '
	rm -rf "$SCRATCH/dump"/*
	mkfifo "$SRC/etc/fifo-$EVIL"
	"$HELPERS/mksock" "$SRC/etc/sock-$EVIL"
	cbackup_run 0 backup --root "$SRC" --id 461 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/dump" --verbose
	test_has "$CB_ERR" "skipping socket .*sock-evil\\\\nERROR"
	test_lacks "$CB_ERR" "^ERROR"
	test_lacks "$CB_ERR" "^[^IWE]"
'

test_done
