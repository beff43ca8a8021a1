#!/bin/bash
# Snapshot mode falls back to suspend, with vzdump's lines, when any volume
# cannot be snapshotted: an ext4 root, an xfs root, a btrfs directory that
# is not a subvolume, a btrfs subvolume root with an ext4 mount point.
# --dry-run says which mode and why. Suspend mode stages a mount point and
# archives it at its target; bad mp values are configuration errors.
. "$(dirname "$0")/lib.sh"

if why=$(loop_fs_unavailable btrfs xfs ext4); then
	test_skip 'snapshot mode fallback' "$why"
	test_done
fi

TMPD=$SCRATCH/tmp

# fell_back WHY-ERE: the reason, then vzdump's two lines, then suspend
fell_back() {
	grep -E "^INFO: (snapshot not possible|mode failure|trying|backup mode)" "$CB_ERR" >lines
	cat >want <<-EOF
	INFO: mode failure - some volumes do not support snapshots
	INFO: trying 'suspend' mode instead
	INFO: backup mode: suspend
	EOF
	sed 1d lines >got
	diff -u want got
	head -n 1 lines | grep -E "^INFO: snapshot not possible: .*$1" ||
		{ echo "reason is not '$1':"; head -n 1 lines; return 1; }
}

# backup_mode RC ID ROOT ARGS...: a snapshot-mode backup of ROOT
backup_mode() {
	local rc=$1 id=$2 root=$3
	shift 3
	mkdir -p "$SCRATCH/dump-$id"
	cbackup_run "$rc" backup --root "$root" --id "$id" --tmpdir "$TMPD" \
		--dumpdir "$SCRATCH/dump-$id" --mode snapshot "$@"
}

test_expect_success 'setup: ext4, xfs and btrfs on loop devices' '
	make_loop_fs ext4 "$SCRATCH/ext4" 64M
	make_loop_fs xfs "$SCRATCH/xfs" 320M
	make_loop_fs btrfs "$SCRATCH/btrfs" 320M
	mkdir -p "$TMPD"
	make_small_tree "$SCRATCH/ext4/ct"
	make_small_tree "$SCRATCH/xfs/ct"
	make_small_tree "$SCRATCH/btrfs/plain"
	btrfs -q subvolume create "$SCRATCH/btrfs/ct"
	make_small_tree "$SCRATCH/btrfs/ct"
	mkdir -p "$SCRATCH/ext4/vol"
	echo "mount point data" >"$SCRATCH/ext4/vol/file"
'

test_expect_success 'ext4 root: vzdump lines, then a suspend backup' '
	backup_mode 0 661 "$SCRATCH/ext4/ct"
	fell_back "is on ext4"
	test_has "$CB_ERR" "^INFO: final sync finished"
	find_archive "$SCRATCH/dump-661" ct 661 .zst
'

test_expect_success 'xfs root: falls back the same way' '
	backup_mode 0 662 "$SCRATCH/xfs/ct"
	fell_back "is on xfs"
	find_archive "$SCRATCH/dump-662" ct 662 .zst
'

test_expect_success 'a btrfs directory that is not a subvolume falls back' '
	backup_mode 0 663 "$SCRATCH/btrfs/plain"
	fell_back "not a subvolume"
'

test_expect_success 'one mount point that cannot be snapshotted: the whole guest falls back' '
	backup_mode 0 664 "$SCRATCH/btrfs/ct" --mp "$SCRATCH/ext4/vol,/srv/vol"
	fell_back "ext4/vol. is on ext4"
	test_lacks "$CB_ERR" "create snapshot"
	test -z "$(find "$SCRATCH/btrfs" -maxdepth 1 -name ".cbackup-snap-*")"
	archive=$(find_archive "$SCRATCH/dump-664" ct 664 .zst)
	zstd -dc <"$archive" | tar -xOf - ./srv/vol/file >got
	echo "mount point data" >want
	diff -u want got
'

