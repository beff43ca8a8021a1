#!/bin/bash
# Issue 25 item 1: every unit is checked, in every codec. 4 bytes flipped
# in a stored (incompressible) unit: the codec's own tester (zstd -t,
# lzop -t, gzip -t) fails; `cbackup verify` without the .sha256 fails,
# names the unit and the member in it, and writes no .verified; `restore`
# fails naming the archive; `restore --path` of the member fails, as does
# a read of it through `cbackup mount` (EIO). `restore` with a .sha256
# that does not match fails unless --ignore-checksum.
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

test_expect_success 'restore: a .sha256 that does not match fails, --ignore-checksum restores' '
	a=$(find_archive "$DUMP" ct izstd .zst)
	d=$SCRATCH/badsum
	mkdir "$d"
	cp "$a" "$a.idx" "$d/"
	b=$d/$(basename "$a")
	echo "0000000000000000000000000000000000000000000000000000000000000000  $(basename "$a")" >"$b.sha256"
	cbackup_run 1 restore "$b" "$SCRATCH/rs1"
	test_has "$CB_ERR" "ERROR: .*$(basename "$a").*(checksum|sha256)"
	cbackup_run 0 restore --ignore-checksum "$b" "$SCRATCH/rs2"
	cmp "$SRC/stored.bin" "$SCRATCH/rs2/stored.bin"
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
