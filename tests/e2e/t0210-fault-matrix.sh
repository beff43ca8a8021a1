#!/bin/bash
# Fault matrix (issue 5, item 1): a fault in each phase of a guest's backup
# (preflight, first sync, freeze, final sync, thaw, archive, commit/rename,
# prune) x ENOSPC in tmpdir or storage (small tmpfs), storage removed or
# read-only, EIO (LD_PRELOAD shim), SIGINT, SIGTERM, SIGKILL. Every failure
# must be clean: the guest runs (cgroup not frozen, writer advances), no
# .tmp and no new archive in storage, earlier backups byte-identical,
# staging removed, an ERROR line naming the phase and the cause, exit 1
# (137 for SIGKILL), and the next run of the same guest works.
#
# Faults are timed by real mechanisms: the hook script (FAULT_AT phase runs
# FAULT_DO), freeze/thaw commands, and the shim (a signal raised by the
# first read of a file that only pass 2 copies, etc.).
. "$(dirname "$0")/lib.sh"

export SRC=$SCRATCH/src STORE=$SCRATCH/store TMPD=$SCRATCH/tmp
export DUMP=$STORE/dump HOOK=$SCRATCH/hook.sh CONF=$SCRATCH/cbackup.conf
export CBACKUP_LOCK_DIR=$SCRATCH/locks
SIDE=$SCRATCH/side
IDS="201 202 203 204 211 212 213 214 215 216 221 222 223 224 231 232 233 234 235
     241 242 243 244 251 252 253 254 255 256 257 258 261 262 263 264 265 271 272 273"

test_expect_success ROOT,CGROUP2,TMPFS 'setup: tree, writer guest in a cgroup, tmpfs tmpdir and storage, one backup of each guest' '
	mkdir -p "$SRC/data" "$CBACKUP_LOCK_DIR"
	make_many_files "$SRC" 300
	head -c 512K /dev/urandom >"$SRC/big"
	mount_tmpfs "$TMPD" 24m
	mount_tmpfs "$STORE" 96m
	mkdir "$DUMP"
	cg=$(make_cgroup v2)
	echo "$cg" >"$SCRATCH/cg"
	start_writer "$cg" "$SCRATCH/guest-log.txt" "$SIDE"
	cat >"$HOOK" <<-\EOF
	#!/bin/sh
	# fill DIR: leave (almost) no free space
	fill() {
		avail=$(df --output=avail -B1 "$1" | tail -n 1)
		fallocate -l $((avail > 65536 ? avail - 16384 : 4096)) "$1/.filler" || true
	}
	[ -n "${FAULT_AT:-}" ] && [ "$1" = "$FAULT_AT" ] || exit 0
	eval "$FAULT_DO"
	exit 0
	EOF
	chmod +x "$HOOK"
	{
		echo "tmpdir = $TMPD"
		echo "dumpdir = $DUMP"
		echo "compress = zstd"
		echo "mode = suspend"
		echo "script = $HOOK"
		# the matrix checks the staging copy is removed (auto keeps copies:
		# its failed runs remove theirs, t0040)
		echo "keep-staging = 0"
		for id in $IDS; do printf "\n[ct %s]\nroot = %s\n" "$id" "$SRC"; done
	} >"$CONF"
	cbackup_run 0 --all --config "$CONF" --freeze-cgroup "$cg"
	for id in $IDS; do find_archive "$DUMP" ct "$id" .zst >/dev/null; done
	# every later run must be in another second than these archives
	sleep 1
'
CG=$(cat "$SCRATCH/cg" 2>/dev/null)
export CG

# backup ID RC [OPTIONS...]: back up guest ID (cgroup freezer unless the
# options name a freeze-cmd)
backup() {
	local id=$1 rc=$2
	shift 2
	case " $* " in
	*" --freeze-cmd "*) ;;
	*) set -- --freeze-cgroup "$CG" "$@" ;;
	esac
	cbackup_run "$rc" "$id" --config "$CONF" "$@"
}

before() {
	rm -f "$FAULT_LOG" "$SRC/late-file"
	storage_snapshot "$DUMP" "$SCRATCH/before"
}

