#!/bin/bash
# cbackup's prune and Proxmox VE's agree on one storage:
# - what PVE leaves: pve-storage src/PVE/Storage/Plugin.pm prune_backups()
#   removes a backup with src/PVE/Storage.pm archive_remove(), which
#   unlinks the archive and, in archive_auxiliaries_remove(), only its
#   logfilename and notesfilename (from archive_info(): <stem>.log and
#   <archive>.notes). cbackup's .sha256, .idx and .verified stay behind:
#   cbackup's next list, prune or backup of that guest removes them with a
#   line saying so.
# - the keep rules: Storage.pm prune_mark_backup_group() sorts a guest's
#   backups newest first (ctime from the name: archive_info() timelocal)
#   and applies keep-last, -hourly, -daily, -weekly (ISO %V/%G), -monthly,
#   -yearly in that order through $prune_mark: a rule skips the backups
#   already marked and the time slots already holding a kept one, keeps the
#   first backup of each new slot up to its count, marks the others of a
#   slot it keeps "remove", and stops at its count; what no rule kept is
#   removed; a protected backup is marked before and never counts.
#   The table below is that algorithm worked by hand (the set of t0130),
#   over names of both kinds: cbackup's series holds both.
. "$(dirname "$0")/lib.sh"

D=$SCRATCH/dump
T=$SCRATCH/tmp
RULES=keep-last=2,keep-hourly=2,keep-daily=2,keep-weekly=2,keep-monthly=2,keep-yearly=2

# PVE's prune of one backup, as archive_remove() does it
pve_prune() {  # ARCHIVE
	local a=$1 stem=${1%.tar*}
	rm -f "$a" "$stem.log" "$a.notes"
}

test_expect_success 'setup: three backups of CT 101 with notes, one verified' '
	make_small_tree "$SCRATCH/src"
	mkdir -p "$D" "$T"
	for i in 1 2 3; do
		cbackup_run 0 backup --root "$SCRATCH/src" --id 101 --dumpdir "$D" --tmpdir "$T" \
			--notes-template "night $i" --prune-backups keep-all=1
	done
	ls "$D"/vzdump-lxc-101-*.tar.zst >archives
	test "$(wc -l <archives)" = 3
	cbackup_run 0 verify "$(head -n 1 archives)"
	test -e "$(head -n 1 archives).verified"
'

test_expect_success 'PVE prunes the oldest; cbackup list removes its .sha256, .idx, .verified, saying so' '
	a=$(head -n 1 archives)
	pve_prune "$a"
	test -e "$a.sha256"
	test -e "$a.idx"
	cbackup_run 0 list 101 --dumpdir "$D"
	for s in sha256 idx verified; do
		test ! -e "$a.$s"
		test_has "$CB_ERR" "^INFO: removing .$a\\.$s.: its archive is gone"
	done
	test "$(grep -c "^101 " "$CB_OUT")" = 2
	for b in $(tail -n 2 archives); do
		test -e "$b.sha256"
		test -e "$b.idx"
		test -e "$b.notes"
	done
'

test_expect_success 'the same after cbackup prune (no ID) and after the next backup of the guest' '
	a=$(sed -n 2p archives)
	pve_prune "$a"
	cbackup_run 0 prune --dumpdir "$D" --prune-backups keep-all=1
	test ! -e "$a.sha256"
	test ! -e "$a.idx"
	test_has "$CB_ERR" "^INFO: removing .$a\\.sha256.: its archive is gone"
	a=$(sed -n 3p archives)
	pve_prune "$a"
	# (a name of its own: not the removed one'"'"'s, of this very second)
	stamp=$(sed -E "s/.*-([0-9_]{10}-[0-9_]{8})\.tar\.zst$/\1/" <<<"$a")
	while [ "$(date +%Y_%m_%d-%H_%M_%S)" = "$stamp" ]; do sleep 0.1; done
	cbackup_run 0 backup --root "$SCRATCH/src" --id 101 --dumpdir "$D" --tmpdir "$T"
	test ! -e "$a.sha256"
	test ! -e "$a.idx"
	test_has "$CB_ERR" "^INFO: removing .$a\\.idx.: its archive is gone"
'

test_expect_success 'a guest whose every archive PVE removed: list without ID cleans it too' '
	cbackup_run 0 backup --root "$SCRATCH/src" --id 102 --dumpdir "$D" --tmpdir "$T"
	a=$(find_archive "$D" ct 102 .zst)
	pve_prune "$a"
	cbackup_run 0 list --dumpdir "$D"
	test ! -e "$a.sha256"
	test ! -e "$a.idx"
	test_has "$CB_ERR" "^INFO: removing .$a\\.sha256.: its archive is gone"
'

prune_marks_table >"$SCRATCH/expected"

test_expect_success 'keep rules over both names: the marks of PVE'"'"'s prune_mark_backup_group' '
	mkdir "$SCRATCH/set"
	n=0
	while read -r mark stamp _; do
		n=$((n + 1))
		if [ $((n % 4)) -ge 2 ]; then
			a=$(synthetic_backup "$SCRATCH/set" ct 101 "$stamp")
		else
			a=$SCRATCH/set/vzdump-lxc-101-$stamp.tar.zst
			: >"$a"
			: >"$SCRATCH/set/vzdump-lxc-101-$stamp.log"
		fi
		if [ "$mark" = protected ]; then : >"$a.protected"; fi
	done <"$SCRATCH/expected"
	cbackup_run 0 prune 101 --dumpdir "$SCRATCH/set" --prune-backups $RULES --dry-run
	sed -E "s/[[:space:]]+/ /g; s/ \$//; s/(cbackup-ct|vzdump-lxc)-101-([0-9_-]+)\\.tar\\.zst/\\2/" \
		"$CB_OUT" >got
	test_cmp "$SCRATCH/expected" got
	# the real prune removes what PVE'"'"'s would, and the .log beside each
	cbackup_run 0 prune 101 --dumpdir "$SCRATCH/set" --prune-backups $RULES
	test ! -e "$SCRATCH/set/vzdump-lxc-101-2017_06_01-10_00_00.tar.zst"
	test ! -e "$SCRATCH/set/vzdump-lxc-101-2017_06_01-10_00_00.log"
	test ! -e "$SCRATCH/set/cbackup-ct-101-2021_01_12-08_00_00.tar.zst"
	test ! -e "$SCRATCH/set/cbackup-ct-101-2021_01_12-08_00_00.tar.zst.sha256"
	test -e "$SCRATCH/set/cbackup-ct-101-2019_01_01-10_00_00.tar.zst"
	test "$(ls "$SCRATCH/set" | grep -c "\\.tar\\.zst$")" = 14
'

test_done
