#!/bin/bash
# Locks: the global flock $CBACKUP_LOCK_DIR/cbackup.lock (vzdump's wording,
# lockwait in minutes, exit 3 on timeout); two concurrent jobs (the second
# waits, then gives up); a lock file left by a dead process never blocks;
# the per-guest lock on this host and the per-guest lock file on the
# storage fail only that guest.
. "$(dirname "$0")/lib.sh"

D=$SCRATCH/dump
L=$CBACKUP_LOCK_DIR
GLOBAL=$L/cbackup.lock

test_expect_success 'setup: two guests' '
	make_small_tree "$SCRATCH/ct101"
	make_small_tree "$SCRATCH/ct102"
	mkdir "$SCRATCH/tmp" "$D"
	cat >"$SCRATCH/c.conf" <<-CONF
	tmpdir = $SCRATCH/tmp
	dumpdir = $D
	[ct 101]
	root = $SCRATCH/ct101
	[ct 102]
	root = $SCRATCH/ct102
	CONF
	# backup-start waits for $SCRATCH/go (at most 30 s): a job that holds
	# the global lock for as long as the test wants
	cat >"$SCRATCH/wait-hook" <<-HOOK
	#!/bin/sh
	[ "\$1" = backup-start ] || exit 0
	: >"$SCRATCH/started"
	i=0
	while [ ! -e "$SCRATCH/go" ] && [ \$i -lt 1500 ]; do sleep 0.02; i=\$((i + 1)); done
	HOOK
	chmod +x "$SCRATCH/wait-hook"
'

test_expect_success 'the global lock is held: waits lockwait (0.05 min = 3 s), exit 3' '
	hold_lock "$GLOBAL"
	t0=$(now_s)
	cbackup_run 3 101 --config "$SCRATCH/c.conf" --lockwait 0.05
	took=$(elapsed_since "$t0")
	echo "gave up after $took s"
	release_lock "$HOLD_PID" "$GLOBAL"
	at_least "$took" 2.5
	grep -x "INFO: trying to get global lock - waiting..." "$CB_ERR"
	grep -x "ERROR: can'"'"'t acquire lock '"'"'$GLOBAL'"'"' - got timeout" "$CB_ERR"
	test_must_fail grep "Starting Backup" "$CB_ERR"
	test -z "$(ls "$D")"
'

test_expect_success 'the lock released: the next run works' '
	cbackup_run 0 101 --config "$SCRATCH/c.conf" --lockwait 0.05
	test_must_fail grep "trying to get global lock" "$CB_ERR"
	find_archive "$D" ct 101 .zst
'

test_expect_success 'released while waiting: the waiting job gets the lock and runs' '
	rm -rf "$D"
	mkdir "$D"
	hold_lock "$GLOBAL"
	("$CBACKUP" 101 --config "$SCRATCH/c.conf" --lockwait 1 >/dev/null 2>"$SCRATCH/waiter.err"
	 echo $? >"$SCRATCH/waiter.rc") &
	wait_for 5 grep -q "trying to get global lock" "$SCRATCH/waiter.err"
	sleep 0.3
	test ! -e "$SCRATCH/waiter.rc"
	release_lock "$HOLD_PID" "$GLOBAL"
	wait_for 20 test -s "$SCRATCH/waiter.rc"
	cat "$SCRATCH/waiter.err"
	test "$(cat "$SCRATCH/waiter.rc")" = 0
	grep -x "INFO: got global lock" "$SCRATCH/waiter.err"
	find_archive "$D" ct 101 .zst
'

test_expect_success 'two concurrent jobs: the second waits, then exit 3; the first finishes' '
	rm -rf "$D" "$SCRATCH/go" "$SCRATCH/started" "$SCRATCH/first.rc"
	mkdir "$D"
	("$CBACKUP" 101 --config "$SCRATCH/c.conf" --script "$SCRATCH/wait-hook" \
		>/dev/null 2>"$SCRATCH/first.err"; echo $? >"$SCRATCH/first.rc") &
	wait_for 10 test -e "$SCRATCH/started"
	t0=$(now_s)
	rc=0
	"$CBACKUP" 102 --config "$SCRATCH/c.conf" --lockwait 0.05 2>"$SCRATCH/second.err" || rc=$?
	took=$(elapsed_since "$t0")
	: >"$SCRATCH/go"
	wait_for 20 test -s "$SCRATCH/first.rc"
	echo "second gave up after $took s with exit $rc"
	cat "$SCRATCH/second.err"
	test "$rc" = 3
	at_least "$took" 2.5
	grep -x "INFO: trying to get global lock - waiting..." "$SCRATCH/second.err"
	grep -x "ERROR: can'"'"'t acquire lock '"'"'$GLOBAL'"'"' - got timeout" "$SCRATCH/second.err"
	test "$(cat "$SCRATCH/first.rc")" = 0
	find_archive "$D" ct 101 .zst
	test -z "$(ls "$D" | grep -e -102-)"
