#!/bin/bash
# Stopped guests (issue 28, item 1): a guest whose freeze backend says it
# does not run (its cgroup gone or empty, its pid gone, its qmp socket gone
# or unanswered) is backed up as it is, in one pass, without any freeze:
# "status = stopped" in the log as vzdump writes it, exit 0. A running one
# says "status = running" and is frozen as before. Stopped must be known
# (issue 37): a process in the guest's root means it runs after all.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
D=$SCRATCH/dump

test_expect_success 'setup' '
	make_small_tree "$SRC" stopped-ct
	mkdir -p "$SCRATCH/tmp" "$D"
'

# stopped_backup ID FREEZE-OPTION...: exit 0, status = stopped, no freeze
stopped_backup() {
	local id=$1
	shift
	cbackup_run 0 backup --root "$SRC" --id "$id" --tmpdir "$SCRATCH/tmp" --dumpdir "$D" "$@"
	test_has "$CB_ERR" "INFO: status = stopped \("
	test_has "$CB_ERR" "INFO: backup mode: stop"
	test_lacks "$CB_ERR" "suspending guest|stopping guest|resuming guest|^ERROR|^WARN"
	tar -tf "$(find_archive "$D" ct "$id" .zst)" | grep -qx "./etc/hostname"
}

test_expect_success ROOT,CGROUP2 'cgroup v2 that does not exist (lxc removed it): stopped' '
	stopped_backup 901 --freeze-cgroup "$(cgroup2_mount)/cbe2e-gone-$$"
	test_has "$CB_ERR" "does not exist"
'

test_expect_success ROOT,CGROUP2 'cgroup v2 relative to the mount, absent: stopped' '
	stopped_backup 902 --freeze-cgroup "cbe2e-gone-rel-$$"
'

test_expect_success ROOT,CGROUP2 'cgroup v2 with no process in it: stopped, never frozen' '
	cg=$(make_cgroup v2)
	stopped_backup 903 --freeze-cgroup "$cg"
	test_has "$CB_ERR" "has no process"
	test_lacks "$cg/cgroup.events" "^frozen 1"
'

test_expect_success ROOT,CGROUP1 'cgroup v1 freezer that does not exist: stopped' '
	stopped_backup 904 --freeze-cgroup "$(cgroup1_freezer_mount)/cbe2e-gone-$$"
'

test_expect_success 'pid that no longer exists: stopped' '
	sleep 0 & gone=$!
	wait "$gone"
	stopped_backup 905 --freeze-pid "$gone"
'

test_expect_success 'qmp socket that does not exist: stopped' '
	stopped_backup 906 --qmp "$SCRATCH/no-such-qmp.sock"
'

test_expect_success 'qmp socket nobody listens on (QEMU died): stopped' '
	"$HELPERS/mksock" "$SCRATCH/dead-qmp.sock"
	stopped_backup 907 --qmp "$SCRATCH/dead-qmp.sock"
'

test_expect_success ROOT,CGROUP2 'a running guest: status = running, frozen for the final sync' '
	cg=$(make_cgroup v2)
	start_guest "$cg" sleep 600
	wait_for 5 grep -q . "$cg/cgroup.procs"   # it moves itself there: not at once
	cbackup_run 0 backup --root "$SRC" --id 908 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--freeze-cgroup "$cg"
	test_has "$CB_ERR" "INFO: status = running"
	test_has "$CB_ERR" "suspending guest \(cgroup2\)"
	test_has "$CB_ERR" "resuming guest"
'

test_expect_success ROOT,CGROUP2 'a stopped guest started during its copy: ERROR, nothing archived' '
	# vzdump locks a stopped CT so that nobody starts it during the copy;
	# cbackup asks again after it. The shim stops cbackup at the copy of
	# one file (SIGSTOP), the guest starts, cbackup goes on.
	cg=$(make_cgroup v2)
	echo "copied while stopped" >"$SRC/start-here"
	rm -f "$FAULT_LOG"
	with_fault_bg "open:SIGSTOP:start-here" \
		"$CBACKUP" backup --root "$SRC" --id 910 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--freeze-cgroup "$cg" >"$CB_OUT" 2>"$CB_ERR"
	pid=$FAULT_PID
	wait_for 30 grep -q "^State:.*stopped" /proc/$pid/status || { kill -KILL "$pid"; false; }
	start_guest "$cg" sleep 600
	wait_for 5 grep -q . "$cg/cgroup.procs"   # it moves itself there: not at once
	kill -CONT "$pid"
	rc=0
	wait "$pid" || rc=$?
	rm "$SRC/start-here"
	cat "$CB_ERR"
	test "$rc" = 1
	fault_fired "^open .*start-here"
	test_has "$CB_ERR" "INFO: status = stopped"
	test_has "$CB_ERR" "ERROR: .*CT 910 was started during the copy of it while stopped"
	test -z "$(find "$D" -name "*-910-*.tar*")"
	no_tmp_files "$D"
