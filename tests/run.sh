#!/bin/sh
# Runs the unit tests (cmocka, TAP output) and the e2e scenarios
# (tests/e2e/tNNNN-*.sh, TAP output), then prints one closing line:
#   N passed, N failed[, N skipped]
# Usage: tests/run.sh [PATTERN]   (PATTERN filters e2e scripts by name)
cd "$(dirname "$0")/.." || exit 2
out=$(mktemp -d /tmp/cbackup-run.XXXXXX)
trap 'rm -rf "$out"' EXIT INT TERM
pass=0 fail=0 skip=0 failed_names="" flaky_names=""

count() {  # $1 = name, $2 = file with TAP output, $3 = exit status
	p=$(grep '^ok ' "$2" | grep -vic '# skip')
	s=$(grep '^ok ' "$2" | grep -ic '# skip')
	f=$(grep -c '^not ok ' "$2")
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
	for t in tests/e2e/t[0-9]*.sh; do
		[ -e "$t" ] || continue
		case "$t" in *"${1:-}"*) ;; *) continue ;; esac
		name=$(basename "$t" .sh)
		bash "$t" >"$out/$name" 2>&1; rc=$?
		# A failure counts: a flaky test is a defect to fix, and CI must
		# say so (issue 29; tests/soak.sh finds them under load). With
		# RETRY_FLAKY=1 (opt-in, for a developer on a busy machine) a
		# script that fails is run once more and the second run counts;
		# the first failure is still shown and named "flaky".
		if [ "$rc" != 0 ] && [ "${RETRY_FLAKY:-0}" = 1 ]; then
			echo "---- $name failed, running it once more; its first output:"
			grep -E '^(not ok|# )' "$out/$name" | head -n 60
			flaky_names="$flaky_names $name"
			bash "$t" >"$out/$name" 2>&1; rc=$?
		fi
		count "$name" "$out/$name" "$rc"
	done
fi

[ -n "$flaky_names" ] && echo "flaky (failed once, then run again):$flaky_names"
[ -n "$failed_names" ] && echo "failed:$failed_names"
if [ "$skip" != 0 ]; then
	echo "$pass passed, $fail failed, $skip skipped"
else
	echo "$pass passed, $fail failed"
fi
[ "$fail" = 0 ]