# clean_failure ID PHASE CAUSE: what every failed guest must leave behind
clean_failure() {
	cat "$CB_ERR"
	error_names "$1" "$2" "$3"
	grep -x "INFO: Backup job finished with errors" "$CB_ERR"
	guest_thawed "$CG" "$SIDE"
	no_tmp_files "$STORE"
	storage_unchanged "$DUMP" "$SCRATCH/before"
	dir_empty "$TMPD" "staging left"
	locks_free "$CBACKUP_LOCK_DIR" "$DUMP"
}

# after_kill: SIGKILL cannot clean up; the watchdog still thaws in time
after_kill() {
	cat "$CB_ERR"
	wait_for 3 eval "! cg_frozen $CG"
	guest_thawed "$CG" "$SIDE"
	test_must_fail grep "Finished Backup" "$CB_ERR"
	locks_free "$CBACKUP_LOCK_DIR" "$DUMP"
}

# next_run_works ID: no fault now; a new archive that verifies, nothing left
next_run_works() {
	rm -f "$SRC/late-file" "$TMPD/.filler" "$DUMP/.filler"
	storage_snapshot "$DUMP" "$SCRATCH/before-next"
	backup "$1" 0
	new=$(ls -t "$DUMP"/"$(archive_prefix ct "$1")"-*.tar.zst | head -n 1)
	test_must_fail grep -F "$(basename "$new")" "$SCRATCH/before-next"
	cbackup_run 0 verify "$new"
	dir_empty "$TMPD" "staging left"
	no_tmp_files "$STORE"
}

# ---- preflight ------------------------------------------------------------

test_expect_success ROOT,CGROUP2,TMPFS 'preflight x storage removed: ERROR, nothing written' '
	before
	mv "$DUMP" "$STORE/gone"
	backup 201 2
	test ! -e "$DUMP" || { echo "the dump directory was recreated"; ls -la "$DUMP"; false; }
	mv "$STORE/gone" "$DUMP"
	clean_failure 201 "" "key .dumpdir.: dumpdir .* does not exist"
	next_run_works 201
'

test_expect_success ROOT,CGROUP2,TMPFS 'preflight x storage read-only: ERROR, nothing written' '
	before
	mount -o remount,ro "$STORE"
	backup 202 1 || { mount -o remount,rw "$STORE"; false; }
	mount -o remount,rw "$STORE"
	clean_failure 202 "preflight: " "Read-only file system"
	next_run_works 202
'

test_expect_success ROOT,CGROUP2,TMPFS 'preflight x tmpdir full (ENOSPC): ERROR before any copy' '
	before
	FAULT_AT=backup-start FAULT_DO="fill $TMPD" "$HOOK" backup-start
	backup 203 1
	rm -f "$TMPD/.filler"
	clean_failure 203 "preflight: " "not enough space in tmpdir"
	next_run_works 203
'

test_expect_success ROOT,CGROUP2,TMPFS 'preflight x SIGTERM while waiting for the global lock: exit 143, lock free' '
	before
	flock -o "$CBACKUP_LOCK_DIR/cbackup.lock" sleep 20 &
	holder=$!
	cleanup_pid "$holder"
	wait_for 5 eval "! flock -n $CBACKUP_LOCK_DIR/cbackup.lock true"
	: >"$CB_ERR"   # here: the run opens it when scheduled, maybe after the wait read it
	"$CBACKUP" 204 --config "$CONF" --freeze-cgroup "$CG" --lockwait 1 >"$CB_OUT" 2>"$CB_ERR" &
	pid=$!
	wait_for 5 grep -q "waiting" "$CB_ERR"
	kill -TERM "$pid"
	rc=0; wait "$pid" || rc=$?
	kill "$holder"
	wait "$holder" || echo "the lock holder ended with status $?"
	cat "$CB_ERR"
	[ "$rc" = 143 ] || { echo "exit status $rc, expected 143"; false; }
	grep -E "^ERROR: .*interrupted by signal TERM" "$CB_ERR"
	test_must_fail grep "Starting Backup" "$CB_ERR"
	locks_free "$CBACKUP_LOCK_DIR" "$DUMP"
	storage_unchanged "$DUMP" "$SCRATCH/before"
	next_run_works 204
'

# ---- first sync (pass 1) --------------------------------------------------

test_expect_success ROOT,CGROUP2,TMPFS 'first sync x tmpdir full (ENOSPC): clean failure' '
	before
	FAULT_AT=backup-start FAULT_DO="fill \$TMPD" backup 211 1
	rm -f "$TMPD/.filler"
	clean_failure 211 "first sync: " "No space left on device"
	next_run_works 211
'

