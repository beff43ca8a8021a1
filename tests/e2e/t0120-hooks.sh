#!/bin/bash
# Hook script (vzdump's phases, arguments and environment): called without
# a shell as HOOK PHASE [MODE ID]; the exact phase order of a two-guest
# job; DUMPDIR STOREID VMTYPE TARGET LOGFILE HOSTNAME; hook output in the
# guest's .log; a failing hook fails where vzdump's does (backup-start,
# pre-restart, backup-end, job-start, job-end) and only warns where
# vzdump's does (backup-abort, log-end).
. "$(dirname "$0")/lib.sh"

CONF=$SCRATCH/cbackup.conf
DUMP=$SCRATCH/nas
# a space in the path: works only if the hook is called without a shell
HOOKDIR="$SCRATCH/hook dir"
HOOK=$HOOKDIR/hook.sh
TRACE=$SCRATCH/trace

test_expect_success 'setup: two guests, a storage, a recording hook' '
	make_small_tree "$SCRATCH/ct101" web-101
	make_small_tree "$SCRATCH/ct102" db-102
	mkdir "$SCRATCH/tmp" "$DUMP" "$HOOKDIR"
	cat >"$CONF" <<-CONF
	tmpdir = $SCRATCH/tmp
	storage = nas

	[storage nas]
	path = $DUMP

	[ct 101]
	root = $SCRATCH/ct101
	freeze-cmd = true
	thaw-cmd = true

	[ct 102]
	root = $SCRATCH/ct102
	freeze-cmd = true
	thaw-cmd = true
	CONF
	# one line per call: PHASE MODE ID DUMPDIR STOREID VMTYPE TARGET LOGFILE
	# HOSTNAME ARGC (unset = "-"); fails at the phases in $HOOK_FAIL
	# (space-separated "PHASE" or "PHASE:ID")
	cat >"$HOOK" <<-"HOOK"
	#!/bin/bash
	echo "$1 ${2:--} ${3:--} ${DUMPDIR:--} ${STOREID:--} ${VMTYPE:--} ${TARGET:--} ${LOGFILE:--} ${HOSTNAME:--} $#" >>"$HOOK_TRACE"
	echo "hook-stdout $1 ${3:-job}"
	echo "hook-stderr $1 ${3:-job}" >&2
	for f in ${HOOK_FAIL:-}; do
		case "$f" in "$1"|"$1:${3:-}") exit 7 ;; esac
	done
	exit 0
	HOOK
	chmod +x "$HOOK"
'

run_job() {  # RC [ARGS...]: the job with the hook, trace in $TRACE
	local rc=$1
	shift
	rm -f "$TRACE"
	HOOK_TRACE=$TRACE cbackup_run "$rc" 101 102 --config "$CONF" --script "$HOOK" "$@"
}

phases() { cut -d" " -f1-3 "$TRACE"; }
reset_dump() { rm -rf "$DUMP" && mkdir "$DUMP"; }

test_expect_success 'a two-guest job calls every phase in vzdump order' '
	run_job 0
	cat >expected <<-EOF
	job-init - -
	job-start - -
	backup-start suspend 101
	pre-stop suspend 101
	pre-restart suspend 101
	post-restart suspend 101
	backup-end suspend 101
	log-end suspend 101
	backup-start suspend 102
	pre-stop suspend 102
	pre-restart suspend 102
	post-restart suspend 102
	backup-end suspend 102
	log-end suspend 102
	job-end - -
	EOF
	phases | diff -u expected -
'

test_expect_success 'job phases: HOOK PHASE only, with DUMPDIR and STOREID' '
	grep -E "^job-" "$TRACE" >job
	test "$(wc -l <job)" = 3
	while read -r phase mode id dumpdir storeid vmtype target logfile host argc; do
		test "$argc" = 1
		test "$dumpdir" = "$DUMP"
		test "$storeid" = nas
		test "$vmtype" = -
	done <job
'

test_expect_success 'guest phases: MODE ID and the environment' '
	a101=$(find_archive "$DUMP" ct 101 .zst)
	a102=$(find_archive "$DUMP" ct 102 .zst)
	grep -Ev "^job-" "$TRACE" >guest
	test "$(wc -l <guest)" = 12
	while read -r phase mode id dumpdir storeid vmtype target logfile host argc; do
		test "$argc" = 3
		test "$mode" = suspend
		test "$dumpdir" = "$DUMP"
		test "$storeid" = nas
		test "$vmtype" = lxc
		test "$host" != -
		if [ "$id" = 101 ]; then a=$a101; else a=$a102; fi
		test "$target" = "$a"
		test "$logfile" = "${a%.tar.zst}.log"
	done <guest
'

