#!/bin/bash
# Benchmark (not a test) of a method: does bench/lib.sh's cpu_priority
# (PRIO=1's cgroup of the highest cpu weight) change what a full restore
# measures? cbackup restore and the stock `zstd -dc | tar -x` of one
# archive of SRC (default /work/distroot), each in the cgroup and out of
# it (unprioritized), ROUNDS (default 6) interleaved rounds, the order
# turned every round, a sync before each, every tree kept to the end, on
# a fresh FS (btrfs or ext4, default btrfs) made by loop_fs. Prints the
# median wall seconds of the four. Asserts nothing. It is why nights.sh
# times its restores out of the cgroup and restore-full.sh has no PRIO
# (bench/README.md, "At e56bcf9").
#
#   bash bench/restore-prio.sh      FS=ext4 ROUNDS=8 bash bench/restore-prio.sh
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
CB=$ROOT/cbackup
SRC=${SRC:-/work/distroot}
FS=${FS:-btrfs}
ROUNDS=${ROUNDS:-6}
W=${BENCH_TMP:-/var/tmp}/cb-bench-restore-prio
export CBACKUP_LOCK_DIR=$W/locks

rm -rf "$W"
loop_fs "$FS" "$W.img" "$W" "$((2 * 4 * (ROUNDS + 1)))G"
trap 'cpu_priority_end; ! mountpoint -q "$W" || umount "$W"; rm -rf "$W" "$W.img"' EXIT
mkdir -p "$W/tmp" "$W/dump" "$W/res"
mkdir -m 700 "$W/locks"
make -C "$ROOT" --no-print-directory all >/dev/null
"$CB" backup --root "$SRC" --id 990 --type ct --tmpdir "$W/tmp" --dumpdir "$W/dump" \
	--compress zstd --quiet 1 >/dev/null 2>"$W/backup.err"
A=$(ls "$W"/dump/*-990-*.tar.zst)
export A
cpu_priority "cbackup-restore-prio-$$" >/dev/null

stock() { zstd -dc "$A" | stock_tar_x "$1"; }
export -f stock stock_tar_x
# one TOOL WHERE ROUND: one timed restore, in the cgroup or out of it
one() {
	local dest=$W/res/$1-$2-$3 cmd
	case $1 in
	cbackup) cmd=("$CB" restore "$A" "$dest") ;;
	stock) mkdir "$dest" && cmd=(bash -c 'stock "$0"' "$dest") ;;
	esac
	sync
	if [ "$2" = in ]; then
		/usr/bin/time -f %e -o "$W/t" "${cmd[@]}" >/dev/null 2>&1
	else
		unprioritized /usr/bin/time -f %e -o "$W/t" "${cmd[@]}" >/dev/null 2>&1
	fi
	cat "$W/t" >>"$W/$1-$2"
}
for i in $(seq "$ROUNDS"); do
	for x in $(rotated "$i" cbackup:in stock:in cbackup:out stock:out); do
		one "${x%:*}" "${x#*:}" "$i"
	done
done
echo "full restore of $SRC onto $FS, wall seconds, medians of $ROUNDS:"
for n in cbackup stock; do
	printf "%-8s in the cgroup %6s   out of it %6s\n" "$n" "$(median "$W/$n-in")" "$(median "$W/$n-out")"
done
