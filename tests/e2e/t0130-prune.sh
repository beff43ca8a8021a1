#!/bin/bash
# Retention with Proxmox's prune-backups semantics on archives with
# synthetic dates covering every keep rule (keep-weekly across an ISO-week
# year boundary: 2020-12-29 and 2021-01-02 are both week 2020/53);
# .protected archives are never pruned and do not count; `prune --dry-run`
# says keep/remove/protected per archive with the rule; a real prune removes
# the archive with its .log and .sha256; prune after a backup (remove = 1),
# from the command line and from a [storage] section.
. "$(dirname "$0")/lib.sh"

D=$SCRATCH/dump
RULES=keep-last=2,keep-hourly=2,keep-daily=2,keep-weekly=2,keep-monthly=2,keep-yearly=2
EMPTY_CONF=$SCRATCH/empty.conf

# The expected marks, newest first: "MARK STAMP (RULE)". Worked by hand
# from Proxmox's algorithm: each rule, in the order last, hourly, daily,
# weekly, monthly, yearly, walks the unmarked backups newest first, skips
# those whose time slot already holds a kept backup, keeps the first of
# each new slot (up to its count) and marks the others of that slot remove.
prune_marks_table >"$SCRATCH/expected"

make_set() {  # DIR: the synthetic set for CT 101, and CT 102 alike
	local stamp mark
	mkdir -p "$1"
	while read -r mark stamp _; do
		synthetic_backup "$1" ct 101 "$stamp" >/dev/null
		synthetic_backup "$1" ct 102 "$stamp" >/dev/null
		if [ "$mark" = protected ]; then
			: >"$1/cbackup-ct-101-$stamp.tar.zst.protected"
			: >"$1/cbackup-ct-102-$stamp.tar.zst.protected"
		fi
	done <"$SCRATCH/expected"
}

# dry-run lines "MARK NAME (RULE)" -> "MARK STAMP (RULE)", whitespace squeezed
normalize() {
	sed -E 's/[[:space:]]+/ /g; s/ $//; s/cbackup-ct-[0-9]+-([0-9_-]+)\.tar\.zst/\1/'
}

test_expect_success 'setup: 24 synthetic backups per guest, 2 protected' '
	: >"$EMPTY_CONF"
	make_set "$D"
	test "$(ls "$D" | grep -c "^cbackup-ct-101-.*\.tar\.zst$")" = 24
'

test_expect_success 'prune --dry-run: every keep rule, the ISO week, .protected' '
	ls "$D" >before
	cbackup_run 0 prune 101 --dumpdir "$D" --prune-backups $RULES --dry-run --config "$EMPTY_CONF"
	normalize <"$CB_OUT" >got
	diff -u "$SCRATCH/expected" got
	ls "$D" | diff -u before -
'

test_expect_success 'keep-weekly uses ISO weeks (%G/%V), not calendar years' '
	test "$(date -u -d 2021-01-02 +%G/%V)" = 2020/53
	test "$(date -u -d 2020-12-29 +%G/%V)" = 2020/53
	grep -x "keep 2021_01_02-10_00_00 (keep-weekly)" got
	grep -x "remove 2020_12_29-10_00_00" got
'

test_expect_success '.protected does not count: keep-last=2 keeps two others' '
	cbackup_run 0 prune 101 --dumpdir "$D" --prune-backups keep-last=2 --dry-run --config "$EMPTY_CONF"
	normalize <"$CB_OUT" >got
	test "$(grep -c "^keep " got)" = 2
	grep -x "protected 2021_01_12-13_00_00 (protected)" got
	grep -x "keep 2021_01_12-12_30_00 (keep-last)" got
	grep -x "keep 2021_01_12-12_10_00 (keep-last)" got
	grep -x "protected 2019_01_01-10_00_00 (protected)" got
	test "$(grep -c "^remove " got)" = 20
'

