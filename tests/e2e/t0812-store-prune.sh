#!/bin/bash
# prune on a unit store (issue 41): the keep rules remove manifests, then
# the units no manifest names are removed, unless a night is being
# written (its mark, from any host); a night waits for a collection's
# mark, and ignores a killed one's. A night killed or out of space leaves
# no manifest; the next night removes its mark and uses what it wrote.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
STORE=$SCRATCH/store
CONF=$SCRATCH/cbackup.conf


# night RC [ARGS...]
night() {
	local rc=$1
	shift
	sleep 1.1
	# a collection's mark a failed case left waits 3 s, not the default hours
	cbackup_run "$rc" backup --config "$CONF" --storage offsite --root "$SRC" --id 101 --type ct \
		--unit-size 1 --lockwait 0.05 "$@"
}

nights() { ls -1 "$STORE/nights/" 2>/dev/null | grep -c "^cbackup-ct-101-"; }
units() { find "$STORE/units" -type f | wc -l; }

# mark KIND TAG AGE: a mark of another host, AGE seconds old
mark() {
	mkdir -p "$STORE/marks/$1"
	printf "host otherhost\npid 1\ntime %s\n" $(( $(date +%s) - $3 )) >"$STORE/marks/$1/$2"
}

# stored: "WRITTEN PRESENT" of the last night
stored() {
	sed -n "s/.*INFO: unit store '[^']*': [0-9]* units, \([0-9]*\) new written .*, \([0-9]*\) already stored .*/\1 \2/p" "$CB_ERR"
}

test_expect_success ROOT 'prune keeps by the rules, then removes the units only the pruned nights had' '
	store_setup 300
	night 0
	for i in 1 2; do
		seq $i 11 300000 >"$SRC/usr/share/f$i.txt"
		night 0
	done
	test "$(nights)" = 3
	before=$(units)
	cbackup_run 0 prune 101 --config "$CONF" --storage offsite --prune-backups keep-last=1 --dry-run
	test "$(nights)" = 3
	test "$(units)" = "$before"
	test_has "$CB_OUT" "^remove +cbackup-ct-101-"
	test "$(ls "$STORE"/cbackup-ct-101-*.log | wc -l)" = 3
	cbackup_run 0 prune 101 --config "$CONF" --storage offsite --prune-backups keep-last=1
	test "$(nights)" = 1
	test_has "$CB_ERR" "storage .offsite.: removed [1-9][0-9]* unit\(s\)"
	# the log files of the pruned nights, beside the store, go with them
	test "$(ls "$STORE"/cbackup-ct-101-*.log | wc -l)" = 1
	test "$(units)" -lt "$before"
	cbackup_run 0 verify --config "$CONF" offsite:
	n=$(ls "$STORE/nights")
	cbackup_run 0 restore --config "$CONF" "offsite:$n" "$SCRATCH/r1"
	diff -r "$SRC" "$SCRATCH/r1"
'

test_expect_success ROOT 'a night being written elsewhere stops the collection; a stale mark does not' '
	night 0
	n=$(nights)
	mark night cbackup-ct-9-2026_01_01-00_00_00.tar.zst 10
	cbackup_run 0 prune 101 --config "$CONF" --storage offsite --prune-backups keep-last=1
	test "$(nights)" = 1
	test_has "$CB_ERR" "garbage collection skipped: 1 night\(s\) being written, cbackup-ct-9-2026_01_01-00_00_00.tar.zst \(host otherhost, process 1\)"
	# the units the pruned night alone had are still there
	cbackup_run 0 prune 101 --config "$CONF" --storage offsite --prune-backups keep-last=1 --dry-run
	test_has "$CB_ERR" "skipped"
	mark night cbackup-ct-9-2026_01_01-00_00_00.tar.zst 100000
	cbackup_run 0 prune 101 --config "$CONF" --storage offsite --prune-backups keep-last=1
	test_has "$CB_ERR" "removed [1-9][0-9]* unit\(s\)"
	test ! -e "$STORE/marks/night/cbackup-ct-9-2026_01_01-00_00_00.tar.zst"
	cbackup_run 0 verify --config "$CONF" offsite:
'

test_expect_success ROOT 'a night waits for a running collection (lockwait), and ignores a killed one' '
	mark gc otherhost-1 5
	night 1 --lockwait 0.02
	test_has "$CB_ERR" "ERROR: Backup of VM 101 failed - .*storage .offsite.: a garbage collection is running \(otherhost-1 \(host otherhost, process 1\)\)"
	test "$(nights)" = 1
	test -z "$(ls "$STORE/marks/night")"
	mark gc otherhost-1 100000
	night 0
	test "$(nights)" = 2
	test ! -e "$STORE/marks/gc/otherhost-1"
'

