#!/bin/bash
# The dump directory is writable by others (cbackup(8), "A dump directory
# others can write to"): what such a user can do to the previous archive,
# its catalog and side files never puts wrong data into the next night's
# archive, and never blocks a run.
# - A catalog whose keys were swapped, its own SHA-256 trailer recomputed
#   (only its .sha256 line no longer holds): not used; the night compresses,
#   says why, and its archive holds the source.
# - The previous archive rewritten while a unit of it is being copied (the
#   shim holds the copy): the new archive still holds the bytes checked.
# - A catalog, archive and .sha256 forged together, consistently: the
#   copies are decoded and compared, the night is still right.
# - A FIFO (or a symlink) where the previous catalog, archive or .sha256
#   should be: backup, verify, ls, restore finish (timeout 60: a red run
#   fails instead of hanging), the backup without reuse and with a line.
# - A planted "newer" backup: the night compresses all; keep-last counts it
#   (what cbackup(8) says such a user can do).
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
DUMP=$SCRATCH/dump
FORGE=$TOP/tests/helpers/idxforge.py

# six text files of 1.5 MB: their tails are segments of equal length
make_tree() {
	rm -rf "$SRC" "$DUMP"
	mkdir -p "$SRC/data" "$DUMP" "$SCRATCH/tmp"
	for i in 1 2 3 4 5 6; do
		seq "$i" 3 9000000 | head -c 1500000 >"$SRC/data/f$i.txt"
	done
	echo guest >"$SRC/hostname"
}

night() {  # RC [ARGS...]
	local rc=$1
	shift
	sleep 1.1   # archive names go by the second
	cbackup_run "$rc" backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$DUMP" --unit-size 1 "$@"
}

newest() { ls -1 "$DUMP"/vzdump-lxc-101-*.tar.zst | tail -n 1; }

# the newest archive is sound by every tool and holds the source
newest_is_right() {
	local a
	a=$(newest)
	zstd -qt "$a"
	(cd "$DUMP" && sha256sum --quiet --strict -c "$(basename "$a").sha256")
	cbackup_run 0 verify "$a"
	rm -rf "$SCRATCH/out"
	mkdir "$SCRATCH/out"
	zstd -dc "$a" | tar -xf - -C "$SCRATCH/out"
	diff -r "$SRC" "$SCRATCH/out"
}

# "REUSED COMPRESSED" units of the last run
counts() {
	sed -n 's/.*reused \([0-9]*\) units.*compressed \([0-9]*\).*/\1 \2/p' "$CB_ERR" | tail -n 1
}

test_expect_success 'setup: night 1' '
	make_tree
	night 0
	test "$(ls "$DUMP"/*.tar.zst | wc -l)" = 1
'

test_expect_success 'a catalog with two keys swapped (own digest recomputed) is not used' '
	a=$(newest)
	cp "$a.idx" "$SCRATCH/good.idx"
	python3 "$FORGE" "$a.idx" swap-keys
	test_must_fail cbackup_run 0 verify "$a"
	night 0
	cp "$CB_ERR" "$SCRATCH/night.err"
	newest_is_right
	test_has "$SCRATCH/night.err" "INFO: no units reused from the previous archive: its catalog does not match its .sha256"
	cp "$SCRATCH/good.idx" "$a.idx"
'

# forge_all ARCHIVE: its catalog's keys swapped, and the catalog's line of
# its .sha256 rewritten to match: nothing in the dump directory tells
forge_all() {
	local sum
	python3 "$FORGE" "$1.idx" swap-keys
	sum=$(sha256sum <"$1.idx" | cut -c1-64)
	sed -i "s/^[0-9a-f]*  \($(basename "$1")\.idx\)\$/$sum  \1/" "$1.sha256"
	cbackup_run 0 verify "$1"
}