test_expect_success ROOT,CGROUP2,TMPFS 'first sync x EIO reading the source: clean failure' '
	before
	with_fault "read:EIO:$SRC/big" backup 212 1
	fault_fired "^read EIO $SRC/big"
	clean_failure 212 "first sync: " "big.*Input/output error"
	next_run_works 212
'

test_expect_success ROOT,CGROUP2,TMPFS 'first sync x SIGINT: clean failure' '
	before
	with_fault "read:SIGINT:$SRC/big" backup 213 130
	fault_fired "^read Interrupt"
	clean_failure 213 "first sync: " "interrupted by signal INT"
	next_run_works 213
'

test_expect_success ROOT,CGROUP2,TMPFS 'first sync x SIGTERM (from the backup-start hook): clean failure' '
	before
	FAULT_AT=backup-start FAULT_DO="kill -TERM \$PPID" backup 214 143
	# the hook may still run when the signal lands (then it is killed and
	# named), or have ended (then the first sync stops)
	clean_failure 214 "(first sync: |hook script .* at phase .backup-start. )" "interrupted by signal TERM"
	next_run_works 214
'

test_expect_success ROOT,CGROUP2,TMPFS 'first sync x SIGKILL: not frozen, nothing in storage, next run removes the stale staging' '
	before
	with_fault "read:SIGKILL:$SRC/big" backup 215 137
	after_kill
	no_tmp_files "$STORE"
	storage_unchanged "$DUMP" "$SCRATCH/before"
	test -d "$TMPD/cbackup/cbackup-215.stage"
	next_run_works 215
'

test_expect_success ROOT,CGROUP2,TMPFS 'first sync x storage removed: the archive step fails cleanly' '
	before
	FAULT_AT=backup-start FAULT_DO="mv \$DUMP \$STORE/gone" backup 216 1
	test ! -e "$DUMP" || { echo "the dump directory was recreated"; ls -la "$DUMP"; false; }
	mv "$STORE/gone" "$DUMP"
	clean_failure 216 "archive: " "No such file or directory"
	next_run_works 216
'

# ---- freeze -----------------------------------------------------------------

test_expect_success ROOT,CGROUP2,TMPFS 'freeze x freeze-cmd fails after freezing: thaw-cmd runs, clean failure' '
	before
	backup 221 1 --freeze-cmd "echo 1 >$CG/cgroup.freeze; exit 3" --thaw-cmd "echo 0 >$CG/cgroup.freeze"
	clean_failure 221 "freeze: " "freeze-cmd .*exit code 3"
	next_run_works 221
'

test_expect_success ROOT,CGROUP2,TMPFS 'freeze x SIGTERM inside the freeze command: thawed, clean failure' '
	before
	backup 222 143 --freeze-cmd "echo 1 >$CG/cgroup.freeze; kill -TERM \$PPID" \
		--thaw-cmd "echo 0 >$CG/cgroup.freeze"
	clean_failure 222 "freeze: " "interrupted by signal TERM"
	next_run_works 222
'

test_expect_success ROOT,CGROUP2,TMPFS 'freeze x SIGINT (pre-stop hook): thawed, clean failure' '
	before
	FAULT_AT=pre-stop FAULT_DO="kill -INT \$PPID" backup 223 130
	# the hook is killed and named if it still runs when the signal lands
	clean_failure 223 "(freeze: |hook script .* at phase .pre-stop. )" "interrupted by signal INT"
	next_run_works 223
'

test_expect_success ROOT,CGROUP2,TMPFS 'freeze x SIGKILL inside the freeze command: the watchdog runs thaw-cmd' '
	before
	backup 224 137 --freeze-cmd "echo 1 >$CG/cgroup.freeze; kill -KILL \$PPID; sleep 1" \
		--thaw-cmd "echo 0 >$CG/cgroup.freeze"
	after_kill
	no_tmp_files "$STORE"
	storage_unchanged "$DUMP" "$SCRATCH/before"
	next_run_works 224
'

# ---- final sync (pass 2): late-file appears between pass 1 and the freeze --

LATE='head -c 1M /dev/urandom >$SRC/late-file'

test_expect_success ROOT,CGROUP2,TMPFS 'final sync x tmpdir full (ENOSPC): thawed, clean failure' '
	before
	FAULT_AT=pre-stop FAULT_DO="$LATE; fill \$TMPD" backup 231 1
	rm -f "$TMPD/.filler"
	clean_failure 231 "final sync: " "late-file.*No space left on device"
	next_run_works 231
