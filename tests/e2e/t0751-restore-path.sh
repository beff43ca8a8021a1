#!/bin/bash
# Issue 18: `cbackup restore ARCHIVE DESTDIR --path P...` restores only
# those entries and subtrees, each identical to the full restore's copy
# (tests/helpers/manifest.py: type, mode, owner, size, times, xattrs, ACLs,
# holes; plus the bytes): a single file, a subtree, a sparse file, a
# hardlinked file whose target is outside the selection, two links of one
# inode. It decodes only the units that hold them: with the archive's
# first unit damaged a later subtree still restores (the full restore
# fails). A catalog that lies about an offset stops the restore; an old
# archive without .idx is restored by a scan, which it says.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
MANIFEST=$TOP/tests/helpers/manifest.py

codec_ext() { case $1 in zstd) echo .zst ;; lzo) echo .lzo ;; gzip) echo .gz ;; 0) echo ;; esac; }

# same_entries FULL PART PATH [--ignore F]: PATH (and below) alike in both trees
same_entries() {
	local full=$1 part=$2 p=$3 ign=${4:-mtime-of-none}
	python3 "$MANIFEST" --ignore "$ign" "$full" | awk -v p="$p" '$1 == p || index($1, p "/") == 1' >"$SCRATCH/m-full"
	python3 "$MANIFEST" --ignore "$ign" "$part" | awk -v p="$p" '$1 == p || index($1, p "/") == 1' >"$SCRATCH/m-part"
	test -s "$SCRATCH/m-full"
	test_cmp "$SCRATCH/m-full" "$SCRATCH/m-part"
	diff -r "$full/$p" "$part/$p"
}

test_expect_success ROOT 'setup: a tree with every file type, several MiB' '
	make_full_tree "$SRC"
	mkdir -p "$SRC/zz/tree/a" "$SRC/zz/tree/b"
	yes "late subtree" | head -c 1M >"$SRC/zz/tree/a/one"
	echo two >"$SRC/zz/tree/b/two"
	mkdir "$SCRATCH/tmp"
'

for codec in zstd gzip lzo 0; do
	ext=$(codec_ext $codec)
	dump=$SCRATCH/dump-$codec
	full=$SCRATCH/full-$codec

	test_expect_success ROOT "$codec: backup and a full restore" '
		mkdir "$dump"
		cbackup_run 0 backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
			--dumpdir "$dump" --compress $codec --unit-size 1
		archive=$(find_archive "$dump" ct 101 "$ext")
		cbackup_run 0 restore "$archive" "$full"
	'

	test_expect_success ROOT "$codec: --path of a single file" '
		archive=$(find_archive "$dump" ct 101 "$ext")
		cbackup_run 0 restore "$archive" "$SCRATCH/one-$codec" --path ./regular.txt
		test_has "$CB_ERR" "restoring 1 of [0-9]+ entries"
		same_entries "$full" "$SCRATCH/one-$codec" regular.txt
		test "$(find "$SCRATCH/one-$codec" ! -type d | wc -l)" = 1
	'

	test_expect_success ROOT "$codec: --path of a subtree and of a sparse file" '
		archive=$(find_archive "$dump" ct 101 "$ext")
		cbackup_run 0 restore "$archive" "$SCRATCH/sub-$codec" --path deep --path ./sparse.img --path zz/
		same_entries "$full" "$SCRATCH/sub-$codec" deep
		same_entries "$full" "$SCRATCH/sub-$codec" zz
		same_entries "$full" "$SCRATCH/sub-$codec" sparse.img
		python3 "$MANIFEST" "$SCRATCH/sub-$codec" >"$SCRATCH/m-sparse"
		test_has "$SCRATCH/m-sparse" "^sparse\.img f .* sparse "
		test_must_fail test -e "$SCRATCH/sub-$codec/regular.txt"
	'

	test_expect_success ROOT "$codec: --path of hardlinks: target outside the selection, two links" '
		archive=$(find_archive "$dump" ct 101 "$ext")
		cbackup_run 0 restore "$archive" "$SCRATCH/hl-$codec" --path ./sub
		same_entries "$full" "$SCRATCH/hl-$codec" sub group
		cmp "$full/hardlink1" "$SCRATCH/hl-$codec/sub/hardlink2"
		test_must_fail test -e "$SCRATCH/hl-$codec/hardlink1"
		cbackup_run 0 restore "$archive" "$SCRATCH/hl2-$codec" --path ./hardlink3 --path ./sub/hardlink2
		test "$(stat -c %i "$SCRATCH/hl2-$codec/hardlink3")" = "$(stat -c %i "$SCRATCH/hl2-$codec/sub/hardlink2")"
		same_entries "$full" "$SCRATCH/hl2-$codec" hardlink3 group
		test_must_fail test -e "$SCRATCH/hl2-$codec/hardlink1"
	'

	test_expect_success ROOT "$codec: only the units that hold the selection are decoded" '
		archive=$(find_archive "$dump" ct 101 "$ext")
		mkdir "$SCRATCH/bad-$codec"
		bad=$SCRATCH/bad-$codec/$(basename "$archive")
		cp "$archive" "$archive.idx" "$SCRATCH/bad-$codec/"
		# a byte of the first unit (lzo: past the lzop file header)
		printf "\377\377\377\377" | dd of="$bad" bs=1 seek=$(( $([ $codec = lzo ] && echo 4096 || echo 100) )) conv=notrunc status=none
		cbackup_run 1 restore "$bad" "$SCRATCH/badfull-$codec"
		cbackup_run 0 restore "$bad" "$SCRATCH/badpart-$codec" --path zz
		same_entries "$full" "$SCRATCH/badpart-$codec" zz
	'

	test_expect_success ROOT "$codec: unknown paths and non-empty destinations are refused" '
		archive=$(find_archive "$dump" ct 101 "$ext")
		cbackup_run 1 restore "$archive" "$SCRATCH/none-$codec" --path ./no/such
		test_has "$CB_ERR" "not in the archive"
		cbackup_run 1 restore "$archive" "$SCRATCH/one-$codec" --path ./regular.txt
		test_has "$CB_ERR" "not empty"
	'
