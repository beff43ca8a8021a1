#!/bin/bash
# vzdump's stop mode (issue 28, item 3): the guest is shut down (stop-cmd,
# or lxc-stop/pct for a container of this host; stopwait bounds it),
# copied in one pass while nothing runs, and started again (start-cmd);
# it is never frozen for the copy. Without a way to stop it, mode stop falls
# back to suspend, saying so. A failed stop still restarts the guest.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
D=$SCRATCH/dump

test_expect_success ROOT,CGROUP2 'setup: a writer guest in its own cgroup, stop and start commands' '
	mkdir -p "$SRC/data" "$SCRATCH/tmp" "$D"
	make_many_files "$SRC" 500
	CG=$(make_cgroup v2)
	echo "$CG" >cg
	start_writer "$CG" "$SRC/data/lines" "$SCRATCH/side"
	# stop: kill everything in the cgroup and wait until it is empty
	printf "#!/bin/sh\necho stop >>\"%s/cmds\"\necho 1 >\"%s/cgroup.kill\"\nwhile grep -q . \"%s/cgroup.procs\"; do sleep 0.02; done\n" \
		"$SCRATCH" "$CG" "$CG" >"$SCRATCH/stop.sh"
	# start: a new writer in the cgroup (its own shell moves itself there
	# first), appending to another file; args: SCRATCH CGROUP WRITER FILE SIDE
	cat >"$SCRATCH/start.sh" <<-\EOF
	#!/bin/sh
	echo start >>"$1/cmds"
	sh -c '"'"'echo $$ >"$1/cgroup.procs"; exec setsid "$2" "$3" "$4"'"'"' sh "$2" "$3" "$4" "$5" </dev/null >/dev/null 2>&1 &
	EOF
	chmod +x "$SCRATCH/stop.sh" "$SCRATCH/start.sh"
'

test_expect_success ROOT,CGROUP2 'mode stop: stopped, copied, started again; never frozen' '
	CG=$(cat cg)
	cbackup_run 0 backup --root "$SRC" --id 301 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--mode stop --freeze-cgroup "$CG" --stop-cmd "$SCRATCH/stop.sh" \
		--start-cmd "$SCRATCH/start.sh $SCRATCH $CG $HELPERS/writer $SRC/data/lines2 $SCRATCH/side2" \
		--stopwait 1
	cat "$CB_ERR"
	test "$(cat "$SCRATCH/cmds")" = "$(printf "stop\nstart")"
	test_has "$CB_ERR" "^INFO: backup mode: stop\$"
	test_has "$CB_ERR" "^INFO: stopping virtual guest\$"
	test_has "$CB_ERR" "^INFO: restarting guest\$"
	test_has "$CB_ERR" "^INFO: guest is online again after [0-9.]+ seconds\$"
	test_lacks "$CB_ERR" "suspending guest|resuming guest|final sync"
	# the copy was taken while nothing wrote: the archived file is the file
	# as the stop left it (the restarted guest writes lines2)
	mkdir out
	tar -xf "$(find_archive "$D" ct 301 .zst)" -C out ./data/lines
	test -s out/data/lines
	cmp out/data/lines "$SRC/data/lines"
	# and the guest runs again, in its cgroup
	wait_for 5 test -s "$SCRATCH/side2"
	counter_advances "$SCRATCH/side2"
	grep -q . "$CG/cgroup.procs"   # (cgroup files have size 0: no test -s)
	for p in $(cat "$CG/cgroup.procs"); do cleanup_pid "$p"; done
'

test_expect_success ROOT,CGROUP2 'a stop-cmd that fails: the guest is started again, exit 1 naming stop-cmd' '
	CG=$(cat cg)
	rm -f "$SCRATCH/cmds"
	cbackup_run 1 backup --root "$SRC" --id 302 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--mode stop --freeze-cgroup "$CG" --stop-cmd "echo stop >>$SCRATCH/cmds; exit 3" \
		--start-cmd "echo start >>$SCRATCH/cmds"
	test "$(cat "$SCRATCH/cmds")" = "$(printf "stop\nstart")"
	test_has "$CB_ERR" "^ERROR: Backup of VM 302 failed - stop: stop-cmd .*exit"
	test_lacks "$CB_ERR" "suspending guest"
'

test_expect_success ROOT,CGROUP2 'mode stop without a way to stop the guest: suspend mode, saying why' '
	CG=$(cat cg)
	cbackup_run 0 backup --root "$SRC" --id 303 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--mode stop --freeze-cgroup "$CG"
	test_has "$CB_ERR" "^INFO: stop mode not possible: no way to stop CT 303 \\(set stop-cmd and start-cmd"
	test_has "$CB_ERR" "^INFO: trying .suspend. mode instead\$"
	test_has "$CB_ERR" "^INFO: backup mode: suspend\$"
	test_has "$CB_ERR" "^INFO: suspending guest \\(cgroup2\\)\$"
	test_lacks "$CB_ERR" "stopping virtual guest"
'

test_expect_success ROOT,CGROUP2 'cleanup: the restarted guest ends with the test' '
	CG=$(cat cg)
	echo 1 >"$CG/cgroup.kill"
	wait_for 5 cgroup_empty "$CG"
'

test_done
