#!/bin/bash
# Bad input everywhere (issue 5, item 4): configuration files (binary
# junk, a 1 MB line, unterminated quotes, duplicate sections, a missing
# file), the command line (unknown options, wrong types, conflicting
# options) and archives for restore and verify (truncated, another codec,
# random bytes, empty). Each gets a clear ERROR line and the documented exit
# status (2 usage/configuration, 1 failure), never a crash (status >= 128)
# and never a hang (timeout 30).
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src DUMP=$SCRATCH/dump TMPD=$SCRATCH/tmp
export CBACKUP_LOCK_DIR=$SCRATCH/locks

# expect_status RC ARGS...: cbackup ARGS exits with RC within 30 s, says
# ERROR: and leaves nothing in the dump directory
expect_status() {
	local want=$1 rc=0
	shift
	rm -rf "$DUMP" && mkdir "$DUMP"   # a failed test must not fail the next one
	timeout 30 "$CBACKUP" "$@" >"$CB_OUT" 2>"$CB_ERR" </dev/null || rc=$?
	head -c 2000 "$CB_ERR"; echo
	echo "exit status $rc"
	[ "$rc" != 124 ] || { echo "cbackup hung"; return 1; }
	[ "$rc" -lt 128 ] || { echo "cbackup crashed"; return 1; }
	[ "$rc" = "$want" ] || { echo "expected exit status $want"; return 1; }
	grep -q "^ERROR: " "$CB_ERR" || { echo "no ERROR: line"; return 1; }
	# one line per message: no junk bytes of the input dumped to the terminal
	[ "$(wc -l <"$CB_ERR")" -lt 20 ] || { echo "too much output"; return 1; }
}

nothing_written() {
	[ -z "$(ls -A "$DUMP")" ] || { echo "written to the dump directory:"; ls -la "$DUMP"; return 1; }
}

test_expect_success 'setup: a small guest, a good archive' '
	mkdir -p "$SRC/etc" "$DUMP" "$TMPD" "$CBACKUP_LOCK_DIR" "$SCRATCH/good"
	echo hello >"$SRC/etc/hostname"
	head -c 300K /dev/urandom >"$SRC/blob"
	"$CBACKUP" backup --root "$SRC" --id 700 --tmpdir "$TMPD" --dumpdir "$SCRATCH/good" \
		--compress zstd 2>/dev/null
	ls "$SCRATCH/good"/vzdump-lxc-700-*.tar.zst
'

# ---- configuration ------------------------------------------------------------

cfg_case() {  # NAME: the file $SCRATCH/NAME.conf, used for a backup of guest 701
	expect_status 2 701 --config "$SCRATCH/$1.conf" --tmpdir "$TMPD" --dumpdir "$DUMP"
	nothing_written
}

test_expect_success 'config: binary junk: exit 2 with FILE:LINE' '
	head -c 8192 /dev/urandom >"$SCRATCH/junk.conf"
	cfg_case junk
	grep -F "$SCRATCH/junk.conf" "$CB_ERR"
'

test_expect_success 'config: NUL bytes and a valid-looking prefix: exit 2' '
	printf "mode = suspend\n\0\0\0compress = zstd\n" >"$SCRATCH/nul.conf"
	cfg_case nul
'

test_expect_success 'config: a 1 MB line: exit 2, no crash' '
	{ printf "tmpdir = "; head -c 1048576 /dev/zero | tr "\0" a; echo; } >"$SCRATCH/long.conf"
	cfg_case long
	grep -F "$SCRATCH/long.conf:1" "$CB_ERR"
'

test_expect_success 'config: a 1 MB key with no value: exit 2, no crash' '
	{ head -c 1048576 /dev/zero | tr "\0" k; echo; } >"$SCRATCH/longkey.conf"
	cfg_case longkey
'

test_expect_success 'config: unterminated quote (mode = "suspend): exit 2 with the line' '
	printf "tmpdir = %s\nmode = \"suspend\n[ct 701]\nroot = %s\n" "$TMPD" "$SRC" >"$SCRATCH/quote.conf"
	cfg_case quote
	grep -F "$SCRATCH/quote.conf:2" "$CB_ERR"