for codec in zstd gzip lzo; do
	ext=$(case $codec in zstd) echo .zst ;; gzip) echo .gz ;; lzo) echo .lzo ;; esac)
	test_expect_success "$codec: catalog and its .sha256 line forged together: the copies are decoded, the night is right" "
		rm -rf \"\$DUMP\" && mkdir \"\$DUMP\"
		night 0 --compress $codec
		a=\$(ls \"\$DUMP\"/*.tar$ext)
		forge_all \"\$a\"
		night 0 --compress $codec
		cp \"\$CB_ERR\" \"\$SCRATCH/night.err\"
		b=\$(ls \"\$DUMP\"/*.tar$ext | tail -n 1)
		cbackup_run 0 verify \"\$b\"
		rm -rf \"\$SCRATCH/out\" && mkdir \"\$SCRATCH/out\"
		cbackup_run 0 restore \"\$b\" \"\$SCRATCH/out\"
		diff -r \"\$SRC\" \"\$SCRATCH/out\"
		test_has \"\$SCRATCH/night.err\" \"WARN: previous archive .* does not hold what its catalog says\"
		test_has \"\$SCRATCH/night.err\" \"INFO: reused [1-9][0-9]* units\"
	"
done
rm -rf "$DUMP" && mkdir "$DUMP"
test_expect_success 'setup: night 1 again' '
	night 0
'

# night_held EXTRA-ARGS: night 2 in the background, held (SIGSTOP) in its
# first copy_file_range from the previous archive; every byte of that
# archive is changed meanwhile (same size), then it goes on: exit 0
night_held() {
	local prev pid rc=0
	prev=$(newest)
	cp "$prev" "$SCRATCH/prev.keep"
	rm -f "$FAULT_LOG"
	sleep 1.1
	with_fault_bg "copy:SIGSTOP:$(basename "$prev")" \
		"$CBACKUP" backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$DUMP" --unit-size 1 "$@" >"$CB_OUT" 2>"$CB_ERR"
	pid=$FAULT_PID
	cleanup_pid "$pid"
	wait_for 60 grep -q "^State:.*stopped" /proc/$pid/status || { kill -KILL "$pid"; false; }
	python3 -c "import sys
f = open(sys.argv[1], \"r+b\")
d = bytearray(f.read())
for i in range(len(d)):
    d[i] ^= 0x5a
f.seek(0)
f.write(d)" "$prev"
	kill -CONT "$pid"
	wait "$pid" || rc=$?
	cat "$CB_ERR"
	cp "$CB_ERR" "$SCRATCH/night.err"
	test "$rc" = 0
	fault_fired "^copy .*$(basename "$prev")"
	cp "$SCRATCH/prev.keep" "$prev"
}

test_expect_success 'the previous archive changed while a unit of it is copied: the new one is right' '
	night_held
	newest_is_right
	test_has "$SCRATCH/night.err" "WARN: [0-9]* units changed in the previous archive while being copied"
'

test_expect_success 'the same with a kept staging copy (units taken on trust, the .sha256 resumed)' '
	night 0 --keep-staging 1
	night 0 --keep-staging 1
	test_has "$CB_ERR" "reused 1[0-9] units"
	night_held --keep-staging 1 --verbose
	newest_is_right
	test_has "$SCRATCH/night.err" "WARN: [0-9]* units changed in the previous archive while being copied"
'

# in_place_of FILE KIND: FILE (kept aside) replaced by a FIFO or a symlink
# to a copy of itself (a symlink is never followed either)
in_place_of() {
	mv "$1" "$1.aside"
	case $2 in
	fifo) mkfifo "$1" ;;
	symlink) cp "$1.aside" "$SCRATCH/elsewhere" && ln -s "$SCRATCH/elsewhere" "$1" ;;
	esac
}
put_back() { rm -f "$1" && mv "$1.aside" "$1"; }

# bounded RC ARGS...: cbackup_run under timeout 60 (a run blocked in
# open() is killed, exit 124, and fails the case instead of hanging it)
bounded() {
	local want=$1 rc=0
	shift
	timeout 60 "$CBACKUP" "$@" >"$CB_OUT" 2>"$CB_ERR" || rc=$?
	[ "$rc" = "$want" ] && return 0
	echo "cbackup $* exited with $rc, expected $want"; cat "$CB_ERR"
	return 1
}

# bounded_fails ARGS...: the same, failing with 1 or 2 (not 124)
bounded_fails() {
	local rc=0
	timeout 60 "$CBACKUP" "$@" >"$CB_OUT" 2>"$CB_ERR" || rc=$?
	[ "$rc" = 1 ] || [ "$rc" = 2 ] && return 0
	echo "cbackup $* exited with $rc, expected 1 or 2"; cat "$CB_ERR"
	return 1
}

# spoiled_night SUFFIX KIND WHY: the newest archive's file SUFFIX ("" for
# the archive) replaced (in_place_of KIND): the night finishes, reuses
# nothing and says WHY; the file put back, the new archive is right
spoiled_night() {
	local a
	a=$(newest)
	in_place_of "$a$1" "$2"
	sleep 1.1
	bounded 0 backup --root "$SRC" --id 101 --type ct --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$DUMP" --unit-size 1
	test_has "$CB_ERR" "INFO: no units reused from the previous archive: $3"
	put_back "$a$1"
	newest_is_right
}

test_expect_success 'setup: a good night to spoil (copies read back as they were written)' '
	night 0
	cp "$CB_ERR" "$SCRATCH/night.err"
	newest_is_right
	test_has "$SCRATCH/night.err" "INFO: reused 1[0-9] units"
	test_lacks "$SCRATCH/night.err" "changed in the previous archive while being copied"
'

for kind in fifo symlink; do
	for what in ".idx:its catalog is missing or damaged" ".sha256:its .sha256 is not a regular file" \
		":it is not a regular file"; do
		test_expect_success "a $kind in place of the previous archive${what%%:*}: the night compresses, says why" "
			spoiled_night '${what%%:*}' $kind '${what#*:}'
		"
	done
	test_expect_success "a $kind in place of an archive's catalog: verify fails, ls and restore scan the archive" "
		a=\$(newest)
		in_place_of \"\$a.idx\" $kind
		bounded 1 verify \"\$a\"
		test_has \"\$CB_ERR\" \"ERROR: .*catalog '.*\\.idx' is a .*, not a regular file\"
		bounded 0 ls \"\$a\"
		test_has \"\$CB_OUT\" 'data/f6.txt'
		test_has \"\$CB_ERR\" 'WARN: .*not a regular file: scanning the archive instead'
		bounded 0 restore \"\$a\" \"\$SCRATCH/r-idx-$kind\"
		diff -r \"\$SRC\" \"\$SCRATCH/r-idx-$kind\"
		bounded 0 restore \"\$a\" \"\$SCRATCH/rp-idx-$kind\" --path ./data/f2.txt
		cmp \"\$SRC/data/f2.txt\" \"\$SCRATCH/rp-idx-$kind/data/f2.txt\"
		put_back \"\$a.idx\"
	"
	test_expect_success "a $kind in place of an archive's .sha256: verify and restore say so" "
		a=\$(newest)
		in_place_of \"\$a.sha256\" $kind
		bounded 1 verify \"\$a\"
		test_has \"\$CB_ERR\" \"ERROR: .*checksum file '.*\\.sha256' is a .*, not a regular file\"
		bounded 1 restore \"\$a\" \"\$SCRATCH/r-sum-$kind\"
		test_has \"\$CB_ERR\" \"ERROR: .*checksum file '.*\\.sha256' is a .*, not a regular file\"
		put_back \"\$a.sha256\"
	"
done

test_expect_success "a FIFO named as the archive: verify, ls, restore, index fail with a clear error" "
	a=\$(newest)
	in_place_of \"\$a\" fifo
	for cmd in verify ls index; do
		bounded_fails \$cmd \"\$a\"
		test_has \"\$CB_ERR\" \"ERROR: .*'.*\\.tar\\.zst' is a .*, not a regular file\"
	done
	bounded_fails restore \"\$a\" \"\$SCRATCH/r-arch-fifo\"
	test_has \"\$CB_ERR\" \"ERROR: .*'.*\\.tar\\.zst' is a .*, not a regular file\"
	put_back \"\$a\"
"
test_expect_success 'an archive named through a symlink (the path the admin gave) is read' '
	a=$(newest)
	ln -s "$a" "$SCRATCH/latest.tar.zst"
	for f in idx sha256; do ln -s "$a.$f" "$SCRATCH/latest.tar.zst.$f"; done
	bounded 1 verify "$SCRATCH/latest.tar.zst"
	test_has "$CB_ERR" "ERROR: .* is a symbolic link, not a regular file"
	rm "$SCRATCH/latest.tar.zst.idx" "$SCRATCH/latest.tar.zst.sha256"
	bounded 0 verify "$SCRATCH/latest.tar.zst"
	bounded 0 ls "$SCRATCH/latest.tar.zst"
	test_has "$CB_OUT" "data/f6.txt"
'

test_expect_success 'a planted "newer" backup: the night compresses all, and keep-last counts it' '
	d=$SCRATCH/dump-planted
	mkdir -p "$d"
	cbackup_run 0 backup --root "$SRC" --id 102 --dumpdir "$d" --tmpdir "$SCRATCH/tmp" --unit-size 1
	first=$(ls "$d"/vzdump-lxc-102-*.tar.zst)
	synthetic_backup "$d" ct 102 2099_01_01-00_00_00 >/dev/null
	sleep 1.1
	cbackup_run 0 backup --root "$SRC" --id 102 --dumpdir "$d" --tmpdir "$SCRATCH/tmp" \
		--unit-size 1 --prune-backups keep-last=2
	test_has "$CB_ERR" "INFO: no units reused from the previous archive: its catalog is missing or damaged"
	test_has "$CB_ERR" "INFO: reused 0 units"
	test ! -e "$first"
	test -e "$d/cbackup-ct-102-2099_01_01-00_00_00.tar.zst"
	test "$(ls "$d"/*-102-*.tar.zst | wc -l)" = 2
'

test_done