done

# patch_u64 FILE OFFSET VALUE
patch_u64() {
	python3 -c 'import struct, sys
f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); f.write(struct.pack("<Q", int(sys.argv[3])))' "$@"
}
get_u64() {
	python3 -c 'import struct, sys
f = open(sys.argv[1], "rb"); f.seek(int(sys.argv[2])); print(struct.unpack("<Q", f.read(8))[0])' "$@"
}

test_expect_success ROOT 'a catalog that lies about an offset stops the restore' '
	archive=$(find_archive "$SCRATCH/dump-zstd" ct 101 .zst)
	cp "$archive.idx" "$SCRATCH/good.idx"
	cbackup_run 0 ls "$archive"
	# the long-named file: its pax header (1024 bytes with its record) comes
	# first; the lie puts its header on the ustar header after that, which
	# names it by a cut name
	n=$(grep -n "long-file-name" "$CB_OUT" | cut -d: -f1)
	off=$((64 + (n - 1) * 64))
	patch_u64 "$archive.idx" $off $(( $(get_u64 "$archive.idx" $off) + 1024 ))
	# as a forger would: the digest of the catalog itself holds (else it is not used)
	python3 "$TOP/tests/helpers/idxforge.py" "$archive.idx" rehash
	name=$(sed -n "${n}p" "$CB_OUT" | sed "s/.* \.\//.\//")
	cbackup_run 1 restore "$archive" "$SCRATCH/lie" --path "$name"
	test_has "$CB_ERR" "the catalog does not match the archive"
	test -z "$(find "$SCRATCH/lie" -type f)"
	# read from an earlier member on, the lie is not needed: the restore is right
	cbackup_run 0 restore "$archive" "$SCRATCH/lie-deep" --path deep
	same_entries "$SCRATCH/full-zstd" "$SCRATCH/lie-deep" deep
	cp "$SCRATCH/good.idx" "$archive.idx"
'

test_expect_success ROOT 'an old archive (GNU tar | zstd, no .idx): restore --path by a scan' '
	mkdir "$SCRATCH/old"
	old=$SCRATCH/old/vzdump-lxc-102-2020_01_01-00_00_00.tar.zst
	(cd "$SRC" && tar --numeric-owner --xattrs --xattrs-include="*" --acls -cf - .) | zstd -q >"$old"
	cbackup_run 0 restore "$old" "$SCRATCH/old-r" --path ./deep --path ./regular.txt
	test_has "$CB_ERR" "no catalog .*scanning the whole archive"
	same_entries "$SCRATCH/full-zstd" "$SCRATCH/old-r" deep
	same_entries "$SCRATCH/full-zstd" "$SCRATCH/old-r" regular.txt
'

test_done
