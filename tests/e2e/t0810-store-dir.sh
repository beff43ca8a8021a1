#!/bin/bash
# A unit store on a plain directory (layout = store, issue 41): each unit
# one file named by the SHA-256 of its bytes, shared by every night and
# guest; each night a manifest written last. The units of a night, in its
# manifest's order, are the same .tar.zst as a classic archive of the same
# staged tree (stock zstd and GNU tar read it); a night stores only what
# changed, a second guest with the same tree almost nothing; a damaged
# unit is mended by the next night that has its bytes.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
STORE=$SCRATCH/store
export ARCHIVE_NAME=cbackup

make_tree() {
	mkdir -p "$STORE" "$SCRATCH/tmp"
	make_reuse_tree "$SRC" 400
}

# night [ARGS...]: guest 101 (kept staging copy) into the store
night() {
	sleep 1.1   # names go by the second
	cbackup_run 0 backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$STORE" --layout store --archive-name cbackup --keep-staging 1 \
		--unit-size 1 "$@"
}

newest_night() { ls -1 "$STORE/nights/" | grep "^cbackup-ct-${1:-101}-" | tail -n 1; }

# units_of NIGHT: its archive, the units concatenated in manifest order
units_of() {
	local h l
	grep '^unit ' "$STORE/nights/$1" | while read -r _ h l; do
		cat "$STORE/units/${h:0:2}/$h"
	done
}

# stored: "WRITTEN PRESENT COPIED" from the last run's store line
stored() {
	sed -n "s/.*INFO: unit store '[^']*': [0-9]* units, \([0-9]*\) new written .*, \([0-9]*\) already stored .*, \([0-9]*\) of them copied.*/\1 \2 \3/p" "$CB_ERR"
}

# flip_byte FILE OFFSET: one byte inverted in place
flip_byte() {
	python3 -c "import sys; f = open(sys.argv[1], \"r+b\"); f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0xff]))" "$1" "$2"
}

store_bytes() { du -sb "$STORE/units" | cut -f1; }

test_expect_success ROOT 'night 1: units and a manifest, no archive file; stock zstd and tar read the units' '
	make_tree
	night
	n=$(newest_night)
	test -n "$n"
	test_lacks <(ls "$STORE") "\.tar\.zst$"
	test "$(find "$STORE/units" -type f | wc -l)" -gt 8
	units_of "$n" >"$SCRATCH/n1.tar.zst"
	test "$(sha256sum <"$SCRATCH/n1.tar.zst" | cut -d" " -f1)" = \
		"$(sed -n "s/^sha256 //p" "$STORE/nights/$n")"
	# every unit is named by its digest
	for f in $(find "$STORE/units" -type f | head -20); do
		test "$(sha256sum <"$f" | cut -d" " -f1)" = "$(basename "$f")"
	done
	mkdir "$SCRATCH/out1"
	zstd -dc "$SCRATCH/n1.tar.zst" | tar -x -C "$SCRATCH/out1"
	diff -r "$SRC" "$SCRATCH/out1"
'

test_expect_success ROOT 'the units are byte for byte the classic archive of the same staged tree' '
	mkdir "$SCRATCH/classic"
	night
	n=$(newest_night)
	sleep 1.1
	cbackup_run 0 backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/classic" --archive-name cbackup --keep-staging 1 \
		--unit-size 1 --reuse 0
	units_of "$n" >"$SCRATCH/n2.tar.zst"
	cmp "$SCRATCH/n2.tar.zst" "$SCRATCH/classic/"cbackup-ct-101-*.tar.zst
'

test_expect_success ROOT 'a night after a small change writes only the units around it, copies the rest' '
	before=$(store_bytes)
	printf "appended\n" >>"$SRC/var/log/syslog"
	seq 3 3 30000 >"$SRC/usr/share/f7.txt"
	night
	read -r written present copied <<<"$(stored)"
	test "$written" -ge 1
	test "$written" -le 6
	test "$copied" -gt 8
	test_has "$CB_ERR" "INFO: reused [0-9]+ units .* from cbackup-ct-101-"
	grew=$(( $(store_bytes) - before ))
	# a tenth of a night at most (the archive is some 5 MB)
	test "$grew" -lt $(( $(wc -c <"$SCRATCH/n1.tar.zst") / 10 ))
	units_of "$(newest_night)" | zstd -dc | tar -xOf - ./usr/share/f7.txt >"$SCRATCH/got"
	cmp "$SRC/usr/share/f7.txt" "$SCRATCH/got"
'

