#!/bin/bash
# VM backups through QEMU's copy-before-write filter (issue 26), with a real
# QEMU (TCG, no guest OS) whose "guest" writes through its own devices'
# BlockBackends (HMP qemu-io drive0/drive1, on a second QMP monitor of the
# test's own: cbackup holds the first for the whole backup). Two disks (a
# qcow2 over a backing file, a sparse raw) are archived as NAME.raw exactly
# as they were at the pause: writes before the pause are in, writes after
# it (before and during the read, over data and over holes) are not; holes
# stay holes; the VM's block graph is as before and the VM runs. A disk the
# VM does not have open is refused with the reason. SIGKILL of cbackup
# during the read: its watchdog takes the filters out; with the watchdog
# killed too, the next run removes the leftovers (cbackup-*) with a WARN and
# backs up exactly. A full tmpdir (ENOSPC in the fleecing image) breaks the
# snapshot, fails the backup, and never the guest's writes. The pause
# logged is QEMU's (its STOP and RESUME timestamps, the pre-stop hook
# before it); an incremental reads no more than 1.2x the bytes the test
# dirtied. vm-method blockdev-backup (the path of QEMU 4.2 to 7.0; this
# QEMU is 7.2, so the test asks for it by the key an admin may set too) is
# exact at the transaction's instant with writes going on, never pauses the
# VM and leaves no job or node. The guest agent's fsfreeze comes before the
# filters go in and its thaw after they are in and the VM runs, also when
# the insertion fails (with blockdev-backup: around the transaction); a
# freeze refused is a WARN. The agent is
# tests/helpers/qgapeer.py, a peer speaking qemu-ga's protocol on a unix
# socket: these VMs run no guest OS, so no real qemu-ga could answer, and
# the peer asks QEMU (the test's monitor) at each call where the VM is. Mode
# snapshot of a VM is said to be QEMU's live backup. QEMU quitting during
# the read fails the backup with an ERROR naming it, nothing left behind.
. "$(dirname "$0")/lib.sh"

if ! test_have_prereq QEMU; then
	test_skip 'VM backups through copy-before-write' 'qemu-system-x86_64, qemu-img or python3 missing'
	test_done
fi

IMG=$SCRATCH/img
SOCK=$SCRATCH/vm.qmp          # cbackup's monitor
TSOCK=$SCRATCH/vm-test.qmp    # the test's (and the hooks')
HOOK=$SCRATCH/hook.sh
HOOKLOG=$SCRATCH/hook.log
MiB=1048576
export QMP_PY QMP_PYTHON TSOCK IMG HOOKLOG HOOK_ACTION=

# the guest's writes: through the device's BlockBackend, mirrored into
# IMG/curN.raw (what the guest sees now); snap copies cur to exp (what the
# snapshot must hold)
cat >"$SCRATCH/guest.sh" <<"GUEST"
# gw N PATTERN OFFSET LENGTH: the guest writes to disk N
gw() {
	local out
	out=$("$QMP_PYTHON" "$QMP_PY" "$TSOCK" human-monitor-command \
		"{\"command-line\": \"qemu-io drive$1 \\\"write -P $2 $3 $4\\\"\"}") || return 1
	case $out in *rror*|*ailed*) echo "guest write failed: $out"; return 1 ;; esac
	qemu-io -f raw -c "write -P $2 $3 $4" "$IMG/cur$1.raw" >/dev/null
}
# gz N OFFSET LENGTH: the guest writes zeros to disk N
gz() {
	local out
	out=$("$QMP_PYTHON" "$QMP_PY" "$TSOCK" human-monitor-command \
		"{\"command-line\": \"qemu-io drive$1 \\\"write -z $2 $3\\\"\"}") || return 1
	case $out in *rror*|*ailed*) echo "guest write failed: $out"; return 1 ;; esac
	qemu-io -f raw -c "write -z $2 $3" "$IMG/cur$1.raw" >/dev/null
}
snap() { cp --sparse=always "$IMG/cur0.raw" "$IMG/exp0.raw" && cp --sparse=always "$IMG/cur1.raw" "$IMG/exp1.raw"; }
GUEST
. "$SCRATCH/guest.sh"

