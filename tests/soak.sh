#!/bin/bash
# tests/soak.sh [ROUNDS] [SCRIPT...]: runs the timing-sensitive e2e scripts
# ROUNDS times (default 5) while busy loops load every core (two per core;
# SOAK_LOADS=N for another count), with no retry: a script that fails once
# under load is a flaky test, a defect to fix (issue 29). Prints each run's result, the first failures'
# output, and one closing line "N passed, N failed" (script runs).
# Needs the binary and the helpers built (make all helpers). Not part of
# make check: about 10 minutes a round on 2 cores.
cd "$(dirname "$0")/.." || exit 2
rounds=${1:-5}
[ $# -gt 0 ] && shift
# the live writer, max-freeze, guest safety, snapshot and change tracking,
# (and its audit), and the other scripts that watch a guest around its freeze
[ $# = 0 ] && set -- t0020-live-writer t0030-sigkill-frozen t0220-max-freeze t0310-guest-safety \
	t0450-freeze-delta t0455-churn t0501-thaw-order t0650-snapshot-btrfs t0720-change-tracking \
	t0725-tracking-audit
out=$(mktemp -d /tmp/cbackup-soak.XXXXXX)
loads=()
stop_loads() {
	[ ${#loads[@]} = 0 ] || kill "${loads[@]}" 2>/dev/null
	wait 2>/dev/null
}
trap 'stop_loads; rm -rf "$out"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
for _ in $(seq "${SOAK_LOADS:-$(( $(nproc) * 2 ))}"); do
	(while :; do :; done) &
	loads+=($!)
done
echo "soak: $rounds rounds of $# scripts, ${#loads[@]} busy loops on $(nproc) cores, RETRY_FLAKY=0"
pass=0 fail=0
for r in $(seq "$rounds"); do
	for t in "$@"; do
		f=tests/e2e/$t.sh
		[ -e "$f" ] || { echo "soak: no $f"; exit 2; }
		start=$SECONDS
		RETRY_FLAKY=0 bash "$f" >"$out/$t.$r" 2>&1
		rc=$?
		if [ "$rc" = 0 ]; then
			pass=$((pass + 1)); echo "round $r: ok $t ($((SECONDS - start)) s, load $(cut -d' ' -f1 /proc/loadavg))"
		else
			fail=$((fail + 1)); echo "round $r: FAILED $t (exit $rc)"
			grep -E '^(not ok|# )' "$out/$t.$r" | head -n 40
		fi
	done
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
