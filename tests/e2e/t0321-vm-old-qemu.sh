#!/bin/bash
# The version check of VM backups (issue 26): a QEMU older than 4.2 has
# neither a copy-before-write snapshot (7.1) nor blockdev-backup jobs in a
# transaction (4.2), so cbackup warns naming its version and takes the
# staging path (images copied while the VM runs, re-checked paused),
# without touching the block graph. Debian 12 ships only QEMU 7.2: the old
# QEMU is tests/helpers/fakeqmp.py, a QMP monitor that reports 4.1.0 and
# logs the commands it gets. Which version takes which path is the unit
# test test_vm_path_by_version (tests/unit/test_json.c); the 4.2-7.0 path
# itself runs on the real QEMU in t0320 (vm-method blockdev-backup).
. "$(dirname "$0")/lib.sh"

if ! command -v python3 >/dev/null; then
	test_skip 'VM backups on an older QEMU' 'python3 missing'
	test_done
fi

SOCK=$SCRATCH/old.qmp
CMDS=$SCRATCH/commands.log
MiB=1048576

test_expect_success 'setup: a "QEMU 4.1.0" monitor, a sparse raw image' '
	"$QMP_PYTHON" "$TOP/tests/helpers/fakeqmp.py" "$SOCK" 4.1.0 "$CMDS" &
	cleanup_pid $!
	wait_for 5 test -S "$SOCK"
	truncate -s 16M "$SCRATCH/disk0.img"
	head -c $MiB /dev/urandom | dd of="$SCRATCH/disk0.img" bs=1M seek=4 conv=notrunc status=none
'

test_expect_success 'QEMU 4.1.0: WARN naming the version, the staging path, nothing else asked' '
	mkdir "$SCRATCH/dump" "$SCRATCH/tmp"
	cbackup_run 0 backup --type vm --id 321 --disk "$SCRATCH/disk0.img" --qmp "$SOCK" \
		--tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/dump" --compress zstd
	grep -E "^WARN: QEMU 4\.1\.0 has neither a copy-before-write snapshot \(7\.1 or later\) nor blockdev-backup jobs in a transaction \(4\.2 or later\)" "$CB_ERR"
	grep -q "^INFO: starting final sync of 1 disk image" "$CB_ERR"
	grep -qx stop "$CMDS"
	grep -qx cont "$CMDS"
	test_lacks "$CMDS" "^(blockdev-add|qom-set|nbd-server-start|block-export-add|transaction)$"
	a=$(find_archive "$SCRATCH/dump" vm 321 .zst)
	mkdir r
	tar -xf "$a" -C r
	cmp "$SCRATCH/disk0.img" r/disk0.img
'

test_expect_success 'mode snapshot on QEMU 4.1.0: falls back to suspend, saying why' '
	mkdir "$SCRATCH/dump3"
	cbackup_run 0 backup --type vm --id 321 --disk "$SCRATCH/disk0.img" --qmp "$SOCK" \
		--tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/dump3" --mode snapshot
	grep -E "^INFO: snapshot mode: QEMU.s own live backup" "$CB_ERR"
	grep -E "^INFO: snapshot not possible: QEMU older than 4\.2 has no live backup" "$CB_ERR"
	grep -E "^INFO: trying .suspend. mode instead" "$CB_ERR"
	grep -q "^INFO: starting final sync of 1 disk image" "$CB_ERR"
'

test_expect_success 'vm-method stage never asks for the version' '
	: >"$CMDS"
	mkdir "$SCRATCH/dump2"
	cbackup_run 0 backup --type vm --id 321 --disk "$SCRATCH/disk0.img" --qmp "$SOCK" \
		--tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/dump2" --vm-method stage
	test_lacks "$CMDS" "^query-version$"
	test_lacks "$CB_ERR" "^WARN: QEMU"
'

test_done
