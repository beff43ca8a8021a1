#!/bin/bash
# Benchmark (not a test): the backup modes on the same guest, in the same
# run, next to vzdump's suspend way.
#
#   bench/modes.sh
#
# The guest: SIZE_MB (default 1024) of files (text-like and random, small
# and large) with a writer process appending to a log in a freezer cgroup.
# Rows:
#   suspend     cbackup --mode suspend, guest on btrfs, tmpdir on ext4
#   snapshot    cbackup --mode snapshot, guest on btrfs (a subvolume)
#   reflink     cbackup --mode suspend, guest and tmpdir on one xfs
#               (mkfs.xfs -m reflink=1): the first sync clones
#   rsync2+zstd vzdump's suspend way: rsync live, freeze, rsync again,
#               thaw, tar | zstd -T0; guest on btrfs, tmpdir on ext4
# Columns (medians of N runs): freeze window (cbackup's log; for rsync the
# frozen second pass as timed here), total time, bytes written to the
# tmpdir's block device (its loop device's sector count, read after a
# `sync -f` of the tmpdir just before the staging copy is removed: from a
# backup-end hook for cbackup, before `rm -rf` for rsync; the sync is in the
# total time of both; the xfs row's device also holds the guest, whose
# writer adds a few KiB).
# Every file system is made here on a loop device under BENCH_TMP and
# removed at exit. Page caches are NOT dropped (shared machine): warm runs.
#   SIZE_MB=1024  N=3  BENCH_TMP=/var/tmp
set -eu
cd "$(dirname "$0")/.."
SIZE_MB=${SIZE_MB:-1024}
N=${N:-3}
TOP=$PWD
CBACKUP=$TOP/cbackup
[ "$(id -u)" = 0 ] || { echo "bench/modes.sh: needs root (loop mounts, cgroups)"; exit 1; }
for t in mkfs.btrfs mkfs.xfs mkfs.ext4 rsync zstd; do
	command -v "$t" >/dev/null || { echo "bench/modes.sh: $t missing (make deps)"; exit 1; }
done
work=$(mktemp -d "${BENCH_TMP:-/var/tmp}/cbackup-modes.XXXXXX")
mounts=()
cg=
writer_pid=
cleanup() {
	set +e
	[ -n "$cg" ] && echo THAWED >"$cg/freezer.state" 2>/dev/null
	[ -e "$cg/cgroup.freeze" ] && echo 0 >"$cg/cgroup.freeze"
	[ -n "$writer_pid" ] && kill -KILL "$writer_pid" 2>/dev/null && wait "$writer_pid" 2>/dev/null
	[ -n "$cg" ] && rmdir "$cg"
	for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}"; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. bench/lib.sh

# mkfs_mount TYPE DIR SIZE
mkfs_mount() {
	loop_fs "$1" "$work/.$(basename "$2").img" "$2" "$3"
	mounts+=("$2")
}

# written DIR: bytes written so far to the block device holding DIR
written() { awk '{ printf "%.0f\n", $7 * 512 }' "/sys/block/$(dev_of "$1")/stat"; }
dev_of() { basename "$(findmnt -n -o SOURCE --target "$1")"; }

# the hook: the device's count before cbackup removes its staging copy
make_hook() {
	cat >"$work/hook.sh" <<-'EOF'
	#!/bin/sh
	[ "$1" = backup-end ] || exit 0
	sync -f "$BENCH_TMPDIR"
	awk '{ printf "%.0f\n", $7 * 512 }' "/sys/block/$BENCH_DEV/stat" >"$BENCH_WRITTEN_AT"
	EOF
	chmod 755 "$work/hook.sh"
}

# make_guest DIR: SIZE_MB of data, 3/4 in many small files
make_guest() {
	local d=$1 small=$((SIZE_MB * 3 / 4)) i
	mkdir -p "$d/etc" "$d/var/log" "$d/big"
	echo bench >"$d/etc/hostname"
	# small files: 16 KiB each, half text-like, half random, 400 per dir
	awk -v n=$((small * 64)) -v d="$d" 'BEGIN {
		srand(7)
		for (i = 0; i < n; i++) {
			if (i % 400 == 0) { dir = sprintf("%s/files%04d", d, i / 400); system("mkdir -p " dir) }
			f = sprintf("%s/f%06d.txt", dir, i)
			for (l = 0; l < 256; l++)
				printf "%06d line %d of a config or log file, value=%d ok\n", i, l, int(rand() * 1e9) > f
			close(f)
		}
	}'
	for i in $(seq 1 $(((SIZE_MB - small) / 64))); do
		head -c 64M /dev/urandom >"$d/big/blob$i.bin"
	done
	sync -f "$d"
}