test_expect_success '--dry-run says which mode and why' '
	backup_mode 0 665 "$SCRATCH/ext4/ct" --dry-run
	test_has "$CB_ERR" "^INFO: dry run: mode suspend: snapshot not possible: .* is on ext4$"
	backup_mode 0 665 "$SCRATCH/btrfs/ct" --dry-run
	test_has "$CB_ERR" "^INFO: dry run: mode snapshot: 1 volume\(s\), each a btrfs subvolume$"
	mkdir -p "$SCRATCH/dump-666"
	cbackup_run 0 backup --root "$SCRATCH/ext4/ct" --id 666 --tmpdir "$TMPD" \
		--dumpdir "$SCRATCH/dump-666" --dry-run
	test_has "$CB_ERR" "^INFO: dry run: mode suspend, as configured$"
	test_lacks "$CB_ERR" "mode failure"
	# nothing written but the storage lock files
	test -z "$(find "$SCRATCH/dump-665" "$SCRATCH/dump-666" -type f ! -name ".*.lock")"
'

test_expect_success 'suspend mode: a mount point is staged and archived at its target' '
	mkdir -p "$SCRATCH/dump-667" "$SCRATCH/vol2/sub"
	echo deep >"$SCRATCH/vol2/sub/deep"
	cbackup_run 0 backup --root "$SCRATCH/xfs/ct" --id 667 --tmpdir "$TMPD" \
		--dumpdir "$SCRATCH/dump-667" --mp "$SCRATCH/ext4/vol,/srv/vol" \
		--mp "$SCRATCH/vol2,/new/place//" --keep-staging 0
	cat "$CB_ERR"
	test_has "$CB_ERR" "^INFO: starting first sync $SCRATCH/ext4/vol/ to .*\.mp1 \(mount point /srv/vol\)$"
	archive=$(find_archive "$SCRATCH/dump-667" ct 667 .zst)
	cbackup_run 0 restore "$archive" "$SCRATCH/r667"
	mkdir -p expect/srv expect/new
	cp -a "$SCRATCH/xfs/ct/." expect/
	cp -a "$SCRATCH/ext4/vol" expect/srv/vol
	cp -a "$SCRATCH/vol2" expect/new/place
	compare_trees --no-acl --no-xattr --no-root-mtime expect/srv/vol r667/srv/vol
	compare_trees --no-acl --no-xattr --no-root-mtime expect/new/place r667/new/place
	test -f r667/etc/hostname
	# the root's copy and the mount points' are gone (the runs above kept theirs)
	find "$TMPD" >"$SCRATCH/left"
	test_lacks "$SCRATCH/left" "667"
'

test_expect_success 'bad mp values and mp on a VM are errors that name the key' '
	printf "[ct 668]\nroot = %s\nmp = relative,/srv\n" "$SCRATCH/xfs/ct" >bad1.conf
	cbackup_run 2 668 --config bad1.conf --dumpdir "$SCRATCH" --tmpdir "$TMPD"
	test_has "$CB_ERR" "bad1.conf:3: key .mp.: mount point source .relative. is not an absolute path"
	printf "[ct 668]\nroot = %s\nmp = /srv/a,/srv/../etc\n" "$SCRATCH/xfs/ct" >bad2.conf
	cbackup_run 2 668 --config bad2.conf --dumpdir "$SCRATCH" --tmpdir "$TMPD"
	test_has "$CB_ERR" "bad2.conf:3: key .mp.: mount point target ./srv/\.\./etc. has a"
	cbackup_run 2 backup --root "$SCRATCH/xfs/ct" --id 668 --mp /srv/a
	test_has "$CB_ERR" "mp.*accepted: SOURCE,TARGET"
	cbackup_run 2 backup --root "$SCRATCH/xfs/ct" --id 668 --mp /srv/a,/
	test_has "$CB_ERR" "guest root"
	printf "[vm 669]\ndisk = %s\nmp = /srv/a,/srv\n" "$SCRATCH/ext4/vol/file" >vm.conf
	mkdir -p dump-669
	cbackup_run 1 669 --config vm.conf --dumpdir "$SCRATCH/dump-669" --tmpdir "$TMPD"
	error_names 669 "" "mp is for containers"
'

test_done
