#!/bin/bash
# Units copied from the previous archive (issue 27): a night's backup copies
# the units whose key the guest's previous archive has, compresses the rest,
# and the archive is byte for byte the one `--reuse 0` writes from the same
# staged tree (each night's reference goes to a dump dir of its own, so that
# it never becomes the previous archive). A member changed with its size and
# mtime kept is never matched to an old unit; a damaged previous archive is
# said, and what follows the damage is compressed.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
DUMP=$SCRATCH/dump
PY=python3

make_tree() {
	mkdir -p "$DUMP" "$SCRATCH/tmp"
	make_reuse_tree "$SRC" 400
}

# night [ARGS...]: a backup of the staged tree (kept between nights)
night() {
	sleep 1.1   # archive names go by the second
	cbackup_run 0 backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$DUMP" --keep-staging 1 --unit-size 1 "$@"
}

newest() { ls -1 "$1"/vzdump-lxc-101-*.tar"$2" | tail -n 1; }

# same_as_no_reuse EXT: `--reuse 0` on the same staged tree writes the same bytes
same_as_no_reuse() {
	local ref=$SCRATCH/ref-$RANDOM
	mkdir "$ref"
	sleep 1.1
	cbackup_run 0 backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$ref" --keep-staging 1 --unit-size 1 --reuse 0 ${2:+--compress $2}
	cmp "$(newest "$DUMP" "$1")" "$(newest "$ref" "$1")"
	# its checksum file is right too (the copied bytes are hashed apart)
	(cd "$DUMP" && sha256sum --quiet -c "$(basename "$(newest "$DUMP" "$1")").sha256")
}

