#!/bin/bash
# tests/lint.sh must accept this file (t0181): lower bounds that only grow
# under load (bwlimit, lockwait), timeouts of waits and loops, and
# comparisons that are not of durations.
. "$(dirname "$0")/lib.sh"

test_expect_success 'not thresholds' '
	t0=$(now_s)
	cbackup_run 3 101 --lockwait 0.05
	took=$(elapsed_since "$t0")
	at_least "$took" 2.5
	write_s=$(written_seconds "$CB_ERR")
	at_least "$write_s" 2.2
	wait_for 10 test -e "$SCRATCH/done"
	end=$((SECONDS + 30))
	while [ $SECONDS -lt $end ]; do sleep 0.1; done
	test "$(wc -l <restored/var/log/writer.log)" -lt "$(wc -l <live.log)"
	at_least "$(stat -c %s "$a")" 1000
'
test_done
