#!/bin/bash
# Benchmark (not a test) of issue 38's memory target: a night's peak RSS
# at most 200 bytes an entry plus a fixed part of 40 MiB. A night is
# `cbackup backup --compress zstd` with every other setting its default
# (keep-staging auto: the staging copy is kept), night 1 (nothing kept
# yet) and night 2 (the kept copy and its index read back), under
# /usr/bin/time -v, on:
#   distroot  the Debian root at DISTROOT (default /work/distroot)
#   gen       a generated tree of ENTRIES (default 1000000) small files,
#             1000 a directory, 1 to 2000 bytes of text each (seeded)
# Everything (the generated tree, tmpdir, dumpdir) is on a loop-mounted
# ext4 of IMG_SIZE (default 40G, sparse) made under MEM_TMP (default /tmp)
# and unmounted at the end. CB=/path/to/cbackup measures that binary
# (default: this tree's, built first). With BEFORE=/path/to/an/older/cbackup
# each night runs with that binary too, interleaved. With BORG=1 borg 1.2
# (create --compression zstd,3, -e none) backs up the same tree, night 1.
# Prints max RSS (MiB) and what is left for the fixed part after 200
# bytes an entry. Asserts nothing.
#
#   bash bench/memory-night.sh           ENTRIES=300000 BEFORE=/work/main/cbackup bash bench/memory-night.sh
set -eu
TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$TOP/bench/lib.sh"
CB=${CB:-}
ENTRIES=${ENTRIES:-1000000}
DISTROOT=${DISTROOT:-/work/distroot}
IMG_SIZE=${IMG_SIZE:-40G}
BEFORE=${BEFORE:-}
BORG=${BORG:-0}
W=$(mktemp -d "${MEM_TMP:-/tmp}/cbackup-memnight.XXXXXX")
cleanup() {
	mountpoint -q "$W/mnt" 2>/dev/null && umount "$W/mnt"
	rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export CBACKUP_LOCK_DIR=$W/locks BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes
mkdir -m 700 "$CBACKUP_LOCK_DIR"
loop_fs ext4 "$W/img" "$W/mnt" "$IMG_SIZE"
M=$W/mnt

gen() {  # DIR N: N small files, 1000 a directory
	python3 - "$1" "$2" <<'PY'
import os, random, sys
d, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(38)
words = [b"alpha", b"beta", b"gamma", b"delta", b"config", b"value", b"path", b"=", b"\n"]
os.makedirs(d)
for i in range(n):
    sub = os.path.join(d, "d%d" % (i // 1000))
    if i % 1000 == 0:
        os.mkdir(sub)
    size = rnd.randint(1, 2000)
    data = b" ".join(rnd.choice(words) for _ in range(size // 5 + 1))[:size]
    with open(os.path.join(sub, "f%d" % i), "wb") as f:
        f.write(data)
PY
}

# night NAME BIN ROOT N: two nights of ROOT (N entries) by BIN, one guest
# id (night 2 reads night 1's kept copy back); max RSS each
NEXT_ID=900
night() {
	local name=$1 bin=$2 root=$3 n=$4 k rss id=$((NEXT_ID += 1))
	rm -rf "$M/tmp-$name" "$M/dump-$name"
	mkdir -p "$M/tmp-$name" "$M/dump-$name"
	for k in 1 2; do
		/usr/bin/time -v "$bin" backup --root "$root" --id "$id" --type ct \
			--tmpdir "$M/tmp-$name" --dumpdir "$M/dump-$name" --compress zstd --quiet 1 \
			>/dev/null 2>"$W/time" || { cat "$W/time"; exit 1; }
		rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$W/time")
		awk -v name="$name" -v k="$k" -v n="$n" -v rss="$rss" 'BEGIN {
			printf "%-24s night %d %9d entries  max RSS %7.1f MiB  fixed part after 200 B/entry %6.1f MiB\n",
			       name, k, n, rss / 1024, (rss * 1024 - 200 * n) / 1048576 }'
	done
	rm -rf "$M/tmp-$name" "$M/dump-$name"
}

borg_night() {  # ROOT N
	rm -rf "$M/borg"
	borg init -e none "$M/borg" >/dev/null
	/usr/bin/time -v borg create --compression zstd,3 "$M/borg::n1" "$1" >/dev/null 2>"$W/time"
	awk -F': ' -v n="$2" '/Maximum resident set size/ {
		printf "%-24s night 1 %9d entries  max RSS %7.1f MiB\n", "borg", n, $2 / 1024 }' "$W/time"
	rm -rf "$M/borg"
}

if [ -z "$CB" ]; then
	make -C "$TOP" --no-print-directory all >/dev/null
	CB=$TOP/cbackup
fi
for tree in distroot gen; do
	if [ "$tree" = distroot ]; then
		root=$DISTROOT
	else
		root=$M/gen
		gen "$root" "$ENTRIES"
	fi
	n=$(find "$root" | wc -l)
	echo "$tree: $root, $n entries"
	night "$tree cbackup" "$CB" "$root" "$n"
	[ -z "$BEFORE" ] || night "$tree before" "$BEFORE" "$root" "$n"
	[ "$BORG" = 0 ] || borg_night "$root" "$n"
	[ "$tree" = gen ] && rm -rf "$root"
done
