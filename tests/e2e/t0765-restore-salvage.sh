#!/bin/bash
# restore --salvage: a damaged unit in the middle of a multi-unit archive
# costs only the members with bytes in it. Every other file comes back
# byte-identical, each member lost is named (stderr, quoted; JSON with
# --output-format json), and the exit status is 1. Without --salvage the
# restore fails as before and leaves nothing.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
DUMP=$SCRATCH/dump
FLIP=$TOP/tests/helpers/flip.py

# flip_f30 ARCHIVE: 4 bytes of mid/f30 flipped where the archive stores
# them verbatim (a stored block's header may split the first place tried)
flip_f30() {
	local off
	for off in 1000 21000 41000; do
		python3 "$FLIP" "$1" "$SRC/mid/f30" $off >/dev/null 2>&1 && return 0
	done
	echo "mid/f30 is not stored verbatim in $1"
	return 1
}

test_expect_success 'setup: 40 small random files between two big ones, 1 MiB units, hardlinks' '
	make_small_tree "$SRC"
	mkdir -p "$SRC/mid" "$DUMP" "$SCRATCH/tmp"
	head -c 3M /dev/urandom >"$SRC/aaa-first.bin"
	for i in $(seq 10 49); do head -c 64K /dev/urandom >"$SRC/mid/f$i"; done
	head -c 3M /dev/urandom >"$SRC/zzz-last.bin"
	ln "$SRC/mid/f30" "$SRC/link-to-f30"
	mkdir "$SRC/zzz"
	echo pair >"$SRC/zzz/x"
	ln "$SRC/zzz/x" "$SRC/zzz/y"
	cbackup_run 0 backup --root "$SRC" --id 1 --compress zstd --unit-size 1 \
		--dumpdir "$DUMP" --tmpdir "$SCRATCH/tmp"
	a=$(find_archive "$DUMP" ct 1 .zst)
	test "$(python3 -c "import sys; print(int(sys.argv[1]) > 4)" \
		"$("$CBACKUP" ls --json "$a" | wc -l)")" = True
	cp "$a" "$SCRATCH/a.tar.zst"
	cp "$a.idx" "$SCRATCH/a.tar.zst.idx"
	cp "$a.sha256" "$SCRATCH/a.tar.zst.sha256"
	flip_f30 "$SCRATCH/a.tar.zst"
'

A=$SCRATCH/a.tar.zst

test_expect_success 'without --salvage the restore fails and restores nothing' '
	cbackup_run 1 restore --ignore-checksum "$A" "$SCRATCH/r0"
	test_has "$CB_ERR" "^ERROR: restore of .* failed"
	test ! -e "$SCRATCH/r0"
'

# every file of the source: restored byte-identical, or named as lost
check_salvaged() {
	local dest=$1 err=$2 f n_lost=0 n_ok=0
	while IFS= read -r f; do
		if grep -q "lost: '\./$f'" "$err"; then
			test ! -e "$dest/$f" || { echo "lost '$f' is in $dest"; return 1; }
			n_lost=$((n_lost + 1))
		else
			cmp "$SRC/$f" "$dest/$f" || return 1
			n_ok=$((n_ok + 1))
		fi
	done < <(cd "$SRC" && find . -type f | sed "s|^\./||")
	echo "restored $n_ok files, lost $n_lost"
	test "$n_lost" -ge 1 || return 1
	test "$n_ok" -gt "$n_lost"
}

test_expect_success 'restore --salvage: every file outside the damaged unit, the lost named, exit 1' '
	cbackup_run 1 restore --salvage "$A" "$SCRATCH/r1"
	test_has "$CB_ERR" "^ERROR: .*lost: '\''\./mid/f30'\''"
	test_has "$CB_ERR" "^ERROR: .*lost: '\''\./link-to-f30'\''"
	test_lacks "$CB_ERR" "lost: '\''\./(aaa-first|zzz-last)\.bin'\''"
	test_has "$CB_ERR" "^ERROR: restore of .* incomplete - [0-9]+ member"
	check_salvaged "$SCRATCH/r1" "$CB_ERR"
	test "$(stat -c %i "$SCRATCH/r1/zzz/x")" = "$(stat -c %i "$SCRATCH/r1/zzz/y")"
'

test_expect_success 'restore --salvage --output-format json: the lost members in the document' '
	cbackup_run 1 restore --salvage --output-format json "$A" "$SCRATCH/r2"
	python3 - "$CB_OUT" "$CB_ERR" <<-\EOF
	import json, re, sys
	doc = json.load(open(sys.argv[1]))
	assert doc["status"] == "partial", doc
	lost = sorted(m["path"] for m in doc["lost"])
	named = sorted(re.findall(r"lost: \x27([^\x27]*)\x27", open(sys.argv[2]).read()))
	assert lost == named and "./mid/f30" in lost, (lost, named)
	assert doc["damaged_units"], doc
	assert doc["entries"] > len(lost), doc
	EOF
'

test_expect_success 'restore --salvage of an intact archive: everything, exit 0' '
	a=$(find_archive "$DUMP" ct 1 .zst)
	cbackup_run 0 restore --salvage "$a" "$SCRATCH/r3"
	diff -r "$SRC" "$SCRATCH/r3"
	test_lacks "$CB_ERR" "lost"
'

for c in lzo gzip; do
	test_expect_success "$c: restore --salvage around a damaged unit" "
		cbackup_run 0 backup --root \"\$SRC\" --id $c --compress $c --unit-size 1 \
			--dumpdir \"\$DUMP\" --tmpdir \"\$SCRATCH/tmp\"
		a=\$(find_archive \"\$DUMP\" ct $c .\${c%ip})
		flip_f30 \"\$a\"
		cbackup_run 1 restore --salvage \"\$a\" \"\$SCRATCH/r-$c\"
		test_has \"\$CB_ERR\" \"^ERROR: .*lost: '\\./mid/f30'\"
		check_salvaged \"\$SCRATCH/r-$c\" \"\$CB_ERR\"
	"
done

test_expect_success 'restore --salvage --dry-run: names what would be lost, writes nothing' '
	cbackup_run 1 restore --salvage --dry-run "$A" "$SCRATCH/r4"
	test_has "$CB_ERR" "^ERROR: .*lost: '\''\./mid/f30'\''"
	test_has "$CB_ERR" "^ERROR: restore of .* incomplete - [0-9]+ member\(s\) would be lost"
	test ! -e "$SCRATCH/r4"
'

test_expect_success 'restore --salvage of a damaged archive without its catalog: says so, restores nothing' '
	mkdir "$SCRATCH/noidx"
	cp "$A" "$SCRATCH/noidx/"
	cbackup_run 1 restore --salvage "$SCRATCH/noidx/a.tar.zst" "$SCRATCH/r5"
	test_has "$CB_ERR" "^ERROR: restore of .* failed - restore --salvage places the damage by the catalog .*a\.tar\.zst\.idx"
	test ! -e "$SCRATCH/r5"
'

test_done
