#!/bin/bash
# Peak memory of a backup against the number of entries (issue 14, point 6:
# at most 200 bytes per entry plus a fixed part under 64 MiB, hardlinks
# included). Builds, in a scratch directory under ${TMPDIR:-/var/tmp}:
#   pairs:   PAIRS files of 1 byte, each with a second name (a hardlink)
#   entries: ENTRIES files of 1 byte, 1000 per directory
# and backs each up (--compress 0, staging and dump in the same scratch
# directory) under /usr/bin/time -v. Prints maximum RSS and bytes per entry.
# Usage: bench/memory.sh [PAIRS [ENTRIES]]   (defaults 200000 1000000)
set -eu
PAIRS=${1:-200000}
ENTRIES=${2:-1000000}
TOP=$(cd "$(dirname "$0")/.." && pwd)
W=$(mktemp -d "${TMPDIR:-/var/tmp}/cbackup-bench-mem.XXXXXX")
trap 'rm -rf "$W"' EXIT

build() {  # DIR KIND N
	python3 - "$@" <<'PY'
import os, sys
d, kind, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
os.makedirs(d)
for i in range(n):
    sub = os.path.join(d, "d%d" % (i // 1000))
    if i % 1000 == 0:
        os.mkdir(sub)
    f = os.path.join(sub, "f%d" % i)
    with open(f, "w") as fh:
        fh.write("x")
    if kind == "pairs":
        os.link(f, os.path.join(sub, "g%d" % i))
PY
}

run() {  # NAME N_ENTRIES
	local name=$1 n=$2 rss
	mkdir -p "$W/dump-$name" "$W/tmp-$name"
	/usr/bin/time -v "$TOP/cbackup" backup --root "$W/$name" --id "mem-$name" \
		--tmpdir "$W/tmp-$name" --dumpdir "$W/dump-$name" --compress 0 --quiet \
		2>"$W/time-$name" >/dev/null || { cat "$W/time-$name"; exit 1; }
	rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$W/time-$name")
	awk -v name="$name" -v n="$n" -v rss="$rss" 'BEGIN {
		printf "%-8s %9d entries  max RSS %8.1f MiB  %6.1f bytes/entry\n",
		       name, n, rss / 1024, rss * 1024 / n }'
	rm -rf "$W/$name" "$W/dump-$name" "$W/tmp-$name"
}

if [ "$PAIRS" -gt 0 ]; then
	build "$W/pairs" pairs "$PAIRS"
	run pairs $((PAIRS * 2 + PAIRS / 1000 + 1))
fi
if [ "$ENTRIES" -gt 0 ]; then
	build "$W/entries" entries "$ENTRIES"
	run entries $((ENTRIES + ENTRIES / 1000 + 1))
fi
