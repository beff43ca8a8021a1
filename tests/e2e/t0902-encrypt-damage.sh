#!/bin/bash
# Damaged encrypted archives (issue 42): a flipped byte in a unit or in the
# catalog, a truncated archive, two units swapped, a unit copied from
# another guest's archive under the same key, another guest's archive and
# catalog put in its place: verify (with and without the key) and restore
# each find it, restore names the unit and writes nothing.
. "$(dirname "$0")/lib.sh"

DUMP=$SCRATCH/dump
KEY=$SCRATCH/key

# frames ARCHIVE: "NUMBER E_OFF E_LEN" per frame of its catalog's table
frames() {
	python3 -c "import struct, sys
x = open(sys.argv[1] + \".idx\", \"rb\").read()
for i in range(struct.unpack(\"<Q\", x[48:56])[0]):
    r = x[72 + 96 * i:72 + 96 * (i + 1)]
    print(i + 1, *struct.unpack(\"<QQ\", r[16:32]))" "$1"
}

# copy_of ID: a copy of the guest's archive and side files in a new dir
copy_of() {
	local a d=$SCRATCH/c-$RANDOM
	a=$(find_archive "$DUMP" ct "$1" .zst.cbenc)
	mkdir "$d" && cp "$a" "$a.idx" "$a.sha256" "$d/"
	echo "$d/$(basename "$a")"
}

# flip FILE OFFSET: invert one byte
flip() {
	python3 -c "import sys
f = open(sys.argv[1], \"r+b\"); f.seek(int(sys.argv[2])); b = f.read(1)
f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0xff]))" "$1" "$2"
}

# put FROM FROM_OFF TO TO_OFF LEN: bytes of FROM over TO
put() {
	dd if="$1" of="$3" bs=4096 skip=$(($2 / 4096)) seek=$(($4 / 4096)) \
		count=$(($5 / 4096)) conv=notrunc status=none
}

# fails_everywhere ARCHIVE PATTERN: restore and verify (key or not) fail
fails_everywhere() {
	cbackup_run 1 restore "$1" "$SCRATCH/out" --encryption-key "$KEY"
	test_has "$CB_ERR" "$2"
	test ! -e "$SCRATCH/out"
	cbackup_run 1 verify "$1" --encryption-key "$KEY"
	cbackup_run 1 verify "$1"
	test ! -e "$1.verified"
}

test_expect_success 'setup: two guests with the same layout, different data, one key' '
	cbackup_run 0 key create "$KEY"
	mkdir -p "$DUMP" "$SCRATCH/tmp"
	for g in 201 202; do
		make_small_tree "$SCRATCH/src$g" "guest$g"
		head -c 6M /dev/urandom >"$SCRATCH/src$g/srv/data/big.bin"
		cbackup_run 0 backup --root "$SCRATCH/src$g" --id $g --type ct --unit-size 1 \
			--tmpdir "$SCRATCH/tmp" --dumpdir "$DUMP" --encryption-key "$KEY"
	done
	a=$(copy_of 201)
	cbackup_run 0 verify "$a" --encryption-key "$KEY"
	test "$(frames "$a" | wc -l)" -ge 5
'

test_expect_success 'a flipped byte in a unit: named by verify and restore, nothing restored' '
	a=$(copy_of 201)
	set -- $(frames "$a" | sed -n 3p)
	flip "$a" $(($2 + 1000))
	fails_everywhere "$a" "unit 3 of .* failed authentication: damaged"
	cbackup_run 1 verify "$a"
	test_has "$CB_ERR" "unit 3 of .* is damaged: its SHA-256 is not the catalog"
	# --path: a member in the damaged unit fails, naming it; one elsewhere
	# comes back (only the units that hold it are decrypted)
	cbackup_run 1 restore "$a" "$SCRATCH/out" --encryption-key "$KEY" --path ./srv/data/big.bin
	test_has "$CB_ERR" "unit 3 of .* failed authentication"
	test ! -e "$SCRATCH/out"
	cbackup_run 0 restore "$a" "$SCRATCH/out" --encryption-key "$KEY" --path ./etc/hostname
	cmp "$SCRATCH/src201/etc/hostname" "$SCRATCH/out/etc/hostname"
	rm -rf "$SCRATCH/out"
'

test_expect_success 'restore checks each unit'\''s tag itself, not the stored checksums' '
	a=$(copy_of 201)
	set -- $(frames "$a" | sed -n 2p)
	flip "$a" $(($2 + 100))
	cbackup_run 1 restore "$a" "$SCRATCH/out" --encryption-key "$KEY"
	test_has "$CB_ERR" "unit 2 of .* failed authentication"
	test ! -e "$SCRATCH/out"
'

test_expect_success 'restore --salvage: the damaged unit named, its members lost, the rest restored' '
	a=$(copy_of 201)
	set -- $(frames "$a" | sed -n 3p)
	flip "$a" $(($2 + 1000))
	cbackup_run 1 restore "$a" "$SCRATCH/out" --encryption-key "$KEY" --salvage
	test_has "$CB_ERR" "ERROR: unit 3 of .* failed authentication: damaged: its members are lost"
	test_has "$CB_ERR" "ERROR: lost: .\./srv/data/big\.bin."
	cmp "$SCRATCH/src201/etc/hostname" "$SCRATCH/out/etc/hostname"
	test ! -e "$SCRATCH/out/srv/data/big.bin"
	rm -rf "$SCRATCH/out"
'

test_expect_success 'a flipped byte in the sealed catalog or in its frame table' '
	a=$(copy_of 201)
	flip "$a.idx" $(($(stat -c %s "$a.idx") - 40))
	fails_everywhere "$a" "the encrypted catalog failed authentication"
	cbackup_run 1 verify "$a"
	test_has "$CB_ERR" "checksum mismatch: .* for the catalog"
	a=$(copy_of 201)
	flip "$a.idx" $((72 + 96 + 40))   # the id of frame 2
	fails_everywhere "$a" "the encrypted catalog failed authentication"
'

test_expect_success 'a truncated archive' '
	a=$(copy_of 201)
	truncate -s -8192 "$a"
	fails_everywhere "$a" "truncated"
'

test_expect_success 'two units of the same size swapped' '
	a=$(copy_of 201)
	set -- $(frames "$a" | awk "\$3 == prev { print p, \$2, \$3; exit } { prev = \$3; p = \$2 }")
	test -n "$3"
	cp "$a" "$SCRATCH/orig"
	put "$SCRATCH/orig" $1 "$a" $2 $3
	put "$SCRATCH/orig" $2 "$a" $1 $3
	fails_everywhere "$a" "unit [0-9]+ of .* is not the unit its catalog names there"
'

test_expect_success 'a unit copied from another guest'\''s archive under the same key' '
	a=$(copy_of 201)
	b=$(find_archive "$DUMP" ct 202 .zst.cbenc)
	set -- $(frames "$a" | sed -n 3p)
	test "$(frames "$b" | sed -n 3p)" = "$*"
	put "$b" $2 "$a" $2 $3
	fails_everywhere "$a" "unit 3 of .* is not the unit its catalog names there"
'

test_expect_success 'another guest'\''s archive and catalog under this one'\''s name' '
	a=$(copy_of 201)
	b=$(find_archive "$DUMP" ct 202 .zst.cbenc)
	cp "$b" "$a"
	cp "$b.idx" "$a.idx"
	cbackup_run 1 restore "$a" "$SCRATCH/out" --encryption-key "$KEY"
	test_has "$CB_ERR" "belongs to another archive .*202"
	test ! -e "$SCRATCH/out"
'

test_expect_success 'the intact archives still restore' '
	for g in 201 202; do
		cbackup_run 0 restore "$(find_archive "$DUMP" ct $g .zst.cbenc)" "$SCRATCH/r$g" \
			--encryption-key "$KEY"
		compare_trees --no-xattr "$SCRATCH/src$g" "$SCRATCH/r$g"
	done
'

test_done
