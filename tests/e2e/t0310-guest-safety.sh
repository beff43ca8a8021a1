#!/bin/bash
# The guest is thawed on every path (issue 12): a failed thaw is retried
# (by cbackup, then by its watchdog), a freeze-cmd that hangs is bounded, a
# signal ends any wait at once, the watchdog holds max-freeze while cbackup
# is stopped, a cgroup freeze that cannot complete is not held, and runs
# killed with SIGKILL leave no orphan .log behind the next run.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src DUMP=$SCRATCH/dump TMPD=$SCRATCH/tmp
# the hooks' and commands' sleep, ~60 s, its argument this script's own:
# pgrep/pkill must not see (or kill) the sleep of another copy of this
# test running beside it (a mutant run, a second suite on the machine)
NAP=60.31$$

# cg_thawed DIR: the cgroup is not frozen
cg_thawed() { test_must_fail cg_frozen "$1" >/dev/null; }

# new_guest NAME: a writer in a fresh cgroup; sets CG and SIDE
new_guest() {
	CG=$(make_cgroup v2)
	SIDE=$SCRATCH/side-$1
	start_writer "$CG" "$SRC/log-$1.txt" "$SIDE"
}

# conf ID KEY=VALUE...: a config with one guest section (values cannot
# hold a ';': the INI comment character)
conf() {
	local id=$1 kv
	shift
	{
		echo "tmpdir = $TMPD"
		echo "dumpdir = $DUMP"
		echo "compress = zstd"
		echo
		echo "[ct $id]"
		echo "root = $SRC"
		for kv in "$@"; do echo "$kv"; done
	} >"$SCRATCH/cb-$id.conf"
	echo "$SCRATCH/cb-$id.conf"
}

# start_bg ARGS...: cbackup in the background; sets CB_PID
start_bg() {
	# emptied here: the child opens them only once scheduled, and a wait
	# for a line in CB_ERR could read the previous case's log meanwhile
	: >"$CB_OUT"
	: >"$CB_ERR"
	"$CBACKUP" "$@" >"$CB_OUT" 2>"$CB_ERR" &
	CB_PID=$!
	cleanup_pid "$CB_PID"
}

# wait_rc: wait for CB_PID; sets RC
wait_rc() {
	RC=0
	wait "$CB_PID" || RC=$?
	echo "cbackup exited with $RC"
	cat "$CB_ERR"
}

test_expect_success ROOT 'setup: a small tree' '
	mkdir -p "$SRC" "$DUMP" "$TMPD"
	make_many_files "$SRC" 300
'

test_expect_success ROOT,CGROUP2 'thaw-cmd failing once: retried, guest thawed, WARN, ERROR naming the thaw, exit 1' '
	new_guest once
	c=$(conf 311 "freeze-cmd = echo 1 >$CG/cgroup.freeze" \
		"thaw-cmd = test -e $SCRATCH/failed-once && echo 0 >$CG/cgroup.freeze || (touch $SCRATCH/failed-once && exit 1)")
	cbackup_run 1 311 --config "$c"
	cat "$CB_ERR"
	test_has "$CB_ERR" "^WARN: thaw failed, retrying: thaw-cmd .* failed with exit code 1"
	error_names 311 "thaw: " "thaw failed 1 time"
	guest_thawed "$CG" "$SIDE"
'

test_expect_success ROOT,CGROUP2 'thaw-cmd failing until it works: cbackup gives up after 5 s, the watchdog keeps trying and thaws' '
	new_guest always
	c=$(conf 312 "freeze-cmd = echo 1 >$CG/cgroup.freeze" "thaw-timeout = 60" \
		"thaw-cmd = test -e $SCRATCH/thaw-works && echo 0 >$CG/cgroup.freeze")
	cbackup_run 1 312 --config "$c"
	cat "$CB_ERR"
	error_names 312 "thaw: " "watchdog \(pid [0-9]+\) keeps retrying"
	# cbackup is gone, the guest is still frozen: only the watchdog is left
	cg_frozen "$CG"
	wd=$(sed -nE "s/.*watchdog \(pid ([0-9]+)\).*/\1/p" "$CB_ERR" | head -n 1)
	test "$(cat /proc/$wd/comm)" = cbackup-wdog
	touch "$SCRATCH/thaw-works"
	wait_for 4 cg_thawed "$CG"
	guest_thawed "$CG" "$SIDE"
	wait_for 4 test_must_fail test -e /proc/$wd
