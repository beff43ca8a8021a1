#!/bin/bash
# Issue 18: seekable archives and their catalog. Per codec, a tree with
# every file type, cut into 1 MiB units: stock tools read the archive as
# before; zstd carries a valid seek table (each frame decodes alone), gzip
# is many members; ARCHIVE.idx exists and is listed in the .sha256;
# `cbackup ls` says what `tar -tv` says; `cbackup index` rebuilds the same
# .idx; a damaged or lying .idx is refused (ls scans the archive instead,
# verify fails); an old archive (GNU tar | zstd, no seek table, no .idx)
# is listed by a scan.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
UNITS=$TOP/tests/helpers/units.py

codec_ext() { case $1 in zstd) echo .zst ;; lzo) echo .lzo ;; gzip) echo .gz ;; 0) echo ;; esac; }
codec_cat() { case $1 in zstd) echo "zstd -dc" ;; lzo) echo "lzop -dc" ;; gzip) echo "gzip -dc" ;; 0) echo cat ;; esac; }
# tar -tv / cbackup ls with the column padding squeezed
squeeze() { tr -s ' ' <"$1"; }

test_expect_success ROOT 'setup: a tree with every file type, several MiB' '
	make_full_tree "$SRC"
	yes "more text for several units" | head -c 5M >"$SRC/sub/more.txt"
	mkdir "$SCRATCH/tmp"
'

for codec in zstd gzip lzo 0; do
	ext=$(codec_ext $codec)
	dec=$(codec_cat $codec)
	dump=$SCRATCH/dump-$codec

	test_expect_success ROOT "$codec: backup writes ARCHIVE.idx, listed in the .sha256" '
		mkdir "$dump"
		# reuse 0: a catalog without unit keys, which only the archive
		# writer knows (t0760 covers them); `cbackup index` rebuilds that
		cbackup_run 0 backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
			--dumpdir "$dump" --compress $codec --unit-size 1 --reuse 0
		archive=$(find_archive "$dump" ct 101 "$ext")
		test -s "$archive.idx"
		test "$(stat -c %a "$archive.idx")" = 640
		test_has "$archive.sha256" "  $(basename "$archive").idx\$"
		(cd "$dump" && sha256sum -c "$(basename "$archive").sha256")
		no_tmp_files "$dump"
	'

	test_expect_success ROOT "$codec: stock tools read the archive as one stream" '
		archive=$(find_archive "$dump" ct 101 "$ext")
		$dec <"$archive" | tar -tvf - >"$SCRATCH/tar-$codec"
		test_has "$SCRATCH/tar-$codec" " \./sub/more\.txt$"
		mkdir "$SCRATCH/gnu-$codec"
		$dec <"$archive" | tar --xattrs --xattrs-include="*" --acls --numeric-owner -xpf - -C "$SCRATCH/gnu-$codec"
		compare_trees "$SRC" "$SCRATCH/gnu-$codec"
		cbackup_run 0 verify "$archive"
	'

	test_expect_success ROOT,BSDTAR "$codec: bsdtar reads the archive" '
		archive=$(find_archive "$dump" ct 101 "$ext")
		mkdir "$SCRATCH/bsd-$codec"
		bsdtar -xpf "$archive" --numeric-owner -C "$SCRATCH/bsd-$codec"
		cmp "$SRC/sub/more.txt" "$SCRATCH/bsd-$codec/sub/more.txt"
		cmp "$SRC/random.bin" "$SCRATCH/bsd-$codec/random.bin"
	'

	test_expect_success ROOT "$codec: cbackup ls equals tar -tv" '
		archive=$(find_archive "$dump" ct 101 "$ext")
		cbackup_run 0 ls "$archive"
		squeeze "$SCRATCH/tar-$codec" >"$SCRATCH/want-$codec"
		squeeze "$CB_OUT" >"$SCRATCH/got-$codec"
		test_cmp "$SCRATCH/want-$codec" "$SCRATCH/got-$codec"
		test_lacks "$CB_ERR" "scanning"
	'

	test_expect_success ROOT "$codec: ls PATH lists that entry or that subtree" '
		archive=$(find_archive "$dump" ct 101 "$ext")
		cbackup_run 0 ls "$archive" ./sub
		grep -E " \./sub/" "$SCRATCH/tar-$codec" | squeeze /dev/stdin >"$SCRATCH/want-sub"
		squeeze "$CB_OUT" >"$SCRATCH/got-sub"
		test_cmp "$SCRATCH/want-sub" "$SCRATCH/got-sub"
		cbackup_run 0 ls "$archive" regular.txt
		test "$(wc -l <"$CB_OUT")" = 1
		test_has "$CB_OUT" " \./regular\.txt$"
		cbackup_run 0 ls --json "$archive" ./rel-link ./chardev
		test_has "$CB_OUT" "^\{\"path\":\"\./rel-link\",\"type\":\"symlink\",.*\"uid\":1234,\"gid\":5678,.*\"link\":\"regular\.txt\"\}$"
		test_has "$CB_OUT" "\"path\":\"\./chardev\",\"type\":\"char\",.*\"major\":1,\"minor\":3\}$"
		cbackup_run 1 ls "$archive" ./no/such/file
		test_has "$CB_ERR" "not in the archive"
	'

	test_expect_success ROOT "$codec: cbackup index rebuilds an identical .idx" '
		archive=$(find_archive "$dump" ct 101 "$ext")
		cp "$archive.idx" "$SCRATCH/idx-$codec"
		rm "$archive.idx"
		cbackup_run 0 index "$archive"
		cmp "$SCRATCH/idx-$codec" "$archive.idx"
		(cd "$dump" && sha256sum -c "$(basename "$archive").sha256")
	'
