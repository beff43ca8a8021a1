#!/bin/bash
# Issue 25 item 1: every unit is checked, in every codec. 4 bytes flipped
# in a stored (incompressible) unit: the codec's own tester (zstd -t,
# lzop -t, gzip -t) fails; `cbackup verify` without the .sha256 fails,
# names the unit and the member in it, and writes no .verified; `restore`
# fails naming the archive; `restore --path` of the member fails, as does
# a read of it through `cbackup mount` (EIO). `restore` with a .sha256
# that does not match fails unless --ignore-checksum. A whole restore
# reads the archive once: its units are checked by the catalog and the
# catalog by its line in the .sha256 (a wrong line fails before any
# entry is made); bytes appended to the archive fail it, as does a plain
# tar of its size under its name.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
DUMP=$SCRATCH/dump
FLIP=$TOP/tests/helpers/flip.py

codec_ext() { case $1 in zstd) echo .zst ;; lzo) echo .lzo ;; gzip) echo .gz ;; esac; }
codec_test() { case $1 in zstd) zstd -tq "$2" ;; lzo) lzop -tq "$2" ;; gzip) gzip -t "$2" ;; esac; }

test_expect_success 'setup: a tree with 12 MiB of incompressible data, one archive per codec' '
	make_small_tree "$SRC"
	head -c 12M /dev/urandom >"$SRC/stored.bin"
	mkdir -p "$DUMP" "$SCRATCH/tmp"
	for c in zstd lzo gzip; do
		cbackup_run 0 backup --root "$SRC" --id "i$c" --compress $c --unit-size 1 \
			--dumpdir "$DUMP" --tmpdir "$SCRATCH/tmp"
	done
'

# damaged CODEC: a copy of the archive (with its .idx and .sha256) with 4
# bytes of stored.bin flipped where they are stored verbatim
damaged() {
	local a d
	a=$(find_archive "$DUMP" ct "i$1" "$(codec_ext $1)")
	d=$SCRATCH/d-$1
	rm -rf "$d"
	mkdir "$d"
	cp "$a" "$a.idx" "$a.sha256" "$d/"
	python3 "$FLIP" "$d/$(basename "$a")" "$SRC/stored.bin" $((6 * 1024 * 1024)) >"$d/at"
	echo "$d/$(basename "$a")"
}

