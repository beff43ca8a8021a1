#!/bin/bash
# Encryption on a unit store (issues 41 and 42): with a key, every unit
# object is a sealed frame named by the keyed MAC of its unit (never a
# plain hash), the manifest is sealed behind a clear header (fingerprint,
# the set of objects it holds, sizes, time); no file name or content is in
# clear anywhere in the store. A wrong key is one error, exit 2, nothing
# written. Nights under one key share units (across nights and guests),
# never with another key's or a plain night's. restore (whole, --path),
# ls, mount, verify (with the key; without: the stored digests, saying
# contents were not checked), prune and its collection work; a flipped
# byte in a unit or a manifest is named. The reference decrypter in
# contrib/ gives a night back with stock zstd and GNU tar. Last, the same
# on S3 (a real radosgw).
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
STORE=$SCRATCH/store
CONF=$SCRATCH/cbackup.conf
KEY=$SCRATCH/key
KEY2=$SCRATCH/key2
DECRYPT=$TOP/contrib/cbackup-decrypt.py
MARK=zqxv-marker-name
CONTENT=zqxv-marker-content-line

# night ID [ARGS...]: a night of guest ID to the store
night() {
	local id=$1
	shift
	sleep 1.1
	cbackup_run 0 backup --config "$CONF" --storage offsite --root "$SRC" --id "$id" --type ct \
		--unit-size 1 "$@"
}
nights() { ls -1 "$STORE/nights/" | grep "^cbackup-ct-$1-"; }
newest() { nights "$1" | tail -n 1; }
# objects NIGHT: the unit objects its manifest holds, one a line
objects() { grep -a "^object " "$STORE/nights/$1" | cut -d" " -f2 | sort -u; }
flip() {
	python3 -c "import sys; f = open(sys.argv[1], \"r+b\"); f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 1]))" "$1" "$2"
}

test_expect_success ROOT 'setup: an encrypted night on a directory store; nothing in clear there' '
	store_setup 300
	printf "%s\n" "$CONTENT" >"$SRC/$MARK"
	cbackup_run 0 key create "$KEY"
	cbackup_run 0 key create "$KEY2"
	night 101 --encryption-key "$KEY" --notes-template "guest {{vmid}} $MARK"
	test_has "$CB_ERR" "INFO: unit store .offsite.: encrypted with key $("$CBACKUP" key show "$KEY")"
	n=$(newest 101)
	test_has <(echo "$n") "^cbackup-ct-101-.*\.tar\.zst$"
	test_must_fail grep -r -a -l -e "$MARK" -e "$CONTENT" -e usr/share/f1.txt -e "guest 101" "$STORE"
	test_lacks "$STORE/nights/$n" "^unit |^catalog |^name "
	test_has "$STORE/nights/$n" "^fingerprint "
	# every object a sealed frame, its name no SHA-256 of its bytes
	test "$(objects "$n" | wc -l)" -gt 10
	for h in $(objects "$n"); do
		f=$STORE/units/${h:0:2}/$h
		test "$(head -c 4 "$f")" = CBUF
		test "$(sha256sum <"$f" | cut -c1-64)" != "$h"
	done
	test_lacks <(ls "$SCRATCH/tmp/cbackup") "cbackup-ct-"
'

test_expect_success ROOT 'list needs no key; restore (whole, --path), ls with the key give the tree back' '
	n=$(newest 101)
	cbackup_run 0 list --config "$CONF" --storage offsite
	test_has "$CB_OUT" "cbackup-ct-101-"
	cbackup_run 0 restore --config "$CONF" "offsite:$n" "$SCRATCH/r1" --encryption-key "$KEY"
	diff -r "$SRC" "$SCRATCH/r1"
	cbackup_run 0 restore --config "$CONF" "offsite:$n" "$SCRATCH/r2" --path ./usr/share/f20.txt \
		--encryption-key "$KEY"
	cmp "$SRC/usr/share/f20.txt" "$SCRATCH/r2/usr/share/f20.txt"
	test "$(find "$SCRATCH/r2" -type f | wc -l)" = 1
	cbackup_run 0 ls --config "$CONF" "offsite:$n" ./usr/share/f1.txt --encryption-key "$KEY"
	test_has "$CB_OUT" "\./usr/share/f1\.txt$"
	test_lacks <(ls "$SCRATCH/tmp/cbackup") "cbackup-ct-"
'

