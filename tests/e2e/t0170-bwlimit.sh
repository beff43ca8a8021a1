#!/bin/bash
# --bwlimit KiB/s: a token bucket (burst: a quarter second of rate) on the
# storage writes and on the pass-1 reads. 12 MiB of incompressible data at
# 4 MiB/s cannot take less than (12 - 1) / 4 = 2.75 s per throttled stage;
# the tests assert a lower bound of 2.2 s only (a test of the mechanism, not
# a timing benchmark: no upper bound, no flakiness on a slow machine) and
# report the measured rates.
. "$(dirname "$0")/lib.sh"

D=$SCRATCH/dump

test_expect_success 'setup: 12 MiB of random data' '
	mkdir -p "$SCRATCH/ct300/data" "$SCRATCH/tmp" "$D"
	head -c 12M /dev/urandom >"$SCRATCH/ct300/data/blob"
'

test_expect_success '--compress 0 --bwlimit 4096: the archive is written at <= 4 MiB/s' '
	t0=$(now_s)
	cbackup_run 0 backup --root "$SCRATCH/ct300" --id 300 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--compress 0 --bwlimit 4096
	took=$(elapsed_since "$t0")
	a=$(find_archive "$D" ct 300 "")
	grep -x "INFO: bandwidth limit: 4096 KB/s" "$CB_ERR"
	bytes=$(stat -c %s "$a")
	write_s=$(written_seconds "$CB_ERR")
	grep "Total bytes written" "$CB_ERR"
	echo "whole run: $took s; archive: $bytes bytes in $write_s s" \
	     "= $(awk -v b=$bytes -v s=$write_s "BEGIN { printf \"%.2f\", b / s / 1048576 }") MiB/s (limit 4 MiB/s)"
	at_least "$bytes" $((12 * 1024 * 1024))
	at_least "$write_s" 2.2
	at_least "$took" 2.2
	cd "$D" && sha256sum -c "$(basename "$a").sha256"
'

test_expect_success 'the first sync (pass-1 reads) is limited too' '
	# DESIGN/issue 4: bwlimit applies to pass-1 reads and to storage writes
	sed -n "s/^INFO: first sync finished (\([0-9.]*\) seconds)$/\1/p" "$CB_ERR" >first
	echo "first sync of 12 MiB at 4 MiB/s: $(cat first) s"
	test -s first
	at_least "$(cat first)" 2.2
'

test_expect_success '--stdout is limited as well' '
	t0=$(now_s)
	"$CBACKUP" backup --root "$SCRATCH/ct300" --id 300 --tmpdir "$SCRATCH/tmp" --compress 0 \
		--bwlimit 8192 --stdout 2>err | wc -c >size
	took=$(elapsed_since "$t0")
	write_s=$(written_seconds err)
	echo "stdout: $(cat size) bytes, archive phase $write_s s (limit 8 MiB/s), whole run $took s"
	at_least "$(cat size)" $((12 * 1024 * 1024))
	# (12 - 2) / 8 = 1.25 s at the least
	at_least "$write_s" 1.0
'

test_done
