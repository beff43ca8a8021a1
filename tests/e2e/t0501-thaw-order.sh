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

test_done
