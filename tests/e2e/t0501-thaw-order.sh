#!/bin/bash
# The guest is thawed as soon as the frozen copy is done, before the archive
# is written: the hooks see it frozen at pre-restart only, running from
# post-restart on (backup-end comes after the archive), in both modes.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
TRACE=$SCRATCH/trace

test_expect_success ROOT,CGROUP2 'setup: a writer guest in its own cgroup, a hook that looks at it' '
	mkdir -p "$SRC/data" "$SCRATCH/tmp" "$SCRATCH/dump"
	make_small_tree "$SRC"
	CG=$(make_cgroup v2)
	echo "$CG" >"$SCRATCH/cg"
	start_writer "$CG" "$SRC/data/log.txt" "$SCRATCH/side"
	cat >"$SCRATCH/hook.sh" <<-HOOK
	#!/bin/sh
	if grep -qx "frozen 1" "$CG/cgroup.events"; then s=frozen; else s=running; fi
	echo "\$1 \$s" >>"$TRACE"
	HOOK
	chmod +x "$SCRATCH/hook.sh"
'

for mode in suspend stop; do
	test_expect_success ROOT,CGROUP2 "mode $mode: frozen at pre-restart, running at post-restart and backup-end" '
		CG=$(cat "$SCRATCH/cg")
		rm -f "$TRACE" "$SCRATCH/dump"/*
		cbackup_run 0 backup --root "$SRC" --id 1 --tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/dump" \
			--freeze-cgroup "$CG" --mode '"$mode"' --script "$SCRATCH/hook.sh"
		cat "$TRACE"
		test_has "$TRACE" "^pre-restart frozen\$"
		test_has "$TRACE" "^post-restart running\$"
		test_has "$TRACE" "^backup-end running\$"
		test_lacks "$TRACE" "^(backup-start|pre-stop|post-restart|backup-end|log-end) frozen"
		guest_thawed "$CG" "$SCRATCH/side"
	'
done

# SIGTERM while frozen: the signal handler thaws at once (the cleanup
# stack), before the interrupted pass even returns, so the guest is running
# again by the time the error path runs its first hook (pre-restart, which
# waits up to 2 s for the thaw, in case it is handed to a helper process).
# The freeze command plants a file that only pass 2 reads; the first read
# of it raises the signal.
test_expect_success ROOT 'SIGTERM in pass 2: thawed by the signal handler, before the error path' '
	rm -f "$TRACE" "$SRC/late.bin"
	cat >"$SCRATCH/freeze.sh" <<-EOS
	#!/bin/sh
	head -c 65536 /dev/zero >"$SRC/late.bin"
	echo freeze >>"$TRACE"
	EOS
	cat >"$SCRATCH/phase.sh" <<-EOS
	#!/bin/bash
	if [ "\$1" = pre-restart ]; then
		for i in \$(seq 100); do grep -qx thaw "$TRACE" && break; sleep 0.02; done
		echo "hook pre-restart, thaws so far: \$(grep -cx thaw "$TRACE")" >>"$TRACE"
	fi
	EOS
	chmod +x "$SCRATCH/freeze.sh" "$SCRATCH/phase.sh"
	with_fault "read:SIGTERM:late.bin" cbackup_run 143 backup --root "$SRC" --id 2 \
		--tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/dump" --script "$SCRATCH/phase.sh" \
		--freeze-cmd "$SCRATCH/freeze.sh" --thaw-cmd "echo thaw >>$TRACE"
	fault_fired "^read .*late.bin"
	cat "$TRACE"
	test_has "$CB_ERR" "interrupted by signal TERM"
	test_has "$TRACE" "^hook pre-restart, thaws so far: 1\$"
'

test_done