'

# retry_lost SIGNAL ID WHAT: the watchdog, retrying a failing thaw-cmd, is
# hit by SIGNAL; cbackup, at the end of its wait for the thaw, ends it and
# thaws the guest itself, saying WHAT of it
# held_or_gone PID: the process is stopped, a zombie or gone
held_or_gone() {
	[ ! -e "/proc/$1/status" ] || grep -q "^State:.*\(stopped\|zombie\)" "/proc/$1/status"
}

retry_lost() {
	new_guest "lost-$2"
	c=$(conf "$2" "freeze-cmd = echo 1 >$CG/cgroup.freeze" "thaw-timeout = 60" \
		"thaw-cmd = test -e $SCRATCH/thaw-works-$2 && echo 0 >$CG/cgroup.freeze")
	start_bg "$2" --config "$c"
	wait_for 30 grep -q "^WARN: thaw failed, retrying" "$CB_ERR"
	wd=$(pgrep -P "$CB_PID" -x cbackup-wdog)
	cleanup_pid "$wd"
	kill "-$1" "$wd"
	# stopped (STOP), or killed: a zombie, or gone once cbackup reaped it
	# (under load it may reap it before a first look: no status file)
	wait_for 5 held_or_gone "$wd"
	touch "$SCRATCH/thaw-works-$2"
	wait_rc
	cg_thawed "$CG"
	test "$RC" = 1
	test_has "$CB_ERR" "^WARN: the freeze watchdog \(pid $wd\) $3.* cbackup thawed the guest itself"
	test_lacks "$CB_ERR" "keeps retrying"
	test_must_fail test -e "/proc/$wd/comm"
	guest_thawed "$CG" "$SIDE"
}

test_expect_success ROOT,CGROUP2 'the watchdog stopped while it retries a failing thaw: found stopped at the end of the wait, ended, cbackup thaws' '
	retry_lost STOP 319 "did not answer the thaw request"
'

test_expect_success ROOT,CGROUP2 'the watchdog killed while it retries a failing thaw: cbackup thaws the guest itself' '
	# which of the two checks of cbackup sees the killed watchdog first (its
	# pipe at EOF, or no answer within the second it gives) depends on
	# where the kill lands: either way cbackup thaws the guest itself
	retry_lost KILL 320 "(ended before it confirmed the thaw|did not answer the thaw request)"
'

# The bounds below are the mechanisms themselves, never a stopwatch: a
# command of about 60 s (NAP) that is gone when cbackup has exited was
# ended by cbackup (not waited for), and cbackup's own error says which bound fired.
test_expect_success ROOT,CGROUP2 'freeze-cmd that freezes, then hangs: ended at max-freeze, thawed, exit 1' '
	new_guest hang
	c=$(conf 313 "freeze-cmd = echo 1 >$CG/cgroup.freeze && sleep $NAP && touch $SCRATCH/slept-313" \
		"thaw-cmd = echo 0 >$CG/cgroup.freeze" "max-freeze = 2")
	cbackup_run 1 313 --config "$c"
	cat "$CB_ERR"
	test_must_fail pgrep -f "^sleep $NAP\$"
	test ! -e "$SCRATCH/slept-313"
	error_names 313 "freeze: " "freeze-cmd .* timed out after 2.0 s"
	guest_thawed "$CG" "$SIDE"
	test_must_fail pgrep -f "^sleep $NAP\$"
'

test_expect_success ROOT,CGROUP2 'SIGTERM while freeze-cmd hangs: the command ended, not waited for, thawed, ERROR names the signal' '
	new_guest term
	c=$(conf 314 "freeze-cmd = echo 1 >$CG/cgroup.freeze && sleep $NAP && touch $SCRATCH/slept-314" \
		"thaw-cmd = echo 0 >$CG/cgroup.freeze" "freeze-wait = 30" "max-freeze = 60")
	start_bg 314 --config "$c"
	wait_for 10 cg_frozen "$CG"
	kill -TERM "$CB_PID"
	wait_rc
	test_must_fail pgrep -f "^sleep $NAP\$"
	test ! -e "$SCRATCH/slept-314"
	test "$RC" != 0
	error_names 314 "freeze: " "interrupted by signal TERM"
	guest_thawed "$CG" "$SIDE"
