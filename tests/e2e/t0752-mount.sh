#!/bin/bash
# Issue 18: `cbackup mount ARCHIVE MOUNTPOINT`, a read-only FUSE view of an
# archive: per codec, with the archive in a read-only directory, the mount
# lists every entry with the type, mode, owner, size, mtime, link target,
# device numbers and xattrs of the full restore's copy
# (tests/helpers/manifest.py), every file reads back byte-exact, writes are
# refused, and `fusermount3 -u` ends it (the process exits).
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
MANIFEST=$TOP/tests/helpers/manifest.py

codec_ext() { case $1 in zstd) echo .zst ;; lzo) echo .lzo ;; gzip) echo .gz ;; 0) echo ;; esac; }

if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
	test_skip 'cbackup mount' 'no /dev/fuse or no fusermount3 (apt-get install fuse3)'
	test_done
fi

# what a FUSE view cannot show as the disk does: hardlink groups (one inode
# per name), allocation (holes), ACLs and chattr flags
IGNORE=group,alloc,acls,fflags

# unmount_wait DIR: unmount and wait until the file system process is gone
unmount_wait() {
	fusermount3 -u "$1"
	wait_for 10 test_must_fail mountpoint -q "$1"
}

test_expect_success ROOT 'setup: a tree with every file type; a read-only dump directory' '
	make_full_tree "$SRC"
	yes "more text for several units" | head -c 5M >"$SRC/more.txt"
	mkdir "$SCRATCH/tmp" "$SCRATCH/dump" "$SCRATCH/ro"
'

for codec in zstd gzip lzo 0; do
	ext=$(codec_ext $codec)
	mnt=$SCRATCH/mnt-$codec

	test_expect_success ROOT "$codec: mount lists and reads back every file" '
		cbackup_run 0 backup --root "$SRC" --id "m$codec" --type ct --tmpdir "$SCRATCH/tmp" \
			--dumpdir "$SCRATCH/dump" --compress $codec --unit-size 1
		archive=$(find_archive "$SCRATCH/dump" ct "m$codec" "$ext")
		cbackup_run 0 restore "$archive" "$SCRATCH/full-$codec"
		mountpoint -q "$SCRATCH/ro" || mount --bind -o ro "$SCRATCH/dump" "$SCRATCH/ro"
		cleanup_mount "$SCRATCH/ro"
		mkdir "$mnt"
		cleanup_mount "$mnt"
		cbackup_run 0 mount "$SCRATCH/ro/$(basename "$archive")" "$mnt"
		mountpoint -q "$mnt"
		python3 "$MANIFEST" --ignore $IGNORE "$SCRATCH/full-$codec" >"$SCRATCH/want-$codec"
		python3 "$MANIFEST" --ignore $IGNORE "$mnt" >"$SCRATCH/got-$codec"
		test_cmp "$SCRATCH/want-$codec" "$SCRATCH/got-$codec"
		rc=0
		diff -r --no-dereference "$SCRATCH/full-$codec" "$mnt" >"$SCRATCH/diff-$codec" 2>&1 || rc=$?
		test_lacks "$SCRATCH/diff-$codec" "differ|Only in"
		test "$(getfattr --only-values -n user.comment "$mnt/xattrs.txt")" = "hello world"
		test_must_fail sh -c "echo x >>\"$mnt/regular.txt\""
		unmount_wait "$mnt"
	'
done

test_done
