#!/bin/bash
# VM backups of a real QEMU (TCG, no guest OS) paused over QMP: the disk
# images (a qcow2 with data, a qcow2 with compressed clusters, a sparse raw)
# and the guest config in the archive, restored byte-identical (holes kept)
# by cbackup, GNU tar and bsdtar; the VM is paused exactly between pre-stop
# and post-restart (checked by a hook querying QMP itself, so cbackup must
# not hold the monitor between operations) and running afterwards; images
# changed between the passes (new mtime, or only a new ctime) are recopied
# in pass 2; [vm ID] in the config file; SIGKILL while paused (the watchdog
# resumes the VM within 2 s) and SIGTERM (resumed at once, clean failure);
# a missing or dead QMP socket fails cleanly; a VM the admin had paused is
# backed up and stays paused.
. "$(dirname "$0")/lib.sh"

if ! test_have_prereq QEMU; then
	test_skip 'VM backups over QMP' 'qemu-system-x86_64, qemu-img or python3 missing'
	test_done
fi

IMG=$SCRATCH/images
SOCK=$SCRATCH/vm200.qmp
GCONF=$IMG/200.conf
HOOK=$SCRATCH/hook.sh
HOOKLOG=$SCRATCH/hook.log
DISKS=(disk0.qcow2 comp.qcow2 data.raw)
MiB=1048576

# the hook gets these through cbackup's environment
export QMP_PY QMP_PYTHON VM_SOCK=$SOCK HOOK_LOG=$HOOKLOG HOOK_ACTION=

test_expect_success 'setup: images, guest config, a recording hook' '
	mkdir "$IMG"
	cd "$IMG"
	# 24 MiB: random, zeros, compressible text, random; then a qemu-io write
	truncate -s 24M src.raw
	head -c 3M /dev/urandom | dd of=src.raw conv=notrunc status=none
	yes "compressible guest data in cluster after cluster" | head -c 4M |
		dd of=src.raw bs=1M seek=10 conv=notrunc status=none
	head -c 1M /dev/urandom | dd of=src.raw bs=1M seek=20 conv=notrunc status=none
	qemu-img convert -f raw -O qcow2 src.raw disk0.qcow2
	qemu-io -f qcow2 -c "write -P 0x5a 16M 512k" disk0.qcow2 >/dev/null
	qemu-img convert -c -f raw -O qcow2 src.raw comp.qcow2
	# compressed clusters indeed (allocation map entries flagged compressed)
	qemu-img map --output=json comp.qcow2 | grep -q "\"compressed\": true" ||
		[ "$(stat -c %s comp.qcow2)" -lt "$(stat -c %s disk0.qcow2)" ]
	rm src.raw
	# sparse raw: 64 MiB apparent, 1 MiB of data at 32 MiB
	truncate -s 64M data.raw
	head -c 1M /dev/urandom | dd of=data.raw bs=1M seek=32 conv=notrunc status=none
	[ $(($(stat -c %b data.raw) * 512)) -le $((2 * MiB)) ]
	printf "name: vm200\nmemory: 64\nvirtio0: disk0.qcow2\n" >"$GCONF"
	cat >"$HOOK" <<-"HOOK"
	#!/bin/bash
	# records PHASE and the VM status it sees over QMP; HOOK_ACTION
	# "PHASE:ACTION ..." makes it act at PHASE
	qmp() { "$QMP_PYTHON" "$QMP_PY" "$@"; }
	if [ "$1" = watch-resume ]; then
		# watch the VM come back (while cbackup may still run), from a
		# session of its own: a signal to cbackup kills the group of the hook
		: >"$KILL_TIME.watching"
		end=$((SECONDS + 30))
		while [ $SECONDS -lt $end ]; do
			[ "$(qmp "$VM_SOCK" status)" = running ] || continue
			date +%s.%N >"$KILL_TIME.resumed"; break
		done
		exit 0
	fi
	st=$(qmp "$VM_SOCK" status 2>&1) || st="qmp-failed($st)"
	echo "$1 $st" >>"$HOOK_LOG"
	for a in $HOOK_ACTION; do
		[ "${a%%:*}" = "$1" ] || continue
		case ${a#*:} in
		modify)     # 4 KiB of new data at 8 MiB (a hole) and at 32 MiB
			head -c 4096 /dev/urandom | dd of="$MOD_FILE" bs=4096 seek=2048 conv=notrunc status=none
			head -c 4096 /dev/urandom | dd of="$MOD_FILE" bs=4096 seek=8192 conv=notrunc status=none ;;
		keep-mtime) touch -r "$MOD_REF" "$MOD_FILE" ;;
		cont)       qmp "$VM_SOCK" cont >/dev/null ;;   # the admin resumes the VM
		kill9|term)
			# $PPID must be cbackup itself: never signal anything else
			comm=$(cat /proc/$PPID/comm)
			if [ "$comm" != cbackup ]; then
				echo "parent-is-$comm" >>"$HOOK_LOG"; exit 0
			fi
			setsid "$0" watch-resume </dev/null >/dev/null 2>&1 &
			while [ ! -e "$KILL_TIME.watching" ]; do sleep 0.01; done
			date +%s.%N >"$KILL_TIME"
			[ "${a#*:}" = kill9 ] && kill -KILL $PPID || kill -TERM $PPID
			wait ;;
		esac
	done
	exit 0
	HOOK
	chmod +x "$HOOK"