# the hook: ACTIONs "PHASE:ACTION ..." in HOOK_ACTION, the phases in HOOKLOG
cat >"$HOOK" <<"HOOK"
#!/bin/bash
. "$GUEST_SH"
echo "$1" >>"$HOOKLOG"
for a in $HOOK_ACTION; do
	[ "${a%%:*}" = "$1" ] || continue
	case ${a#*:} in
	before)   # the last writes before the pause: in the snapshot
		gw 0 0xb1 3M 128k && gw 1 0xb2 5M 64k && snap || exit 1 ;;
	after)    # after the pause, before the read: over data, over holes
		gw 0 0xc1 0 1M && gw 0 0xc2 20M 256k && gw 0 0xc3 24M 64k || exit 1
		gw 1 0xc4 2M 512k && gw 1 0xc5 30M 64k || exit 1
		# and on during the read, until the test stops it
		setsid bash -c ". \"$GUEST_SH\"; i=0; while [ ! -e \"$IMG/stop-writer\" ]; do
			gw \$((i % 2)) 0xd\$((i % 10)) \$(((i * 3) % 30))M 64k || break
			i=\$((i + 1)); done; echo \$i >\"$IMG/writer-done\"" </dev/null >/dev/null 2>&1 & ;;
	fill)     # 12 MiB over data: the fleecing image must take its old content
		gw 0 0xe1 0 12M && touch "$IMG/fill-done" ;;
	slow)     # a slow pre-stop hook: its end must come before QEMU's STOP
		sleep 1; date +%s.%N >"$IMG/hook-end" ;;
	clash)    # a node of cbackup's name for disk 1: its filter cannot go in
		"$QMP_PYTHON" "$QMP_PY" "$TSOCK" blockdev-add \
			"{\"driver\": \"null-co\", \"node-name\": \"cbackup-cbw1\"}" >/dev/null || exit 1 ;;
	esac
done
exit 0
HOOK
chmod +x "$HOOK"

test_expect_success 'setup: a qcow2 over a backing file, a sparse raw' '
	mkdir "$IMG"
	cd "$IMG"
	qemu-img create -q -f qcow2 base.qcow2 32M
	qemu-io -f qcow2 -c "write -P 0x11 0 12M" -c "write -P 0x12 8M 1M" base.qcow2 >/dev/null
	qemu-img create -q -f qcow2 -b base.qcow2 -F qcow2 d0.qcow2
	qemu-io -f qcow2 -c "write -P 0x13 1M 512k" -c "write -P 0x14 24M 1M" d0.qcow2 >/dev/null
	truncate -s 32M d1.raw
	qemu-io -f raw -c "write -P 0x21 2M 2M" -c "write -P 0x22 16M 64k" d1.raw >/dev/null
	qemu-img convert -f qcow2 -O raw d0.qcow2 cur0.raw
	cp --sparse=always d1.raw cur1.raw
'
export GUEST_SH=$SCRATCH/guest.sh

test_expect_success 'QEMU runs the VM: two virtio disks on drive0/drive1, two monitors' '
	rm -f "$SCRATCH/vm.pid"
	qemu-system-x86_64 -name vm320 -nodefaults -display none -machine pc,accel=tcg -m 64 -S \
		-drive file="$IMG/d0.qcow2",format=qcow2,if=none,id=drive0 \
		-device virtio-blk-pci,drive=drive0,id=vd0 \
		-drive file="$IMG/d1.raw",format=raw,if=none,id=drive1 \
		-device virtio-blk-pci,drive=drive1,id=vd1 \
		-qmp "unix:$SOCK,server=on,wait=off" -qmp "unix:$TSOCK,server=on,wait=off" \
		-daemonize -pidfile "$SCRATCH/vm.pid" >>"$SCRATCH/qemu.log" 2>&1
	cp "$SCRATCH/vm.pid" "$SCRATCH/vm.pid.kept"
	cleanup_pid "$(cat "$SCRATCH/vm.pid")"
	qmp "$TSOCK" cont >/dev/null
	wait_vm_status 5 "$TSOCK" running
	gw 0 0xa1 12M 64k
	qmp "$TSOCK" query-block >"$SCRATCH/graph.before"
	grep -q "\"node-name\": \"#block" "$SCRATCH/graph.before"
'

