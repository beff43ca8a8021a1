#!/bin/bash
# keep-staging incrementals of a VM (copy-before-write path, a real QEMU,
# TCG, no guest OS) when the qcow2 file is rolled back: night 1, the VM
# shut down (its persistent dirty bitmap stored in the file, consistent),
# the file copied, the VM started, a guest write, night 2; the VM shut
# down, the copy put back, the VM started: the file's bitmap is night 1's,
# the kept image night 2's. Night 3 must read the whole disk (an INFO says
# why: the bitmap's generation is not the kept copy's) and archive the
# disk as it is now, not the kept image; night 4 is incremental again.
# A run killed after its pause leaves no stopped bitmap (the watchdog drops
# it) and the next one reads in full.
. "$(dirname "$0")/lib.sh"

IMG=$SCRATCH/img
SOCK=$SCRATCH/vm.qmp
TMP=$SCRATCH/tmp

if ! test_have_prereq QEMU; then
	test_skip 'VM bitmaps after a file-level rollback' 'qemu-system-x86_64, qemu-img or python3 missing'
	test_done
fi

# gw PATTERN OFFSET LENGTH: the guest writes (through its device)
gw() {
	local out
	out=$(qmp "$SOCK" human-monitor-command \
		"{\"command-line\": \"qemu-io virtio0 \\\"write -P $1 $2 $3\\\"\"}") || return 1
	case $out in *rror*|*ailed*) echo "guest write failed: $out"; return 1 ;; esac
}

# night N: a keep-staging backup into dump-N
night() {
	mkdir -p "$SCRATCH/dump-$1"
	cbackup_run 0 backup --type vm --id 322 --disk "$IMG/d.qcow2" --qmp "$SOCK" \
		--tmpdir "$TMP" --dumpdir "$SCRATCH/dump-$1" --keep-staging 1 --compress zstd
}

# exact N: night N's archive holds the disk as the VM has it now
exact() {
	local a r=$SCRATCH/r-$1
	a=$(find_archive "$SCRATCH/dump-$1" vm 322 .zst)
	mkdir "$r"
	tar -xf "$a" -C "$r"
	qemu-img compare -f raw -F qcow2 -U "$r/d.raw" "$IMG/d.qcow2"
}

# (test bodies run in subshells: the pid is read from qemu_start's file)
vm_start() { qemu_start vm322 "$SOCK" "$IMG/d.qcow2:qcow2"; }
vm_stop() { qemu_stop "$SOCK" "$(cat "$SCRATCH/vm322.pid")"; }

test_expect_success 'setup: a qcow2 with data, the VM runs' '
	mkdir "$IMG" "$TMP"
	qemu-img create -q -f qcow2 "$IMG/d.qcow2" 32M
	qemu-io -f qcow2 -c "write -P 0x11 0 4M" -c "write -P 0x12 8M 1M" "$IMG/d.qcow2" >/dev/null
	vm_start
'

test_expect_success 'night 1, shut down, the file copied; a write; night 2 incremental' '
	night 1
	exact 1
	vm_stop
	cp "$IMG/d.qcow2" "$IMG/after1.qcow2"
	qemu-img info "$IMG/after1.qcow2" >info
	test_has info "name: cbackup-322"
	vm_start
	gw 0x22 2M 64k
	night 2
	test_has "$CB_ERR" "^INFO: disk .*d.qcow2.: only the extents bitmap .cbackup-322[^ ]*. marks dirty are read"
	exact 2
'

test_expect_success 'the file put back from after night 1: night 3 reads it all, INFO, exact' '
	vm_stop
	cp "$IMG/after1.qcow2" "$IMG/d.qcow2"
	vm_start
	night 3
	cat "$CB_ERR"
	exact 3
	test_lacks "$CB_ERR" "marks dirty are read"
	test_has "$CB_ERR" "^INFO: disk .*d.qcow2.: bitmap .cbackup-322@[0-9a-f]+. is of another state of the disk than the kept copy"
	test_has "$CB_ERR" "the whole disk is read"
	test_has "$CB_ERR" "^INFO: disk .*d.qcow2. \(drive .virtio0.\): [0-9.]+MiB of 32MiB read"
'

test_expect_success 'night 4: incremental again, exact; one bitmap of cbackup on the disk' '
	gw 0x44 6M 64k
	night 4
	test_has "$CB_ERR" "^INFO: disk .*d.qcow2.: only the extents bitmap .cbackup-322@[0-9a-f]+. marks dirty are read"
	test_has "$CB_ERR" "^INFO: disk .*d.qcow2.: read 65536 bytes of 65536 dirty"
	exact 4
	qmp "$SOCK" query-block | grep -o "\"name\": \"cbackup-[^\"]*\"" >bitmaps
	cat bitmaps
	[ $(wc -l <bitmaps) = 1 ]
'

# no_stopped_bitmap: the VM's monitor is free again and no bitmap is stopped
no_stopped_bitmap() { qmp "$SOCK" query-block >blocks && test_lacks blocks "\"recording\": false"; }

test_expect_success 'night 5 killed after the pause: its stopped bitmap goes; night 6 full, exact' '
	gw 0x55 10M 64k
	mkdir -p "$SCRATCH/dump-5"
	# held (the shim'"'"'s SIGSTOP) before the export, after the pause
	with_fault_bg "data:SIGSTOP:cbackup-exp0" \
		"$CBACKUP" backup --type vm --id 322 --disk "$IMG/d.qcow2" --qmp "$SOCK" \
		--tmpdir "$TMP" --dumpdir "$SCRATCH/dump-5" --keep-staging 1 >"$CB_OUT" 2>"$CB_ERR"
	pid=$FAULT_PID
	cleanup_pid $pid
	wait_for 30 grep -q "^State:.*stopped" /proc/$pid/status
	kill -KILL $pid
	wait $pid || :
	wait_for 10 no_stopped_bitmap
	grep -o "\"name\": \"cbackup-[^\"]*\"" blocks >bitmaps
	[ $(wc -l <bitmaps) = 1 ]
	night 6
	test_has "$CB_ERR" "^WARN: disk .*d.qcow2.: no kept image recorded complete: the whole disk is read"
	exact 6
	vm_stop
'

test_done