'

test_expect_success 'QEMU runs the VM with the three disks; QMP says running' '
	qemu_start vm200 "$SOCK" "$IMG/disk0.qcow2:qcow2" "$IMG/comp.qcow2:qcow2" "$IMG/data.raw:raw"
	echo "$QEMU_PID" >"$SCRATCH/qemu.pid"
	[ "$(qmp "$SOCK" status)" = running ]
	qmp "$SOCK" query-block >blocks
	for d in "${DISKS[@]}"; do grep -q "$IMG/$d" blocks; done
'
QEMU_PID=$(cat "$SCRATCH/qemu.pid" 2>/dev/null)

# backup_vm RC NAME [ARGS...]: the ad hoc VM backup into $SCRATCH/dump-NAME
# with tmpdir $SCRATCH/tmp-NAME, the hook log reset; RC "!0": any failure
backup_vm() {
	local want=$1 name=$2 d rc=0 disks=()
	shift 2
	mkdir -p "$SCRATCH/dump-$name" "$SCRATCH/tmp-$name"
	rm -f "$HOOKLOG"
	for d in "${DISKS[@]}"; do disks+=(--disk "$IMG/$d"); done
	"$CBACKUP" backup --type vm --id 200 "${disks[@]}" --qmp "$SOCK" \
		--guest-config "$GCONF" --tmpdir "$SCRATCH/tmp-$name" \
		--dumpdir "$SCRATCH/dump-$name" --compress zstd --script "$HOOK" "$@" \
		>"$CB_OUT" 2>"$CB_ERR" || rc=$?
	[ "$rc" = "$want" ] || { [ "$want" = "!0" ] && [ "$rc" != 0 ]; } && return 0
	echo "cbackup exited with $rc, expected $want"
	echo "--- stdout:"; cat "$CB_OUT"
	echo "--- stderr:"; cat "$CB_ERR"
	return 1
}

# in_order FILE ERE...: each ERE matches a line of FILE after the previous one
in_order() {
	local f=$1 last=0 n
	shift
	for re in "$@"; do
		n=$(grep -n -E -- "$re" "$f" | cut -d: -f1 | awk -v l="$last" '$1 > l { print; exit }')
		[ -n "$n" ] || { echo "no line /$re/ after line $last of:"; cat "$f"; return 1; }
		last=$n
	done
}