test_expect_success 'HOSTNAME is the guest'"'"'s name, as in vzdump (not the host'"'"'s)' '
	# vzdump sets HOSTNAME to the guest'"'"'s hostname (CT: its config
	# "hostname", else "CT<ID>"); cbackup'"'"'s guest has /etc/hostname
	for id in 101 102; do
		want=$(cat "$SCRATCH/ct$id/etc/hostname")
		got=$(awk -v id=$id "\$1 == \"backup-start\" && \$3 == id { print \$9 }" "$TRACE")
		echo "CT $id: HOSTNAME=$got (guest: $want, host: $(hostname))"
		test "$got" = "$want" || test "$got" = "CT$id"
	done
'

test_expect_success 'hook output (stdout and stderr) goes into the guest'"'"'s .log' '
	a101=$(find_archive "$DUMP" ct 101 .zst)
	log=${a101%.tar.zst}.log
	for phase in backup-start pre-stop pre-restart post-restart backup-end; do
		grep -Ex "${TS}INFO: hook-stdout $phase 101" "$log"
		grep -Ex "${TS}INFO: hook-stderr $phase 101" "$log"
	done
	# nothing of the other guest (not a bare "102": a rate such as
	# "compress 102MiB/s" in the log matched it, a false failure in CI)
	test_must_fail grep -E "(hook-std(out|err) .* 102$|ct-?102|db-102)" "$log"
	# log-end runs after the log is closed: its output is on stderr only
	test_must_fail grep "log-end" "$log"
	grep -x "INFO: hook-stdout log-end 101" "$CB_ERR"
	grep -x "INFO: hook-stdout job-init job" "$CB_ERR"
'

test_expect_success 'the freeze hooks surround the frozen part of the log' '
	a101=$(find_archive "$DUMP" ct 101 .zst)
	grep -nE "hook-stdout (pre-stop|pre-restart|post-restart)|suspending guest|starting final sync|resuming guest|guest is online" \
		"${a101%.tar.zst}.log" | sed -E "s/^[0-9]+:$TS//" | sed "s/ (.*//; s/ after .*//; s/ sync .*/ sync/" >seq
	cat >expected <<-EOF
	INFO: hook-stdout pre-stop 101
	INFO: suspending guest
	INFO: starting final sync
	INFO: hook-stdout pre-restart 101
	INFO: resuming guest
	INFO: guest is online again
	INFO: hook-stdout post-restart 101
	EOF
	diff -u expected seq
'

test_expect_success 'the pause in the log is the freeze, not the pre-stop hook before it' '
	# the guest runs during pre-stop: a hook of 2 s there is no pause.
	# The freeze and thaw commands record when they ran; the figure is
	# checked against those, and against the hook start it must not reach
	cat >"$SCRATCH/slow-hook.sh" <<-EOF
	#!/bin/bash
	[ "\$1" = pre-stop ] || exit 0
	date +%s.%N >"$SCRATCH/hook-start"
	sleep 2
	EOF
	chmod +x "$SCRATCH/slow-hook.sh"
	mkdir -p "$SCRATCH/dump-pause"
	cbackup_run 0 backup --root "$SCRATCH/ct101" --id 120 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/dump-pause" --script "$SCRATCH/slow-hook.sh" \
		--freeze-cmd "date +%s.%N >$SCRATCH/frozen" --thaw-cmd "date +%s.%N >$SCRATCH/thawed"
	pause=$(sed -nE "s/^INFO: guest is online again after ([0-9.]+) seconds$/\1/p" "$CB_ERR")
	test -n "$pause"
	# frozen at least from the freeze command to the thaw command (2 decimals)
	at_least "$pause" "$(awk -v a="$(cat "$SCRATCH/frozen")" -v b="$(cat "$SCRATCH/thawed")" "BEGIN { printf \"%.2f\", b - a - 0.01 }")"
	# and shorter than from the hook start to the thaw command: the hook is not in
	test_must_fail at_least "$pause" "$(awk -v a="$(cat "$SCRATCH/hook-start")" -v b="$(cat "$SCRATCH/thawed")" "BEGIN { printf \"%.3f\", b - a }")"
'

test_expect_success '"script" in the config file works like --script' '
	cp "$CONF" "$SCRATCH/script.conf"
	sed -i "1i script = $HOOK" "$SCRATCH/script.conf"
	mkdir "$SCRATCH/dump-script"
	rm -f "$TRACE"
	HOOK_TRACE=$TRACE cbackup_run 0 101 --config "$SCRATCH/script.conf" --dumpdir "$SCRATCH/dump-script"
	test "$(phases | tr "\n" ,)" = "job-init - -,job-start - -,backup-start suspend 101,pre-stop suspend 101,pre-restart suspend 101,post-restart suspend 101,backup-end suspend 101,log-end suspend 101,job-end - -,"