test_expect_success ROOT 'another guest with the same tree adds no unit of data, and compresses none again' '
	before=$(store_bytes)
	sleep 1.1
	cbackup_run 0 backup --root "$SRC" --id 102 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$STORE" --layout store --archive-name cbackup --unit-size 1
	read -r written present copied <<<"$(stored)"
	test "$present" -gt 8
	# its first night copies the units 101 has (their keys in its catalog)
	test "$copied" -gt 8
	test_has "$CB_ERR" "INFO: reused [0-9]+ units .* from cbackup-ct-101-.*, compressed [0-2] units"
	# only the tar stream end may differ: its last unit
	test "$written" -le 1
	test $(( $(store_bytes) - before )) -lt 100000
	test -n "$(newest_night 102)"
'

test_expect_success ROOT 'a damaged unit is not copied, and the next night that has its bytes mends it' '
	n=$(newest_night)
	h=$(grep "^unit " "$STORE/nights/$n" | sed -n 3p | cut -d" " -f2)
	f=$STORE/units/${h:0:2}/$h
	flip_byte "$f" 100
	test "$(sha256sum <"$f" | cut -d" " -f1)" != "$h"
	# the local unit cache would give the good bytes: this night reads the store
	rm -rf "$SCRATCH/tmp/cbackup/cbackup-101.stage.units"
	night
	test "$(sha256sum <"$f" | cut -d" " -f1)" = "$h"
	units_of "$(newest_night)" | zstd -dc | tar -tf - >/dev/null
'

test_expect_success ROOT 'with a kept staging copy, units are taken on trust: unchanged staged data is not read' '
	night
	printf "more\n" >>"$SRC/var/log/syslog"
	night --verbose
	test_has "$CB_ERR" "INFO: taken on trust: [1-9][0-9]* units, [0-9.]+[KM]iB of staged data not read"
	units_of "$(newest_night)" | zstd -dc | tar -xOf - ./var/log/syslog >"$SCRATCH/got"
	cmp "$SRC/var/log/syslog" "$SCRATCH/got"
	test "$(units_of "$(newest_night)" | sha256sum | cut -d" " -f1)" = \
		"$(sed -n "s/^sha256 //p" "$STORE/nights/$(newest_night)")"
'

# cache_reads: how many units the last run read from the local unit cache
cache_reads() {
	sed -n "s/.*(\([0-9]*\) read from the local unit cache).*/\1/p" "$CB_ERR"
}

test_expect_success ROOT 'a night with nothing changed reads no unit from the store: the local unit cache has them' '
	night
	n=$(newest_night)
	# reading any of six units of the last night from the store fails
	spec=$(grep "^unit " "$STORE/nights/$n" | sed -n 2,7p |
		while read -r _ h _; do printf "read:EIO:/units/%s/%s;" "${h:0:2}" "$h"; done)
	rm -f "$FAULT_LOG"
	touch "$FAULT_LOG"
	with_fault "${spec%;}" night
	read -r written present copied <<<"$(stored)"
	test_lacks "$FAULT_LOG" "/units/"
	test "$copied" -gt 8
	test "$(cache_reads)" = "$copied"
	n=$(newest_night)
	test "$(units_of "$n" | sha256sum | cut -d" " -f1)" = "$(sed -n "s/^sha256 //p" "$STORE/nights/$n")"
	# the cache holds the units of this night, no other
	grep "^unit " "$STORE/nights/$n" | cut -d" " -f2 | sort -u >"$SCRATCH/want"
	ls "$SCRATCH/tmp/cbackup/cbackup-101.stage.units" | sort >"$SCRATCH/have"
	test_cmp "$SCRATCH/want" "$SCRATCH/have"
'

test_expect_success ROOT 'a damaged file in the local unit cache is not copied: the night is still whole' '
	n=$(newest_night)
	h=$(grep "^unit " "$STORE/nights/$n" | sed -n 3p | cut -d" " -f2)
	flip_byte "$SCRATCH/tmp/cbackup/cbackup-101.stage.units/$h" 100
	night
	test_has "$CB_ERR" "WARN: previous archive .* damaged at compressed offset"
	n=$(newest_night)
	test "$(units_of "$n" | sha256sum | cut -d" " -f1)" = "$(sed -n "s/^sha256 //p" "$STORE/nights/$n")"
	units_of "$n" | zstd -dc | tar -tf - >/dev/null
	test "$(sha256sum <"$SCRATCH/tmp/cbackup/cbackup-101.stage.units/$h" | cut -d" " -f1)" = "$h"
'

