#!/bin/bash
# cbackup dies while the guest is frozen: SIGKILL (the watchdog thaws the
# guest when cbackup's pipe closes) and SIGTERM (the signal handler thaws at once, the
# backup fails cleanly: non-zero exit, no .tmp, no staging left).
# killer-on-freeze sends the signal the moment it sees the guest frozen.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src

test_expect_success ROOT 'setup: a tree with many files (a long final sync)' '
	mkdir -p "$SRC/data"
	make_many_files "$SRC" 5000
'

# check_thawed_after_kill EVENTS: frozen, killed, then thawed while the
# watcher lingered (30 s, half of max-freeze's default 60 s): the thaw came
# from the kill (the watchdog's pipe, or the signal handler), not from the
# max-freeze deadline. No stopwatch: a loaded machine may take its time.
check_thawed_after_kill() {
	cat "$1"
	awk '
		$1 == "frozen" && !k { f = 1 }
		$1 == "killed" { if (!f) { print "killed before frozen?"; exit 1 } k = 1 }
		$1 == "thawed" && k { t = 1 }
		END {
			if (!k) { print "cbackup was never seen in the frozen window"; exit 1 }
			if (!t) { print "the guest was not thawed after the kill"; exit 1 }
		}' "$1"
}

# the pre-restart hook holds the freeze until cbackup is gone (at most 30 s):
# the signal lands inside the freeze however late a loaded machine lets the
# killer run
printf '%s\n' '#!/bin/sh' '[ "$1" = pre-restart ] || exit 0' \
	'i=0; while kill -0 $PPID 2>/dev/null && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done' \
	>"$SCRATCH/hold-hook"
chmod +x "$SCRATCH/hold-hook"

# kill_in_freeze ID SIGNAL DELAY_MS CGROUP CBACKUP-FREEZE-OPTIONS...: a
# writer guest in CGROUP, cbackup signalled DELAY_MS after the freeze; sets RC
kill_in_freeze() {
	local id=$1 sig=$2 delay=$3 cg=$4
	shift 4
	SIDE=$SCRATCH/side-$id
	start_writer "$cg" "$SRC/data/log-$id.txt" "$SIDE"
	# each run its own tmpdir: a SIGKILLed run cannot remove its staging
	mkdir "$SCRATCH/dump-$id" "$SCRATCH/tmp-$id"
	RC=0
	"$HELPERS/killer-on-freeze" -c "$cg" -o "$SCRATCH/events-$id" -s "$SIDE" \
		-k "$sig" -d "$delay" -l 30000 -- \
		"$CBACKUP" backup --root "$SRC" --id "$id" --tmpdir "$SCRATCH/tmp-$id" \
		--dumpdir "$SCRATCH/dump-$id" --compress zstd --mode suspend "$@" \
		>"$CB_OUT" 2>"$CB_ERR" || RC=$?
	cat "$CB_ERR"
	echo "exit status $RC"
}

guest_runs_again() {
	test_must_fail cg_frozen "$1"
	counter_advances "$SIDE"
	kill -KILL "$GUEST_PID"
}

test_expect_success ROOT,CGROUP2 'SIGKILL while frozen (cgroup v2): watchdog thaws' '
	cg=$(make_cgroup v2)
	kill_in_freeze 301 9 0 "$cg" --freeze-cgroup "$cg" --script "$SCRATCH/hold-hook"
	[ "$RC" = 137 ]
	check_thawed_after_kill "$SCRATCH/events-301"
	test_must_fail grep "resuming guest" "$CB_ERR"
	guest_runs_again "$cg"
'

test_expect_success ROOT,CGROUP1 'SIGKILL while frozen (cgroup v1 freezer): watchdog thaws' '
	cg=$(make_cgroup v1)
	kill_in_freeze 302 9 0 "$cg" --freeze-cgroup "$cg" --script "$SCRATCH/hold-hook"
	test_must_fail grep "resuming guest" "$CB_ERR"
	[ "$RC" = 137 ]
	check_thawed_after_kill "$SCRATCH/events-302"
	guest_runs_again "$cg"
'

test_expect_success ROOT,CGROUP2 'SIGKILL during a slow freeze-cmd: watchdog runs thaw-cmd' '
	cg=$(make_cgroup v2)
	kill_in_freeze 303 9 0 "$cg" --freeze-cmd "echo 1 >$cg/cgroup.freeze; sleep 3" \
		--thaw-cmd "echo 0 >$cg/cgroup.freeze"
	[ "$RC" = 137 ]
	check_thawed_after_kill "$SCRATCH/events-303"
	guest_runs_again "$cg"
'

test_expect_success ROOT,CGROUP2 'SIGTERM while frozen: thawed at once, clean failure' '
	cg=$(make_cgroup v2)
	# a pre-restart hook keeps the guest frozen for 3 s: the signal lands
	# inside the freeze however late a loaded machine lets the killer run
	printf "#!/bin/sh\n[ \"\$1\" = pre-restart ] && exec sleep 3\nexit 0\n" >"$SCRATCH/frozen-hook"
	chmod +x "$SCRATCH/frozen-hook"
	kill_in_freeze 304 15 0 "$cg" --freeze-cgroup "$cg" --script "$SCRATCH/frozen-hook"
	[ "$RC" != 0 ]
	check_thawed_after_kill "$SCRATCH/events-304"
	guest_runs_again "$cg"
	grep "^ERROR: " "$CB_ERR"
	no_tmp_files "$SCRATCH/dump-304"
	test -z "$(ls "$SCRATCH/dump-304" | grep "\.tar")"
	test -z "$(ls -A "$SCRATCH/tmp-304")" || { echo "staging left:"; ls -la "$SCRATCH/tmp-304"; false; }
'

test_expect_success ROOT,CGROUP2 'SIGTERM in the final sync: the handler thaws, clean failure' '
	cg=$(make_cgroup v2)
	# the SIGTERM comes from the read of a file made between the passes
	# (the fault shim), so it lands inside the final sync however loaded
	# the host (too short a freeze for the watcher to see: signal 0)
	printf "#!/bin/sh\n[ \"\$1\" = pre-stop ] && head -c 1M /dev/zero >%s\nexit 0\n" \
		"$SRC/late-file" >"$SCRATCH/late-hook"
	chmod +x "$SCRATCH/late-hook"
	with_fault "read:SIGTERM:$SRC/late-file" kill_in_freeze 305 0 0 "$cg" --freeze-cgroup "$cg" \
		--script "$SCRATCH/late-hook"
	rm -f "$SRC/late-file"
	fault_fired "read Terminated .*late-file"
	[ "$RC" != 0 ]
	grep -x "INFO: resuming guest" "$CB_ERR"
	guest_runs_again "$cg"
	grep "^ERROR: Backup of CT 305 failed - final sync: .*signal TERM" "$CB_ERR"
	no_tmp_files "$SCRATCH/dump-305"
	test -z "$(ls "$SCRATCH/dump-305" | grep "\.tar")"
	test -z "$(ls -A "$SCRATCH/tmp-305")" || { echo "staging left:"; ls -la "$SCRATCH/tmp-305"; false; }
'

test_done