'

test_expect_success 'config: duplicate [ct] sections: exit 2 naming both lines' '
	printf "[ct 701]\nroot = %s\n\n[ct 701]\nroot = /nonexistent\n" "$SRC" >"$SCRATCH/dup.conf"
	cfg_case dup
	grep -F "$SCRATCH/dup.conf:4" "$CB_ERR"
'

test_expect_success 'config: unterminated section header: exit 2 with the line' '
	printf "[ct 701\nroot = %s\n" "$SRC" >"$SCRATCH/section.conf"
	cfg_case section
	grep -F "$SCRATCH/section.conf:1" "$CB_ERR"
'

test_expect_success 'config: an ignored vzdump key, then a bad value: exit 2, no crash (fuzz_config double free)' '
	printf "pool = p\nmode = fast\n" >"$SCRATCH/unknown-then-bad.conf"
	cfg_case unknown-then-bad
	grep -F "$SCRATCH/unknown-then-bad.conf:2" "$CB_ERR"
'

test_expect_success 'config: missing file: exit 2 naming it' '
	expect_status 2 701 --config "$SCRATCH/nonexistent.conf"
	grep -F "$SCRATCH/nonexistent.conf" "$CB_ERR"
	grep -i "no such file" "$CB_ERR"
'

test_expect_success 'config: a directory instead of a file: exit 2' '
	expect_status 2 701 --config "$SCRATCH"
'

# ---- command line ---------------------------------------------------------------

adhoc() { echo --root "$SRC" --tmpdir "$TMPD" --dumpdir "$DUMP"; }

test_expect_success 'cli: unknown option: exit 2 naming it' '
	expect_status 2 backup $(adhoc) --frobnicate 1
	grep -F -- "--frobnicate" "$CB_ERR"
	nothing_written
'

test_expect_success 'cli: unknown short option: exit 2' '
	expect_status 2 backup $(adhoc) -x
'

test_expect_success 'cli: option without its value: exit 2' '
	expect_status 2 backup $(adhoc) --bwlimit
	grep -F -- "--bwlimit" "$CB_ERR"
'

test_expect_success 'cli: wrong types: exit 2 naming the option and the accepted values' '
	for bad in "--bwlimit abc" "--bwlimit -5" "--max-freeze 1x" "--zstd many" "--compress brotli" \
		   "--mode fast" "--ionice 9" "--lockwait soon" "--freeze-pid pid" "--remove=maybe" \
		   "--bwlimit 99999999999999999999999"; do
		expect_status 2 backup $(adhoc) $bad || { echo "for $bad"; false; }
		opt=${bad%% *}
		grep -F -- "${opt%%=*}" "$CB_ERR" || { echo "for $bad: the option is not named"; false; }
	done
	nothing_written
'

test_expect_success 'cli: --all together with IDs: exit 2' '
	printf "[ct 701]\nroot = %s\n" "$SRC" >"$SCRATCH/one.conf"
	expect_status 2 --all 701 --config "$SCRATCH/one.conf" --tmpdir "$TMPD" --dumpdir "$DUMP"
	nothing_written
'

test_expect_success 'cli: --stdout with two guests: exit 2' '
	printf "[ct 701]\nroot = %s\n[ct 702]\nroot = %s\n" "$SRC" "$SRC" >"$SCRATCH/two.conf"
	expect_status 2 701 702 --stdout --config "$SCRATCH/two.conf" --tmpdir "$TMPD" --dumpdir "$DUMP" >/dev/null
	nothing_written
'

test_expect_success 'cli: restore with one argument, verify with none: exit 2' '
	expect_status 2 restore "$SCRATCH/x"
	expect_status 2 verify
'

