#!/bin/bash
# cbackup verify ARCHIVE: checks the .sha256, decompresses and walks the
# whole tar; exit 0 and a .verified marker for a good archive; exit 1
# naming the problem for a flipped byte (checksum mismatch), a truncated
# file, random bytes, a corrupt tar. `list` shows verified yes/no.
. "$(dirname "$0")/lib.sh"

D=$SCRATCH/dump
BAD=$SCRATCH/bad

test_expect_success 'setup: a zstd and an uncompressed archive' '
	make_small_tree "$SCRATCH/ct101"
	head -c 2M /dev/urandom >"$SCRATCH/ct101/srv/data/big.bin"
	mkdir "$SCRATCH/tmp" "$D" "$BAD"
	cbackup_run 0 backup --root "$SCRATCH/ct101" --id 101 --tmpdir "$SCRATCH/tmp" --dumpdir "$D"
	cbackup_run 0 backup --root "$SCRATCH/ct101" --id 102 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" --compress 0
	find_archive "$D" ct 101 .zst
	find_archive "$D" ct 102 ""
'

test_expect_success 'list before verify: checksum yes, verified no' '
	cbackup_run 0 list --dumpdir "$D"
	cat "$CB_OUT"
	head -n 1 "$CB_OUT" | grep -E "^ID +TYPE +DATE +SIZE +CODEC +PROTECTED +CHECKSUM +VERIFIED +ARCHIVE +NOTES$"
	grep -E "^101 +ct +[0-9-]{10} [0-9:]{8} +[0-9]+[KMG]?B +zstd +no +yes +no +vzdump-lxc-101-" "$CB_OUT"
	grep -E "^102 +ct .* none +no +yes +no +vzdump-lxc-102-" "$CB_OUT"
'

test_expect_success 'a good archive: exit 0, checksum matches, .verified written' '
	a=$(find_archive "$D" ct 101 .zst)
	cbackup_run 0 verify "$a"
	grep -E "^INFO: archive .* is good: [0-9]+ entries, .*checksum matches" "$CB_ERR"
	test -s "$a.verified"
	a=$(find_archive "$D" ct 102 "")
	cbackup_run 0 verify "$a"
	test -s "$a.verified"
'

test_expect_success 'list after verify: verified yes; list ID shows one guest' '
	cbackup_run 0 list 101 --dumpdir "$D"
	cat "$CB_OUT"
	grep -E "^101 +ct .* zstd +no +yes +yes +vzdump-lxc-101-" "$CB_OUT"
	test_must_fail grep "^102 " "$CB_OUT"
	test "$(wc -l <"$CB_OUT")" = 2
'

test_expect_success 'list shows .protected' '
	a=$(find_archive "$D" ct 102 "")
	: >"$a.protected"
	cbackup_run 0 list --dumpdir "$D"
	grep -E "^102 +ct .* none +yes +yes +yes +vzdump-lxc-102-" "$CB_OUT"
	rm "$a.protected"
'

test_expect_success 'a flipped byte: exit 1, "checksum mismatch", no .verified' '
	a=$(find_archive "$D" ct 101 .zst)
	cp "$a" "$BAD/flip.tar.zst"
	cp "$a.sha256" "$BAD/flip.tar.zst.sha256"
	size=$(stat -c %s "$BAD/flip.tar.zst")
	byte=$(od -An -tu1 -j $((size / 2)) -N1 "$BAD/flip.tar.zst" | tr -d " ")
	printf "\\$(printf %o $((byte ^ 1)))" | dd of="$BAD/flip.tar.zst" bs=1 seek=$((size / 2)) conv=notrunc status=none
	test_must_fail cmp -s "$a" "$BAD/flip.tar.zst"
	cbackup_run 1 verify "$BAD/flip.tar.zst"
	grep -E "^ERROR: verify of .*flip.tar.zst.* failed - checksum mismatch" "$CB_ERR"
	test ! -e "$BAD/flip.tar.zst.verified"
'

test_expect_success 'a truncated archive with its .sha256: exit 1, checksum mismatch' '
	a=$(find_archive "$D" ct 101 .zst)
	head -c $(($(stat -c %s "$a") * 2 / 3)) "$a" >"$BAD/cut.tar.zst"
	cp "$a.sha256" "$BAD/cut.tar.zst.sha256"
	cbackup_run 1 verify "$BAD/cut.tar.zst"
	grep -E "^ERROR: .*checksum mismatch" "$CB_ERR"
'

test_expect_success 'a truncated zstd archive without .sha256: exit 1 naming truncation' '
	a=$(find_archive "$D" ct 101 .zst)
	head -c $(($(stat -c %s "$a") * 2 / 3)) "$a" >"$BAD/trunc.tar.zst"
	cbackup_run 1 verify "$BAD/trunc.tar.zst"
	grep -E "^WARN: no checksum file" "$CB_ERR"
	grep -iE "^ERROR: verify of .*trunc.tar.zst.* failed - .*(truncat|corrupt|unexpected end)" "$CB_ERR"
	test ! -e "$BAD/trunc.tar.zst.verified"
'

test_expect_success 'a truncated tar (inside a file'"'"'s data), no .sha256: exit 1' '
	a=$(find_archive "$D" ct 102 "")
	head -c $(($(stat -c %s "$a") / 2)) "$a" >"$BAD/trunc.tar"
	cbackup_run 1 verify "$BAD/trunc.tar"
	grep -iE "^ERROR: verify of .* failed - .*(truncat|corrupt|unexpected end|premature)" "$CB_ERR"
'

test_expect_success 'a damaged tar header after good entries, no .sha256: exit 1 naming corruption' '
	a=$(find_archive "$D" ct 102 "")
	cp "$a" "$BAD/hdr.tar"
	# the header block of ./var/log/messages: break its checksum field
	off=$(grep -obUa "\./var/log/messages" "$BAD/hdr.tar" | cut -d: -f1 |
	      while read -r o; do [ $((o % 512)) = 0 ] && echo "$o" && break; done)
	test -n "$off"
	printf "77777777" | dd of="$BAD/hdr.tar" bs=1 seek=$((off + 148)) conv=notrunc status=none
	cbackup_run 1 verify "$BAD/hdr.tar"
	grep -iE "^ERROR: verify of .* failed - .*(corrupt|damaged)" "$CB_ERR"
'

test_expect_success 'random bytes: exit 1' '
	head -c 100000 /dev/urandom >"$BAD/random.tar.zst"
	cbackup_run 1 verify "$BAD/random.tar.zst"
	grep -E "^ERROR: verify of .*random.tar.zst.* failed - " "$CB_ERR"
	test ! -e "$BAD/random.tar.zst.verified"
'

test_expect_success 'a missing archive: exit 1 naming it' '
	cbackup_run 1 verify "$BAD/nonexistent.tar.zst"
	grep -F "nonexistent.tar.zst" "$CB_ERR"
'

test_expect_success 'a .sha256 that is not sha256sum output: exit 1' '
	a=$(find_archive "$D" ct 101 .zst)
	cp "$a" "$BAD/badsum.tar.zst"
	echo "not a checksum" >"$BAD/badsum.tar.zst.sha256"
	cbackup_run 1 verify "$BAD/badsum.tar.zst"
	grep -F "badsum.tar.zst.sha256" "$CB_ERR"
'

test_done
