#!/bin/bash
# Proxmox VE lists and restores only the container backups whose names it
# knows: pve-storage src/PVE/Storage.pm, archive_info(), takes
# ^vzdump-(lxc|openvz|qemu)-.+ with a tar/vma extension as a backup at all,
# and as a "standard" one (the GUI's Restore, prune) only
# vzdump-lxc-<VMID [1-9][0-9]{2,8}>-YYYY_MM_DD-HH_MM_SS.<ext>, its time
# read back with timelocal (local time); the log is <that stem>.log
# (logfilename) and the notes <archive>.notes (notesfilename); the
# protection flag is <archive>.protected (protection_file_path). So a
# container's archive is named that way by default; `archive-name =
# cbackup` and IDs PVE cannot hold keep cbackup-ct-...; both names are one
# series for list, prune and unit reuse.
. "$(dirname "$0")/lib.sh"

D=$SCRATCH/dump
T=$SCRATCH/tmp
# archive_info()'s standard-name pattern for a container (tar, its codecs)
STD='^vzdump-lxc-[1-9][0-9]{2,8}-[0-9]{4}_[0-9]{2}_[0-9]{2}-[0-9]{2}_[0-9]{2}_[0-9]{2}\.tar(\.(zst|lzo|gz))?$'

test_expect_success 'setup' '
	make_reuse_tree "$SCRATCH/src" 60
	mkdir -p "$D" "$T"
'

test_expect_success 'a container 101: vzdump-lxc-101-STAMP.tar.zst, its .log, .notes, .protected' '
	cbackup_run 0 backup --root "$SCRATCH/src" --id 101 --dumpdir "$D" --tmpdir "$T" \
		--notes-template "{{vmid}} nightly" --protected 1
	a=$(ls "$D" | grep "\.tar\.zst$")
	[[ $a =~ $STD ]] || { echo "name $a is not a standard PVE name"; false; }
	stem=${a%.tar.zst}
	test -s "$D/$stem.log"
	test_has "$D/$a.notes" "^101 nightly$"
	test -e "$D/$a.protected"
	test -s "$D/$a.sha256"
	test_has "$D/$stem.log" "INFO: creating vzdump archive .$D/$a."
	test -z "$(ls "$D" | grep "^cbackup-")"
'

test_expect_success 'the time stamp is local time, as vzdump (archive_info reads it with timelocal)' '
	rm -f "$D"/*
	# Kathmandu is UTC+05:45: its minute of the run is never UTC'"'"'s
	k0=$(TZ=Asia/Kathmandu date +%Y_%m_%d-%H_%M)
	TZ=Asia/Kathmandu cbackup_run 0 backup --root "$SCRATCH/src" --id 102 --dumpdir "$D" --tmpdir "$T"
	k1=$(TZ=Asia/Kathmandu date +%Y_%m_%d-%H_%M)
	a=$(ls "$D" | grep "\.tar\.zst$")
	minute=$(sed -E "s/^vzdump-lxc-102-(.{16}).*/\1/" <<<"$a")
	echo "$a: $minute, Kathmandu $k0 .. $k1"
	printf "%s\n" "$k0" "$k1" >minutes
	grep -qx "$minute" minutes
'

