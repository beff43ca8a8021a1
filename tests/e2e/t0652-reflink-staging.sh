#!/bin/bash
# Reflink staging: in suspend mode, when the tmpdir and the guest root share
# a file system that clones file data (xfs made with -m reflink=1, btrfs),
# the first sync clones instead of copying: it says so, the file system's
# used space does not grow by the data (df before and during the backup,
# from a hook), and the space check counts the cloned data as free (a tree
# bigger than the free space is backed up). The archive is the same.
. "$(dirname "$0")/lib.sh"

if why=$(loop_fs_unavailable xfs btrfs); then
	test_skip 'reflink staging' "$why"
	test_done
fi

HOOK=$SCRATCH/hook.sh
MiB=1048576

# after the first sync (pre-stop): the file system's used bytes, and how
# many big files the staging copy holds
cat >"$HOOK" <<'EOF'
#!/bin/sh
[ "$1" = pre-stop ] || exit 0
sync -f "$FS"
df -B1 --output=used "$FS" | tail -n 1 | tr -d ' ' >"$FS_USED_AT"
find "$FS/tmp" -type f -size +1M | wc -l >"$FS_STAGED_AT"
EOF
chmod 755 "$HOOK"

# make_guest FS MIB: a small tree plus MIB MiB of random data in 4 files
make_guest() {
	local i
	make_small_tree "$1/ct"
	mkdir -p "$1/tmp" "$1/ct/data"
	for i in 1 2 3 4; do
		head -c $(($2 / 4 * MiB)) /dev/urandom >"$1/ct/data/blob$i"
	done
}

# reflink_backup FS ID: a suspend backup with tmpdir on FS; checks that the
# data was cloned and that FS's used space grew by less than 8 MiB
reflink_backup() {
	local fs=$1 id=$2 before
	mkdir -p "$SCRATCH/dump-$id"
	before=$(fs_used "$fs")
	FS=$fs FS_USED_AT=$SCRATCH/used-$id FS_STAGED_AT=$SCRATCH/staged-$id \
		cbackup_run 0 backup --root "$fs/ct" --id "$id" --tmpdir "$fs/tmp" \
		--dumpdir "$SCRATCH/dump-$id" --script "$HOOK" --compress 0 --keep-staging 0
	cat "$CB_ERR"
	test_has "$CB_ERR" "^INFO: first sync: data cloned \(reflink\)$"
	test "$(cat "$SCRATCH/staged-$id")" = 4
	echo "used before $before, after the first sync $(cat "$SCRATCH/used-$id")"
	test $(($(cat "$SCRATCH/used-$id") - before)) -lt $((8 * MiB))
	archive=$(find_archive "$SCRATCH/dump-$id" ct "$id" "")
	mkdir "$SCRATCH/r$id"
	tar --numeric-owner -xpf "$archive" -C "$SCRATCH/r$id"
	compare_trees --no-acl --no-xattr "$fs/ct" "$SCRATCH/r$id"
}

test_expect_success 'setup: xfs (reflink=1) with a tree bigger than its free space' '
	make_loop_fs xfs "$SCRATCH/xfs" 320M
	make_guest "$SCRATCH/xfs" 160
	free=$(df -B1 --output=avail "$SCRATCH/xfs" | tail -n 1)
	echo "free: $free"
	test "$free" -lt $((160 * MiB))
'

test_expect_success 'xfs: the first sync clones, no extra data blocks, space check passes' '
	reflink_backup "$SCRATCH/xfs" 671
	dir_empty "$SCRATCH/xfs/tmp" "staging left"
'

test_expect_success 'btrfs: the first sync clones, no extra data blocks' '
	make_loop_fs btrfs "$SCRATCH/btrfs" 640M
	make_guest "$SCRATCH/btrfs" 128
	btrfs -q subvolume create "$SCRATCH/btrfs/sub"
	reflink_backup "$SCRATCH/btrfs" 672
'

test_expect_success 'tmpdir on another file system: copied, not cloned' '
	mkdir -p "$SCRATCH/tmp" "$SCRATCH/dump-673"
	cbackup_run 0 backup --root "$SCRATCH/btrfs/ct" --id 673 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/dump-673" --compress 0
	test_lacks "$CB_ERR" "cloned"
	test_has "$CB_ERR" "^INFO: Total transferred file size: [0-9]{9}"
'

test_done
