#!/bin/bash
# Prune never removes the backup it just wrote: a rule set that keeps
# nothing (keep-last=0, keep-all=0, every count 0) is exit 2 naming the
# option or the config file:line, for backup and for `cbackup prune`; and
# an archive dated in the future (another host's clock, a clock that went
# back) cannot make keep-last=1 delete the new backup.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/e2e/lib-attacker.sh"

DUMP=$SCRATCH/dump
TMPD=$SCRATCH/tmp
CONF=$SCRATCH/cbackup.conf

test_expect_success 'setup: a guest, two old backups' '
	make_small_tree "$SCRATCH/src"
	mkdir -p "$DUMP" "$TMPD"
	synthetic_backup "$DUMP" ct 101 2020_01_01-10_00_00 >/dev/null
	synthetic_backup "$DUMP" ct 101 2020_01_02-10_00_00 >/dev/null
	storage_snapshot "$DUMP" "$SCRATCH/before"
'

test_expect_success '--prune-backups keep-last=0 is exit 2 naming the option, nothing touched' '
	cbackup_run 2 backup --root "$SCRATCH/src" --id 101 --dumpdir "$DUMP" --tmpdir "$TMPD" \
		--prune-backups keep-last=0
	test_has "$CB_ERR" "^ERROR: .*--prune-backups.*keep-last=0.*keep no backup"
	storage_unchanged "$DUMP" "$SCRATCH/before"
'

test_expect_success 'keep-last=0,keep-daily=0 and keep-all=0 keep nothing too: exit 2' '
	cbackup_run 2 backup --root "$SCRATCH/src" --id 101 --dumpdir "$DUMP" --tmpdir "$TMPD" \
		--prune-backups keep-last=0,keep-daily=0
	cbackup_run 2 backup --root "$SCRATCH/src" --id 101 --dumpdir "$DUMP" --tmpdir "$TMPD" \
		--prune-backups keep-all=0
	storage_unchanged "$DUMP" "$SCRATCH/before"
'

test_expect_success 'keep-last=0 in the config is exit 2 with file:line' '
	printf "tmpdir = %s\ndumpdir = %s\n\n[ct 101]\nroot = %s\nprune-backups = keep-last=0\n" \
		"$TMPD" "$DUMP" "$SCRATCH/src" >"$CONF"
	cbackup_run 2 --config "$CONF" 101
	test_has "$CB_ERR" "^ERROR: .*cbackup\.conf:6: key .prune-backups.*keep no backup"
	storage_unchanged "$DUMP" "$SCRATCH/before"
'

test_expect_success 'cbackup prune --prune-backups keep-last=0 is exit 2, removes nothing' '
	cbackup_run 2 prune 101 --dumpdir "$DUMP" --prune-backups keep-last=0
	test_has "$CB_ERR" "keep no backup"
	storage_unchanged "$DUMP" "$SCRATCH/before"
'

test_expect_success 'keep-last=0,keep-all=1 is allowed: keeps everything' '
	cbackup_run 0 prune 101 --dumpdir "$DUMP" --prune-backups keep-last=0,keep-all=1
	storage_unchanged "$DUMP" "$SCRATCH/before"
'

test_expect_success 'an archive dated in the future: keep-last=1 keeps the one just written' '
	synthetic_backup "$DUMP" ct 101 2099_01_01-10_00_00 >/dev/null
	cbackup_run 0 backup --root "$SCRATCH/src" --id 101 --dumpdir "$DUMP" --tmpdir "$TMPD" \
		--prune-backups keep-last=1
	new=$(sed -n "s/^INFO: creating vzdump archive .\(.*\).$/\1/p" "$CB_ERR")
	test -n "$new"
	test -f "$new"
	test -f "$new.sha256"
	test -f "$DUMP/cbackup-ct-101-2099_01_01-10_00_00.tar.zst"
	test_lacks "$CB_ERR" "removing backup .$new"
'

test_done