test_expect_success ROOT,TMPFS 'a sealed night is fetched whole: a tmpdir too small for it says why' '
	n=$(newest 101)
	mount_tmpfs "$SCRATCH/tiny" 96k
	cbackup_run 1 restore --config "$CONF" --tmpdir "$SCRATCH/tiny" "offsite:$n" "$SCRATCH/r0" \
		--encryption-key "$KEY"
	test_has "$CB_ERR" "^ERROR: restore of .* failed - .*No space left on device"
	test ! -e "$SCRATCH/r0"
'

test_expect_success ROOT 'without the key or with another: one clear error, exit 2, nothing written' '
	n=$(newest 101)
	cbackup_run 2 restore --config "$CONF" "offsite:$n" "$SCRATCH/r3" --encryption-key "$KEY2"
	test_has "$CB_ERR" "archive was encrypted with key $("$CBACKUP" key show "$KEY"), this key is $("$CBACKUP" key show "$KEY2")"
	test ! -e "$SCRATCH/r3"
	cbackup_run 2 ls --config "$CONF" "offsite:$n" --encryption-key "$KEY2"
	test_has "$CB_ERR" "archive was encrypted with key"
	cbackup_run 2 restore --config "$CONF" "offsite:$n" "$SCRATCH/r3"
	test_has "$CB_ERR" "is encrypted: give its key with --encryption-key FILE"
	test ! -e "$SCRATCH/r3"
	test_lacks <(ls "$SCRATCH/tmp/cbackup") "cbackup-ct-"
'

test_expect_success ROOT 'dedup under one key: the next night and another guest share its units; another key shares none' '
	n1=$(newest 101)
	printf "night 2\n" >>"$SRC/var/log/syslog"
	night 101 --encryption-key "$KEY"
	test_has "$CB_ERR" "unit store .offsite.: [0-9]+ units, [0-9]+ new written .*, [1-9][0-9]* of them copied, not compressed again"
	n2=$(newest 101)
	test "$(comm -12 <(objects "$n1") <(objects "$n2") | wc -l)" -gt 10
	night 102 --encryption-key "$KEY"
	n3=$(newest 102)
	test "$(comm -12 <(objects "$n2") <(objects "$n3") | wc -l)" -gt 10
	night 103 --encryption-key "$KEY2"
	test_has "$CB_ERR" "encrypted with key $("$CBACKUP" key show "$KEY2")"
	n4=$(newest 103)
	test -z "$(comm -12 <(objects "$n2") <(objects "$n4"))"
	test -z "$(comm -12 <(objects "$n3") <(objects "$n4"))"
	cbackup_run 0 restore --config "$CONF" "offsite:$n4" "$SCRATCH/r4" --encryption-key "$KEY2"
	diff -r "$SRC" "$SCRATCH/r4"
	cbackup_run 0 restore --config "$CONF" "offsite:$n3" "$SCRATCH/r5" --encryption-key "$KEY"
	diff -r "$SRC" "$SCRATCH/r5"
'

test_expect_success ROOT 'plain and encrypted nights on one store stay apart; both restore' '
	night 104
	p=$(newest 104)
	test_has "$STORE/nights/$p" "^unit "
	grep "^unit " "$STORE/nights/$p" | cut -d" " -f2 | sort -u >"$SCRATCH/plain-units"
	test -z "$(comm -12 "$SCRATCH/plain-units" <(objects "$(newest 101)"))"
	# an encrypted night after it copies nothing of it: all its units sealed
	night 105 --encryption-key "$KEY2"
	test -z "$(comm -12 "$SCRATCH/plain-units" <(objects "$(newest 105)"))"
	cbackup_run 0 restore --config "$CONF" "offsite:$p" "$SCRATCH/r6"
	diff -r "$SRC" "$SCRATCH/r6"
	cbackup_run 0 restore --config "$CONF" "offsite:$(newest 105)" "$SCRATCH/r7" --encryption-key "$KEY2"
	diff -r "$SRC" "$SCRATCH/r7"
'

test_expect_success ROOT 'verify with the key checks contents; without it the stored digests, and says so' '
	n=$(newest 101)
	cbackup_run 0 verify --config "$CONF" "offsite:$n" --encryption-key "$KEY"
	test_has "$CB_ERR" "every unit is there and matches its digest"
	test_lacks "$CB_ERR" "not checked"
	cbackup_run 0 verify --config "$CONF" "offsite:$n"
	test_has "$CB_ERR" "every unit is there and matches its digest"
	test_has "$CB_ERR" "contents were not checked"
	cbackup_run 0 verify --config "$CONF" offsite:
	test_has "$CB_ERR" "storage .offsite.: 5 encrypted night\(s\) without their key: .* their contents were not checked"
	cbackup_run 0 verify --config "$CONF" offsite: --encryption-key "$KEY"
	test_has "$CB_ERR" "storage .offsite.: 2 encrypted night\(s\) without their key"
