#!/bin/bash
# keep-staging across three runs (issue 16, item 1): between the runs the
# guest changes in every way the fidelity suite knows (content with size
# and mtime put back, type changes both ways, renames of files and
# directories, a removed file whose inode a new one may get again with the
# old size and mtime, owner/mode/xattr/ACL changes, hardlinks made and
# broken, a device renumbered); each archive equals its source (manifest.py
# for what rsync cannot see, compare_trees for content).
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
MANIFEST="python3 $TOP/tests/helpers/manifest.py"
OLD='2019-05-06 07:08:09.987654321'
mkdir -p "$SCRATCH/tmp"

# backup_and_check N: keep-staging backup N, its archive restored equals SRC
backup_and_check() {
	local archive
	mkdir "$SCRATCH/dump-$1"
	cbackup_run 0 backup --root "$SRC" --id 701 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/dump-$1" --keep-staging 1 --freeze-cmd true --thaw-cmd true
	test_lacks "$CB_ERR" "^(WARN|ERROR): "
	archive=$(find_archive "$SCRATCH/dump-$1" ct 701 .zst)
	cbackup_run 0 restore "$archive" "$SCRATCH/r-$1"
	$MANIFEST "$SRC" >"$SCRATCH/src-$1.manifest"
	$MANIFEST "$SCRATCH/r-$1" >"$SCRATCH/r-$1.manifest"
	test_cmp "$SCRATCH/src-$1.manifest" "$SCRATCH/r-$1.manifest"
	compare_trees "$SRC" "$SCRATCH/r-$1"
}

# put_back FILE: size kept by the caller, mtime put back
put_back() { touch -h -d "$OLD" "$@"; }

test_expect_success ROOT,ACL,SETCAP 'run 1: a full tree' '
	make_full_tree "$SRC"
	mkdir -p "$SRC/d1/d2" "$SRC/t"
	echo one >"$SRC/d1/d2/f"
	echo file >"$SRC/t/was-file"
	mkdir "$SRC/t/was-dir"
	echo inner >"$SRC/t/was-dir/x"
	ln -s target "$SRC/t/was-link"
	mkfifo "$SRC/t/was-fifo"
	echo recycle-me >"$SRC/t/recycled"
	put_back "$SRC/t/recycled"
	backup_and_check 1
'

test_expect_success ROOT,ACL,SETCAP 'run 2: content, types, renames, recycled inodes, metadata' '
	printf "HELLO\\n" >"$SRC/regular.txt"
	put_back "$SRC/regular.txt"
	rm "$SRC/t/was-file"
	mkdir "$SRC/t/was-file"
	rm -r "$SRC/t/was-dir"
	ln -s elsewhere "$SRC/t/was-dir"
	rm "$SRC/t/was-link"
	echo now-a-file >"$SRC/t/was-link"
	rm "$SRC/t/was-fifo"
	mknod "$SRC/t/was-fifo" c 1 5
	mv "$SRC/d1" "$SRC/d1-renamed"
	mv "$SRC/text.txt" "$SRC/sub/text-moved.txt"
	rm "$SRC/t/recycled"
	echo recycle-it >"$SRC/t/recycled"
	put_back "$SRC/t/recycled"
	chown 4321:8765 "$SRC/regular.txt"
	chmod 0640 "$SRC/empty"
	setfattr -n user.comment -v "changed value" "$SRC/xattrs.txt"
	setfacl -m u:4321:rw "$SRC/acl.txt"
	ln "$SRC/empty" "$SRC/sub/empty-link"
	rm "$SRC/hardlink3"
	rm "$SRC/chardev"
	mknod "$SRC/chardev" c 1 8
	put_back "$SRC/chardev"
	put_back "$SRC/t" "$SRC/sub" "$SRC"
	backup_and_check 2
'

test_expect_success ROOT,ACL,SETCAP 'run 3: everything changed back and again' '
	printf "hello\\n" >"$SRC/regular.txt"
	put_back "$SRC/regular.txt"
	rmdir "$SRC/t/was-file"
	echo file-again >"$SRC/t/was-file"
	rm "$SRC/t/was-dir"
	mkdir "$SRC/t/was-dir"
	rm "$SRC/t/was-fifo"
	mkfifo "$SRC/t/was-fifo"
	mv "$SRC/d1-renamed" "$SRC/d1"
	mv "$SRC/d1/d2/f" "$SRC/d1/f-up"
	rm "$SRC/t/recycled"
	echo recycle-me >"$SRC/t/recycled"
	put_back "$SRC/t/recycled"
	setfattr -x user.comment "$SRC/xattrs.txt"
	setfacl -b "$SRC/acl.txt"
	rm "$SRC/sub/empty-link"
	ln "$SRC/regular.txt" "$SRC/d1/regular-link"
	rm "$SRC/blockdev"
	mknod "$SRC/blockdev" b 7 201
	put_back "$SRC/blockdev"
	put_back "$SRC/t" "$SRC/d1" "$SRC"
	backup_and_check 3
'

test_done