'

test_expect_success ROOT,CGROUP2 'SIGTERM in a hook and in a bwlimit wait: each wait ended by the signal' '
	new_guest hook
	cat >"$SCRATCH/sleepy-hook" <<-EOF
	#!/bin/sh
	[ "\$1" = pre-stop ] && sleep $NAP && touch "$SCRATCH/slept-hook"
	exit 0
	EOF
	chmod +x "$SCRATCH/sleepy-hook"
	c=$(conf 315 "freeze-cgroup = $CG" "script = $SCRATCH/sleepy-hook")
	start_bg 315 --config "$c"
	wait_for 10 pgrep -f "^sleep $NAP\$"
	kill -TERM "$CB_PID"
	wait_rc
	test "$RC" != 0
	error_names 315 "" "signal TERM"
	test_must_fail pgrep -f "^sleep $NAP\$"
	test ! -e "$SCRATCH/slept-hook"
	guest_thawed "$CG" "$SIDE"
	# bwlimit: a 20 MB file at 100 KiB/s
	mkdir -p "$SCRATCH/big"
	head -c 20M /dev/urandom >"$SCRATCH/big/blob"
	start_bg backup --root "$SCRATCH/big" --id 316 --tmpdir "$TMPD" --dumpdir "$DUMP" --bwlimit 100
	wait_for 10 grep -q "starting first sync" "$CB_ERR"
	sleep 1
	kill -TERM "$CB_PID"
	wait_rc
	test "$RC" != 0
	test_has "$CB_ERR" "^ERROR: .*signal TERM"
	# 20 MB at 100 KiB/s is 200 s of first sync: ended in the middle
	test_lacks "$CB_ERR" "first sync finished"
	no_tmp_files "$DUMP"
'

test_expect_success ROOT,CGROUP2 'cbackup stopped in the pre-restart hook: the watchdog thaws at max-freeze, exit 1 after SIGCONT' '
	new_guest stop
	cat >"$SCRATCH/stop-hook" <<-EOF
	#!/bin/sh
	[ "\$1" = pre-restart ] || exit 0
	date +%s.%N >$SCRATCH/stopped-at
	kill -STOP \$PPID
	EOF
	chmod +x "$SCRATCH/stop-hook"
	c=$(conf 317 "freeze-cgroup = $CG" "script = $SCRATCH/stop-hook" "max-freeze = 2")
	start_bg 317 --config "$c"
	wait_for 10 test -s "$SCRATCH/stopped-at"
	thawed=yes
	wait_for 4 cg_thawed "$CG" || thawed=no
	state=$(ps -o stat= -p "$CB_PID" | cut -c1)
	# continued whatever happened: a stopped cbackup would hold the job
	# lock for the tests after this one
	kill -CONT "$CB_PID"
	wait_rc
	# thawed while cbackup was still stopped
	test "$thawed" = yes
	test "$state" = T
	test "$RC" = 1
	error_names 317 "thaw: " "max-freeze \(2 s\) exceeded"
	guest_thawed "$CG" "$SIDE"
	counter_advances "$SIDE"
'