'

test_expect_success ROOT,CGROUP2,TMPFS 'final sync x EIO reading the source: thawed, clean failure' '
	before
	FAULT_AT=pre-stop FAULT_DO="$LATE" with_fault "read:EIO:$SRC/late-file" backup 232 1
	fault_fired "^read EIO $SRC/late-file"
	clean_failure 232 "final sync: " "late-file.*Input/output error"
	next_run_works 232
'

test_expect_success ROOT,CGROUP2,TMPFS 'final sync x SIGINT: thawed, clean failure' '
	before
	FAULT_AT=pre-stop FAULT_DO="$LATE" with_fault "read:SIGINT:$SRC/late-file" backup 233 130
	fault_fired "^read Interrupt"
	clean_failure 233 "final sync: " "interrupted by signal INT"
	next_run_works 233
'

test_expect_success ROOT,CGROUP2,TMPFS 'final sync x SIGTERM: thawed, clean failure' '
	before
	FAULT_AT=pre-stop FAULT_DO="$LATE" with_fault "read:SIGTERM:$SRC/late-file" backup 234 143
	fault_fired "^read Terminated"
	clean_failure 234 "final sync: " "interrupted by signal TERM"
	next_run_works 234
'

test_expect_success ROOT,CGROUP2,TMPFS 'final sync x SIGKILL: the watchdog thaws, next run works' '
	before
	FAULT_AT=pre-stop FAULT_DO="$LATE" with_fault "read:SIGKILL:$SRC/late-file" backup 235 137
	after_kill
	no_tmp_files "$STORE"
	storage_unchanged "$DUMP" "$SCRATCH/before"
	next_run_works 235
'

# ---- thaw ---------------------------------------------------------------------

test_expect_success ROOT,CGROUP2,TMPFS 'thaw x SIGTERM (pre-restart hook, still frozen): thawed, clean failure' '
	before
	FAULT_AT=pre-restart FAULT_DO="kill -TERM \$PPID" backup 241 143
	clean_failure 241 "" "interrupted by signal TERM"
	next_run_works 241
'

test_expect_success ROOT,CGROUP2,TMPFS 'thaw x SIGINT (pre-restart hook, still frozen): thawed, clean failure' '
	before
	FAULT_AT=pre-restart FAULT_DO="kill -INT \$PPID" backup 242 130
	clean_failure 242 "" "interrupted by signal INT"
	next_run_works 242
'

test_expect_success ROOT,CGROUP2,TMPFS 'thaw x SIGKILL (pre-restart hook, still frozen): the watchdog thaws' '
	before
	FAULT_AT=pre-restart FAULT_DO="kill -KILL \$PPID" backup 243 137
	after_kill
	no_tmp_files "$STORE"
	storage_unchanged "$DUMP" "$SCRATCH/before"
	next_run_works 243
'

test_expect_success ROOT,CGROUP2,TMPFS 'thaw x thaw-cmd fails: ERROR names thaw, no archive' '
	before
	backup 244 1 --freeze-cmd "echo 1 >$CG/cgroup.freeze" \
		--thaw-cmd "echo 0 >$CG/cgroup.freeze; exit 4"
	clean_failure 244 "thaw: " "thaw-cmd"
	next_run_works 244
'

# ---- archive ------------------------------------------------------------------

test_expect_success ROOT,CGROUP2,TMPFS 'archive x storage full (ENOSPC): clean failure, no .tmp' '
	before
	FAULT_AT=post-restart FAULT_DO="fill \$STORE" backup 251 1
	rm -f "$STORE/.filler"
	clean_failure 251 "archive: " "No space left on device"
	next_run_works 251
'

test_expect_success ROOT,CGROUP2,TMPFS 'archive x storage read-only (ro mount over it): clean failure' '
	before
	FAULT_AT=post-restart FAULT_DO="mount -t tmpfs -o ro,size=1m tmpfs \$DUMP" backup 252 1
	umount "$DUMP"
	clean_failure 252 "archive: " "Read-only file system"
	next_run_works 252
'

test_expect_success ROOT,CGROUP2,TMPFS 'archive x storage removed: clean failure' '
	before
	FAULT_AT=post-restart FAULT_DO="mv \$DUMP \$STORE/gone" backup 253 1
	mv "$STORE/gone" "$DUMP"
	clean_failure 253 "archive: " "No such file or directory"
	next_run_works 253