# backup_vm RC NAME [ARGS...]: the backup into dump-NAME, tmpdir tmp-NAME
backup_vm() {
	local want=$1 name=$2 rc=0
	shift 2
	mkdir -p "$SCRATCH/dump-$name" "$SCRATCH/tmp-$name"
	rm -f "$HOOKLOG"
	"$CBACKUP" backup --type vm --id 320 --disk "$IMG/d0.qcow2" --disk "$IMG/d1.raw" \
		--qmp "$SOCK" --tmpdir "$SCRATCH/tmp-$name" --dumpdir "$SCRATCH/dump-$name" \
		--compress zstd --script "$HOOK" "$@" >"$CB_OUT" 2>"$CB_ERR" || rc=$?
	[ "$rc" = "$want" ] || { [ "$want" = "!0" ] && [ "$rc" != 0 ]; } && return 0
	echo "cbackup exited with $rc, expected $want"
	cat "$CB_OUT" "$CB_ERR"
	return 1
}

# graph_restored: the VM runs on its own nodes again, nothing of cbackup left
graph_restored() {
	wait_vm_status 5 "$TSOCK" running
	qmp "$TSOCK" query-block >"$SCRATCH/graph.now"
	diff <(grep -o "\"node-name\": \"[^\"]*\"" "$SCRATCH/graph.before") \
	     <(grep -o "\"node-name\": \"[^\"]*\"" "$SCRATCH/graph.now")
	qmp "$TSOCK" query-named-block-nodes | grep -o "\"node-name\": \"[^\"]*\"" >"$SCRATCH/nodes.now"
	test_lacks "$SCRATCH/nodes.now" "\"cbackup-"
	[ "$(qmp "$TSOCK" query-block-exports)" = "[]" ]
	test_lacks "$SCRATCH/graph.now" "\"name\": \"cbackup-320-t\""
	# at most one bitmap of cbackup on each of the two disks, recording
	[ $(grep -c "\"name\": \"cbackup-320" "$SCRATCH/graph.now") -le 2 ]
	test_lacks "$SCRATCH/graph.now" "\"recording\": false"
}

# archive_exact NAME: the archive holds d0.raw and d1.raw equal to exp0/exp1
archive_exact() {
	local a r=$SCRATCH/r-$1
	a=$(find_archive "$SCRATCH/dump-$1" vm 320 .zst)
	mkdir "$r"
	tar -xf "$a" -C "$r"
	[ "$(cd "$r" && ls)" = "$(printf "d0.raw\nd1.raw")" ]
	cmp "$IMG/exp0.raw" "$r/d0.raw"
	cmp "$IMG/exp1.raw" "$r/d1.raw"
}

# no_output NAME: a failed backup left no archive, no staging, no fleecing
no_output() {
	no_tmp_files "$SCRATCH/dump-$1"
	test -z "$(ls "$SCRATCH/dump-$1" | grep "\.tar")" ||
		{ echo "archive left:"; ls -la "$SCRATCH/dump-$1"; return 1; }
	dir_empty "$SCRATCH/tmp-$1/cbackup" "staging left"
}

exported() { qmp "$TSOCK" query-block-exports | grep -q cbackup-exp; }

stop_writer() {
	touch "$IMG/stop-writer"
	wait_for 20 test -e "$IMG/writer-done"
	rm -f "$IMG/stop-writer" "$IMG/writer-done"
}

test_expect_success 'point in time: writes before the pause in, after it (and during the read) out' '
	HOOK_ACTION="pre-stop:before post-restart:after" backup_vm 0 pit --bwlimit 8192
	stop_writer
	cat "$CB_ERR"
	grep -E "^INFO: VM paused [0-9.]+ ms \(QEMU.s STOP at [0-9.]+ to RESUME at [0-9.]+\) to insert 2 copy-before-write filter" "$CB_ERR"
	[ "$(grep -E "^(pre-stop|pre-restart|post-restart)$" "$HOOKLOG")" = "$(printf "pre-stop\npre-restart\npost-restart")" ]
	archive_exact pit
	graph_restored
	dir_empty "$SCRATCH/tmp-pit/cbackup" "left in the private directory"
'

test_expect_success 'the archive: sparse raw images; the backing file content in d0.raw' '
	r=$SCRATCH/r-pit
	[ "$(stat -c %s "$r/d0.raw")" = $((32 * MiB)) ]
	[ $(($(stat -c %b "$r/d0.raw") * 512)) -le $((15 * MiB)) ]
	[ $(($(stat -c %b "$r/d1.raw") * 512)) -le $((3 * MiB)) ]
	qemu-io -f raw -c "read -P 0x12 8M 1M" "$r/d0.raw" >out
	test_lacks out fail
	qemu-img compare -q -f raw -F raw "$r/d0.raw" "$IMG/exp0.raw"
