#!/bin/bash
# cbackup watches its freeze watchdog (issue 25 item 4): killed (SIGKILL,
# as the OOM killer does) or stopped (SIGSTOP) while the guest is frozen,
# the watchdog can no longer thaw or hold max-freeze, so cbackup thaws the
# guest itself at once, says so in a WARN line and fails the backup naming
# the watchdog. The same when the watchdog was stopped while cbackup itself
# was (its watching thread too): the thaw request gets no answer, cbackup
# thaws the guest itself and ends the watchdog (issue 37). The guest is held
# frozen by a pre-restart hook that waits
# for the test; the bound below (max-freeze + 2 s) is polled, never timed.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src DUMP=$SCRATCH/dump TMPD=$SCRATCH/tmp
MAXF=20

cg_thawed() { test_must_fail cg_frozen "$1" >/dev/null; }

# the hook: in the frozen phase, say so and wait for the test's go
cat >"$SCRATCH/hold-hook" <<EOF
#!/bin/sh
[ "\$1" = pre-restart ] || exit 0
echo \$\$ >"$SCRATCH/hook.pid"
touch "$SCRATCH/in-freeze"
while [ ! -e "$SCRATCH/go" ]; do sleep 0.05; done
exit 0
EOF
chmod +x "$SCRATCH/hold-hook"

# the watchdog of cbackup CB_PID (its child named cbackup-wdog)
watchdog_of() { pgrep -P "$1" -x cbackup-wdog; }

# start_held ID: a writer guest in a new cgroup ($CG, counter $SIDE) and
# cbackup ($CB_PID) backing it up, held frozen in its pre-restart hook
start_held() {
	CG=$(make_cgroup v2)
	SIDE=$SCRATCH/side-$1
	start_writer "$CG" "$SRC/log-$1.txt" "$SIDE"
	rm -f "$SCRATCH/in-freeze" "$SCRATCH/go" "$SCRATCH/hook.pid"
	"$CBACKUP" backup --root "$SRC" --id "$1" --tmpdir "$TMPD" --dumpdir "$DUMP" \
		--freeze-cgroup "$CG" --max-freeze "$MAXF" --script "$SCRATCH/hold-hook" \
		>"$CB_OUT" 2>"$CB_ERR" &
	CB_PID=$!
	cleanup_pid "$CB_PID"
	wait_for 30 test -e "$SCRATCH/in-freeze"
}

# lost SIGNAL ID: freeze, hit the watchdog with SIGNAL, check the takeover
lost() {
	local sig=$1 id=$2 wd rc=0
	start_held "$id"
	cg_frozen "$CG"
	wd=$(watchdog_of "$CB_PID")
	test -n "$wd"
	cleanup_pid "$wd"
	kill "-$sig" "$wd"
	# polled: cbackup is still in the hook, only its own thaw can do this
	wait_for $((MAXF + 2)) cg_thawed "$CG"
	# thawed while the hook still waits for the test: cbackup took over at
	# once, not when max-freeze ended the hook
	kill -0 "$(cat "$SCRATCH/hook.pid")"
	guest_thawed "$CG" "$SIDE"
	touch "$SCRATCH/go"
	wait "$CB_PID" || rc=$?
	cat "$CB_ERR"
	test "$rc" = 1
	test_has "$CB_ERR" "^WARN: the freeze watchdog \(pid $wd\) $3.* while the guest was frozen: cbackup thawed the guest itself"
	error_names "$id" "" "freeze watchdog \(pid $wd\) $3"
	# the watchdog is gone (a stopped one was ended, not left behind)
	wait_for 5 test_must_fail test -e "/proc/$wd/comm"
}

test_expect_success ROOT 'setup: a small tree' '
	mkdir -p "$SRC" "$DUMP" "$TMPD"
	make_many_files "$SRC" 200
'

test_expect_success ROOT,CGROUP2 'watchdog SIGKILLed while frozen: cbackup thaws the guest itself and says so' '
	lost KILL 3111 "ended"
'

test_expect_success ROOT,CGROUP2 'watchdog SIGSTOPped while frozen: no answer, cbackup thaws the guest itself' '
	lost STOP 3112 "did not answer"
'

test_expect_success ROOT,CGROUP2 'watchdog stopped while cbackup itself was held: no answer to the thaw, cbackup thaws the guest itself and ends it' '
	# cbackup is stopped (SIGSTOP: its watching thread too) while the
	# guest is frozen, the watchdog is stopped meanwhile, cbackup goes on:
	# its thaw request gets no answer
	start_held 3114
	wd=$(watchdog_of "$CB_PID")
	test -n "$wd"
	cleanup_pid "$wd"
	hook=$(pgrep -P "$CB_PID" -f hold-hook)
	kill -STOP "$CB_PID"
	wait_for 5 grep -q "^State:.*stopped" "/proc/$CB_PID/status"
	kill -STOP "$wd"
	wait_for 5 grep -q "^State:.*stopped" "/proc/$wd/status"
	touch "$SCRATCH/go"
	wait_for 5 test_must_fail test -e "/proc/$hook/cmdline"
	cg_frozen "$CG"
	kill -CONT "$CB_PID"
	rc=0
	wait "$CB_PID" || rc=$?
	cat "$CB_ERR"
	# thawed when cbackup is gone, not by anyone after it
	cg_thawed "$CG"
	test "$rc" = 1
	test_has "$CB_ERR" "^WARN: the freeze watchdog \(pid $wd\) did not answer.* while the guest was frozen: cbackup thawed the guest itself"
	test_lacks "$CB_ERR" "keeps retrying"
	guest_thawed "$CG" "$SIDE"
	test_must_fail test -e "/proc/$wd/comm"
'

test_expect_success ROOT,CGROUP2 'a watchdog that answers is left alone: a long freeze under max-freeze succeeds' '
	start_held 3113
	sleep 3
	cg_frozen "$CG"
	touch "$SCRATCH/go"
	wait "$CB_PID"
	test_lacks "$CB_ERR" "freeze watchdog"
	guest_thawed "$CG" "$SIDE"
'

test_done
