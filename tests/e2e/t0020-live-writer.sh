#!/bin/bash
# A live guest: a writer process appends numbered lines to a file in the
# tree every ~1 ms. cbackup freezes it (cgroup v2, v1 freezer, or SIGSTOP to
# its process group) for the final sync only: the archived file is exactly
# the file at the freeze (complete, consecutive lines), the writer did not
# move while frozen, and it runs again afterwards.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src

test_expect_success ROOT 'setup: a tree with some bulk' '
	mkdir -p "$SRC/data" "$SCRATCH/tmp"
	make_many_files "$SRC" 3000
	head -c 4M /dev/urandom >"$SRC/data/blob"
	# the freeze of an unchanged tree lasts milliseconds: the pre-restart
	# hook (the guest frozen) holds it until the watcher has seen it, then
	# notes the writer counter, however loaded the host (at most 60 s)
	cat >"$SCRATCH/hold-hook" <<-\EOF
	#!/bin/sh
	[ "$1" = pre-restart ] || exit 0
	i=0
	while ! grep -q "^frozen" "$HOLD_EVENTS" 2>/dev/null && [ $i -lt 3000 ]; do sleep 0.02; i=$((i + 1)); done
	cat "$HOLD_SIDE" >"$HOLD_EVENTS.at-pre-restart"
	exit 0
	EOF
	chmod +x "$SCRATCH/hold-hook"
'

# check_frozen_window EVENTS ARCHIVED_LINES: one freeze, one thaw, in that
# order; the writer counter did not move while frozen (the same when the
# watcher saw the freeze and in the pre-restart hook, the guest still
# frozen) and the archive holds exactly the lines written before the freeze
# (beyond the line it may have been writing at the freeze). No bound on how
# far it got after the thaw: a loaded host may notice the thaw late.
check_frozen_window() {
	local ev=$1 n=$2
	cat "$ev"
	awk -v n="$n" -v ch="$(cat "$ev.at-pre-restart")" '
		$1 == "frozen" { nf++; c1 = $2 }
		$1 == "thawed" && nf { nt++; c2 = $2 }
		END {
			if (nf != 1 || nt != 1) { print "expected one freeze and one thaw, saw " nf "/" nt; exit 1 }
			if (n != c1 && n != c1 + 1) { print "archived " n " lines, counter at freeze " c1; exit 1 }
			if (ch != c1) { print "counter " c1 " at freeze, " ch " in pre-restart (frozen)"; exit 1 }
			if (c2 < c1) { print "counter " c1 " at freeze, " c2 " at thaw"; exit 1 }
		}' "$ev"
}

# live_backup ID CGROUP|"" FREEZE-OPTION...: a writer guest (in CGROUP, or
# watched by pid), backed up under killer-on-freeze; checks the result
live_backup() {
	local id=$1 cg=$2
	shift 2
	local dump=$SCRATCH/dump-$id ev=$SCRATCH/events-$id side=$SCRATCH/side-$id
	local log=data/log-$id.txt watch
	mkdir "$dump"
	start_writer "$cg" "$SRC/$log" "$side"
	if [ -n "$cg" ]; then watch="-c $cg"; else watch="-p $GUEST_PID"; fi
	[ "$1" = --freeze-pid ] && set -- --freeze-pid "$GUEST_PID"
	HOLD_EVENTS=$ev HOLD_SIDE=$side "$HELPERS/killer-on-freeze" $watch -o "$ev" -s "$side" -l 30000 -- \
		"$CBACKUP" backup --root "$SRC" --id "$id" --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$dump" --compress zstd --mode suspend --script "$SCRATCH/hold-hook" "$@" \
		>"$CB_OUT" 2>"$CB_ERR" ||
		{ echo "cbackup failed"; cat "$CB_ERR"; return 1; }
	cat "$CB_ERR"
	grep "INFO: final sync finished" "$CB_ERR"
	grep "INFO: guest is online again after" "$CB_ERR"
	archive=$(find_archive "$dump" ct "$id" .zst)
	zstd -dc <"$archive" | tar -xOf - "./$log" >"$SCRATCH/archived-$id.txt"
	check_lines "$SCRATCH/archived-$id.txt"
	check_frozen_window "$ev" "$(wc -l <"$SCRATCH/archived-$id.txt")"
	counter_advances "$side"
	[ "$(wc -l <"$SRC/$log")" -gt "$(wc -l <"$SCRATCH/archived-$id.txt")" ]
	kill -KILL "$GUEST_PID"
}

test_expect_success ROOT,CGROUP2 'cgroup v2: writer frozen for the final sync only' '
	cg=$(make_cgroup v2)
	live_backup 201 "$cg" --freeze-cgroup "$cg"
	grep "suspending guest" "$CB_ERR"
'

test_expect_success ROOT,CGROUP2 'cgroup v2 by relative path' '
	cg=$(make_cgroup v2)
	live_backup 202 "$cg" --freeze-cgroup "$(basename "$cg")"
'

test_expect_success ROOT,CGROUP1 'cgroup v1 freezer: writer frozen for the final sync only' '
	cg=$(make_cgroup v1)
	live_backup 203 "$cg" --freeze-cgroup "$cg"
'

test_expect_success ROOT '--freeze-pid: writer stopped for the final sync only' '
	live_backup 204 "" --freeze-pid
'

test_expect_success ROOT 'no freeze control: a warning, the backup still works' '
	mkdir "$SCRATCH/dump-205"
	cbackup_run 0 backup --root "$SRC" --id 205 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/dump-205" --compress zstd
	grep "^WARN: " "$CB_ERR"
	find_archive "$SCRATCH/dump-205" ct 205 .zst
'

test_done