start_writer() {
	local mnt
	mnt=$(awk '$3 == "cgroup" && $4 ~ /(^|,)freezer(,|$)/ { print $2; exit }' /proc/self/mounts)
	if [ -n "$mnt" ]; then
		cg=$mnt/cbackup-bench-$$
	else
		cg=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)/cbackup-bench-$$
	fi
	mkdir "$cg"
	cc -O2 -o "$work/writer" tests/helpers/writer.c
	(echo "$BASHPID" >"$cg/cgroup.procs"; exec "$work/writer" "$1" "$work/side") &
	writer_pid=$!
}

cg_freeze() {
	if [ -e "$cg/freezer.state" ]; then
		echo "$1" >"$cg/freezer.state"
		while [ "$1" = FROZEN ] && ! grep -qx FROZEN "$cg/freezer.state"; do sleep 0.001; done
	else
		echo $([ "$1" = FROZEN ] && echo 1 || echo 0) >"$cg/cgroup.freeze"
	fi
}

# run_cbackup ROW ROOT TMPDIR ARGS...: one timed run; appends to the row's files
run_cbackup() {
	local row=$1 root=$2 tmp=$3 t0 t1 w0 w1
	shift 3
	rm -f "$work/dump/"*
	sync; w0=$(written "$tmp"); t0=$(now)
	BENCH_TMPDIR=$tmp BENCH_DEV=$(dev_of "$tmp") BENCH_WRITTEN_AT=$work/written-at \
		"$CBACKUP" backup --root "$root" --id 900 --tmpdir "$tmp" --dumpdir "$work/dump" \
		--freeze-cgroup "$cg" --compress zstd --quiet --script "$work/hook.sh" "$@" \
		2>"$work/$row.log"
	t1=$(now); w1=$(cat "$work/written-at")
	sed -n 's/.*guest is online again after \([0-9.]*\) seconds.*/\1/p' "$work/dump/"*.log >>"$work/$row.freeze"
	elapsed "$t0" "$t1" >>"$work/$row.total"
	echo $((w1 - w0)) >>"$work/$row.written"
	cp "$work/dump/"*.log "$work/$row.last.log"
}

run_rsync() {
	local root=$1 tmp=$2 stage=$2/rsync.stage t0 t1 f0 f1 w0 w1
	rm -rf "$stage" "$work/dump/"*
	sync; w0=$(written "$tmp"); t0=$(now)
	rsync -aHAX --numeric-ids --delete "$root/" "$stage/"
	f0=$(now); cg_freeze FROZEN
	rsync -aHAX --numeric-ids --delete "$root/" "$stage/"
	cg_freeze THAWED; f1=$(now)
	tar -C "$stage" --numeric-owner --xattrs --acls -cf - . | zstd -q -T0 >"$work/dump/rsync.tar.zst"
	sync -f "$tmp"; w1=$(written "$tmp")
	rm -rf "$stage"
	t1=$(now)
	elapsed "$f0" "$f1" >>"$work/rsync2+zstd.freeze"
	elapsed "$t0" "$t1" >>"$work/rsync2+zstd.total"
	echo $((w1 - w0)) >>"$work/rsync2+zstd.written"
}

echo "bench/modes.sh: making file systems and a ${SIZE_MB} MB guest (twice) under $work"
make -s cbackup
make_hook
mkdir -p "$work/dump"
mkfs_mount btrfs "$work/btrfs" $((SIZE_MB * 2 + 1024))M
mkfs_mount xfs "$work/xfs" $((SIZE_MB * 3 + 512))M
mkfs_mount ext4 "$work/ext4" $((SIZE_MB * 2 + 512))M
btrfs -q subvolume create "$work/btrfs/ct"
make_guest "$work/btrfs/ct"
cp -a "$work/btrfs/ct" "$work/xfs/ct"
mkdir -p "$work/xfs/tmp"
sync
start_writer "$work/btrfs/ct/var/log/writer.log"

for i in $(seq 1 "$N"); do
	echo "run $i of $N"
	run_cbackup suspend "$work/btrfs/ct" "$work/ext4" --mode suspend
	run_cbackup snapshot "$work/btrfs/ct" "$work/ext4" --mode snapshot
	run_cbackup reflink "$work/xfs/ct" "$work/xfs/tmp" --mode suspend
	run_rsync "$work/btrfs/ct" "$work/ext4"
done
grep -q "data cloned (reflink)" "$work/reflink.last.log" || echo "WARNING: the reflink row did not clone"
grep -q "backup mode: snapshot" "$work/snapshot.last.log" || echo "WARNING: the snapshot row fell back"

echo
echo "guest: $(du -sh --apparent-size "$work/btrfs/ct" | cut -f1), $(find "$work/btrfs/ct" | wc -l) entries; medians of $N"
printf '%-12s %12s %10s %16s\n' mode freeze_s total_s tmpdir_written
for row in suspend snapshot reflink rsync2+zstd; do
	printf '%-12s %12s %10s %16s\n' "$row" "$(median "$work/$row.freeze")" \
		"$(median "$work/$row.total")" "$(median "$work/$row.written")"
done
echo
echo "last snapshot-mode log:"
cat "$work/snapshot.last.log"