'

test_expect_success 'backup-start fails for 101: that guest fails, backup-abort runs, 102 goes on' '
	reset_dump
	HOOK_FAIL=backup-start:101 run_job 1
	grep -E "^ERROR: Backup of VM 101 failed - .*hook.*backup-start.*7" "$CB_ERR"
	cat >expected <<-EOF
	job-init - -
	job-start - -
	backup-start suspend 101
	backup-abort suspend 101
	log-end suspend 101
	backup-start suspend 102
	pre-stop suspend 102
	pre-restart suspend 102
	post-restart suspend 102
	backup-end suspend 102
	log-end suspend 102
	job-end - -
	EOF
	phases | diff -u expected -
	test -z "$(ls "$DUMP" | grep "^vzdump-lxc-101-.*\.tar")"
	find_archive "$DUMP" ct 102 .zst
	test "$(tail -n 1 "$CB_ERR")" = "INFO: Backup job finished with errors"
	# the reason and the abort hook'"'"'s output are in the failed guest'"'"'s log
	grep -E "^${TS}ERROR: Backup of VM 101 failed - " "$DUMP"/vzdump-lxc-101-*.log
	grep -Ex "${TS}INFO: hook-stdout backup-abort 101" "$DUMP"/vzdump-lxc-101-*.log
'

test_expect_success 'pre-restart fails: the guest is still thawed, then fails' '
	reset_dump
	HOOK_FAIL=pre-restart:102 run_job 1
	grep -E "^ERROR: Backup of VM 102 failed - .*pre-restart" "$CB_ERR"
	grep -Ex "${TS}INFO: resuming guest" "$DUMP"/vzdump-lxc-102-*.log
	phases | grep -A2 "^pre-restart suspend 102" | cut -d" " -f1 | tr "\n" , | grep -x "pre-restart,post-restart,backup-abort,"
	find_archive "$DUMP" ct 101 .zst
	test -z "$(ls "$DUMP" | grep "^vzdump-lxc-102-.*\.tar")"
'

test_expect_success 'backup-end fails: the guest counts as failed (vzdump)' '
	reset_dump
	HOOK_FAIL=backup-end:101 run_job 1
	grep -E "^ERROR: Backup of VM 101 failed - .*backup-end" "$CB_ERR"
	phases | grep -A1 "^backup-end suspend 101" | tail -n 1 | grep -x "backup-abort suspend 101"
'

test_expect_success 'log-end and backup-abort failing only warn' '
	reset_dump
	HOOK_FAIL=log-end run_job 0
	grep -E "^WARN: .*log-end" "$CB_ERR"
	test "$(tail -n 1 "$CB_ERR")" = "INFO: Backup job finished successfully"
	reset_dump
	HOOK_FAIL="backup-start:101 backup-abort" run_job 1
	grep -E "^ERROR: Backup of VM 101 failed - .*backup-start" "$CB_ERR"
	grep -E "^WARN: .*backup-abort" "$CB_ERR"
	find_archive "$DUMP" ct 102 .zst
'

test_expect_success 'job-start fails: job-abort runs, no guest is touched, exit 1' '
	reset_dump
	HOOK_FAIL=job-start run_job 1
	grep -E "^ERROR: Backup job failed - .*job-start" "$CB_ERR"
	test "$(phases | tr "\n" ,)" = "job-init - -,job-start - -,job-abort - -,"
	test -z "$(ls -A "$DUMP")"
'

test_expect_success 'job-init fails: the job fails before it starts, exit 1' '
	reset_dump
	HOOK_FAIL=job-init run_job 1
	grep -E "^ERROR: Backup job failed - .*job-init" "$CB_ERR"
	test "$(phases | tr "\n" ,)" = "job-init - -,"
	test -z "$(ls -A "$DUMP")"
'

test_expect_success 'job-end fails: the job fails and job-abort runs (as vzdump)' '
	# vzdump runs job-end inside the job'"'"'s eval: its failure runs
	# job-abort and ends with "Backup job failed - ..." and an error exit
	reset_dump
	HOOK_FAIL=job-end run_job 1
	grep -E "^ERROR: Backup job failed - .*job-end" "$CB_ERR"
	phases | tail -n 2 | tr "\n" , | grep -x "job-end - -,job-abort - -,"
'

test_expect_success 'a hook that cannot be executed: a configuration error (exit 2) with its name' '
	printf "#!/bin/sh\nexit 0\n" >"$SCRATCH/noexec.sh"
	cbackup_run 2 101 --config "$CONF" --script "$SCRATCH/noexec.sh"
	grep -F "$SCRATCH/noexec.sh" "$CB_ERR"
'

test_done
