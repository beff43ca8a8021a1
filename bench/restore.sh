#!/bin/bash
# Benchmark (not a test) of issue 18: restoring one file instead of a guest.
# A distro root (SRC, default /work/distroot when ready, else /usr) is backed
# up once with zstd (default options: unit-size 4 MiB); then, page cache
# dropped before each row with DROP=1 (system-wide: off by default on a
# shared machine):
#   full restore                         cbackup restore ARCHIVE DIR
#   one small file                       cbackup restore ... --path FILE
#   a ~50 MB subtree                     cbackup restore ... --path DIR
#   ls of one path                       cbackup ls ARCHIVE FILE
#   first byte through the mount         cbackup mount + head -c1 FILE
# and the archive's size against a single stream `tar | zstd -3 -T0` of
# the same tree. Prints a table; asserts nothing. WORK = scratch (kept with
# KEEP=1).
#
#   bash bench/restore.sh        SRC=/usr bash bench/restore.sh
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CB=$ROOT/cbackup
if [ -z "${SRC:-}" ]; then
	if [ -e /work/distroot/.ready ]; then SRC=/work/distroot; else SRC=/usr; fi
fi
WORK=${WORK:-/var/tmp/cb-bench-restore}
DROP=${DROP:-0}
# our own lock directory: never wait for (or block) a real backup job
export CBACKUP_LOCK_DIR=$WORK/locks

rm -rf "$WORK"
mkdir -p "$WORK/tmp" "$WORK/dump" "$WORK/mnt"
mkdir -m 700 "$WORK/locks"
cleanup() {
	mountpoint -q "$WORK/mnt" && fusermount3 -u "$WORK/mnt"
	[ "${KEEP:-0}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT

drop() { [ "$DROP" = 1 ] && sync && echo 3 >/proc/sys/vm/drop_caches; return 0; }
now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc; }

make -C "$ROOT" --no-print-directory all >/dev/null

# the subtree: the directory whose size is nearest 50 MB; the file: a small one
subtree=$(cd "$SRC" && du -k --max-depth=4 . 2>/dev/null |
	awk '{ d = $1 - 51200; if (d < 0) d = -d; if (best == "" || d < bd) { bd = d; best = $2 } } END { print best }')
small=$(cd "$SRC" && find ./etc -type f -size -4k 2>/dev/null | sort | tail -n 1)

echo "tree: $SRC ($(du -sh "$SRC" 2>/dev/null | cut -f1), $(find "$SRC" | wc -l) entries)"
echo "small file: $small; subtree: $subtree ($(du -sh "$SRC/$subtree" | cut -f1))"

t0=$(now)
"$CB" backup --root "$SRC" --id 990 --type ct --tmpdir "$WORK/tmp" --dumpdir "$WORK/dump" \
	--compress zstd --quiet 1 >/dev/null 2>"$WORK/backup.err"
tb=$(secs "$t0" "$(now)")
archive=$(ls "$WORK"/dump/cbackup-ct-990-*.tar.zst)

row() { printf "%-34s %10s\n" "$1" "$2"; }
printf "%-34s %10s\n" "operation" "seconds"
row "backup (zstd, unit-size 4)" "$tb"

drop; t0=$(now)
"$CB" restore "$archive" "$WORK/full" 2>/dev/null
tfull=$(secs "$t0" "$(now)")
row "full restore" "$tfull"
rm -rf "$WORK/full"

drop; t0=$(now)
"$CB" restore "$archive" "$WORK/one" --path "$small" 2>/dev/null
tone=$(secs "$t0" "$(now)")
row "restore --path (one small file)" "$tone"

drop; t0=$(now)
"$CB" restore "$archive" "$WORK/sub" --path "$subtree" 2>/dev/null
row "restore --path (~50 MB subtree)" "$(secs "$t0" "$(now)")"

drop; t0=$(now)
"$CB" ls "$archive" "$small" >/dev/null 2>&1
row "ls (one path)" "$(secs "$t0" "$(now)")"

drop; t0=$(now)
"$CB" mount "$archive" "$WORK/mnt" 2>/dev/null
head -c1 "$WORK/mnt/$small" >/dev/null
row "mount + first byte" "$(secs "$t0" "$(now)")"
fusermount3 -u "$WORK/mnt"

(cd "$SRC" && tar --numeric-owner -cf - .) | zstd -3 -T0 -q >"$WORK/single.tar.zst"
a=$(stat -c %s "$archive")
s=$(stat -c %s "$WORK/single.tar.zst")
echo
printf "archive %d bytes, tar | zstd -3 -T0 %d bytes: %s x; catalog %d bytes\n" "$a" "$s" \
	"$(echo "scale=4; $a / $s" | bc)" "$(stat -c %s "$archive.idx")"
printf "one small file: %s%% of the full restore\n" "$(echo "scale=2; 100 * $tone / $tfull" | bc)"