test_expect_success ROOT 'lzo and gzip nights: their units are what lzop and gzip read, copied the next night too' '
	for c in lzo gzip; do
		night --compress $c
		night --compress $c
		read -r written present copied <<<"$(stored)"
		test "$copied" -gt 8 || return 1
		n=$(newest_night)
		units_of "$n" >"$SCRATCH/n.$c"
		test "$(sha256sum <"$SCRATCH/n.$c" | cut -d" " -f1)" = \
			"$(sed -n "s/^sha256 //p" "$STORE/nights/$n")" || return 1
	done
	rm -rf "$SCRATCH/out2"
	mkdir "$SCRATCH/out2"
	lzop -dc <"$SCRATCH/n.lzo" | tar -x -C "$SCRATCH/out2"
	diff -r "$SRC" "$SCRATCH/out2"
	gzip -dc <"$SCRATCH/n.gzip" | tar -tf - >/dev/null
'

test_expect_success ROOT 'unit-size by default: 1 MiB units on a store, 4 MiB in an archive file' '
	mkdir -p "$SCRATCH/big/d" "$SCRATCH/s1" "$SCRATCH/s4" "$SCRATCH/file"
	head -c $((12 << 20)) /dev/urandom >"$SCRATCH/big/d/blob"
	cbackup_run 0 backup --root "$SCRATCH/big" --id 7 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/s1" --layout store --archive-name cbackup
	cbackup_run 0 backup --root "$SCRATCH/big" --id 7 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/s4" --layout store --archive-name cbackup --unit-size 4
	cbackup_run 0 backup --root "$SCRATCH/big" --id 7 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/file" --archive-name cbackup
	# 12 MiB of data: a unit a MiB, against one in four MiB
	test "$(grep -c "^unit " "$SCRATCH"/s1/nights/*)" -ge 12
	test "$(grep -c "^unit " "$SCRATCH"/s4/nights/*)" -le 6
	zstd -lv "$SCRATCH"/file/cbackup-ct-7-*.tar.zst >"$SCRATCH/frames"
	test "$(sed -n "s/^# Zstandard Frames: *//p" "$SCRATCH/frames")" -le 6
'

# (encryption on a store: t0813)
test_expect_success ROOT 'a key file others may read is refused on a store before anything is touched (exit 2), no night written' '
	n=$(ls "$STORE/nights" | wc -l)
	cbackup_run 0 key create "$SCRATCH/key"
	chmod 644 "$SCRATCH/key"
	sleep 1.1
	cbackup_run 2 backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$STORE" --layout store --archive-name cbackup --encryption-key "$SCRATCH/key"
	test_has "$CB_ERR" "ERROR: option --encryption-key: key file .* is accessible by group or others"
	test "$(ls "$STORE/nights" | wc -l)" = "$n"
'

test_expect_success ROOT 'a storage'"'"'s upload-parallel is the number of its writers' '
	mkdir -p "$SCRATCH/s-up"
	printf "[storage up2]\npath = %s\nlayout = store\nupload-parallel = 2\n" "$SCRATCH/s-up" \
		>"$SCRATCH/up.conf"
	CB_DEBUG=1 cbackup_run 0 backup --config "$SCRATCH/up.conf" --storage up2 --root "$SRC" \
		--id 104 --type ct --tmpdir "$SCRATCH/tmp" --archive-name cbackup
	test_has "$CB_ERR" "^DEBUG: unit store .up2.: .* for the uploads \(2 at once\)"
'

test_expect_success ROOT 'a job of several guests opens the store once a guest: no handle left open' '
	mkdir -p "$SCRATCH/s-all"
	cat >"$SCRATCH/all.conf" <<-EOF
	tmpdir = $SCRATCH/tmp
	archive-name = cbackup
	[storage all]
	path = $SCRATCH/s-all
	layout = store
	[ct 121]
	root = $SRC
	[ct 122]
	root = $SRC
	[ct 123]
	root = $SRC
	EOF
	# the hook counts the open files of the cbackup that runs it
	printf "#!/bin/sh\n[ \"\$1\" = backup-end ] || exit 0\nls /proc/\$PPID/fd | wc -l >>%s\n" \
		"$SCRATCH/fds" >"$SCRATCH/fd-hook"
	chmod +x "$SCRATCH/fd-hook"
	cbackup_run 0 backup --config "$SCRATCH/all.conf" --storage all --all --freeze-cmd true \
		--thaw-cmd true --script "$SCRATCH/fd-hook"
	echo "open files at each guest'"'"'s end:" $(cat "$SCRATCH/fds")
	test "$(wc -l <"$SCRATCH/fds")" = 3
	test "$(sort -u "$SCRATCH/fds" | wc -l)" = 1
'

test_done
