#!/bin/sh
# Runs the unit tests (cmocka, TAP output) and the e2e scenarios
# (tests/e2e/tNNNN-*.sh, TAP output), then prints one closing line:
#   N passed, N failed[, N skipped]
# Usage: tests/run.sh [PATTERN]   (PATTERN filters e2e scripts by name)
# E2E_JOBS=N: scripts run at a time (default: one per core, at most 2).
cd "$(dirname "$0")/.." || exit 2
# run_e2e SCRIPT OUT: one script, TAP output in OUT/NAME, its status in
# OUT/NAME.rc, its wall time in OUT/NAME.secs.
# A failure counts: a flaky test is a defect to fix, and CI must say so
# (issue 29; tests/soak.sh finds them under load). With RETRY_FLAKY=1
# (opt-in, for a developer on a busy machine) a script that fails is run
# once more and the second run counts; the first failure is still shown
# and named "flaky" (OUT/NAME.flaky).
if [ "${1:-}" = --one ]; then
	t=$2 out=$3 name=$(basename "$2" .sh) start=$(date +%s)
	bash "$t" >"$out/$name" 2>&1; rc=$?
	if [ "$rc" != 0 ] && [ "${RETRY_FLAKY:-0}" = 1 ]; then
		grep -E '^(not ok|# )' "$out/$name" | head -n 60 >"$out/$name.flaky"
		bash "$t" >"$out/$name" 2>&1; rc=$?
	fi
	echo "$rc" >"$out/$name.rc"
	echo $(($(date +%s) - start)) >"$out/$name.secs"
	exit 0
fi

out=$(mktemp -d /tmp/cbackup-run.XXXXXX)
trap 'rm -rf "$out"' EXIT INT TERM
pass=0 fail=0 skip=0 failed_names="" flaky_names=""

count() {  # $1 = name, $2 = file with TAP output, $3 = exit status
	# a skip is "ok N - ... # skip" (ours) or "not ok N # SKIP ..." (cmocka's
	# TAP for skip()): either way a skip, not a failure
	p=$(grep '^ok ' "$2" | grep -vic '# skip')
	s=$(grep -E '^(not )?ok ' "$2" | grep -ic '# skip')
	f=$(grep '^not ok ' "$2" | grep -vic '# skip')
	if [ "$3" != 0 ] && [ "$f" = 0 ]; then
		f=1; echo "not ok - $1 exited with status $3" >>"$2"
	fi
	pass=$((pass + p)); skip=$((skip + s)); fail=$((fail + f))
	[ "$f" != 0 ] && failed_names="$failed_names $1"
	grep -E '^(ok|not ok) ' "$2" | sed "s|^|[$1] |"
	[ "$f" != 0 ] && { echo "---- output of $1:"; tail -n 40 "$2"; }
}

for bin in $UNIT_BINS; do
	name=$(basename "$bin")
	CMOCKA_MESSAGE_OUTPUT=TAP "$bin" >"$out/$name" 2>&1; rc=$?
	count "$name" "$out/$name" "$rc"
done

if [ "${E2E:-1}" = 1 ]; then
	# E2E_JOBS scripts at a time (default: one per core, at most 2): each
	# script has its own scratch directory, cgroups, locks and loop
	# devices, and none may rely on an idle machine (tests/soak.sh). The
	# slow ones (tests/e2e/SLOW) start first so that the tail is short.
	jobs=${E2E_JOBS:-$(nproc)}
	[ "$jobs" -gt 2 ] && [ -z "${E2E_JOBS:-}" ] && jobs=2
	for t in tests/e2e/t[0-9]*.sh; do
		[ -e "$t" ] || continue
		case "$t" in *"${1:-}"*) ;; *) continue ;; esac
		echo "$t"
	done >"$out/list"
	{ grep -xFf "$out/list" tests/e2e/SLOW 2>/dev/null; grep -vxFf tests/e2e/SLOW "$out/list" 2>/dev/null || cat "$out/list"; } |
		awk '!seen[$0]++' | xargs -r -P "$jobs" -I{} sh "$0" --one {} "$out"
	while read -r t; do
		name=$(basename "$t" .sh)
		if [ -s "$out/$name.flaky" ]; then
			echo "---- $name failed, ran it once more; its first output:"
			cat "$out/$name.flaky"
			flaky_names="$flaky_names $name"
		fi
		count "$name" "$out/$name" "$(cat "$out/$name.rc" 2>/dev/null || echo 1)"
	done <"$out/list"
	echo "slowest e2e scripts (s): $(for f in "$out"/*.secs; do echo "$(cat "$f") $(basename "$f" .secs)"; done |
		sort -rn | head -n 8 | tr '\n' ' ')"
fi

[ -n "$flaky_names" ] && echo "flaky (failed once, then run again):$flaky_names"
# the failures in brief, last (a CI log is often read from its tail): each
# failing case with the first lines of what it printed after it
for n in $failed_names; do
	[ -f "$out/$n" ] || continue
	awk -v n="$n" '/^not ok / { print "[" n "] " $0; k = 4; next }
		/^# / && k > 0 { print "[" n "]   " $0; k--; next } { k = 0 }' "$out/$n" | head -n 24
done
[ -n "$failed_names" ] && echo "failed:$failed_names"
if [ "$skip" != 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ "$fail" = 0 ]