test_expect_success ROOT,CGROUP2 'a guest that stops while frozen (killed, its cgroup removed): thawed at once, not retried until thaw-timeout, a WARN says so' '
	new_guest gone
	cat >"$SCRATCH/gone-hook" <<-EOF
	#!/bin/sh
	[ "\$1" = pre-restart ] || exit 0
	for p in \$(cat $CG/cgroup.procs); do kill -9 \$p; done
	while grep -q . $CG/cgroup.procs; do sleep 0.01; done   # (size 0: not -s)
	rmdir $CG
	EOF
	chmod +x "$SCRATCH/gone-hook"
	rm -rf "$DUMP"/*
	c=$(conf 319 "freeze-cgroup = $CG" "script = $SCRATCH/gone-hook" "thaw-timeout = 30")
	cbackup_run 0 319 --config "$c"
	cat "$CB_ERR"
	test_lacks "$CB_ERR" "thaw failed"
	test_has "$DUMP"/vzdump-lxc-319-*.log "WARN: the freeze cgroup .* is gone: the guest stopped while it was frozen"
	mkdir "$SCRATCH/gone-check"
	tar -C "$SCRATCH/gone-check" -xf "$(find_archive "$DUMP" ct 319 .zst)"
	test -s "$SCRATCH/gone-check/log-gone.txt"
'

if [ -c /dev/fuse ] && grep -qw fuse /proc/filesystems; then
test_expect_success ROOT,CGROUP2 'a task that cannot freeze (blocked on FUSE): the rest is thawed within freeze-wait, the task named' '
	new_guest fuse
	mkdir "$SCRATCH/fuse"
	"$HELPERS/fuse-hang" "$SCRATCH/fuse" >"$SCRATCH/fuse.out" &
	cleanup_pid $!
	wait_for 5 grep -q ready "$SCRATCH/fuse.out"
	cleanup_mount "$SCRATCH/fuse"
	start_guest "$CG" cat "$SCRATCH/fuse/hang"
	wait_for 5 grep -q request_wait_answer /proc/$GUEST_PID/wchan
	c=$(conf 318 "freeze-cgroup = $CG" "freeze-wait = 2")
	cbackup_run 1 318 --config "$c"
	cat "$CB_ERR"
	error_names 318 "freeze: " "did not freeze within 2.0 s.*pid $GUEST_PID \(cat\) state D"
	guest_thawed "$CG" "$SIDE"
'
else
test_skip 'a task that cannot freeze (blocked on FUSE)' 'no /dev/fuse or no fuse in this kernel'
fi

test_expect_success ROOT 'SIGKILLed runs leave no orphan .log after the next run' '
	rm -rf "$DUMP"/*
	cat >"$SCRATCH/slow-hook" <<-EOF
	#!/bin/sh
	[ "\$1" = pre-stop ] && sleep $NAP
	exit 0
	EOF
	chmod +x "$SCRATCH/slow-hook"
	for i in 1 2 3; do
		mkdir -p "$TMPD/k$i"
		start_bg backup --root "$SRC" --id 319 --tmpdir "$TMPD/k$i" --dumpdir "$DUMP" \
			--script "$SCRATCH/slow-hook"
		wait_for 10 pgrep -f "^sleep $NAP\$"
		kill -KILL "$CB_PID"
		wait "$CB_PID" || :
		pkill -f "^sleep $NAP\$"
		sleep 1.1   # the next run gets a name of its own
	done
	# each killed run removed the orphan of the run before it
	ls "$DUMP"
	test "$(ls "$DUMP" | grep -c "\.log$")" = 1
	cbackup_run 0 backup --root "$SRC" --id 319 --tmpdir "$TMPD" --dumpdir "$DUMP"
	ls "$DUMP"
	test "$(ls "$DUMP" | grep -c "\.log$")" = 1
	a=$(find_archive "$DUMP" ct 319 .zst)
	test -f "${a%.tar.zst}.log"
	test_has "$CB_ERR" "removing .*\.log. left by an interrupted run"
'

test_expect_success ROOT 'cbackup prune removes the orphan .log of a SIGKILLed run too (the guest not locked)' '
	mkdir -p "$TMPD/k9"
	sleep 1.1   # a name of its own, not the last run of the case before
	start_bg backup --root "$SRC" --id 319 --tmpdir "$TMPD/k9" --dumpdir "$DUMP" \
		--script "$SCRATCH/slow-hook"
	wait_for 10 pgrep -f "^sleep $NAP\$"
	kill -KILL "$CB_PID"
	wait "$CB_PID" || :
	pkill -f "^sleep $NAP\$"
	ls "$DUMP"
	test "$(ls "$DUMP" | grep -c "\.log$")" = 2
	cbackup_run 0 prune 319 --dumpdir "$DUMP" --prune-backups keep-last=5
	cat "$CB_ERR"
	test_has "$CB_ERR" "removing .*\.log. left by an interrupted run"
	test "$(ls "$DUMP" | grep -c "\.log$")" = 1
	a=$(find_archive "$DUMP" ct 319 .zst)
	test -f "${a%.tar.zst}.log"
'

test_done