test_expect_success 'keep-all=1 keeps everything' '
	cbackup_run 0 prune 101 --dumpdir "$D" --prune-backups keep-all=1 --dry-run --config "$EMPTY_CONF"
	normalize <"$CB_OUT" >got
	test "$(grep -c "^keep .* (keep-all)$" got)" = 22
	test "$(grep -c "^protected " got)" = 2
	test_must_fail grep "^remove" got
'

test_expect_success 'prune: removes archive, .log, .sha256, .verified; keeps the rest' '
	: >"$D/cbackup-ct-101-2017_06_01-10_00_00.tar.zst.verified"
	: >"$D/cbackup-ct-101-2021_01_12-12_30_00.tar.zst.verified"
	cbackup_run 0 prune 101 --dumpdir "$D" --prune-backups $RULES --config "$EMPTY_CONF"
	grep -x "INFO: 101: pruned 10 backup(s)" "$CB_ERR"
	while read -r mark stamp _; do
		b=$D/cbackup-ct-101-$stamp
		if [ "$mark" = remove ]; then
			for f in "$b.tar.zst" "$b.log" "$b.tar.zst.sha256" "$b.tar.zst.verified"; do
				test ! -e "$f" || { echo "$f should be gone"; exit 1; }
			done
		else
			test -e "$b.tar.zst"
			test -e "$b.log"
			test -e "$b.tar.zst.sha256"
		fi
	done <"$SCRATCH/expected"
	test -e "$D/cbackup-ct-101-2021_01_12-12_30_00.tar.zst.verified"
	test -e "$D/cbackup-ct-101-2019_01_01-10_00_00.tar.zst.protected"
	test "$(ls "$D" | grep -c "^cbackup-ct-101-.*\.tar\.zst$")" = 14
	# the other guest is not touched by "prune 101"
	test "$(ls "$D" | grep -c "^cbackup-ct-102-.*\.tar\.zst$")" = 24
'

test_expect_success 'prune again: nothing more to remove' '
	cbackup_run 0 prune 101 --dumpdir "$D" --prune-backups $RULES --config "$EMPTY_CONF"
	grep -x "INFO: 101: pruned 0 backup(s)" "$CB_ERR"
'

test_expect_success 'prune without ID: every guest of the dump directory' '
	cbackup_run 0 prune --dumpdir "$D" --prune-backups keep-last=1 --config "$EMPTY_CONF"
	grep -x "INFO: 101: pruned 11 backup(s)" "$CB_ERR"
	grep -x "INFO: 102: pruned 21 backup(s)" "$CB_ERR"
	test "$(ls "$D" | grep -c "\.tar\.zst$")" = 6   # per guest: 1 kept + 2 protected
'

test_expect_success 'a backup with --prune-backups keep-last=2 --remove 1 leaves 2 (+ protected)' '
	make_small_tree "$SCRATCH/ct101"
	mkdir "$SCRATCH/tmp" "$SCRATCH/d2"
	make_set "$SCRATCH/d2"
	cbackup_run 0 backup --root "$SCRATCH/ct101" --id 101 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/d2" --prune-backups keep-last=2 --remove 1 --config "$EMPTY_CONF"
	grep -x "INFO: prune older backups with retention: keep-last=2" "$CB_ERR"
	grep -x "INFO: pruned 21 backup(s) not covered by keep-retention policy" "$CB_ERR"
	# the synthetic set has the old names (cbackup-ct-), the new backup
	# vzdump'"'"'s (vzdump-lxc-): one series
	ls "$SCRATCH/d2" | grep -E "^(cbackup-ct|vzdump-lxc)-101-.*\.tar\.zst$" >left
	cat left
	test "$(wc -l <left)" = 4
	grep -x "cbackup-ct-101-2021_01_12-13_00_00.tar.zst" left     # protected
	grep -x "cbackup-ct-101-2021_01_12-12_30_00.tar.zst" left     # newest synthetic
	grep -x "cbackup-ct-101-2019_01_01-10_00_00.tar.zst" left     # protected
	grep -E "^vzdump-lxc-101-[0-9]{4}_" left   # the new one
	test "$(ls "$SCRATCH/d2" | grep -c "^cbackup-ct-102-.*\.tar\.zst$")" = 24