# idx_segs IDX: the catalog's segments, "U_OFF U_LEN C_OFF C_LEN" a line
idx_segs() {
	$PY -c "import struct, sys
d = open(sys.argv[1], \"rb\").read()
ne, nu, sl = struct.unpack(\"<QQQ\", d[16:40])
off = 64 + ne * 64 + (ne * 4 + 7) // 8 * 8 + nu * 24 + sl
n = struct.unpack(\"<Q\", d[off:off + 8])[0]
for i in range(n):
    print(*struct.unpack(\"<QQQQ\", d[off + 8 + i * 96:off + 40 + i * 96]))" "$1"
}

# aligned_units IDX: more than 8 units, each at a 4 KiB multiple and 4 KiB
# long (padded: clones need aligned offsets)
aligned_units() {
	idx_segs "$1" | awk '$3 % 4096 || $4 % 4096 { print "unaligned: " $0; bad = 1 }
		END { if (NR <= 8) print NR " segments"; exit bad || NR <= 8 }'
}

# counts: "REUSED COMPRESSED" from the log line of the last run
counts() {
	sed -n 's/.*INFO: reused \([0-9]*\) units .*, compressed \([0-9]*\) units (.*/\1 \2/p' "$CB_ERR"
}

test_expect_success ROOT 'night 1: nothing to copy from; the catalog has a key per unit' '
	make_tree
	night
	test_has "$CB_ERR" "INFO: reused 0 units \(0B\) from no previous archive, compressed [0-9]+ units"
	read -r reused compressed <<<"$(counts)"
	test "$compressed" -gt 8
	$PY -c "import struct, sys; d = open(sys.argv[1], \"rb\").read(); sys.exit(0 if struct.unpack(\"<Q\", d[56:64])[0] & 1 else 1)" \
		"$(newest "$DUMP" .zst).idx"
	same_as_no_reuse .zst
'

test_expect_success ROOT 'night 2, nothing changed: every unit copied, the same bytes as reuse 0' '
	prev=$(basename "$(newest "$DUMP" .zst)")
	night --output-format json
	test_has "$CB_ERR" "INFO: reused [0-9]+ units \([0-9.]+MiB\) from $prev, compressed 0 units \(0B\)"
	$PY -c "import json, sys; g = json.load(open(sys.argv[1]))[\"guests\"][0]
assert g[\"reused_units\"] > 8 and g[\"compressed_units\"] == 0 and g[\"reused_from\"] == sys.argv[2], g" \
		"$CB_OUT" "$prev"
	same_as_no_reuse .zst
	cbackup_run 0 verify "$(newest "$DUMP" .zst)"
	zstd -dc "$(newest "$DUMP" .zst)" | tar -tf - >/dev/null
	# zstd units are padded to 4 KiB (clones need aligned offsets)
	aligned_units "$(newest "$DUMP" .zst).idx"
'

test_expect_success ROOT 'a file only read in the guest (its atime moved) changes no unit' '
	# archives carry no atime (as the gnu format of GNU tar): a guest that
	# reads a file (relatime moves its atime once a day) would otherwise
	# change its unit every night
	touch -a -d "2001-02-03 04:05:06.789" "$SRC/usr/share/f300.txt" "$SRC/var/log/syslog"
	night
	read -r reused compressed <<<"$(counts)"
	test "$reused" -gt 8
	test "$compressed" = 0
	zstd -dc "$(newest "$DUMP" .zst)" | tar --format=posix -tvf - >/dev/null
	same_as_no_reuse .zst
'

test_expect_success ROOT 'a member changed with its size and mtime kept is compressed, never copied' '
	f=$SRC/usr/share/f200.txt
	touch -r "$f" "$SCRATCH/mtime.ref"
	size=$(stat -c %s "$f")
	printf "CHANGED" | dd of="$f" bs=1 seek=5000 conv=notrunc status=none
	touch -r "$SCRATCH/mtime.ref" "$f"
	test "$(stat -c %s "$f")" = "$size"
	night
	read -r reused compressed <<<"$(counts)"
	test "$reused" -gt 8
	test "$compressed" -ge 1
	zstd -dc "$(newest "$DUMP" .zst)" | tar -xOf - ./usr/share/f200.txt >"$SCRATCH/got"
	cmp "$f" "$SCRATCH/got"
	same_as_no_reuse .zst
'

test_expect_success ROOT 'members added and removed change only the units around them' '
	before=$(newest "$DUMP" .zst)
	rm "$SRC/usr/share/f10.txt"
	seq 5 5 90000 >"$SRC/usr/share/f10b.txt"
	printf "appended\n" >>"$SRC/var/log/syslog"
	night
	read -r reused compressed <<<"$(counts)"
	# three changes: at most two units each, the rest copied (about 15
	# units in all: never every unit after a change)
	read -r reused compressed <<<"$(counts)"
	test "$compressed" -le 6
	test "$reused" -ge $((2 * compressed))
	same_as_no_reuse .zst
'

test_expect_success ROOT 'a damaged previous archive: a WARN line, the rest compressed, the same bytes' '
	prev=$(newest "$DUMP" .zst)
	size=$(stat -c %s "$prev")
	$PY -c "import sys; f = open(sys.argv[1], \"r+b\"); f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0xff]))" \
		"$prev" $((size / 2))
	night
	test_has "$CB_ERR" "WARN: previous archive .* damaged at compressed offset [0-9]+: compressing the rest"
	read -r reused compressed <<<"$(counts)"
	test "$compressed" -gt 2
	same_as_no_reuse .zst
	cbackup_run 0 verify "$(newest "$DUMP" .zst)"
'

# last_seg IDX: "START MIDDLE", compressed offsets of the archive's last segment
last_seg() { idx_segs "$1" | tail -n 1 | awk '{ print $3, $3 + int($4 / 2) }'; }

test_expect_success ROOT 'copies are checked by unit CRC-32s, the last unit by its SHA-256: damaged, said' '
	# nothing changed: every unit copied, each checked before it is
	night --verbose
	test_has "$CB_ERR" "INFO: reused units checked: [1-9][0-9]* by the catalog.s unit CRC-32s, 1 by their SHA-256"
	# the archive'"'"'s last unit has no unit after it to close its CRC-32:
	# its SHA-256 finds a damaged byte there
	prev=$(newest "$DUMP" .zst)
	read -r start mid <<<"$(last_seg "$prev.idx")"
	$PY -c "import sys; f = open(sys.argv[1], \"r+b\"); f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0xff]))" \
		"$prev" "$mid"
	night
	test_has "$CB_ERR" "WARN: previous archive .* damaged at compressed offset $start: compressing the rest"
	same_as_no_reuse .zst
'

test_expect_success ROOT 'a previous archive without its catalog: said, everything compressed' '
	mv "$(newest "$DUMP" .zst).idx" "$SCRATCH/idx.away"
	night
	test_has "$CB_ERR" "no units reused from the previous archive: its catalog is missing or damaged"
	test_has "$CB_ERR" "INFO: reused 0 units"
	same_as_no_reuse .zst
'

test_expect_success ROOT 'lzo: units copied too (no padding), the same bytes as reuse 0' '
	night --compress lzo
	night --compress lzo
	read -r reused compressed <<<"$(counts)"
	test "$reused" -gt 8
	test "$compressed" = 0
	same_as_no_reuse .lzo lzo
	lzop -dc "$(newest "$DUMP" .lzo)" | tar -tf - >/dev/null
'

test_expect_success ROOT 'gzip: one member per unit, units copied, the same bytes as reuse 0' '
	night --compress gzip
	night --compress gzip
	read -r reused compressed <<<"$(counts)"
	test "$reused" -gt 8
	test "$compressed" = 0
	same_as_no_reuse .gz gzip
	gzip -t "$(newest "$DUMP" .gz)"
	gzip -dc "$(newest "$DUMP" .gz)" | tar -tf - >/dev/null
	tar -xzOf "$(newest "$DUMP" .gz)" ./usr/share/f200.txt >"$SCRATCH/got"
	cmp "$SRC/usr/share/f200.txt" "$SCRATCH/got"
	cbackup_run 0 verify "$(newest "$DUMP" .gz)"
	# every unit padded to 4 KiB (an empty member with an FEXTRA field)
	aligned_units "$(newest "$DUMP" .gz).idx"
'

test_expect_success ROOT 'gzip: a changed member is compressed, the rest copied, GNU tar reads it' '
	printf "gzip night\n" >>"$SRC/var/log/syslog"
	night --compress gzip
	read -r reused compressed <<<"$(counts)"
	test "$reused" -gt 8
	test "$compressed" -ge 1
	same_as_no_reuse .gz gzip
	tar -xzOf "$(newest "$DUMP" .gz)" ./var/log/syslog >"$SCRATCH/got"
	cmp "$SRC/var/log/syslog" "$SCRATCH/got"
'

test_expect_success ROOT 'pigz (threaded gzip): units copied too, the same bytes as reuse 0' '
	night --compress gzip --pigz 2
	night --compress gzip --pigz 2
	read -r reused compressed <<<"$(counts)"
	test "$reused" -gt 8
	test "$compressed" = 0
	same_as_no_reuse .gz "gzip --pigz 2"
	gzip -t "$(newest "$DUMP" .gz)"
'

test_done