# same_images DIR: every image and guest.conf restored byte-identical,
# data.raw still sparse
same_images() {
	local d
	for d in "${DISKS[@]}"; do cmp "$IMG/$d" "$1/$d"; done
	cmp "$GCONF" "$1/guest.conf"
	local alloc=$(($(stat -c %b "$1/data.raw") * 512))
	[ "$alloc" -le $((4 * MiB)) ] ||
		{ echo "restored data.raw has $alloc bytes allocated: holes lost"; return 1; }
	qemu-img check -q "$1/disk0.qcow2"
	qemu-img check -q "$1/comp.qcow2"
}

# no_output NAME: failed backup left no archive, no .tmp, no staging
no_output() {
	no_tmp_files "$SCRATCH/dump-$1"
	test -z "$(ls "$SCRATCH/dump-$1" | grep "\.tar")" ||
		{ echo "archive left:"; ls -la "$SCRATCH/dump-$1"; return 1; }
	dir_empty "$SCRATCH/tmp-$1" "staging left"
}

test_expect_success 'backup over QMP: paused exactly between pre-stop and post-restart' '
	backup_vm 0 main
	cat "$CB_ERR"
	cat "$HOOKLOG"
	grep -qx "pre-stop running" "$HOOKLOG"
	grep -qx "pre-restart paused" "$HOOKLOG"
	grep -qx "post-restart running" "$HOOKLOG"
	[ "$(qmp "$SOCK" status)" = running ]
	in_order "$CB_ERR" "^INFO: Starting Backup of VM 200 \(vm\)$" \
		"^INFO: starting first sync" \
		"^INFO: suspending guest \(qmp\)$" \
		"^INFO: final sync finished \([0-9.]+ seconds\)$" \
		"^INFO: resuming guest$" \
		"^INFO: guest is online again after [0-9.]+ seconds$"
	test_must_fail grep "^ERROR" "$CB_ERR"
'

test_expect_success 'the archive: guest.conf and the images by base name, sha256 ok' '
	archive=$(find_archive "$SCRATCH/dump-main" vm 200 .zst)
	zstd -dc <"$archive" | tar -tf - | grep -vx "\./" | LC_ALL=C sort >members
	printf "./comp.qcow2\n./data.raw\n./disk0.qcow2\n./guest.conf\n" >expected
	diff -u expected members
	cd "$SCRATCH/dump-main"
	sha256sum -c "${archive%.tar.zst}.sha256" || sha256sum -c "$archive.sha256"
	no_tmp_files "$SCRATCH/dump-main"
	dir_empty "$SCRATCH/tmp-main" "staging left"
'

test_expect_success 'cbackup restore: byte-identical images, raw still sparse' '
	archive=$(find_archive "$SCRATCH/dump-main" vm 200 .zst)
	cbackup_run 0 restore "$archive" "$SCRATCH/r-cb"
	same_images "$SCRATCH/r-cb"
	rm -rf "$SCRATCH/r-cb"
'

test_expect_success 'GNU tar + zstd restore: byte-identical images, raw still sparse' '
	archive=$(find_archive "$SCRATCH/dump-main" vm 200 .zst)
	mkdir "$SCRATCH/r-gnu"
	zstd -dc <"$archive" | tar -xpf - -C "$SCRATCH/r-gnu"
	same_images "$SCRATCH/r-gnu"
	rm -rf "$SCRATCH/r-gnu"
'

test_expect_success BSDTAR 'bsdtar restore: byte-identical images, raw still sparse' '
	archive=$(find_archive "$SCRATCH/dump-main" vm 200 .zst)
	mkdir "$SCRATCH/r-bsd"
	bsdtar -xpf "$archive" -C "$SCRATCH/r-bsd"
	same_images "$SCRATCH/r-bsd"
	rm -rf "$SCRATCH/r-bsd"
'

# archived_image NAME IMAGE: IMAGE from the archive of backup NAME on stdout
archived_image() {
	zstd -dc <"$(find_archive "$SCRATCH/dump-$1" vm 200 .zst)" | tar -xOf - "./$2"
}