'

test_expect_success 'a disk the VM does not have open is refused, naming why' '
	truncate -s 1M "$IMG/other.raw"
	backup_vm 1 other --disk "$IMG/other.raw"
	error_names 320 "" "disk .*other.raw.*no drive of the VM has it open"
	graph_restored
'

test_expect_success 'SIGKILL during the read: the watchdog takes the filters out' '
	mkdir -p "$SCRATCH/dump-kill" "$SCRATCH/tmp-kill"
	"$CBACKUP" backup --type vm --id 320 --disk "$IMG/d0.qcow2" --disk "$IMG/d1.raw" \
		--qmp "$SOCK" --tmpdir "$SCRATCH/tmp-kill" --dumpdir "$SCRATCH/dump-kill" \
		--bwlimit 256 >"$CB_OUT" 2>"$CB_ERR" &
	pid=$!
	wait_for 20 exported
	kill -KILL $pid
	wait $pid || rc=$?
	[ "$rc" = 137 ]
	wait_for 10 graph_restored
	graph_restored
	gw 0 0xf1 5M 64k
'

test_expect_success 'watchdog killed too: the next run removes the leftovers, WARN, exact' '
	"$CBACKUP" backup --type vm --id 320 --disk "$IMG/d0.qcow2" --disk "$IMG/d1.raw" \
		--qmp "$SOCK" --tmpdir "$SCRATCH/tmp-kill" --dumpdir "$SCRATCH/dump-kill" \
		--bwlimit 256 >"$CB_OUT" 2>"$CB_ERR" &
	pid=$!
	wait_for 20 exported
	wd=$(pgrep -P $pid -x cbackup-vmwdog)
	kill -KILL $wd
	kill -KILL $pid
	wait $pid || rc=$?
	[ "$rc" = 137 ]
	qmp "$TSOCK" query-named-block-nodes >nodes
	grep -q "\"node-name\": \"cbackup-cbw0\"" nodes
	gw 0 0xf2 6M 64k
	gw 1 0xf3 7M 64k
	snap
	backup_vm 0 kill
	grep -E "^WARN: removed [0-9]+ leftover\(s\) named cbackup-\* of an earlier run" "$CB_ERR"
	archive_exact kill
	graph_restored
'

test_expect_success 'keep-staging: a chain of 3 runs, the 2nd and 3rd read only the dirty extents' '
	HOOK_ACTION="pre-stop:before" backup_vm 0 inc1 --keep-staging 1
	archive_exact inc1
	test_lacks "$CB_ERR" "^WARN"
	qmp "$TSOCK" query-block | grep -qE "\"name\": \"cbackup-320@[0-9a-f]{16}\""
	gw 0 0x71 0 128k
	gw 0 0x72 18M 64k
	gz 0 8M 64k
	gw 1 0x73 2M 64k
	HOOK_ACTION="pre-stop:before post-restart:after" backup_vm 0 inc2 --keep-staging 1 \
		--tmpdir "$SCRATCH/tmp-inc1"
	stop_writer
	grep -E "^INFO: disk .*d0.qcow2.: only the extents bitmap .cbackup-320@[0-9a-f]{16}. marks dirty are read" "$CB_ERR"
	grep -E "^INFO: disk .*d0.qcow2. \(drive .drive0.\): [0-9.]+KiB of 32MiB read" "$CB_ERR"
	# the test dirtied 128k + 64k + 64k (zeros) here and 128k in the hook
	read=$(sed -n "s/^INFO: disk .*d0.qcow2.: read \([0-9]*\) bytes of \([0-9]*\) dirty.*/\1/p" "$CB_ERR")
	echo "d0: read $read bytes, the test dirtied $((384 * 1024))"
	test -n "$read"
	test "$read" -gt 0
	test $((read * 10)) -le $((384 * 1024 * 12))
	archive_exact inc2
	gz 0 0 1M
	gw 1 0x74 20M 64k
	HOOK_ACTION="pre-stop:before" backup_vm 0 inc3 --keep-staging 1 --tmpdir "$SCRATCH/tmp-inc1"
	grep -E "^INFO: disk .*d1.raw.: only the extents bitmap .cbackup-320@[0-9a-f]{16}. marks dirty are read" "$CB_ERR"
	archive_exact inc3
	graph_restored
'