'

test_expect_success ROOT 'a flipped byte in a unit object is named by verify (with and without the key) and restore; the next night mends it' '
	n=$(newest 102)
	# the largest: a unit of big.bin (stored raw), which restore reads
	h=$(grep -a "^object " "$STORE/nights/$n" | sort -k3,3n | tail -n 1 | cut -d" " -f2)
	f=$STORE/units/${h:0:2}/$h
	flip "$f" 100
	cbackup_run 1 verify --config "$CONF" "offsite:$n"
	test_has "$CB_ERR" "unit .units/${h:0:2}/$h. is damaged"
	cbackup_run 1 verify --config "$CONF" "offsite:$n" --encryption-key "$KEY"
	test_has "$CB_ERR" "unit .units/${h:0:2}/$h. is damaged"
	cbackup_run 1 restore --config "$CONF" "offsite:$n" "$SCRATCH/r8" --encryption-key "$KEY"
	test_has "$CB_ERR" "unit .units/${h:0:2}/$h. is damaged"
	test ! -e "$SCRATCH/r8/usr"
	# the next night does not copy the damaged unit: it seals it again, in
	# its place. Run without a kept copy (keep-staging 0): a kept copy comes
	# with a local unit cache, and a night that reads a unit from there
	# never sees the store object (docs/object-storage.md)
	night 102 --encryption-key "$KEY" --keep-staging 0
	test_has <(objects "$(newest 102)") "^$h$"
	cbackup_run 0 verify --config "$CONF" "offsite:$n" --encryption-key "$KEY"
'

test_expect_success ROOT 'a flipped byte in a sealed manifest, a changed clear header, swapped objects, a manifest under another name: named, nothing restored' '
	n=$(newest 102)
	m=$STORE/nights/$n
	cp "$m" "$SCRATCH/m.bak"
	flip "$m" $(( $(stat -c %s "$m") - 100 ))
	cbackup_run 1 verify --config "$CONF" "offsite:$n" --encryption-key "$KEY"
	test_has "$CB_ERR" "manifest of .$n. is damaged"
	cbackup_run 1 verify --config "$CONF" "offsite:$n"
	test_has "$CB_ERR" "manifest of .$n. is damaged"
	cbackup_run 1 restore --config "$CONF" "offsite:$n" "$SCRATCH/r9" --encryption-key "$KEY"
	test_has "$CB_ERR" "manifest of .$n. is damaged"
	cp "$SCRATCH/m.bak" "$m"
	# the clear header changed and its closing digest made again: the key finds it
	python3 -c "