'

# A guest whose freeze backend says "stopped" (its cgroup missing or
# empty: a mistyped freeze-cgroup) is stopped only when nothing runs in
# its root: a process whose root is the guest's root, or a directory in
# it, is a running guest that would be backed up unfrozen. That guest
# fails (exit 1), nothing is archived, and prune removes nothing.
CT=$SCRATCH/ct
test_expect_success ROOT 'setup: a container root with a static busybox, an older backup kept' '
	make_small_tree "$CT" running-ct
	mkdir -p "$CT/bin" "$CT/srv/jail/bin" "$SCRATCH/keep"
	cp /bin/busybox "$CT/bin/busybox"
	cp /bin/busybox "$CT/srv/jail/bin/busybox"
	cbackup_run 0 backup --root "$CT" --id 920 --tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/keep"
	storage_snapshot "$SCRATCH/keep" "$SCRATCH/keep.before"
	test -s "$SCRATCH/keep.before"
'

# rooted_at DIR: the pid of a process whose root is DIR
rooted_at() {
	local p
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/root" 2>/dev/null)" = "$1" ] && echo "${p#/proc/}" && return 0
	done
	return 1
}

# running_in ROOT FREEZE-CGROUP: a backup of the guest at CT while a
# process runs chrooted at ROOT fails, touching nothing in the dump dir
running_in() {
	chroot "$1" /bin/busybox sleep 600 </dev/null >/dev/null 2>&1 &
	cleanup_pid $!
	wait_for 5 rooted_at "$1"
	GUEST_PID=$(rooted_at "$1")
	cleanup_pid "$GUEST_PID"
	cbackup_run 1 backup --root "$CT" --id 920 --tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/keep" \
		--freeze-cgroup "$2" --prune-backups keep-last=1
	kill -KILL "$GUEST_PID"
	wait_for 5 test_must_fail rooted_at "$1"
	cat "$CB_ERR"
	test_has "$CB_ERR" "^ERROR: Backup of VM 920 failed - .*freeze cgroup .* but CT 920 runs: pid $GUEST_PID has its root in .$1."
	test_lacks "$CB_ERR" "status = stopped|backup mode: stop|creating .*archive|prune older|pruned"
	storage_snapshot "$SCRATCH/keep" "$SCRATCH/keep.after"
	test_cmp "$SCRATCH/keep.before" "$SCRATCH/keep.after"
	no_tmp_files "$SCRATCH/keep"
}

test_expect_success ROOT,CGROUP2 'a mistyped freeze-cgroup while a process runs in the root: ERROR, nothing archived, nothing pruned' '
	running_in "$CT" "$(cgroup2_mount)/cbe2e-typo-$$"
'

test_expect_success ROOT,CGROUP2 'a process chrooted below the root, an empty freeze cgroup: ERROR too' '
	running_in "$CT/srv/jail" "$(make_cgroup v2)"
'

test_expect_success ROOT,CGROUP2 'a process chrooted into a bind mount of the root: found by device and inode' '
	mkdir "$SCRATCH/ct-bound"
	mount --bind "$CT" "$SCRATCH/ct-bound"
	cleanup_mount "$SCRATCH/ct-bound"
	running_in "$SCRATCH/ct-bound" "$(cgroup2_mount)/cbe2e-typo-$$"
'

test_expect_success ROOT,CGROUP2 'the same root with nothing running in it: stopped, backed up' '
	cbackup_run 0 backup --root "$CT" --id 921 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--freeze-cgroup "$(cgroup2_mount)/cbe2e-typo-$$"
	test_has "$CB_ERR" "INFO: status = stopped \(freeze cgroup .* does not exist\)"
	test -n "$(find_archive "$D" ct 921 .zst)"
'

test_expect_success ROOT,CGROUP2 'a cgroup without a freezer file is still a configuration error' '
	mkdir "$SCRATCH/notacg"
	cbackup_run 2 backup --root "$SRC" --id 909 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--freeze-cgroup "$SCRATCH/notacg"
	test_has "$CB_ERR" "option --freeze-cgroup: freeze cgroup .* not found \(no cgroup.freeze"
'

test_done
