#!/bin/bash
# restore --force replaces, as pct restore --force does (issue 28 item 10):
# the archive is restored into a fresh directory and swapped in only when
# complete; files not in the archive are gone, a conflict (a directory
# where the archive has a file) is no obstacle, --keep-old keeps the old
# tree beside, and a failure in the middle of the extraction (an injected
# EIO on a file's write) leaves DESTDIR exactly as it was, with nothing of
# the restore left behind. The same for a DESTDIR that is a mount point.
# restore --path --force replaces only the chosen paths and never follows
# a symlink in DESTDIR on the way down to them.
. "$(dirname "$0")/lib.sh"

DUMP=$SCRATCH/dump TMPD=$SCRATCH/tmp SRC=$SCRATCH/src

# manifest DIR: every entry with its type, size, mode, owner and content hash
manifest() {
	(cd "$1" && find . -printf '%p %y %s %m %u\n' | sort &&
		find . -type f -exec sha256sum {} + | sort -k 2)
}

# old_tree DIR: a tree that is not the archive's, with conflicts
old_tree() {
	mkdir -p "$1/etc/hostname" "$1/only-old/deep"
	echo old >"$1/only-old/deep/file"
	echo old >"$1/etc/hostname/in-the-way"
	echo old >"$1/stale"
}

# no_leftovers DIR: no private directory of a restore left in DIR
no_leftovers() {
	local left
	left=$(find "$1" -maxdepth 1 -name '.cbackup-restore-*')
	[ -z "$left" ] || { echo "left behind: $left"; return 1; }
}

test_expect_success ROOT 'setup: a guest and its archive' '
	make_small_tree "$SRC"
	head -c 2M /dev/urandom >"$SRC/big.bin"
	mkdir -p "$DUMP" "$TMPD"
	cbackup_run 0 backup --root "$SRC" --id 485 --dumpdir "$DUMP" --tmpdir "$TMPD"
	find_archive "$DUMP" ct 485 .zst >archive-name
'

test_expect_success ROOT '--force: files not in the archive are gone, conflicts replaced' '
	A=$(cat archive-name)
	old_tree "$SCRATCH/d1"
	cbackup_run 0 restore --force "$A" "$SCRATCH/d1"
	test_must_fail test -e "$SCRATCH/d1/stale"
	test_must_fail test -e "$SCRATCH/d1/only-old"
	compare_trees --no-xattr --no-acl "$SRC" "$SCRATCH/d1"
	no_leftovers "$SCRATCH"
	test -z "$(find "$SCRATCH" -maxdepth 1 -name "d1.old-*")"
'

test_expect_success ROOT '--force --keep-old: the old tree is kept beside, as it was' '
	A=$(cat archive-name)
	old_tree "$SCRATCH/d2"
	manifest "$SCRATCH/d2" >before
	cbackup_run 0 restore --force --keep-old "$A" "$SCRATCH/d2"
	compare_trees --no-xattr --no-acl "$SRC" "$SCRATCH/d2"
	old=$(find "$SCRATCH" -maxdepth 1 -name "d2.old-*")
	test_has "$CB_ERR" "the old tree is kept as .*d2\.old-"
	manifest "$old" >after
	test_cmp before after
'

test_expect_success ROOT 'a failure in the middle of the extraction leaves DESTDIR as it was' '
	A=$(cat archive-name)
	old_tree "$SCRATCH/d3"
	manifest "$SCRATCH/d3" >before
	: >"$FAULT_LOG"
	with_fault "write:EIO:big.bin" cbackup_run 1 restore --force "$A" "$SCRATCH/d3"
	fault_fired "write"
	test_has "$CB_ERR" "^ERROR: restore of .* failed - cannot restore .*big\.bin"
	manifest "$SCRATCH/d3" >after
	test_cmp before after
	no_leftovers "$SCRATCH"
'

test_expect_success ROOT,TMPFS 'DESTDIR a mount point: replaced the same way, a failure leaves it as it was' '
	A=$(cat archive-name)
	mount_tmpfs "$SCRATCH/mnt" 64M
	old_tree "$SCRATCH/mnt"
	manifest "$SCRATCH/mnt" >before
	: >"$FAULT_LOG"
	with_fault "write:EIO:big.bin" cbackup_run 1 restore --force "$A" "$SCRATCH/mnt"
	fault_fired "write"
	manifest "$SCRATCH/mnt" >after
	test_cmp before after
	no_leftovers "$SCRATCH/mnt"
	cbackup_run 0 restore --force "$A" "$SCRATCH/mnt"
	test_must_fail test -e "$SCRATCH/mnt/stale"
	compare_trees --no-xattr --no-acl "$SRC" "$SCRATCH/mnt"
	no_leftovers "$SCRATCH/mnt"
	cbackup_run 1 restore --force --keep-old "$A" "$SCRATCH/mnt"
	test_has "$CB_ERR" "keep-old: the old tree of .* cannot be kept beside it"
'

test_expect_success ROOT '--path --force: only the chosen paths are replaced' '
	A=$(cat archive-name)
	old_tree "$SCRATCH/d4"
	echo mine >"$SCRATCH/d4/etc/mine"
	cbackup_run 0 restore --force --path ./etc/hostname "$A" "$SCRATCH/d4"
	test "$(cat "$SCRATCH/d4/etc/hostname")" = "$(cat "$SRC/etc/hostname")"
	test -f "$SCRATCH/d4/stale"
	test -f "$SCRATCH/d4/etc/mine"
	test -f "$SCRATCH/d4/only-old/deep/file"
	no_leftovers "$SCRATCH"
'

test_expect_success ROOT '--path --force: a symlink in DESTDIR on the way is refused, not followed' '
	A=$(cat archive-name)
	mkdir -p "$SCRATCH/d5" "$SCRATCH/elsewhere"
	ln -s ../elsewhere "$SCRATCH/d5/etc"
	cbackup_run 1 restore --force --path ./etc/hostname "$A" "$SCRATCH/d5"
	test_has "$CB_ERR" "etc. in .*d5. is not a directory \(a symlink is not followed\)"
	dir_empty "$SCRATCH/elsewhere"
	no_leftovers "$SCRATCH"
'

test_done