import hashlib, sys
t = open(sys.argv[1], \"rb\").read().replace(b\"\\nprotected 0\\n\", b\"\\nprotected 1\\n\")
body = t[:t.rindex(b\"end \")]
open(sys.argv[1], \"wb\").write(body + b\"end \" + hashlib.sha256(body).hexdigest().encode() + b\"\\n\")" "$m"
	test_has "$m" "^protected 1$"
	cbackup_run 1 restore --config "$CONF" "offsite:$n" "$SCRATCH/r9" --encryption-key "$KEY"
	test_has "$CB_ERR" "manifest of .$n. is damaged \(its sealed part does not authenticate\)"
	test ! -e "$SCRATCH/r9/usr"
	cp "$SCRATCH/m.bak" "$m"
	# two objects of the night swapped: each is named as damaged
	set -- $(grep -a "^object " "$m" | sort -k3,3n | tail -n 2 | cut -d" " -f2)
	cp "$STORE/units/${1:0:2}/$1" "$SCRATCH/o1"
	cp "$STORE/units/${2:0:2}/$2" "$STORE/units/${1:0:2}/$1"
	cbackup_run 1 restore --config "$CONF" "offsite:$n" "$SCRATCH/r9" --encryption-key "$KEY"
	test_has "$CB_ERR" "unit .units/${1:0:2}/$1. is damaged"
	test ! -e "$SCRATCH/r9/usr"
	cp "$SCRATCH/o1" "$STORE/units/${1:0:2}/$1"
	# another night'"'"'s sealed manifest under this name: its sealed name differs
	cp "$STORE/nights/$(newest 101)" "$m"
	cbackup_run 1 restore --config "$CONF" "offsite:$n" "$SCRATCH/r9" --encryption-key "$KEY"
	test_has "$CB_ERR" "manifest of .$n. is incomplete or names another night"
	test ! -e "$SCRATCH/r9/usr"
	cp "$SCRATCH/m.bak" "$m"
'

test_expect_success ROOT 'mount with the key shows the night' '
	if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
		echo "# no /dev/fuse or fusermount3: mount not tried"
	else
		mkdir "$SCRATCH/mnt"
		cleanup_mount "$SCRATCH/mnt"
		cbackup_run 0 mount --config "$CONF" "offsite:$(newest 101)" "$SCRATCH/mnt" --encryption-key "$KEY"
		cmp "$SRC/usr/share/f20.txt" "$SCRATCH/mnt/usr/share/f20.txt"
		fusermount3 -u "$SCRATCH/mnt"
		wait_for 10 test_must_fail mountpoint -q "$SCRATCH/mnt"
	fi
'

test_expect_success ROOT 'the reference decrypter gives a night back from the store with stock zstd and GNU tar' '
	n=$(newest 101)
	mkdir "$SCRATCH/x1"
	python3 "$DECRYPT" "$KEY" "$STORE/nights/$n" - | zstd -dc | tar --numeric-owner -xpf - -C "$SCRATCH/x1"
	diff -r "$SRC" "$SCRATCH/x1"
	test_must_fail python3 "$DECRYPT" "$KEY2" "$STORE/nights/$n" - >/dev/null 2>err
	test_has err "archive was encrypted with key"
'

test_expect_success ROOT 'prune without the key removes an encrypted night; the collection keeps what others use' '
	n1=$(nights 101 | head -n 1)
	n2=$(newest 101)
	only=$(comm -23 <(objects "$n1") <(cat <(for x in $(ls "$STORE/nights"); do [ "$x" = "$n1" ] || objects "$x"; done) | sort -u) | head -n 1)
	test -n "$only"
	cbackup_run 0 prune 101 --config "$CONF" --storage offsite --prune-backups keep-last=1
	test "$(nights 101)" = "$n2"
	test ! -e "$STORE/units/${only:0:2}/$only"
	for n in $(ls "$STORE/nights"); do
		for h in $(objects "$n"); do test -f "$STORE/units/${h:0:2}/$h"; done
	done
	cbackup_run 0 restore --config "$CONF" "offsite:$n2" "$SCRATCH/r10" --encryption-key "$KEY"
	diff -r "$SRC" "$SCRATCH/r10"
	cbackup_run 0 verify --config "$CONF" offsite:
'

need_rgw 'an encrypted night on S3'

test_expect_success ROOT 'on radosgw: an encrypted night, restored with the key, refused with another, verified without' '
	mkdir "$SCRATCH/s3dump"
	cat >"$SCRATCH/s3.conf" <<-EOF
	dumpdir = $SCRATCH/s3dump
	tmpdir = $SCRATCH/tmp
	archive-name = cbackup
	[storage cloud]
	type = s3
	endpoint = $CB_S3_ENDPOINT
	bucket = enc
	prefix = cb
	EOF
	curl -sf --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -X PUT "$CB_S3_ENDPOINT/enc" >/dev/null
	cbackup_run 0 backup --config "$SCRATCH/s3.conf" --storage cloud --root "$SRC" --id 201 --type ct \
		--encryption-key "$KEY"
	test_has "$CB_ERR" "encrypted with key $("$CBACKUP" key show "$KEY")"
	cbackup_run 0 list --config "$SCRATCH/s3.conf" --storage cloud
	n=$(grep -o "cbackup-ct-201-[^ ]*\.tar\.zst" "$CB_OUT" | head -n 1)
	test -n "$n"
	cbackup_run 0 restore --config "$SCRATCH/s3.conf" "cloud:$n" "$SCRATCH/s1" --encryption-key "$KEY"
	diff -r "$SRC" "$SCRATCH/s1"
	cbackup_run 2 restore --config "$SCRATCH/s3.conf" "cloud:$n" "$SCRATCH/s2" --encryption-key "$KEY2"
	test_has "$CB_ERR" "archive was encrypted with key"
	test ! -e "$SCRATCH/s2"
	cbackup_run 0 verify --config "$SCRATCH/s3.conf" "cloud:$n"
	test_has "$CB_ERR" "contents were not checked"
'

test_done
