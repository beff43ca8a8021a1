#!/bin/sh
# Benchmark (not a test): the cost of checking stored units (issue 25): a
# backup of incompressible data (SIZE MiB of /dev/urandom, default 1024,
# all of it stored raw) with the zstd codec, by two cbackup binaries side
# by side, interleaved, RUNS runs each (default 5): medians of the wall
# time and of the CPU time (user + system, all threads) of `cbackup backup
# --root` (staging, archive, .sha256, .idx), and the "Total bytes written"
# rate it logs. Everything on tmpfs (WORK, default /dev/shm/cb-bench-stored)
# so that disks do not hide the CPU cost; on a loaded machine the CPU time
# is the figure to read.
#
#   OLD=/path/to/main/cbackup NEW=./cbackup sh bench/stored.sh
set -eu
SIZE=${SIZE:-1024}
RUNS=${RUNS:-5}
WORK=${WORK:-/dev/shm/cb-bench-stored}
OLD=${OLD:?OLD=cbackup binary before}
NEW=${NEW:-./cbackup}
COMPRESS=${COMPRESS:-zstd}
rm -rf "$WORK"
mkdir -p "$WORK/src" "$WORK/tmp"
mkdir -m 700 "$WORK/locks"
# its own locks: another backup on this host does not hold the bench up
export CBACKUP_LOCK_DIR="$WORK/locks"
trap 'rm -rf "$WORK"' EXIT
head -c "${SIZE}M" /dev/urandom >"$WORK/src/random.bin"

run() {  # BIN LABEL: seconds of one backup, appended to WORK/LABEL.{wall,cpu}
	rm -rf "$WORK/dump"
	mkdir "$WORK/dump"
	/usr/bin/time -f "%e %U %S" -o "$WORK/time" "$1" backup --root "$WORK/src" --id 1 \
		--compress "$COMPRESS" --dumpdir "$WORK/dump" --tmpdir "$WORK/tmp" 2>"$WORK/log" || { cat "$WORK/log" >&2; exit 1; }
	awk '{ print $1 }' "$WORK/time" >>"$WORK/$2.wall"
	awk '{ printf "%.2f\n", $2 + $3 }' "$WORK/time" >>"$WORK/$2.cpu"
	sed -n 's/.*Total bytes written: .*, \(.*\)).*/\1/p' "$WORK/log" >>"$WORK/$2.rate"
}

median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

for i in $(seq "$RUNS"); do
	run "$OLD" old
	run "$NEW" new
done
echo "backup of ${SIZE} MiB of random data, --compress $COMPRESS, $RUNS runs each, interleaved"
for l in old new; do
	printf '%-4s cpu median %ss (%s)  wall median %ss (%s)  rate: %s\n' $l \
		"$(median "$WORK/$l.cpu")" "$(tr '\n' ' ' <"$WORK/$l.cpu")" \
		"$(median "$WORK/$l.wall")" "$(tr '\n' ' ' <"$WORK/$l.wall")" \
		"$(tr '\n' ' ' <"$WORK/$l.rate")"
done
