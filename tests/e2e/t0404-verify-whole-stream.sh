#!/bin/bash
# verify without a .sha256 still proves the stream whole: each codec
# checks its own end (zstd frame checksum and last frame, gzip trailer CRC
# and ISIZE, lzop end marker and block checksums) and that nothing follows
# it, and the tar stream must end with its end-of-archive blocks on a block
# boundary. An archive cut by a few bytes or with bytes appended is
# `ERROR:`, exit 1, and gets no .verified.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/e2e/lib-attacker.sh"

DUMP=$SCRATCH/dump
TMPD=$SCRATCH/tmp

test_expect_success 'setup: one archive per codec, without .sha256' '
	make_small_tree "$SCRATCH/src"
	mkdir -p "$DUMP" "$TMPD"
	for c in zstd lzo gzip 0; do
		cbackup_run 0 backup --root "$SCRATCH/src" --id "v$c" --compress "$c" \
			--dumpdir "$DUMP" --tmpdir "$TMPD"
	done
	rm -f "$DUMP"/*.sha256
'

# damaged NAME HOW: a copy of the archive of codec NAME, damaged
damaged() {
	local a out
	# the archive, not its catalog (.idx) beside it
	a=$(ls "$DUMP"/cbackup-ct-v$1-*.tar* | grep -v '\.idx$')
	out=$SCRATCH/damaged.$2.$(basename "$a")
	cp "$a" "$out"
	case $2 in
	cut*) truncate -s "-${2#cut}" "$out" ;;
	add) printf "garbage" >>"$out" ;;
	addzero) head -c 512 /dev/zero >>"$out" ;;
	esac
	echo "$out"
}

for c in zstd lzo gzip 0; do
	test_expect_success "$c: the intact archive is good" "
		a=\$(damaged $c none)
		cbackup_run 0 verify \"\$a\"
		test -f \"\$a.verified\"
	"
	for how in cut1 cut4 cut8 add; do
		test_expect_success "$c: $how is ERROR, exit 1, no .verified" "
			a=\$(damaged $c $how)
			cbackup_run 1 verify \"\$a\"
			test_has \"\$CB_ERR\" \"^ERROR: verify of .*failed - \"
			test ! -e \"\$a.verified\"
		"
	done
done

test_expect_success '0: 512 zero bytes appended to a plain tar is still a whole archive' '
	a=$(damaged 0 addzero)
	cbackup_run 0 verify "$a"
'

test_done