done

test_expect_success ROOT 'zstd: the seek table is valid and every frame decodes alone' '
	archive=$(find_archive "$SCRATCH/dump-zstd" ct 101 .zst)
	frames=$(python3 "$UNITS" zstd "$archive")
	test "$frames" -gt 8
'

test_expect_success ROOT 'gzip: one member per unit' '
	archive=$(find_archive "$SCRATCH/dump-gzip" ct 101 .gz)
	members=$(python3 "$UNITS" gzip "$archive")
	test "$members" -gt 8
'

# patch_idx FILE OFFSET PACKFMT VALUE: overwrite little-endian bytes
patch_idx() {
	python3 -c 'import struct, sys
f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); f.write(struct.pack(sys.argv[3], int(sys.argv[4])))' "$@"
}

test_expect_success ROOT 'a lying or damaged .idx is refused: ls scans, verify fails' '
	archive=$(find_archive "$SCRATCH/dump-zstd" ct 101 .zst)
	good=$SCRATCH/idx-zstd
	n=0
	# entry count, unit count (alone too large; fits alone, not with the
	# rest), first entry offset, a unit offset, truncation, bytes appended
	for patch in "16 <Q 4611686018427387904" "24 <Q 99999999" units-sum "128 <Q 999999999999" \
		     "-40 <Q 1" truncate append; do
		n=$((n + 1))
		cp "$good" "$archive.idx"
		case $patch in
		truncate) truncate -s 100 "$archive.idx" ;;
		append) printf "0123456789abcdef" >>"$archive.idx" ;;
		units-sum) patch_idx "$archive.idx" 24 "<Q" $(( ($(stat -c %s "$archive.idx") - 96) / 16 )) ;;
		-*) set -- $patch; size=$(stat -c %s "$archive.idx")
		    patch_idx "$archive.idx" $((size + $1)) "$2" "$3" ;;
		*) set -- $patch; patch_idx "$archive.idx" "$1" "$2" "$3" ;;
		esac
		cbackup_run 0 ls "$archive"
		test_has "$CB_ERR" "damaged catalog|catalog is of another archive"
		test_has "$CB_ERR" "scanning the archive instead"
		squeeze "$CB_OUT" >"$SCRATCH/got-lie"
		test_cmp "$SCRATCH/want-zstd" "$SCRATCH/got-lie"
		cbackup_run 1 verify "$archive"
		test_has "$CB_ERR" "catalog"
	done
	test "$n" = 7
	cp "$good" "$archive.idx"
'

test_expect_success ROOT 'an old archive (GNU tar | zstd, no .idx): ls by a scan, index makes one' '
	mkdir "$SCRATCH/old"
	old=$SCRATCH/old/vzdump-lxc-102-2020_01_01-00_00_00.tar.zst
	(cd "$SRC" && tar --numeric-owner -cf - .) | zstd -q >"$old"
	cbackup_run 0 ls "$old"
	test_has "$CB_ERR" "no catalog .*scanning the whole archive"
	zstd -dc "$old" | tar -tvf - | squeeze /dev/stdin >"$SCRATCH/want-old"
	squeeze "$CB_OUT" >"$SCRATCH/got-old"
	test_cmp "$SCRATCH/want-old" "$SCRATCH/got-old"
	cbackup_run 0 index "$old"
	test -s "$old.idx"
	cbackup_run 0 ls "$old"
	test_lacks "$CB_ERR" "scanning"
	squeeze "$CB_OUT" >"$SCRATCH/got-old2"
	test_cmp "$SCRATCH/want-old" "$SCRATCH/got-old2"
'

test_expect_success ROOT 'prune removes the .idx with its archive' '
	dump=$SCRATCH/dump-zstd
	archive=$(find_archive "$dump" ct 101 .zst)
	: >"$SCRATCH/empty.conf"
	synthetic_backup "$dump" ct 101 2099_01_01-00_00_00 >/dev/null
	cbackup_run 0 prune 101 --dumpdir "$dump" --prune-backups keep-last=1 --config "$SCRATCH/empty.conf"
	test_must_fail test -e "$archive"
	test_must_fail test -e "$archive.idx"
'

test_done