test_expect_success 'archive-name = cbackup (config and command line) keeps cbackup-ct-101-...' '
	rm -f "$D"/*
	printf "archive-name: cbackup\n" >"$SCRATCH/names.conf"
	cbackup_run 0 backup --config "$SCRATCH/names.conf" --root "$SCRATCH/src" --id 101 \
		--dumpdir "$D" --tmpdir "$T"
	ARCHIVE_NAME=cbackup find_archive "$D" ct 101 .zst
	rm -f "$D"/*
	cbackup_run 0 backup --archive-name cbackup --root "$SCRATCH/src" --id 101 --dumpdir "$D" --tmpdir "$T"
	ARCHIVE_NAME=cbackup find_archive "$D" ct 101 .zst
	cbackup_run 2 backup --archive-name pve --root "$SCRATCH/src" --id 101 --dumpdir "$D" --tmpdir "$T"
	test_has "$CB_ERR" "archive-name.*(vzdump|cbackup)"
'

test_expect_success 'IDs PVE cannot hold (web, 99, 1000000000, 0101) keep cbackup-ct-ID' '
	rm -f "$D"/*
	for id in web 99 1000000000 0101; do
		cbackup_run 0 backup --root "$SCRATCH/src" --id $id --dumpdir "$D" --tmpdir "$T"
		find_archive "$D" ct $id .zst >/dev/null
		test -n "$(ls "$D" | grep "^cbackup-ct-$id-.*\.tar\.zst$")"
	done
	test -z "$(ls "$D" | grep "^vzdump-")"
'

test_expect_success 'old and new names are one series: list, prune keep-last, reuse from the old name' '
	rm -f "$D"/*
	synthetic_backup "$D" ct 101 2020_01_01-00_00_00 >/dev/null
	cbackup_run 0 backup --archive-name cbackup --root "$SCRATCH/src" --id 101 --dumpdir "$D" \
		--tmpdir "$T" --prune-backups keep-all=1
	old=$(ls "$D" | grep "^cbackup-ct-101-.*\.tar\.zst$" | grep -v 2020_01_01)
	test -n "$old"
	echo "change" >>"$SCRATCH/src/etc/conf"
	# a second of its own: two names of one second are one keep-last slot
	stamp=$(sed -E "s/^cbackup-ct-101-(.*)\.tar\.zst$/\1/" <<<"$old")
	while [ "$(date +%Y_%m_%d-%H_%M_%S)" = "$stamp" ]; do sleep 0.1; done
	cbackup_run 0 backup --root "$SCRATCH/src" --id 101 --dumpdir "$D" --tmpdir "$T" \
		--prune-backups keep-last=2
	new=$(ls "$D" | grep "^vzdump-lxc-101-.*\.tar\.zst$")
	test_has "$CB_ERR" "INFO: reused [1-9][0-9]* units \([^)]*\) from $old"
	# keep-last=2 over both names: the 2020 one went
	test_has "$CB_ERR" "removing backup .*cbackup-ct-101-2020_01_01-00_00_00\.tar\.zst"
	test ! -e "$D/cbackup-ct-101-2020_01_01-00_00_00.tar.zst"
	cbackup_run 0 list 101 --dumpdir "$D"
	test_has "$CB_OUT" "$old"
	test_has "$CB_OUT" "$new"
	test "$(grep -c "^101 " "$CB_OUT")" = 2
'

test_expect_success 'vzdump'"'"'s log lines (pve-manager PVE/VZDump.pm exec_backup_task, pve-container src/PVE/VZDump/LXC.pm prepare): started at, CT Name, notes, protected, retention, pruned, finished at' '
	rm -f "$D"/*
	mkdir -p "$SCRATCH/cfg"
	printf "arch: amd64\nhostname: web-101\nostype: debian\n" >"$SCRATCH/cfg/101.conf"
	cbackup_run 0 backup --root "$SCRATCH/src" --id 101 --dumpdir "$D" --tmpdir "$T"
	sleep 1.1   # the next archive gets a name of its own
	cbackup_run 0 backup --root "$SCRATCH/src" --id 101 --dumpdir "$D" --tmpdir "$T" \
		--guest-config "$SCRATCH/cfg/101.conf" --notes-template "{{guestname}}" \
		--prune-backups keep-last=1,keep-daily=1
	cat "$CB_ERR"
	D8="[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}"
	test_has "$CB_ERR" "^INFO: Starting Backup of VM 101 \(lxc\)$"
	test_has "$CB_ERR" "^INFO: Backup started at $D8$"
	test_has "$CB_ERR" "^INFO: CT Name: web-101$"
	test_has "$CB_ERR" "^INFO: adding notes to backup$"
	test_has "$CB_ERR" "^INFO: prune older backups with retention: keep-daily=1, keep-last=1$"
	test_has "$CB_ERR" "^INFO: pruned 1 backup\(s\) not covered by keep-retention policy$"
	test_has "$CB_ERR" "^INFO: Backup finished at $D8$"
	a=$(ls "$D" | grep "\.tar\.zst$")
	test_has "$D/${a%.tar.zst}.log" "^${TS}INFO: CT Name: web-101$"
	sleep 1.1
	cbackup_run 0 backup --root "$SCRATCH/src" --id 101 --dumpdir "$D" --tmpdir "$T" \
		--protected 1 --remove 0
	test_has "$CB_ERR" "^INFO: marking backup as protected$"
'

test_done
