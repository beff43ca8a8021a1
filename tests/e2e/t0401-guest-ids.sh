#!/bin/bash
# Guest IDs are validated wherever they enter (IDs on the command line,
# --id, [ct ID]/[vm ID] sections, list/prune IDs, an ad hoc root's name):
# letters, digits, '_', '-', '.', not starting with '.' or '-'; anything
# else is exit 2 naming the ID and nothing is created. Archive names are
# parsed from the right, so "web" and "web-1" never claim each other's
# files: list, prune, and the stale .tmp cleanup of a run.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/e2e/lib-attacker.sh"

DUMP=$SCRATCH/dump
TMPD=$SCRATCH/tmp
CONF=$SCRATCH/cbackup.conf

test_expect_success 'setup' '
	make_small_tree "$SCRATCH/src"
	mkdir -p "$DUMP/sub" "$TMPD/sub"
'

test_expect_success '--id ../../x is exit 2 naming the ID; nothing written outside the dump dir' '
	# what another user can make in a shared dump dir or tmpdir
	mkdir "$DUMP/sub/cbackup-ct-.." "$TMPD/sub/cbackup-.."
	cbackup_run 2 backup --root "$SCRATCH/src" --id ../../x --dumpdir "$DUMP/sub" --tmpdir "$TMPD/sub"
	test_has "$CB_ERR" "^ERROR: .*invalid guest ID .\.\./\.\./x."
	test -z "$(find "$DUMP" "$TMPD" -name "x*")"
	rmdir "$DUMP/sub/cbackup-ct-.." "$TMPD/sub/cbackup-.."
'

test_expect_success 'other bad IDs, as --id and as an argument: exit 2 naming the ID' '
	for id in ".hidden" "-rf" "a/b" "a b" "x*" "" "é"; do
		cbackup_run 2 backup --root "$SCRATCH/src" --id "$id" --dumpdir "$DUMP/sub" --tmpdir "$TMPD/sub"
		test_has "$CB_ERR" "invalid guest ID|empty value"
	done
	for id in ../x .hidden a/b; do
		cbackup_run 2 backup "$id" --dumpdir "$DUMP/sub" --tmpdir "$TMPD/sub"
		test_has "$CB_ERR" "^ERROR: invalid guest ID .${id//./\\.}."
	done
	dir_empty "$DUMP/sub"
	dir_empty "$TMPD/sub"
'

test_expect_success 'good IDs pass: web-1, a.b_c, 101' '
	for id in web-1 a.b_c 101; do
		cbackup_run 0 backup --root "$SCRATCH/src" --id "$id" --dumpdir "$DUMP/sub" \
			--tmpdir "$TMPD/sub" --prune-backups keep-all=1
		find_archive "$DUMP/sub" ct "$id" .zst
	done
	rm -f "$DUMP/sub"/*
'

test_expect_success 'a [ct ../x] section is exit 2 with file:line' '
	printf "tmpdir = %s\ndumpdir = %s\n\n[ct ../x]\nroot = %s\n" "$TMPD" "$DUMP" "$SCRATCH/src" >"$CONF"
	cbackup_run 2 --config "$CONF" --all
	test_has "$CB_ERR" "cbackup\.conf:4: invalid guest ID .\.\./x."
'

test_expect_success 'an ad hoc root named .hidden needs --id: exit 2 naming the ID' '
	cp -a "$SCRATCH/src" "$SCRATCH/.hidden"
	cbackup_run 2 backup --root "$SCRATCH/.hidden" --dumpdir "$DUMP/sub" --tmpdir "$TMPD/sub"
	test_has "$CB_ERR" "give --id.*invalid guest ID .\.hidden."
'

test_expect_success 'list and prune ID: a bad ID is exit 2' '
	cbackup_run 2 list ../x --dumpdir "$DUMP"
	test_has "$CB_ERR" "invalid guest ID"
	cbackup_run 2 prune ../x --dumpdir "$DUMP" --prune-backups keep-last=1
	test_has "$CB_ERR" "invalid guest ID"
'

test_expect_success 'web and web-1 side by side: list shows each its own' '
	for s in 2026_01_01-10_00_00 2026_01_02-10_00_00; do
		synthetic_backup "$DUMP" ct web "$s" >/dev/null
		synthetic_backup "$DUMP" ct web-1 "$s" >/dev/null
	done
	synthetic_backup "$DUMP" ct web-1-2 2026_01_03-10_00_00 >/dev/null
	cbackup_run 0 list --dumpdir "$DUMP"
	test "$(grep -c "^web  " "$CB_OUT")" = 2
	test "$(grep -c "^web-1  " "$CB_OUT")" = 2
	test "$(grep -c "^web-1-2 " "$CB_OUT")" = 1
	cbackup_run 0 list web --dumpdir "$DUMP"
	test "$(grep -c "cbackup-ct-web-2026" "$CB_OUT")" = 2
	test_lacks "$CB_OUT" "web-1"
	cbackup_run 0 list web-1 --dumpdir "$DUMP"
	test "$(grep -c "cbackup-ct-web-1-2026" "$CB_OUT")" = 2
	test_lacks "$CB_OUT" "cbackup-ct-web-2026|web-1-2-2026"
'

test_expect_success 'prune web (web-1) keep-last=1 removes one of web (web-1), none of the other' '
	cbackup_run 0 prune web-1 --dumpdir "$DUMP" --prune-backups keep-last=1
	test_has "$CB_ERR" "web-1: pruned 1 backup"
	test ! -e "$DUMP/cbackup-ct-web-1-2026_01_01-10_00_00.tar.zst"
	synthetic_backup "$DUMP" ct web-1 2026_01_01-10_00_00 >/dev/null
	cbackup_run 0 prune web --dumpdir "$DUMP" --prune-backups keep-last=1
	test_has "$CB_ERR" "web: pruned 1 backup"
	test -f "$DUMP/cbackup-ct-web-2026_01_02-10_00_00.tar.zst"
	test ! -e "$DUMP/cbackup-ct-web-2026_01_01-10_00_00.tar.zst"
	test -f "$DUMP/cbackup-ct-web-1-2026_01_01-10_00_00.tar.zst"
	test -f "$DUMP/cbackup-ct-web-1-2026_01_02-10_00_00.tar.zst"
	test -f "$DUMP/cbackup-ct-web-1-2026_01_01-10_00_00.log"
'

test_expect_success 'a run of web leaves web-1 in-flight .tmp and .sha256 alone' '
	: >"$DUMP/cbackup-ct-web-1-2026_02_01-10_00_00.tar.zst.tmp"
	: >"$DUMP/cbackup-ct-web-1-2026_02_01-10_00_00.tar.zst.sha256.tmp"
	: >"$DUMP/cbackup-ct-web-2026_02_01-10_00_00.tar.zst.tmp"
	cbackup_run 0 backup --root "$SCRATCH/src" --id web --dumpdir "$DUMP" --tmpdir "$TMPD" \
		--prune-backups keep-all=1
	test -f "$DUMP/cbackup-ct-web-1-2026_02_01-10_00_00.tar.zst.tmp"
	test -f "$DUMP/cbackup-ct-web-1-2026_02_01-10_00_00.tar.zst.sha256.tmp"
	test ! -e "$DUMP/cbackup-ct-web-2026_02_01-10_00_00.tar.zst.tmp"
	test_lacks "$CB_ERR" "removing .*web-1"
'

test_done