for c in zstd lzo gzip; do
	test_expect_success "$c: the intact archive passes its codec test and verify" "
		a=\$(find_archive \"$DUMP\" ct i$c $(codec_ext $c))
		codec_test $c \"\$a\"
		cbackup_run 0 verify \"\$a\"
	"
	test_expect_success "$c: the codec's own tester catches 4 bytes flipped in a stored unit" "
		a=\$(damaged $c)
		test_must_fail codec_test $c \"\$a\"
	"
	test_expect_success "$c: verify without the .sha256 fails naming the unit and member; no .verified" "
		a=\$(damaged $c)
		rm \"\$a.sha256\"
		cbackup_run 1 verify \"\$a\"
		test_has \"\$CB_ERR\" '^ERROR: .*unit [0-9]+ .*stored\\.bin'
		test ! -e \"\$a.verified\"
	"
	test_expect_success "$c: restore fails naming the archive" "
		a=\$(damaged $c)
		cbackup_run 1 restore \"\$a\" \"\$SCRATCH/r-$c\"
		test_has \"\$CB_ERR\" \"ERROR: .*\$(basename \"\$a\")\"
	"
	test_expect_success "$c: restore --path of the damaged member fails" "
		a=\$(damaged $c)
		cbackup_run 1 restore \"\$a\" \"\$SCRATCH/p-$c\" --path ./stored.bin
		test_has \"\$CB_ERR\" '^ERROR: .*unit [0-9]+'
	"
done

# copy_izstd NAME [EXT...]: the zstd archive copied into SCRATCH/NAME with
# ARCHIVE.EXT (idx, sha256) beside it; the copy's path
copy_izstd() {
	local a d=$SCRATCH/$1 x
	a=$(find_archive "$DUMP" ct izstd .zst)
	shift
	mkdir "$d" && cp "$a" "$d/" || return 1
	for x in "$@"; do cp "$a.$x" "$d/" || return 1; done
	echo "$d/$(basename "$a")"
}

test_expect_success 'restore: a .sha256 that does not match fails, --ignore-checksum restores' '
	a=$(find_archive "$DUMP" ct izstd .zst)
	b=$(copy_izstd badsum idx)
	echo "0000000000000000000000000000000000000000000000000000000000000000  $(basename "$a")" >"$b.sha256"
	cbackup_run 1 restore "$b" "$SCRATCH/rs1"
	test_has "$CB_ERR" "ERROR: .*$(basename "$a").*(checksum|sha256)"
	cbackup_run 0 restore --ignore-checksum "$b" "$SCRATCH/rs2"
	cmp "$SRC/stored.bin" "$SCRATCH/rs2/stored.bin"
'

# archive_reads TRACE ARCHIVE: the bytes read from ARCHIVE in an strace
# -ff -y -o TRACE of reads (every thread's pread64 and read on an fd of
# that file; a file per thread: no call split across lines)
archive_reads() {
	cat "$1".* | awk -v name="$(basename "$2")>" '
		index($0, name) && / = [0-9]+$/ { n += $NF }
		END { print n + 0 }'
}

test_expect_success 'restore reads the archive once: each unit checked by the catalog, the catalog by the .sha256' '
	a=$(find_archive "$DUMP" ct izstd .zst)
	strace -ff -qq -y -e trace=pread64,read -e signal=none -o "$SCRATCH/reads" \
		"$CBACKUP" restore "$a" "$SCRATCH/once" 2>"$CB_ERR"
	cmp "$SRC/stored.bin" "$SCRATCH/once/stored.bin"
	size=$(stat -c %s "$a")
	read=$(archive_reads "$SCRATCH/reads" "$a")
	echo "read $read bytes of an archive of $size"
	test "$read" -ge "$size"
	test "$read" -lt $((size * 3 / 2))
'

test_expect_success 'restore: a .sha256 whose catalog line does not match the catalog fails before any entry' '
	a=$(find_archive "$DUMP" ct izstd .zst)
	b=$(copy_izstd badidx idx)
	sed "/\.idx\$/s/^[0-9a-f]\{8\}/00000000/" "$a.sha256" >"$b.sha256"
	test_must_fail cmp -s "$a.sha256" "$b.sha256"
	cbackup_run 1 restore "$b" "$SCRATCH/rbi"
	test_has "$CB_ERR" "^ERROR: .*checksum mismatch.*$(basename "$a")\.idx"
	test ! -e "$SCRATCH/rbi"
	cbackup_run 0 restore --ignore-checksum "$b" "$SCRATCH/rbi2"
	cmp "$SRC/stored.bin" "$SCRATCH/rbi2/stored.bin"
'

test_expect_success 'verify: the same wrong catalog line fails, naming both files and both digests; no .verified' '
	a=$(find_archive "$DUMP" ct izstd .zst)
	b=$(copy_izstd badidxv idx)
	sed "/\.idx\$/s/^[0-9a-f]\{8\}/00000000/" "$a.sha256" >"$b.sha256"
	cbackup_run 1 verify "$b"
	test_has "$CB_ERR" "^ERROR: .*checksum mismatch: .$b\.sha256. says 00000000[0-9a-f]{56} for .$b\.idx., it has [0-9a-f]{64}"
	test ! -e "$b.verified"
'

test_expect_success 'restore: bytes appended to the archive (catalog and .sha256 as they were) fail' '
	b=$(copy_izstd longer idx sha256)
	head -c 4096 /dev/urandom >>"$b"
	cbackup_run 1 restore "$b" "$SCRATCH/rlo"
	test_has "$CB_ERR" "^ERROR: "
	test ! -e "$SCRATCH/rlo"
'

test_expect_success 'restore: a plain tar of the same size under the archive name (its catalog and .sha256 kept) fails' '
	b=$(copy_izstd forged idx sha256)
	size=$(stat -c %s "$b")
	tar -C "$SRC" -cf "$b" etc
	truncate -s "$size" "$b"
	cbackup_run 1 restore "$b" "$SCRATCH/rfo"
	test_has "$CB_ERR" "^ERROR: .*the catalog does not match the archive"
	test ! -e "$SCRATCH/rfo"
'

if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
	test_skip 'mount of a damaged archive' 'no /dev/fuse or no fusermount3 (apt-get install fuse3)'
else
	for c in zstd lzo gzip; do
		test_expect_success ROOT "$c: mount: reading the damaged member is EIO, the others read" "
			a=\$(damaged $c)
			mnt=\$SCRATCH/mnt-$c
			mkdir \"\$mnt\"
			cleanup_mount \"\$mnt\"
			cbackup_run 0 mount \"\$a\" \"\$mnt\"
			test_must_fail cat \"\$mnt/stored.bin\" >/dev/null 2>\"\$SCRATCH/cat-$c\"
			test_has \"\$SCRATCH/cat-$c\" 'Input/output error'
			cat \"\$mnt/etc/hostname\" >/dev/null
			fusermount3 -u \"\$mnt\"
		"
	done
fi

test_done
