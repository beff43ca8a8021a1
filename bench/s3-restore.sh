#!/bin/bash
# Benchmark (not a test): a whole night restored from an S3 store,
# cbackup against `restic restore`, on ONE throwaway radosgw
# (scripts/rgw.sh), each tool in its own bucket (issue 41's full-restore
# row). The guest of bench/guest.sh (the Debian root + a 24 MiB database)
# is backed up NIGHTS times (default 1; bench/guest.sh's nightly change
# between) by each tool, every setting its default; then the last night's
# ROUNDS (default 5) interleaved restores, the order turned each round, each
# restore into a fresh directory on a loop-mounted ext4 (FS=btrfs for
# btrfs), the trees removed only at the end:
#   cbs3    cbackup restore --config CONF offsite:NIGHT DEST
#   restic  restic -r s3:ENDPOINT/BUCKET restore latest --target DEST
#   before  BEFORE=/path/to/another/cbackup: the same night restored by it
# Prints the medians of wall and CPU (user+sys of the client; radosgw's
# own CPU not counted) and the ratios against restic (issue 41's target:
# wall <= 0.8x). PRIO=1: radosgw and every timed command run in a cpu
# cgroup of the highest weight (bench/lib.sh cpu_priority), so that other
# jobs on a shared machine weigh on none of them (the disk stays shared).
# Environment: ROUNDS=5 NIGHTS=1 DISTROOT=/work/distroot CB=./cbackup BEFORE=
#   BENCH_TMP=/var/tmp (scratch, removed at exit). Page caches are not
#   dropped: every run is warm, for all.
set -eu
cd "$(dirname "$0")/.."
TOP=$(pwd)
CB=${CB:-$TOP/cbackup}
BEFORE=${BEFORE:-}
ROUNDS=${ROUNDS:-5}
NIGHTS=${NIGHTS:-1}
DISTROOT=${DISTROOT:-/work/distroot}
. bench/lib.sh

for t in restic rclone radosgw mkfs.ext4 /usr/bin/time; do
	command -v "$t" >/dev/null || { echo "missing: $t (scripts/deps.sh; apt-get install restic rclone time)" >&2; exit 2; }
done
work=$(mktemp -d "${BENCH_TMP:-/var/tmp}/cbackup-s3restore.XXXXXX")
RGW=$work/rgw
MNT=$work/mnt
SRC=$work/src
cleanup() {
	bash "$TOP/scripts/rgw.sh" stop "$RGW" >/dev/null 2>&1 || true
	mountpoint -q "$MNT" 2>/dev/null && umount "$MNT"
	cpu_priority_end
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export CBACKUP_LOCK_DIR=$work/locks RESTIC_PASSWORD=bench
mkdir -m 700 "$CBACKUP_LOCK_DIR"
. bench/guest.sh

# before radosgw starts: it is one of the timed parts
[ "${PRIO:-0}" = 1 ] && cpu_priority "cbackup-s3restore-$$"
echo "starting radosgw ..."
start_rgw_env "$RGW" "$work/rgw.out" || exit 1
truncate -s 20G "$work/fs.img"
case ${FS:-ext4} in
ext4) mkfs.ext4 -q -F "$work/fs.img" ;;
btrfs) mkfs.btrfs -q -f "$work/fs.img" >/dev/null ;;
*) echo "FS: ext4 or btrfs" >&2; exit 2 ;;
esac
mkdir -p "$MNT"
mount -o loop "$work/fs.img" "$MNT"
mkdir -p "$MNT/tmp" "$MNT/res" "$MNT/restic-cache"

echo "copying the guest ..."
make_guest
cat >"$work/cb.conf" <<EOF
[storage offsite]
type = s3
endpoint = $CB_S3_ENDPOINT
bucket = cbs3
EOF
rclone mkdir X:cbs3
restic -q init -r "s3:$CB_S3_ENDPOINT/restic" --cache-dir "$MNT/restic-cache" >/dev/null
for n in $(seq 1 "$NIGHTS"); do
	[ "$n" = 1 ] || { sleep 1.1; change "$n" >/dev/null; }
	"$CB" backup --config "$work/cb.conf" --storage offsite --root "$SRC" --id 100 --type ct \
		--tmpdir "$MNT/tmp" --freeze-cmd true --thaw-cmd true --quiet 1 \
		2>"$work/backup.err" || { cat "$work/backup.err" >&2; exit 1; }
	restic -q -r "s3:$CB_S3_ENDPOINT/restic" --cache-dir "$MNT/restic-cache" backup "$SRC" >/dev/null
done
night=$(sed -n "s/.*creating vzdump archive 'offsite:\(.*\.tar\.zst\)'.*/\1/p" "$MNT/tmp/cbackup/ct-100.log")
[ -n "$night" ] || { echo "no night in the store" >&2; exit 1; }
echo "guest: $(find "$SRC" | wc -l) entries, $(du -sh "$SRC" | cut -f1); night $night"

# run NAME ROUND CMD...: one timed restore into a fresh directory
run() {
	local name=$1 dest=$MNT/res/$1-$2
	shift 2
	mkdir "$dest"
	/usr/bin/time -f "%e %U %S" -o "$work/t" bash -c '"$@"' _ "$@" "$dest" >/dev/null 2>"$work/err" ||
		{ echo "$name failed:" >&2; tail -5 "$work/err" >&2; exit 1; }
	awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$work/t" >>"$work/$name"
}
cb_restore() { "$1" restore --config "$work/cb.conf" "offsite:$night" "$2" --force; }
restic_restore() {
	restic -q -r "s3:$CB_S3_ENDPOINT/restic" --cache-dir "$MNT/restic-cache" restore latest --target "$1"
}
export -f cb_restore restic_restore
export work night
run warmup 0 restic_restore
for i in $(seq "$ROUNDS"); do
	order="cbs3 restic ${BEFORE:+before}"
	[ $((i % 2)) = 0 ] && order="${BEFORE:+before} restic cbs3"
	for n in $order; do
		case $n in
		cbs3) run cbs3 "$i" cb_restore "$CB" ;;
		restic) run restic "$i" restic_restore ;;
		before) run before "$i" cb_restore "$BEFORE" ;;
		esac
	done
	echo "   round $i done, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
# the restored tree is the guest's (restic's keeps the source's path)
# (diff cannot compare device nodes: /dev left out)
diff -r --no-dereference --exclude=dev "$SRC" "$MNT/res/cbs3-1" >/dev/null ||
	{ echo "cbackup's restore differs from the guest" >&2; exit 1; }

timing_table "$work" restic "full restore (median of $ROUNDS)" restic cbs3 ${BEFORE:+before}
