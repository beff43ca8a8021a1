#!/bin/bash
# Benchmark (not a test) of issue 38: a full restore against the stock way,
# `zstd -dc ARCHIVE | tar -x` (GNU tar with --numeric-owner -p --xattrs
# --acls: the same metadata cbackup restores). SRC (default /work/distroot
# when ready, else a copy of /usr/share made in WORK) is backed up once
# with zstd; then ROUNDS (default 3) interleaved rounds, each restore into
# a fresh directory (removed outside the timing): cbackup restore, the
# stock pipeline, and with BEFORE=/path/to/an/older/cbackup that one too.
# Prints medians of wall and CPU (user+sys) seconds and the ratios against
# the stock pipeline, then the system calls of one restore each
# (strace -f -c): opens, stats and unlinks an entry. Asserts nothing.
# FLOOR=1 adds `tar -x` of the archive already decompressed (into WORK,
# outside the timing): what the file system takes to make the tree from
# one writer, with no decoding at all (on btrfs cbackup's restore is
# there: bench/README.md).
# No PRIO: the kernel's writeback workers a restore waits on stay out of
# bench/lib.sh's cpu cgroup of the highest weight, and cbackup's ratio
# measured 0.06 higher in it on average (bench/lib.sh unprioritized,
# bench/restore-prio.sh). It ran with PRIO=1 until ee2139c.
#
#   bash bench/restore-full.sh      BEFORE=/work/main/cbackup FS=btrfs bash bench/restore-full.sh
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"
CB=$ROOT/cbackup
WORK=${WORK:-/var/tmp/cb-bench-restore-full}
ROUNDS=${ROUNDS:-3}
BEFORE=${BEFORE:-}
export CBACKUP_LOCK_DIR=$WORK/locks

rm -rf "$WORK"
mkdir -p "$WORK"
# FS=ext4|btrfs: WORK (the dump dir and every destination) on a fresh
# loop-mounted file system (sparse, next to WORK), unmounted at the end:
# no earlier removal weighs on the creates. Its size leaves half of it
# free after the last restore (the trees are kept to the end: a file
# system filling up slows the late rounds' allocations, and a 20G one held
# only 27 trees of the Debian root, the last rounds of ROUNDS=9 FLOOR=1)
if [ -n "${FS:-}" ]; then
	case $FS in ext4|btrfs) ;; *) echo "FS: ext4 or btrfs" >&2; exit 2 ;; esac
	loop_fs "$FS" "$WORK.img" "$WORK" "$((2 * 3 * (ROUNDS + 1)))G"
fi
mkdir -p "$WORK/tmp" "$WORK/dump" "$WORK/res"
mkdir -m 700 "$WORK/locks"
trap '[ "${KEEP:-0}" = 1 ] || { ! mountpoint -q "$WORK" || umount "$WORK"; rm -rf "$WORK" "$WORK.img"; }' EXIT
if [ -z "${SRC:-}" ]; then
	if [ -e /work/distroot/.ready ]; then
		SRC=/work/distroot
	else
		SRC=$WORK/src
		mkdir -p "$SRC" && cp -a /usr/share "$SRC/share"
	fi
fi
make -C "$ROOT" --no-print-directory all >/dev/null
echo "tree: $SRC ($(du -sh "$SRC" 2>/dev/null | cut -f1), $(find "$SRC" | wc -l) entries)"
"$CB" backup --root "$SRC" --id 990 --type ct --tmpdir "$WORK/tmp" --dumpdir "$WORK/dump" \
	--compress zstd --quiet 1 >/dev/null 2>"$WORK/backup.err"
A=$(ls "$WORK"/dump/*-990-*.tar.zst)

stock() { zstd -dc "$A" | stock_tar_x "$1"; }
floor() { stock_tar_x "$1" "$WORK/plain.tar"; }
[ "${FLOOR:-0}" = 1 ] && zstd -qdc "$A" >"$WORK/plain.tar" && cat "$WORK/plain.tar" >/dev/null
# run NAME ROUND CMD...: one timed restore into a fresh directory; "wall
# cpu" appended to WORK/NAME. The trees are removed only at the end: ext4
# scans the inode table for recently deleted inodes on every create (most
# of a restore's system time right after an rm -rf of the last tree). A
# sync first: the last restore's data, still being written back, would
# take the cores and the locks from this one (on btrfs its kworkers'
# checksums and extent updates; nights.sh syncs the same way).
run() {
	local name=$1 dest=$WORK/res/$1-$2
	shift 2
	case $name in stock|floor|warmup) mkdir "$dest" ;; esac
	sync
	/usr/bin/time -f "%e %U %S" -o "$WORK/t" "$@" "$dest" >/dev/null 2>&1
	awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$WORK/t" >>"$WORK/$name"
}
export -f stock floor stock_tar_x
export A WORK
# a first restore not counted (the file system's state after the setup
# weighs on whichever comes first), then the order turns every round
run warmup 0 bash -c 'stock "$0"'
fl=
[ "${FLOOR:-0}" = 1 ] && fl=floor
for i in $(seq "$ROUNDS"); do
	order="cbackup stock ${BEFORE:+before} $fl"
	[ $((i % 2)) = 0 ] && order="$fl ${BEFORE:+before} stock cbackup"
	for n in $order; do
		case $n in
		cbackup) run cbackup "$i" "$CB" restore "$A" ;;
		stock)   run stock "$i" bash -c 'stock "$0"' ;;
		before)  run before "$i" "$BEFORE" restore "$A" ;;
		floor)   run floor "$i" bash -c 'floor "$0"' ;;
		esac
	done
done
rm -rf "$WORK/res" && mkdir "$WORK/res"

timing_table "$WORK" stock "full restore (median of $ROUNDS)" stock cbackup ${BEFORE:+before} $fl

# calls NAME CMD...: strace -f -c of one restore; opens, stats, unlinks an entry
calls() {
	local name=$1 dest=$WORK/res/$1 n
	shift
	rm -rf "$dest"
	[ "$name" = stock ] && mkdir "$dest"
	strace -f -c -o "$WORK/strace" "$@" "$dest" >/dev/null 2>&1
	n=$(find "$SRC" | wc -l)
	awk -v name="$name" -v n="$n" '
		$NF ~ /^(openat|openat2|open)$/ { o += $4 }
		$NF ~ /^(newfstatat|statx|lstat|stat)$/ { s += $4 }
		$NF ~ /^(unlink|unlinkat)$/ { u += $4; if (NF == 6) uf += $5 }
		END { printf "%-10s %9d opens (%.2f an entry) %9d stats (%.2f) %7d unlinks (%d failed)\n",
			name, o, o / n, s, s / n, u, uf }' "$WORK/strace"
}
command -v strace >/dev/null || exit 0
echo "system calls of one restore ($(find "$SRC" | wc -l) entries):"
calls cbackup "$CB" restore "$A"
calls stock bash -c 'stock "$0"'
[ -z "$BEFORE" ] || calls before "$BEFORE" restore "$A"