'

test_expect_success ROOT,CGROUP2,TMPFS 'archive x EIO writing the storage: clean failure, no .tmp' '
	before
	with_fault "write:EIO:$DUMP/vzdump-lxc-254-:after=100000" backup 254 1
	fault_fired "^write EIO $DUMP/vzdump-lxc-254-.*\.tmp"
	clean_failure 254 "archive: " "Input/output error"
	next_run_works 254
'

test_expect_success ROOT,CGROUP2,TMPFS 'archive x EIO reading the staged copy: clean failure, no .tmp' '
	before
	with_fault "read:EIO:cbackup-255.stage/big" backup 255 1
	fault_fired "^read EIO .*cbackup-255.stage/big"
	clean_failure 255 "archive: " "Input/output error"
	next_run_works 255
'

test_expect_success ROOT,CGROUP2,TMPFS 'archive x SIGINT while writing: clean failure, the ERROR names the signal (not the vanished .tmp)' '
	before
	with_fault "write:SIGINT:$DUMP/vzdump-lxc-256-:after=100000" backup 256 130
	fault_fired "^write Interrupt"
	clean_failure 256 "archive: " "interrupted by signal INT"
	next_run_works 256
'

test_expect_success ROOT,CGROUP2,TMPFS 'archive x SIGTERM (post-restart hook): clean failure' '
	before
	FAULT_AT=post-restart FAULT_DO="kill -TERM \$PPID" backup 257 143
	# the hook may still run when the signal lands (then it is killed and
	# named), or have ended (then the archive stops)
	clean_failure 257 "(archive: |hook script .* at phase .post-restart. )" "interrupted by signal TERM"
	next_run_works 257
'

test_expect_success ROOT,CGROUP2,TMPFS 'archive x SIGKILL while writing: guest runs, list ignores the .tmp, next run works' '
	before
	with_fault "write:SIGKILL:$DUMP/vzdump-lxc-258-:after=100000" backup 258 137
	after_kill
	storage_unchanged "$DUMP" "$SCRATCH/before"
	ls "$DUMP"/vzdump-lxc-258-*.tmp >"$SCRATCH/tmp-258"
	cat "$SCRATCH/tmp-258"
	cbackup_run 0 list 258 --dumpdir "$DUMP"
	cat "$CB_OUT"
	test_must_fail grep -F ".tmp" "$CB_OUT"
	[ "$(grep -c "vzdump-lxc-258-" "$CB_OUT")" = 1 ]
	# the next run must not trip over it
	sleep 1
	backup 258 0
	dir_empty "$TMPD" "staging left"
'

