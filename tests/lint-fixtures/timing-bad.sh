#!/bin/bash
# tests/lint.sh must reject every numbered line marked BAD below (t0181):
# timing thresholds as main had them (t0650, t0310, t0300, t0030, t0220)
# and two more.
. "$(dirname "$0")/lib.sh"

freeze_under() {
	local s
	s=$(sed -n 's/^INFO: guest is online again after \([0-9.]*\) seconds$/\1/p' "$CB_ERR")
	awk -v s="$s" -v max="$1" 'BEGIN { exit !(s < max) }' # BAD
}
seconds_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f\n", b - a }'; }
at_most() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
resumed_within() {
	local t0 t1 took
	t0=$(cat "$SCRATCH/kill-time")
	t1=$(cat "$SCRATCH/kill-time.resumed")
	took=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
	at_least "$1" "$took" # BAD
}

test_expect_success 'thresholds' '
	t0=$EPOCHREALTIME
	cbackup_run 1 313 --config "$c"
	at_most "$(seconds_between "$t0" "$EPOCHREALTIME")" 4 # BAD
	freeze_under 0.05
	start=$(now_s)
	cbackup_run 0 101
	[ "$(elapsed_since "$start")" -lt 2 ] # BAD
	ms=$(sed -n "s/^INFO: final sync took \([0-9]*\) ms$/\1/p" "$CB_ERR")
	test "$ms" -le 50 # BAD
'
check_thawed_after_kill() {
	awk '$1 == "thawed" { t = $3 } $1 == "killed" { k = $3 }
		END { if (t - k > 2000) { print "late"; exit 1 } }' "$1" # BAD
}
test_expect_success 'a difference of two times read from files' '
	froze=$(cat "$SCRATCH/froze-at")
	thawed=$(head -n 1 "$SCRATCH/thawed-at")
	awk -v f="$froze" -v t="$thawed" "BEGIN { d = t - f; exit !(d >= 0.9 && d < 2.5) }" # BAD
'
test_done