test_expect_success 'an image changed between the passes (pre-stop hook): pass 2 recopies it' '
	cp --sparse=always "$IMG/data.raw" before.raw
	HOOK_ACTION=pre-stop:modify MOD_FILE=$IMG/data.raw backup_vm 0 changed
	test_must_fail cmp -s before.raw "$IMG/data.raw"
	archived_image changed data.raw >got.raw
	cmp "$IMG/data.raw" got.raw
	[ "$(qmp "$SOCK" status)" = running ]
'

test_expect_success 'changed with its mtime put back (only the ctime moves): recopied' '
	touch -r "$IMG/data.raw" mtime.ref
	cp --sparse=always "$IMG/data.raw" before.raw
	HOOK_ACTION="pre-stop:modify pre-stop:keep-mtime" MOD_FILE=$IMG/data.raw \
		MOD_REF=$SCRATCH/mtime.ref backup_vm 0 ctime
	[ "$(stat -c %y "$IMG/data.raw")" = "$(stat -c %y mtime.ref)" ]
	test_must_fail cmp -s before.raw "$IMG/data.raw"
	archived_image ctime data.raw >got.raw
	cmp "$IMG/data.raw" got.raw
'

test_expect_success '[vm 200] in the config file (repeated disk lines, qmp, config)' '
	mkdir "$SCRATCH/dump-conf" "$SCRATCH/tmp-conf"
	cat >vm.conf <<-CONF
	tmpdir = $SCRATCH/tmp-conf
	dumpdir = $SCRATCH/dump-conf
	compress = gzip

	[vm 200]
	disk = $IMG/disk0.qcow2
	disk = $IMG/comp.qcow2
	disk = $IMG/data.raw
	qmp = $SOCK
	config = $GCONF
	CONF
	rm -f "$HOOKLOG"
	cbackup_run 0 200 --config vm.conf --script "$HOOK"
	cat "$CB_ERR"
	grep -qx "pre-restart paused" "$HOOKLOG"
	grep -q "^INFO: suspending guest (qmp)$" "$CB_ERR"
	[ "$(qmp "$SOCK" status)" = running ]
	archive=$(find_archive "$SCRATCH/dump-conf" vm 200 .gz)
	mkdir r-conf
	tar -xzpf "$archive" -C r-conf
	same_images r-conf
	rm -rf r-conf
'

# resumed_on_signal: after the kill the hook logged, QMP says running while
# the hook's watcher still looks (30 s): well before max-freeze (60 s, the
# default) could have resumed it, so it was the signal (or the watchdog's
# pipe closing) that did. A mechanism, not a stopwatch.
resumed_on_signal() {
	test -s "$SCRATCH/kill-time" || { echo "the hook never sent the signal"; cat "$HOOKLOG"; return 1; }
	wait_for 35 test -s "$SCRATCH/kill-time.resumed" >/dev/null ||
		{ echo "the hook did not see the VM running while it watched"; return 1; }
}

# cbackup_gone NAME: no process of that run (the watchdog) left behind
no_procs_of() { ! pgrep -f -- "$SCRATCH/tmp-$1" >/dev/null; }
cbackup_gone() {
	wait_for 3 no_procs_of "$1" >/dev/null && return 0
	echo "processes of the killed run left:"; ps -fp "$(pgrep -d, -f -- "$SCRATCH/tmp-$1")"
	kill -KILL $(pgrep -f -- "$SCRATCH/tmp-$1") 2>/dev/null
	return 1
}

# unpause_vm: leave the VM running for the next test, whatever happened
unpause_vm() { vm_status_is "$SOCK" running || qmp "$SOCK" cont >/dev/null; }