test_expect_success 'keep-staging with the bitmap gone: WARN, the whole disk read, exact' '
	node=$(qmp "$TSOCK" query-block | grep -o "\"node-name\": \"#block[0-9]*\"" | head -1 | cut -d\" -f4)
	bm=$(qmp "$TSOCK" query-block | grep -oE "cbackup-320@[0-9a-f]{16}" | head -1)
	qmp "$TSOCK" block-dirty-bitmap-remove "{\"node\": \"$node\", \"name\": \"$bm\"}"
	gw 0 0x75 4M 64k
	HOOK_ACTION="pre-stop:before" backup_vm 0 inc4 --keep-staging 1 --tmpdir "$SCRATCH/tmp-inc1"
	grep -E "^WARN: disk .*d0.qcow2.: bitmap .$bm. is missing: the whole disk is read" "$CB_ERR"
	archive_exact inc4
'

test_expect_success ROOT,TMPFS 'ENOSPC in the fleecing image: the backup fails, the guest writes on' '
	mkdir -p "$SCRATCH/tmp-full"
	mount -t tmpfs -o size=10m tmpfs "$SCRATCH/tmp-full"
	cleanup_mount "$SCRATCH/tmp-full"
	HOOK_ACTION="post-restart:fill" backup_vm 1 full
	test -e "$IMG/fill-done"
	error_names 320 "" "reading the snapshot of disk .*d0.qcow2"
	graph_restored
	qmp "$TSOCK" query-block >blocks
	test_lacks blocks "\"io-status\": \"nospace\""
	gw 0 0xf4 9M 64k
	no_output full
'

test_expect_success 'the pause is QEMU'"'"'s STOP to RESUME: a slow pre-stop hook is not in it' '
	HOOK_ACTION="pre-stop:slow pre-stop:before" backup_vm 0 slow
	line=$(grep -E "^INFO: VM paused" "$CB_ERR")
	echo "$line"
	set -- $(echo "$line" | sed -E "s/.*paused ([0-9.]+) ms \(QEMU.s STOP at ([0-9.]+) to RESUME at ([0-9.]+)\).*/\1 \2 \3/")
	[ $# = 3 ]
	# the hook ended before QEMU stopped the VM (an order of instants) ...
	h=$(cat "$IMG/hook-end")
	stop_us=${2/./}
	resume_us=${3/./}
	hook_us=${h%???}
	hook_us=${hook_us/./}
	test "$hook_us" -le "$stop_us"
	# ... and the figure is RESUME - STOP in tenths of ms (p = round(d / 100 us))
	tenths=${1/./}
	diff_us=$((resume_us - stop_us - 10#$tenths * 100))
	test "$diff_us" -ge -50
	test "$diff_us" -le 50
	archive_exact slow
'

test_expect_success 'vm-method blockdev-backup: exact at the transaction, writes go on, never paused' '
	HOOK_ACTION="pre-stop:before post-restart:after" backup_vm 0 bdb --vm-method blockdev-backup \
		--bwlimit 8192
	stop_writer
	cat "$CB_ERR"
	grep -E "^INFO: QEMU 7\.[0-9.]+: blockdev-backup of 2 disk\(s\) into the staging directory \(vm-method blockdev-backup\)" "$CB_ERR"
	grep -E "^INFO: 2 blockdev-backup job\(s\) started in one transaction: the VM was not paused" "$CB_ERR"
	test_lacks "$CB_ERR" "^INFO: VM paused"
	archive_exact bdb
	graph_restored
	[ "$(qmp "$TSOCK" query-jobs)" = "[]" ]
	dir_empty "$SCRATCH/tmp-bdb/cbackup" "left in the private directory"
'

test_expect_success 'blockdev-backup: SIGKILL during the jobs, the watchdog cancels them' '
	mkdir -p "$SCRATCH/dump-bdk" "$SCRATCH/tmp-bdk"
	"$CBACKUP" backup --type vm --id 320 --disk "$IMG/d0.qcow2" --disk "$IMG/d1.raw" \
		--qmp "$SOCK" --tmpdir "$SCRATCH/tmp-bdk" --dumpdir "$SCRATCH/dump-bdk" \
		--vm-method blockdev-backup --bwlimit 256 >"$CB_OUT" 2>"$CB_ERR" &
	pid=$!
	wait_for 20 eval "qmp \"\$TSOCK\" query-jobs | grep -q cbackup-job1"
	kill -KILL $pid
	wait $pid || rc=$?
	[ "$rc" = 137 ]
	wait_for 10 graph_restored
	graph_restored
	[ "$(qmp "$TSOCK" query-jobs)" = "[]" ]
'

QGA=$SCRATCH/qga.sock
QGALOG=$SCRATCH/qga.log
start_qga() {
	rm -f "$QGA" "$QGALOG"
	"$QMP_PYTHON" "$TOP/tests/helpers/qgapeer.py" "$QGA" "$QGALOG" "$TSOCK" "$@" &
	cleanup_pid $!
	QGAPID=$!
	wait_for 5 test -S "$QGA"
}
stop_qga() { kill $QGAPID; wait $QGAPID 2>/dev/null || :; }
# the agent's fsfreeze calls: "COMMAND VM-STATUS FILTERS-IN"
fsfreeze_calls() { grep "^guest-fsfreeze" "$QGALOG"; }

test_expect_success 'qga: frozen before the filters go in, thawed after (VM running again)' '
	start_qga
	HOOK_ACTION="pre-stop:before" backup_vm 0 qga --qga "$QGA"
	stop_qga
	cat "$QGALOG"
	[ "$(fsfreeze_calls)" = "$(printf "guest-fsfreeze-freeze running 0\nguest-fsfreeze-thaw running 2")" ]
	grep -q "^guest-sync-delimited " "$QGALOG"
	grep -E "^INFO: guest agent: 1 file system\(s\) frozen" "$CB_ERR"
	grep -E "^INFO: guest agent: 1 file system\(s\) thawed" "$CB_ERR"
	archive_exact qga
	graph_restored
'

test_expect_success 'qga: the thaw comes when a filter cannot go in; the backup fails, graph restored' '
	start_qga
	HOOK_ACTION="pre-stop:clash" backup_vm 1 qgafail --qga "$QGA"
	stop_qga
	cat "$QGALOG"
	fsfreeze_calls >calls
	[ "$(head -1 calls)" = "guest-fsfreeze-freeze running 0" ]
	[ "$(sed -n 2p calls | cut -d" " -f1)" = guest-fsfreeze-thaw ]
	[ $(wc -l <calls) = 2 ]
	error_names 320 "" "cbackup-cbw1"
	graph_restored
	no_output qgafail
'

test_expect_success 'qga: a freeze the agent refuses is a WARN, the backup goes on, thaw tried' '
	start_qga fail-freeze
	HOOK_ACTION="pre-stop:before" backup_vm 0 qgawarn --qga "$QGA"
	stop_qga
	grep -E "^WARN: guest agent .*guest-fsfreeze-freeze: failed to freeze /: Operation not supported: the disks are backed up without a file system freeze" "$CB_ERR"
	fsfreeze_calls | cut -d" " -f1 >calls
	[ "$(cat calls)" = "$(printf "guest-fsfreeze-freeze\nguest-fsfreeze-thaw")" ]
	archive_exact qgawarn
	graph_restored
'

test_expect_success 'qga with blockdev-backup: frozen before the jobs start, thawed once they run' '
	start_qga
	HOOK_ACTION="pre-stop:before" backup_vm 0 qgabdb --qga "$QGA" --vm-method blockdev-backup \
		--bwlimit 8192
	stop_qga
	cat "$QGALOG"
	# the jobs'"'"' own copy-before-write filters are in at the thaw
	[ "$(fsfreeze_calls)" = "$(printf "guest-fsfreeze-freeze running 0\nguest-fsfreeze-thaw running 2")" ]
	archive_exact qgabdb
	graph_restored
'

test_expect_success 'mode snapshot of a VM: QEMU'"'"'s live backup, said so; no fallback' '
	HOOK_ACTION="pre-stop:before" backup_vm 0 snapmode --mode snapshot
	grep -E "^INFO: snapshot mode: QEMU.s own live backup" "$CB_ERR"
	test_lacks "$CB_ERR" "snapshot not possible|trying .suspend. mode"
	grep -E "^INFO: VM paused [0-9.]+ ms \(QEMU.s STOP" "$CB_ERR"
	archive_exact snapmode
'

# held_backup NAME FAULT [ARGS...]: cbackup in the background under the
# shim, held (SIGSTOP) where FAULT fires; pid set.
held_backup() {
	local name=$1 spec=$2
	shift 2
	mkdir -p "$SCRATCH/dump-$name" "$SCRATCH/tmp-$name"
	rm -f "$FAULT_LOG"
	with_fault_bg "$spec" \
		"$CBACKUP" backup --type vm --id 320 --disk "$IMG/d0.qcow2" --disk "$IMG/d1.raw" \
		--qmp "$SOCK" --tmpdir "$SCRATCH/tmp-$name" --dumpdir "$SCRATCH/dump-$name" \
		--compress zstd "$@" >"$CB_OUT" 2>"$CB_ERR"
	pid=$FAULT_PID
	cleanup_pid $pid
	wait_for 30 grep -q "^State:.*stopped" /proc/$pid/status
}
# ended PID: the child PID has exited (a zombie until waited for)
ended() { [ ! -e "/proc/$1" ] || grep -q "^State:.*zombie" "/proc/$1/status"; }
# stop_watchdog: the watchdog of the held cbackup stopped (SIGSTOP); wd set
stop_watchdog() {
	wd=$(pgrep -P $pid -x cbackup-vmwdog)
	test -n "$wd" && kill -STOP $wd && cleanup_pid $wd
}
# go_on RC: the held cbackup goes on and exits with RC
go_on() {
	local rc=0
	kill -CONT $pid
	wait_for 30 ended $pid || return 1
	wait $pid || rc=$?
	cat "$CB_ERR"
	[ "$rc" = "$1" ] && return 0
	echo "cbackup exited with $rc, expected $1"
	return 1
}

test_expect_success 'held past max-freeze between the two filters: ERROR, no archive, VM runs' '
	# held right before the filter of disk 1 goes in: the VM is paused
	# with disk 0 filtered; the watchdog resumes it at max-freeze
	snap
	held_backup mf "data:SIGSTOP:cbackup-cbw1" --max-freeze 1
	fault_fired "^data .*cbackup-cbw1"
	wait_vm_status 10 "$TSOCK" running
	gw 1 0xe7 6M 64k
	go_on 1
	error_names 320 "" "max-freeze \(1 s\) exceeded while the copy-before-write filters went in: the watchdog resumed the VM"
	test_lacks "$CB_ERR" "^INFO: VM paused"
	no_output mf
	graph_restored
'

test_expect_success 'the VM watchdog stopped while the VM is paused: cbackup resumes it, ends it' '
	held_backup wds "data:SIGSTOP:cbackup-cbw1"
	stop_watchdog
	vm_status_is "$TSOCK" paused
	go_on 1
	vm_status_is "$TSOCK" running
	test ! -e /proc/$wd
	error_names 320 "" "the VM watchdog \(pid $wd\) did not answer for 1 s \(stopped\?\): cbackup resumed the VM itself"
	no_output wds
	graph_restored
'

test_expect_success 'the VM watchdog stopped after the pause: killed at the end, WARN, exact' '
	# held before the first export, the VM running again
	snap
	held_backup wdr "data:SIGSTOP:cbackup-exp0"
	stop_watchdog
	go_on 0
	test_has "$CB_ERR" "^WARN: the VM watchdog \(pid $wd\) did not end in 1 s \(stopped\?\): killed"
	test ! -e /proc/$wd
	archive_exact wdr
	graph_restored
'

test_expect_success 'QEMU quits during the read: ERROR naming it, exit 1, nothing left' '
	mkdir -p "$SCRATCH/dump-quit" "$SCRATCH/tmp-quit"
	"$CBACKUP" backup --type vm --id 320 --disk "$IMG/d0.qcow2" --disk "$IMG/d1.raw" \
		--qmp "$SOCK" --tmpdir "$SCRATCH/tmp-quit" --dumpdir "$SCRATCH/dump-quit" \
		--bwlimit 1024 >"$CB_OUT" 2>"$CB_ERR" &
	pid=$!
	wait_for 20 exported
	wd=$(pgrep -P $pid -x cbackup-vmwdog)
	# QEMU answers its quit only once the NBD client (cbackup, in its
	# bwlimit sleep) has come back: the reply may not come in qmp.py'"'"'s time
	qmp "$TSOCK" quit >/dev/null || :
	wait $pid || rc=$?
	cat "$CB_ERR"
	[ "$rc" = 1 ]
	error_names 320 "" "the VM shut down or QEMU quit during the backup"
	wait_for 10 test ! -e "/proc/$wd"
	wait_for 5 test ! -e "/proc/$(cat "$SCRATCH/vm.pid.kept")"
	no_output quit
'

test_done
