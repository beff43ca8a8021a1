#!/bin/bash
# bench/freeze-window.sh [ENTRIES_K] [DIR]: the frozen pass 2 on a generated
# tree of ENTRIES_K thousand entries (default 1000: 1,000 directories of 999
# one-byte files) with 10 files changed in the pre-stop hook, with change
# tracking (auto), without (off), and without on one thread (off, today's
# serial walk; RUNS picks some of these); prints the log's
# "final sync finished (N seconds)" and the path pass 2 took, and the
# tracking audit's cost after the thaw (issue 24: a stat walk of the tree
# with the guest running, after a tracked final sync; "not run" after a
# full walk), with the machine's load before and after. The tree and
# the staging copies live under DIR (default /var/tmp/cbackup-bench-fw) and
# are removed at the end. Needs root (fanotify).
# TREE=PATH (or FW_TREE=PATH): a copy of PATH instead (e.g. a
# debootstrapped Debian root), 10 of its regular files changed.
# CBS="A B": several binaries (before/after a change), each run in turn;
# ROUNDS=N: that many rounds of them, interleaved.
# LOGS=DIR: keep each run's --verbose log there (ROUND-RUN.log).
set -eu
TOP=$(cd "$(dirname "$0")/.." && pwd)
K=${1:-1000}
DIR=${2:-/var/tmp/cbackup-bench-fw}
CB=${CB:-$TOP/cbackup}  # a copy, to go on building while it runs
trap 'rm -rf "$DIR"' EXIT
mkdir -p "$DIR/tmp" "$DIR/dump"
TREE=${TREE:-${FW_TREE:-}}
if [ -n "$TREE" ]; then
	# a real tree (a distro root): a copy, 10 of its regular files changed
	cp -a "$TREE" "$DIR/src"
	find "$DIR/src" -xdev -type f -size +0 | awk 'NR % 997 == 1' | head -n 10 >"$DIR/changes"
else
python3 - "$DIR/src" "$K" <<'PY'
import os, sys
root, k = sys.argv[1], int(sys.argv[2])
os.makedirs(root)
for d in range(k):
    dp = os.path.join(root, "d%04d" % d)
    os.mkdir(dp)
    for f in range(999):
        fd = os.open(os.path.join(dp, "f%04d" % f), os.O_CREAT | os.O_WRONLY, 0o644)
        os.write(fd, b"x")
        os.close(fd)
PY
	for i in 1 2 3 4 5 6 7 8 9 10; do
		printf "$DIR/src/d%04d/f%04d\n" $((i * 37 % K)) $i
	done >"$DIR/changes"
fi
cat >"$DIR/hook.sh" <<HOOK
#!/bin/bash
[ "\$1" = pre-stop ] || exit 0
while IFS= read -r f; do
	echo changed >>"\$f"
done <"$DIR/changes"
HOOK
chmod +x "$DIR/hook.sh"
entries=$(find "$DIR/src" | wc -l)
echo "tree: $entries entries; load: $(cut -d" " -f1-3 /proc/loadavg) on $(nproc) cores"
for round in $(seq 1 "${ROUNDS:-1}"); do
for CB in ${CBS:-$CB}; do
for run in ${RUNS:-auto off off-1-thread}; do
	tracking=${run%%-*}
	threads=; [ "$run" = off-1-thread ] && threads=1
	rm -rf "$DIR/dump"/* "$DIR/tmp"/*
	CB_P2_THREADS=$threads "$CB" backup --root "$DIR/src" --id 90 --tmpdir "$DIR/tmp" \
		--dumpdir "$DIR/dump" --compress none --freeze-cmd true --thaw-cmd true \
		--script "$DIR/hook.sh" --change-tracking "$tracking" --verbose >"$DIR/log" 2>&1 ||
		echo "$run: cbackup exited with $?: $(grep -E "^(ERROR|WARN):" "$DIR/log" | head -n 3)"
	way=$(grep -oE "pass 2: (tracked [0-9]+ directories|full walk)" "$DIR/log")
	p1=$(sed -nE "s/.*first sync finished \(([0-9.]+) seconds\).*/\1/p" "$DIR/log")
	p2=$(sed -nE "s/.*final sync took ([0-9.]+) ms.*/\1/p" "$DIR/log")
	frozen=$(sed -nE "s/.*online again after ([0-9.]+) seconds.*/\1/p" "$DIR/log")
	audit=$(sed -nE "s/.*tracking audit: ([0-9]+) entries checked in ([0-9.]+) s, ([0-9]+) missed.*/\2 s (\1 entries, \3 missed)/p" "$DIR/log")
	echo "$CB $run: pass 1 ${p1}s, pass 2 ${p2} ms, frozen ${frozen}s ($way), audit ${audit:-not run}; load $(cut -d" " -f1-3 /proc/loadavg)"
	grep -E "change tracking: [0-9]+ (events|inodes)|change tracking is not exact" "$DIR/log" || :
	[ -z "${LOGS:-}" ] || cp "$DIR/log" "$LOGS/$round-$run.log"
done
done
done