test_expect_success 'SIGKILL while paused (pre-restart hook): the watchdog resumes, not max-freeze' '
	rm -f "$SCRATCH/kill-time" "$SCRATCH/kill-time.resumed" "$SCRATCH/kill-time.watching"
	KILL_TIME=$SCRATCH/kill-time HOOK_ACTION=pre-restart:kill9 backup_vm 137 kill9 || rc=$?
	cat "$HOOKLOG"
	grep -qx "pre-restart paused" "$HOOKLOG"
	resumed_on_signal || { unpause_vm; false; }
	test_must_fail grep "^INFO: resuming guest" "$CB_ERR"
	cbackup_gone kill9
	[ -z "${rc:-}" ]
'

test_expect_success 'SIGTERM while paused: resumed at once, clean failure' '
	rm -f "$SCRATCH/kill-time" "$SCRATCH/kill-time.resumed" "$SCRATCH/kill-time.watching"
	KILL_TIME=$SCRATCH/kill-time HOOK_ACTION=pre-restart:term backup_vm "!0" term || rc=$?
	cat "$HOOKLOG"
	grep -qx "pre-restart paused" "$HOOKLOG"
	resumed_on_signal || { unpause_vm; false; }
	grep "^ERROR: Backup of VM 200 failed - " "$CB_ERR"
	cbackup_gone term
	no_output term
	[ -z "${rc:-}" ]
'

test_expect_success 'a missing QMP socket: exit 1, ERROR names it, no archive' '
	bad=$SCRATCH/no-such-vm.qmp
	backup_vm 1 nosock --qmp "$bad"
	grep "^ERROR: Backup of VM 200 failed - " "$CB_ERR" | grep -F "$bad"
	test_must_fail grep "suspending guest" "$CB_ERR"
	[ "$(qmp "$SOCK" status)" = running ]
	no_output nosock
'

test_expect_success 'a dead QMP socket (nobody listens): exit 1, ERROR names it, no archive' '
	dead=$SCRATCH/dead.qmp
	"$HELPERS/mksock" "$dead"
	test -S "$dead"
	backup_vm 1 dead --qmp "$dead"
	grep "^ERROR: Backup of VM 200 failed - " "$CB_ERR" | grep -F "$dead"
	test_must_fail grep "suspending guest" "$CB_ERR"
	[ "$(qmp "$SOCK" status)" = running ]
	no_output dead
'

test_expect_success 'a VM the admin had paused is backed up as it is and stays paused' '
	qmp "$SOCK" stop >/dev/null
	rc=0
	backup_vm 0 prepaused || rc=$?
	status=$(qmp "$SOCK" status)
	unpause_vm
	cat "$CB_ERR"
	[ "$status" = paused ] || { echo "cbackup resumed a VM it had not paused"; false; }
	[ "$rc" = 0 ]
	grep -x "INFO: VM was paused already: backed up as it is, it stays paused" "$CB_ERR"
	test_must_fail grep "^INFO: resuming guest" "$CB_ERR"
	grep -qx "pre-restart paused" "$HOOKLOG"
	grep -qx "post-restart paused" "$HOOKLOG"
	archive=$(find_archive "$SCRATCH/dump-prepaused" vm 200 .zst)
	cbackup_run 0 restore "$archive" "$SCRATCH/r-prepaused"
	same_images "$SCRATCH/r-prepaused"
'

test_expect_success 'resumed by its admin after cbackup started: stopped and resumed as usual' '
	qmp "$SOCK" stop >/dev/null
	HOOK_ACTION=backup-start:cont backup_vm 0 resumed
	cat "$CB_ERR" "$HOOKLOG"
	grep -qx "pre-stop running" "$HOOKLOG"
	grep -qx "pre-restart paused" "$HOOKLOG"
	grep "^INFO: resuming guest" "$CB_ERR"
	[ "$(qmp "$SOCK" status)" = running ]
'

test_expect_success 'QEMU quits cleanly' '
	qemu_stop "$SOCK" "$QEMU_PID"
	test ! -d "/proc/$QEMU_PID"
'

test_done