test_expect_success 'cli: --freeze-pid together with --freeze-cgroup: usage error (exit 2), nothing written' '
	expect_status 2 backup $(adhoc) --freeze-pid $$ --freeze-cgroup /sys/fs/cgroup/nonexistent
	grep -E "freeze-pid|freeze-cgroup" "$CB_ERR"
	nothing_written
'

# ---- archives ---------------------------------------------------------------------

archive_case() {  # FILE: restore and verify both fail cleanly (exit 1)
	expect_status 1 verify "$1"
	grep -F "verify of" "$CB_ERR"
	expect_status 1 restore "$1" "$SCRATCH/restore-$(basename "$1")"
	grep -F "restore of" "$CB_ERR"
}

test_expect_success 'archive: truncated (zstd): verify and restore fail with a clear error' '
	good=$(ls "$SCRATCH/good"/vzdump-lxc-700-*.tar.zst)
	size=$(stat -c %s "$good")
	head -c $((size / 2)) "$good" >"$SCRATCH/truncated.tar.zst"
	archive_case "$SCRATCH/truncated.tar.zst"
'

test_expect_success 'archive: truncated tar (no compression): clear error' '
	good=$(ls "$SCRATCH/good"/vzdump-lxc-700-*.tar.zst)
	zstd -dc <"$good" | head -c 100000 >"$SCRATCH/truncated.tar"
	archive_case "$SCRATCH/truncated.tar"
'

test_expect_success 'archive: the .sha256 of another archive: verify reports a mismatch' '
	good=$(ls "$SCRATCH/good"/vzdump-lxc-700-*.tar.zst)
	cp "$good" "$SCRATCH/other.tar.zst"
	echo "0000000000000000000000000000000000000000000000000000000000000000  other.tar.zst" >"$SCRATCH/other.tar.zst.sha256"
	expect_status 1 verify "$SCRATCH/other.tar.zst"
	grep "checksum mismatch" "$CB_ERR"
'

test_expect_success 'archive: another codec (xz, bzip2): clear error' '
	good=$(ls "$SCRATCH/good"/vzdump-lxc-700-*.tar.zst)
	zstd -dc <"$good" | xz -1 >"$SCRATCH/other.tar.xz"
	archive_case "$SCRATCH/other.tar.xz"
	zstd -dc <"$good" | bzip2 -1 >"$SCRATCH/other.tar.bz2"
	archive_case "$SCRATCH/other.tar.bz2"
'

test_expect_success 'archive: corrupt zstd frame (bytes flipped in the middle): clear error' '
	good=$(ls "$SCRATCH/good"/vzdump-lxc-700-*.tar.zst)
	cp "$good" "$SCRATCH/flipped.tar.zst"
	printf "\377\377\377\377\377\377\377\377" |
		dd of="$SCRATCH/flipped.tar.zst" bs=1 seek=$(( $(stat -c %s "$good") / 2 )) conv=notrunc status=none
	archive_case "$SCRATCH/flipped.tar.zst"
'

test_expect_success 'archive: random bytes, a zstd magic then random bytes, empty: clear errors' '
	head -c 65536 /dev/urandom >"$SCRATCH/random.tar.zst"
	archive_case "$SCRATCH/random.tar.zst"
	{ printf "\050\265\057\375"; head -c 65536 /dev/urandom; } >"$SCRATCH/magic.tar.zst"
	archive_case "$SCRATCH/magic.tar.zst"
	{ printf "\037\213\010\000"; head -c 65536 /dev/urandom; } >"$SCRATCH/magic.tar.gz"
	archive_case "$SCRATCH/magic.tar.gz"
	{ printf "\211LZO\000\015\012\032\012"; head -c 65536 /dev/urandom; } >"$SCRATCH/magic.tar.lzo"
	archive_case "$SCRATCH/magic.tar.lzo"
	: >"$SCRATCH/empty.tar.zst"
	archive_case "$SCRATCH/empty.tar.zst"
'

test_expect_success 'archive: a missing file and a directory: clear errors' '
	archive_case "$SCRATCH/nonexistent.tar.zst"
	archive_case "$SCRATCH/good"
'

test_done