test_expect_success ROOT 'a night killed mid-way leaves no manifest; the next one removes its mark and uses its units' '
	build_helpers
	seq 7 13 400000 >"$SRC/usr/share/f3.txt"
	seq 9 17 400000 >"$SRC/usr/share/f4.txt"
	n=$(nights)
	before=$(units)
	with_fault "rename:SIGKILL:~tmp:after=2" night 137
	fault_fired "rename (SIGKILL|Killed)"
	test "$(nights)" = "$n"
	test "$(units)" -gt "$before"
	test -n "$(ls "$STORE/marks/night")"
	test -n "$(ls -A "$STORE/~tmp")"
	night 0
	test "$(nights)" = $((n + 1))
	test -z "$(ls "$STORE/marks/night")"
	# the temporary file the kill left, removed by the next run on this host
	test -z "$(ls -A "$STORE/~tmp")"
	read -r written present <<<"$(stored)"
	# the two units the killed night wrote were not written again
	test "$present" -ge 2
	cbackup_run 0 verify --config "$CONF" offsite:
'

test_expect_success ROOT 'a night out of space fails, leaves no manifest, no mark and no temporary file' '
	build_helpers
	seq 5 3 400000 >"$SRC/usr/share/f5.txt"
	n=$(nights)
	with_fault "write:ENOSPC:~tmp:after=100000" night 1
	fault_fired "write ENOSPC"
	test_has "$CB_ERR" "ERROR: Backup of VM 101 failed - .*cannot put .units/"
	test "$(nights)" = "$n"
	test -z "$(ls "$STORE/marks/night")"
	test -z "$(ls -A "$STORE/~tmp")"
	night 0
	test "$(nights)" = $((n + 1))
'

test_expect_success ROOT 'a prune while a night is being written (held at its first unit) removes no unit it relies on; the night ends whole' '
	build_helpers
	# night A has f6 as it is; B another f6; the held night C has f6 as
	# in A again: its units are in the store (A has them), C writes none
	# of them and relies on them, though only A, pruned meanwhile, names them
	cp -p "$SRC/usr/share/f6.txt" "$SCRATCH/f6.orig"
	night 0
	seq 4 19 300000 >"$SRC/usr/share/f6.txt"
	night 0
	cp -p "$SCRATCH/f6.orig" "$SRC/usr/share/f6.txt"
	printf "C\n" >>"$SRC/var/log/syslog"
	rm -f "$FAULT_LOG"
	# held at the first unit it writes (its mark and listing done before)
	with_fault_bg "rename:SIGSTOP:~tmp:after=1" \
		"$CBACKUP" backup --config "$CONF" --storage offsite --root "$SRC" --id 101 --type ct \
		--unit-size 1 >"$SCRATCH/held.out" 2>"$SCRATCH/held.err"
	pid=$FAULT_PID
	wait_for 30 grep -q "^State:.*stopped" /proc/$pid/status || { kill -KILL "$pid"; false; }
	# the older nights pruned: their units are named by no manifest now
	cbackup_run 0 prune 101 --config "$CONF" --storage offsite --prune-backups keep-last=1
	test_has "$CB_ERR" "garbage collection skipped: 1 night\(s\) being written, cbackup-ct-101-.* \(host [^,]*, process $pid\)"
	kill -CONT "$pid"
	rc=0
	wait "$pid" || rc=$?
	test "$rc" = 0
	fault_fired "rename SIGSTOP|rename Stopped"
	cbackup_run 0 verify --config "$CONF" offsite:
	n=$(ls "$STORE/nights" | tail -n 1)
	cbackup_run 0 restore --config "$CONF" "offsite:$n" "$SCRATCH/r6"
	diff -r "$SRC" "$SCRATCH/r6"
	# now nothing runs: the next prune collects
	cbackup_run 0 prune 101 --config "$CONF" --storage offsite --prune-backups keep-last=1
	test_has "$CB_ERR" "removed [1-9][0-9]* unit\(s\)"
	cbackup_run 0 verify --config "$CONF" offsite:
'

test_expect_success ROOT 'two hosts back the same guest up to one store: the second fails, naming the first' '
	printf "D\n" >>"$SRC/var/log/syslog"
	before=$(nights)
	rm -f "$FAULT_LOG"
	# host A (its own lock directory: another host shares only the store),
	# held at the first unit it writes
	mkdir -m 0700 -p "$SCRATCH/locks-a"
	CBACKUP_LOCK_DIR=$SCRATCH/locks-a \
	with_fault_bg "rename:SIGSTOP:~tmp:after=1" \
		"$CBACKUP" backup --config "$CONF" --storage offsite --root "$SRC" --id 101 --type ct \
		--unit-size 1 >"$SCRATCH/a.out" 2>"$SCRATCH/a.err"
	pid=$FAULT_PID
	cleanup_pid "$pid"
	wait_for 30 grep -q "^State:.*stopped" /proc/$pid/status 2>/dev/null || { cat "$SCRATCH/a.err"; false; }
	# host B, meanwhile
	sleep 1.1
	cbackup_run 1 backup --config "$CONF" --storage offsite --root "$SRC" --id 101 --type ct \
		--unit-size 1
	test_has "$CB_ERR" "ERROR: .*CT 101 is being backed up to this storage by another host"
	test "$(nights)" = "$before"
	kill -CONT "$pid"
	rc=0
	wait "$pid" || rc=$?
	test "$rc" = 0
	test "$(nights)" = $((before + 1))
	test -z "$(ls "$STORE/locks" 2>/dev/null)"
'

test_done
