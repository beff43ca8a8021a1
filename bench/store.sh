#!/bin/bash
# Benchmark (not a test): storage after N nights of ~1 % change, the
# classic layout (one archive a night) against a unit store (layout =
# store) in a directory of the same file system (issue 41). On ext4 (no
# clones) every classic night is a whole archive; a store keeps each
# distinct unit once.
#
# The guest: a generated tree (FILES text files of 2-60 KB, a 48 MiB
# database of 4 KiB pages, half random, half text, 4 logs). Before each
# night 2..N: 1 % of the files rewritten (those of one directory; SCATTER=1:
# anywhere), 1 % of the database's pages
# rewritten in place, ~50 KB appended to each log, 30 files added and
# the previous night's removed. Seeded: both layouts see the same changes.
# Both back up with --keep-staging 1 --compress zstd --unit-size 4 (the
# default); printed: du -sb of each dump directory after each night, and
# the ratio after the last.
# Environment: NIGHTS=7 FILES=4000 SCATTER=0 UNIT=4 (unit-size, MiB) BENCH_TMP=/var/tmp
set -eu
cd "$(dirname "$0")/.."
CB=$(pwd)/cbackup
NIGHTS=${NIGHTS:-7}
FILES=${FILES:-4000}
work=$(mktemp -d "${BENCH_TMP:-/var/tmp}/cbackup-store.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
export CBACKUP_LOCK_DIR=$work/locks
mkdir -m 700 "$CBACKUP_LOCK_DIR"
SRC=$work/src

change() {   # NIGHT
	python3 - "$SRC" "$1" "$FILES" <<'PY'
import os, random, sys
root, night, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(41 * 1000 + night)
def text(n):
    return "".join("line %d of %d: %s\n" % (i, n, "abcdefgh" * rnd.randint(1, 8)) for i in range(n))
os.makedirs(os.path.join(root, "var/lib/db"), exist_ok=True)
os.makedirs(os.path.join(root, "var/log"), exist_ok=True)
if night == 1:
    for i in range(files):
        d = os.path.join(root, "usr/share/d%03d" % (i % 100))
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, "f%05d" % i), "w").write(text(rnd.randint(30, 900)))
    with open(os.path.join(root, "var/lib/db/db"), "wb") as f:
        for p in range(12288):
            f.write(rnd.randbytes(2048) + (b"row %08d " % p) * 146 + b"\0" * 4)
    for i in range(4):
        open(os.path.join(root, "var/log/l%d.log" % i), "w").write(text(2000))
    sys.exit(0)
# 1 % of the files: one directory's (a package upgraded), or (SCATTER=1)
# anywhere in the tree, the worst case for any chunking
pick = rnd.sample(range(files), files // 100) if os.environ.get("SCATTER") == "1" else \
    range(night % 100, files, 100)
for i in pick:
    open(os.path.join(root, "usr/share/d%03d/f%05d" % (i % 100, i)), "w").write(text(rnd.randint(30, 900)))
with open(os.path.join(root, "var/lib/db/db"), "r+b") as f:
    for p in rnd.sample(range(12288), 123):
        f.seek(p * 4096)
        f.write(rnd.randbytes(2048) + (b"row %08d " % p) * 146 + b"\0" * 4)
for i in range(4):
    open(os.path.join(root, "var/log/l%d.log" % i), "a").write(text(600))
d = os.path.join(root, "var/cache/new")
os.makedirs(d, exist_ok=True)
for f in os.listdir(d):
    os.unlink(os.path.join(d, f))
for i in range(30):
    open(os.path.join(d, "n%d-%d" % (night, i)), "w").write(text(rnd.randint(30, 300)))
PY
}

night() {   # LAYOUT
	"$CB" backup --root "$SRC" --id 101 --type ct --tmpdir "$work/tmp-$1" --dumpdir "$work/dump-$1" \
		--layout "$1" --keep-staging 1 --compress zstd --unit-size "${UNIT:-4}" --quiet >"$work/out" 2>&1 ||
		{ cat "$work/out"; exit 1; }
}

mkdir -p "$work/dump-classic" "$work/dump-store" "$work/tmp-classic" "$work/tmp-store"
printf "night  tree(MB)  classic(MB)  store(MB)\n"
for n in $(seq 1 "$NIGHTS"); do
	change "$n"
	sleep 1.1   # archive names go by the second
	night classic
	night store
	printf "%5d  %8.1f  %11.1f  %9.1f\n" "$n" "$(du -sb "$SRC" | awk '{ print $1 / 1e6 }')" \
		"$(du -sb "$work/dump-classic" | awk '{ print $1 / 1e6 }')" \
		"$(du -sb "$work/dump-store" | awk '{ print $1 / 1e6 }')"
done
c=$(du -sb "$work/dump-classic" | cut -f1)
s=$(du -sb "$work/dump-store" | cut -f1)
echo "after $NIGHTS nights: store / classic = $(awk -v s="$s" -v c="$c" 'BEGIN { printf "%.3f", s / c }')"