'

test_expect_success 'lock files left by dead processes do not block' '
	rm -rf "$D"
	mkdir "$D"
	# the holders are SIGKILLed: the files stay, the flocks go with them
	hold_lock "$GLOBAL"; g=$HOLD_PID
	hold_lock "$L/cbackup-101.lock"; p=$HOLD_PID
	hold_lock "$D/.cbackup-ct-101.lock"; s=$HOLD_PID
	kill -KILL -- -$g -$p -$s
	wait_for 5 lock_is_free "$GLOBAL"
	wait_for 5 lock_is_free "$L/cbackup-101.lock"
	wait_for 5 lock_is_free "$D/.cbackup-ct-101.lock"
	test -e "$GLOBAL"
	test -e "$L/cbackup-101.lock"
	test -e "$D/.cbackup-ct-101.lock"
	echo 99999 >"$GLOBAL"   # even with a dead PID in it
	cbackup_run 0 101 --config "$SCRATCH/c.conf" --lockwait 0.05
	test_must_fail grep "trying to get global lock" "$CB_ERR"
	find_archive "$D" ct 101 .zst
'

test_expect_success 'per-guest lock held on this host: that guest fails (exit 1), the other succeeds' '
	rm -rf "$D"
	mkdir "$D"
	hold_lock "$L/cbackup-101.lock"
	cbackup_run 1 101 102 --config "$SCRATCH/c.conf"
	release_lock "$HOLD_PID" "$L/cbackup-101.lock"
	grep -E "^ERROR: Backup of VM 101 failed - .*CT 101 is locked by another cbackup on this host" "$CB_ERR"
	grep -x "INFO: Finished Backup of VM 102 ([0-9][0-9]:[0-9][0-9]:[0-9][0-9])" "$CB_ERR"
	test "$(tail -n 1 "$CB_ERR")" = "INFO: Backup job finished with errors"
	find_archive "$D" ct 102 .zst
	test -z "$(ls "$D" | grep "^vzdump-lxc-101-.*\.tar")"
'

test_expect_success 'per-guest lock file on the storage held (another host): that guest fails' '
	rm -rf "$D"
	mkdir "$D"
	hold_lock "$D/.cbackup-ct-102.lock"
	cbackup_run 1 101 102 --config "$SCRATCH/c.conf"
	release_lock "$HOLD_PID" "$D/.cbackup-ct-102.lock"
	grep -E "^ERROR: Backup of VM 102 failed - .*being backed up to this storage by another host.*\.cbackup-ct-102\.lock" "$CB_ERR"
	find_archive "$D" ct 101 .zst
	test -z "$(ls "$D" | grep "^vzdump-lxc-102-.*\.tar")"
'

test_expect_success 'a backup in progress holds its guest lock and its storage lock' '
	rm -rf "$D" "$SCRATCH/go" "$SCRATCH/started" "$SCRATCH/first.rc"
	mkdir "$D"
	("$CBACKUP" 101 --config "$SCRATCH/c.conf" --script "$SCRATCH/wait-hook" \
		>/dev/null 2>"$SCRATCH/first.err"; echo $? >"$SCRATCH/first.rc") &
	wait_for 10 test -e "$SCRATCH/started"
	held_local=0 held_store=0 held_global=0
	lock_is_held "$L/cbackup-101.lock" && held_local=1
	lock_is_held "$D/.cbackup-ct-101.lock" && held_store=1
	lock_is_held "$GLOBAL" && held_global=1
	: >"$SCRATCH/go"
	wait_for 20 test -s "$SCRATCH/first.rc"
	echo "local=$held_local storage=$held_store global=$held_global"
	test "$held_local$held_store$held_global" = 111
	test "$(cat "$SCRATCH/first.rc")" = 0
	lock_is_free "$L/cbackup-101.lock"
	lock_is_free "$D/.cbackup-ct-101.lock"
	lock_is_free "$GLOBAL"
'

test_done
