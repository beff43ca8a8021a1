#!/bin/bash
# Units copied from the previous archive in snapshot mode (issue 27): the
# guest is a btrfs subvolume archived from a read-only snapshot (no staging
# copy, no staging index), and the dump directory is on the same btrfs.
# Snapshot mode keys every unit from the snapshot's bytes, as staged mode
# does (a stat of the snapshot never stands for its content: see
# cbackup(8), "Reuse in snapshot mode"): a night copies the units the
# previous archive has, as clones (extents shared with it), compresses the
# rest, and writes the bytes `--reuse 0` writes from the same snapshot
# content. A file rewritten in place with its size and mtime put back is
# compressed, never copied.
. "$(dirname "$0")/lib.sh"

B=$SCRATCH/btrfs
TMPD=$SCRATCH/tmp

if why=$(loop_fs_unavailable btrfs); then
	test_skip 'reuse in btrfs snapshot mode' "$why"
	test_done
fi

# snap_night DUMP [ARGS...]: a snapshot-mode backup of the ct subvolume
snap_night() {
	local dump=$1
	shift
	mkdir -p "$dump"
	sleep 1.1   # archive names go by the second
	cbackup_run 0 backup --root "$B/ct" --id 771 --type ct --tmpdir "$TMPD" --dumpdir "$dump" \
		--mode snapshot --freeze-cmd true --thaw-cmd true --unit-size 1 "$@"
}

newest() { ls -1 "$1"/vzdump-lxc-771-*.tar"$2" | tail -n 1; }

counts() {
	sed -n 's/.*INFO: reused \([0-9]*\) units .*, compressed \([0-9]*\) units (.*/\1 \2/p' "$CB_ERR"
}

# same_as_no_reuse: --reuse 0 from a new snapshot of the same content
# writes the same bytes as the night just run
same_as_no_reuse() {
	local ref=$B/ref-$RANDOM
	snap_night "$ref" --reuse 0
	cmp "$(newest "$B/dump" .zst)" "$(newest "$ref" .zst)"
	rm -rf "$ref"
}

# exclusive_kib FILE: KiB of FILE that no other file shares (btrfs)
exclusive_kib() {
	sync -f "$1"
	btrfs filesystem du --kbytes -s "$1" | awk 'NR == 2 { print int($2) }'
}

test_expect_success 'setup: btrfs on a loop device, a subvolume guest' '
	make_loop_fs btrfs "$B" 768M
	btrfs -q subvolume create "$B/ct"
	mkdir -p "$TMPD" "$B/ct/usr/share" "$B/ct/var/lib/db" "$B/ct/var/log"
	for i in $(seq 1 300); do
		seq "$i" 7 $((i * 900)) | head -c 20000 >"$B/ct/usr/share/f$i.txt"
	done
	head -c 3M /dev/urandom >"$B/ct/usr/share/big.bin"
	seq 1 300000 >"$B/ct/var/lib/db/db"
	seq 1 50000 >"$B/ct/var/log/syslog"
'

test_expect_success 'night 1 in snapshot mode: nothing to copy from, keys in the catalog' '
	snap_night "$B/dump"
	test_has "$CB_ERR" "^INFO: backup mode: snapshot$"
	test_lacks "$CB_ERR" "first sync"
	test_has "$CB_ERR" "INFO: reused 0 units \(0B\) from no previous archive, compressed [0-9]+ units"
	test "$(find "$TMPD" -mindepth 1 | wc -l)" = 0
'

test_expect_success 'night 2, nothing changed: every unit copied as a clone, the bytes of reuse 0' '
	prev=$(basename "$(newest "$B/dump" .zst)")
	snap_night "$B/dump"
	test_has "$CB_ERR" "INFO: reused [0-9]+ units \([0-9.]+MiB\) from $prev, compressed 0 units"
	read -r reused compressed <<<"$(counts)"
	test "$reused" -gt 8
	# the copies are clones: the new archive shares its extents with the
	# previous one (only the tail and the seek table are its own)
	total=$(( $(stat -c %s "$(newest "$B/dump" .zst)") / 1024 ))
	excl=$(exclusive_kib "$(newest "$B/dump" .zst)")
	echo "archive $total KiB, $excl KiB exclusive"
	test "$total" -gt 1000
	test "$excl" -lt $((total / 10))
	same_as_no_reuse
	cbackup_run 0 verify "$(newest "$B/dump" .zst)"
'

test_expect_success 'in-place rewrite with size and mtime put back: compressed, never copied' '
	f=$B/ct/var/lib/db/db
	touch -r "$f" "$SCRATCH/mtime.ref"
	size=$(stat -c %s "$f")
	printf "PAGE" | dd of="$f" bs=1 seek=700000 conv=notrunc status=none
	touch -r "$SCRATCH/mtime.ref" "$f"
	test "$(stat -c %s "$f")" = "$size"
	printf "snapshot night\n" >>"$B/ct/var/log/syslog"
	snap_night "$B/dump"
	read -r reused compressed <<<"$(counts)"
	test "$reused" -gt 8
	test "$compressed" -ge 2
	zstd -dc "$(newest "$B/dump" .zst)" | tar -xOf - ./var/lib/db/db >"$SCRATCH/got"
	cmp "$f" "$SCRATCH/got"
	same_as_no_reuse
'

test_done
