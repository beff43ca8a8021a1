#!/bin/sh
# Benchmark (not a test): the cost of checking stored units (issue 25): a
# backup of incompressible data (SIZE MiB of /dev/urandom, default 1024,
# all of it stored raw) with the zstd codec, by two cbackup binaries side
# by side, interleaved, RUNS runs each (default 5), medians of the wall
# time of `cbackup backup --root` (staging, archive, .sha256, .idx) and of
# the "Total bytes written" rate it logs. Everything on tmpfs (WORK,
# default /dev/shm/cb-bench-stored) so that disks do not hide the CPU cost.
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
trap 'rm -rf "$WORK"' EXIT
head -c "${SIZE}M" /dev/urandom >"$WORK/src/random.bin"

run() {  # BIN LABEL: seconds of one backup, appended to WORK/LABEL
	rm -rf "$WORK/dump"
	mkdir "$WORK/dump"
	t0=$(date +%s.%N)
	"$1" backup --root "$WORK/src" --id 1 --compress "$COMPRESS" --dumpdir "$WORK/dump" \
		--tmpdir "$WORK/tmp" 2>"$WORK/log"
	t1=$(date +%s.%N)
	echo "$t0 $t1" | awk '{ printf "%.3f\n", $2 - $1 }' >>"$WORK/$2.wall"
	sed -n 's/.*Total bytes written: .*, \(.*\)).*/\1/p' "$WORK/log" >>"$WORK/$2.rate"
}

median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

for i in $(seq "$RUNS"); do
	run "$OLD" old
	run "$NEW" new
done
echo "backup of ${SIZE} MiB of random data, --compress $COMPRESS, $RUNS runs each, interleaved"
printf '%-5s wall median %ss (all: %s)  rate: %s\n' old "$(median "$WORK/old.wall")" \
	"$(tr '\n' ' ' <"$WORK/old.wall")" "$(tr '\n' ' ' <"$WORK/old.rate")"
printf '%-5s wall median %ss (all: %s)  rate: %s\n' new "$(median "$WORK/new.wall")" \
	"$(tr '\n' ' ' <"$WORK/new.wall")" "$(tr '\n' ' ' <"$WORK/new.rate")"