test_expect_success ROOT,CGROUP2,TMPFS 'archive x SIGKILL: the next run of that guest removes the killed run'"'"'s .tmp' '
	test -s "$SCRATCH/tmp-258"
	rc=0; no_tmp_files "$STORE" || rc=1
	rm -f "$DUMP"/*.tmp   # do not fail the tests after this one too
	[ $rc = 0 ]
'

# ---- commit: fsync, rename, checksum --------------------------------------------

test_expect_success ROOT,CGROUP2,TMPFS 'commit x fsync EIO: clean failure, no .tmp' '
	before
	with_fault "fsync:EIO:$DUMP/vzdump-lxc-261-" backup 261 1
	fault_fired "^fsync EIO"
	clean_failure 261 "archive: " "cannot sync.*Input/output error"
	next_run_works 261
'

test_expect_success ROOT,CGROUP2,TMPFS 'rename x EIO: clean failure, no .tmp, no final name' '
	before
	with_fault "rename:EIO:$DUMP/vzdump-lxc-262-" backup 262 1
	fault_fired "^rename EIO"
	clean_failure 262 "archive: " "cannot rename.*Input/output error"
	next_run_works 262
'

test_expect_success ROOT,CGROUP2,TMPFS 'rename x SIGTERM just before the rename: clean failure' '
	before
	with_fault "rename:SIGTERM:$DUMP/vzdump-lxc-263-" backup 263 143
	fault_fired "^rename Terminated"
	clean_failure 263 "archive: " ""
	next_run_works 263
'

test_expect_success ROOT,CGROUP2,TMPFS 'rename x SIGKILL just before the rename: no archive under the final name' '
	before
	with_fault "rename:SIGKILL:$DUMP/vzdump-lxc-264-" backup 264 137
	after_kill
	storage_unchanged "$DUMP" "$SCRATCH/before"
	rm -f "$DUMP"/vzdump-lxc-264-*.tmp
	next_run_works 264
'

test_expect_success ROOT,CGROUP2,TMPFS 'checksum x EIO syncing .sha256: failure; what is left is complete' '
	before
	with_fault "fsync:EIO:.sha256.tmp" backup 265 1
	fault_fired "^fsync EIO .*\.sha256\.tmp"
	cat "$CB_ERR"
	error_names 265 "archive: " "checksum.*Input/output error"
	guest_thawed "$CG" "$SIDE"
	no_tmp_files "$STORE"
	dir_empty "$TMPD" "staging left"
	# observed: the archive was renamed before the checksum was written
	for a in "$DUMP"/vzdump-lxc-265-*.tar.zst; do
		grep -qF "$(basename "$a")" "$SCRATCH/before" && continue
		echo "left after the failure: $a (no .sha256: $(test -e "$a.sha256" || echo yes))"
		cbackup_run 0 verify "$a"
	done
	sleep 1
	next_run_works 265
'

# ---- prune (keep-last=1 after a successful backup) -------------------------------

test_expect_success ROOT,CGROUP2,TMPFS 'prune x EIO removing an old archive: a warning, the new backup stands' '
	before
	old=$(basename "$(ls "$DUMP"/vzdump-lxc-271-*.tar.zst | head -n 1)")
	with_fault "unlink:EIO:$old" backup 271 0 --prune-backups keep-last=1
	fault_fired "^unlink EIO .*$old"
	cat "$CB_ERR"
	grep -E "^WARN: .*prune" "$CB_ERR"
	test -e "$DUMP/$old"
	new=$(ls -t "$DUMP"/vzdump-lxc-271-*.tar.zst | head -n 1)
	[ "$(basename "$new")" != "$old" ]
	cbackup_run 0 verify "$new"
	no_tmp_files "$STORE"
	guest_thawed "$CG" "$SIDE"
'

test_expect_success ROOT,CGROUP2,TMPFS 'prune x SIGTERM: the new archive is complete, no .tmp, thawed' '
	before
	old=$(basename "$(ls "$DUMP"/vzdump-lxc-272-*.tar.zst | head -n 1)")
	rc=0
	with_fault "unlink:SIGTERM:$old" "$CBACKUP" 272 --config "$CONF" --freeze-cgroup "$CG" \
		--prune-backups keep-last=1 >"$CB_OUT" 2>"$CB_ERR" || rc=$?
	cat "$CB_ERR"
	echo "exit status $rc"
	# handled, not killed: 0 (the signal came as the last unlink was done)
	# or 143 as the exit-code table says; the checks below show the rest
	# (the new archive complete, no .tmp, thawed)
	test "$rc" = 0 -o "$rc" = 143
	fault_fired "^unlink Terminated"
	new=$(ls -t "$DUMP"/vzdump-lxc-272-*.tar.zst | head -n 1)
	[ "$(basename "$new")" != "$old" ]
	cbackup_run 0 verify "$new"
	no_tmp_files "$STORE"
	guest_thawed "$CG" "$SIDE"
	dir_empty "$TMPD" "staging left"
'

test_expect_success ROOT,CGROUP2,TMPFS 'prune x SIGKILL: the new archive is complete, thawed, next run works' '
	before
	old=$(basename "$(ls "$DUMP"/vzdump-lxc-273-*.tar.zst | head -n 1)")
	with_fault "unlink:SIGKILL:$old" backup 273 137 --prune-backups keep-last=1
	after_kill
	new=$(ls -t "$DUMP"/vzdump-lxc-273-*.tar.zst | head -n 1)
	[ "$(basename "$new")" != "$old" ]
	cbackup_run 0 verify "$new"
	no_tmp_files "$STORE"
	sleep 1
	next_run_works 273
'

test_expect_success ROOT,CGROUP2,TMPFS 'after the matrix: every earlier backup still verifies, no lock held' '
	for a in "$DUMP"/vzdump-lxc-*.tar.zst; do
		"$CBACKUP" verify "$a" >/dev/null 2>&1 || { echo "does not verify: $a"; false; }
	done
	locks_free "$CBACKUP_LOCK_DIR" "$DUMP"
	test_must_fail cg_frozen "$CG"
'

test_done