'

test_expect_success '--remove 0: no pruning after the backup' '
	mkdir "$SCRATCH/d3"
	make_set "$SCRATCH/d3"
	cbackup_run 0 backup --root "$SCRATCH/ct101" --id 101 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/d3" --prune-backups keep-last=2 --remove 0 --config "$EMPTY_CONF"
	test_must_fail grep "pruned" "$CB_ERR"
	test "$(ls "$SCRATCH/d3" | grep -cE "^(cbackup-ct|vzdump-lxc)-101-.*\.tar\.zst$")" = 25
'

test_expect_success 'a failed backup prunes nothing' '
	mkdir "$SCRATCH/d4"
	make_set "$SCRATCH/d4"
	cbackup_run 2 backup --root "$SCRATCH/no-such-root" --id 101 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/d4" --prune-backups keep-last=1 --config "$EMPTY_CONF"
	test "$(ls "$SCRATCH/d4" | grep -c "^cbackup-ct-101-.*\.tar\.zst$")" = 24
'

test_expect_success 'prune-backups of a [storage] section applies to its guests' '
	mkdir "$SCRATCH/d5"
	make_set "$SCRATCH/d5"
	cat >"$SCRATCH/storage.conf" <<-CONF
	tmpdir = $SCRATCH/tmp
	storage = nas
	[storage nas]
	path = $SCRATCH/d5
	prune-backups = keep-last=1,keep-yearly=1
	[ct 101]
	root = $SCRATCH/ct101
	CONF
	cbackup_run 0 101 --config "$SCRATCH/storage.conf"
	grep -x "INFO: prune older backups with retention: keep-last=1, keep-yearly=1" "$CB_ERR"
	ls "$SCRATCH/d5" | grep -E "^(cbackup-ct|vzdump-lxc)-101-.*\.tar\.zst$" >left
	cat left
	# the new one (keep-last), the newest of an older year (keep-yearly: a
	# rule only counts slots the earlier rules left uncovered), 2 protected
	test "$(wc -l <left)" = 4
	grep -x "cbackup-ct-101-2021_01_12-12_30_00.tar.zst" left
	# and "cbackup prune" reads the same rule from the storage
	make_set "$SCRATCH/d5"
	cbackup_run 0 prune 101 --config "$SCRATCH/storage.conf" --dry-run
	normalize <"$CB_OUT" >got
	test "$(grep -c "^keep " got)" = 2
'

test_expect_success 'an invalid prune-backups on the command line: exit 2' '
	cbackup_run 2 prune 101 --dumpdir "$D" --prune-backups keep-lots=3 --config "$EMPTY_CONF"
	grep -E "^ERROR: .*keep-lots" "$CB_ERR"
'

test_expect_success 'an invalid prune-backups in the config: exit 2 with FILE:LINE, nothing touched' '
	# DESIGN 4: bad values are exit 2 with file, line, key and the accepted
	# values, before anything is touched - not a warning after the backup
	mkdir "$SCRATCH/d6"
	printf "tmpdir = %s\ndumpdir = %s\nprune-backups = keep-lots=3\n" \
		"$SCRATCH/tmp" "$SCRATCH/d6" >"$SCRATCH/bad.conf"
	cbackup_run 2 backup --root "$SCRATCH/ct101" --id 101 --config "$SCRATCH/bad.conf"
	grep -F "$SCRATCH/bad.conf:3" "$CB_ERR"
	grep "prune-backups" "$CB_ERR"
	test -z "$(ls -A "$SCRATCH/d6")"
'

test_done
