#!/bin/bash
# Files cbackup creates in the dump directory and the lock directory: an
# exact mode whatever the umask (archive 0640; .log, .sha256, .verified
# 0644); created O_CREAT|O_EXCL|O_NOFOLLOW, so symlinks another user plants
# at the predictable names of a world-writable dump directory are never
# followed; an archive name is never reused (two backups in one second:
# the second waits for the next second); the lock directory is root's
# alone (created 0700, refused when others can enter it), lock files are
# never followed through a symlink.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/e2e/lib-attacker.sh"

DUMP=$SCRATCH/dump
TMPD=$SCRATCH/tmp
VICTIM=$SCRATCH/victim

backup() {  # RC [OPTIONS...]
	local rc=$1
	shift
	cbackup_run "$rc" backup --root "$SCRATCH/src" --id 101 --dumpdir "$DUMP" --tmpdir "$TMPD" \
		--prune-backups keep-all=1 "$@"
}

stamp_in() { date -d "@$(($(date +%s) + $1))" +%Y_%m_%d-%H_%M_%S; }

test_expect_success 'setup' '
	make_small_tree "$SCRATCH/src"
	mkdir -p "$DUMP" "$TMPD"
	echo precious >"$VICTIM"
'

test_expect_success 'umask 000: archive 0640, .log/.sha256/.verified 0644' '
	(umask 000 && backup 0)
	a=$(find_archive "$DUMP" ct 101 .zst)
	(umask 000 && cbackup_run 0 verify "$a")
	test "$(mode_of "$a")" = 640
	test "$(mode_of "$a.sha256")" = 644
	test "$(mode_of "$a.verified")" = 644
	test "$(mode_of "${a%.tar.zst}.log")" = 644
	rm -f "$DUMP"/*
'

test_expect_success 'umask 077: the same modes' '
	(umask 077 && backup 0)
	a=$(find_archive "$DUMP" ct 101 .zst)
	test "$(mode_of "$a")" = 640
	test "$(mode_of "$a.sha256")" = 644
	test "$(mode_of "${a%.tar.zst}.log")" = 644
	rm -f "$DUMP"/*
'

test_expect_success 'symlinks planted by another user in a world-writable dump dir are not followed' '
	chmod 0777 "$DUMP"
	for s in 0 1 2; do
		base=$DUMP/vzdump-lxc-101-$(stamp_in $s)
		as_nobody ln -s "$VICTIM" "$base.log"
		as_nobody ln -s "$VICTIM" "$base.tar.zst.tmp"
		as_nobody ln -s "$VICTIM" "$base.tar.zst.sha256.tmp"
	done
	as_nobody ln -s "$VICTIM" "$DUMP/.cbackup-ct-101.lock.x"
	backup 0
	test "$(cat "$VICTIM")" = precious
	a=$(sed -n "s/^INFO: creating vzdump archive .\(.*\).$/\1/p" "$CB_ERR")
	test -f "$a"
	test ! -L "$a"
	cbackup_run 0 verify "$a"
	test ! -L "${a%.tar.zst}.log"
	test_has "${a%.tar.zst}.log" "Starting Backup of VM 101"
	rm -rf "$DUMP"/* "$DUMP"/.cbackup*
	chmod 0755 "$DUMP"
'

test_expect_success 'a symlink at the storage lock name is refused, never followed' '
	ln -s "$SCRATCH/victim2" "$DUMP/.cbackup-ct-101.lock"
	backup 1
	test_has "$CB_ERR" "lock file .*\.cbackup-ct-101\.lock"
	test ! -e "$SCRATCH/victim2"
	rm -f "$DUMP"/* "$DUMP/.cbackup-ct-101.lock"
'

test_expect_success 'two backups in one second: the existing archive is never replaced' '
	s0=$(stamp_in 0) s1=$(stamp_in 1)
	echo old0 >"$DUMP/vzdump-lxc-101-$s0.tar.zst"
	echo old1 >"$DUMP/vzdump-lxc-101-$s1.tar.zst"
	storage_snapshot "$DUMP" "$SCRATCH/before"
	backup 0
	storage_snapshot "$DUMP" "$SCRATCH/after"
	grep -F -x -f "$SCRATCH/before" "$SCRATCH/after" >"$SCRATCH/kept"
	test_cmp "$SCRATCH/before" "$SCRATCH/kept"
	test "$(cat "$DUMP/vzdump-lxc-101-$s0.tar.zst")" = old0
	test "$(cat "$DUMP/vzdump-lxc-101-$s1.tar.zst")" = old1
	test "$(ls "$DUMP"/*.tar.zst | wc -l)" = 3
'

test_expect_success 'back to back backups: each its own archive and log' '
	rm -f "$DUMP"/*
	backup 0
	backup 0
	test "$(ls "$DUMP"/*.tar.zst | wc -l)" = 2
	test "$(ls "$DUMP"/*.log | wc -l)" = 2
	for l in "$DUMP"/*.log; do test_has "$l" "Finished Backup of VM 101"; done
'

test_expect_success 'the lock directory is created 0700' '
	CBACKUP_LOCK_DIR=$SCRATCH/newlocks backup 0
	test "$(mode_of "$SCRATCH/newlocks")" = 700
	test_must_fail as_nobody flock -n "$SCRATCH/newlocks/cbackup.lock" true
'

test_expect_success 'a lock dir others can write to is refused: nobody holding the lock cannot block jobs' '
	mkdir -m 1777 "$SCRATCH/publocks"
	as_nobody touch "$SCRATCH/publocks/cbackup.lock"
	start_guest "" setpriv --reuid=65534 --regid=65534 --clear-groups -- flock -o "$SCRATCH/publocks/cbackup.lock" sleep 300
	wait_for 5 lock_is_held "$SCRATCH/publocks/cbackup.lock"
	CBACKUP_LOCK_DIR=$SCRATCH/publocks backup 1 --lockwait 0.02
	test_has "$CB_ERR" "^ERROR: lock directory: .*publocks. is accessible by group or others \(mode 1777"
'

test_expect_success 'a symlink at the global lock name is not followed' '
	mkdir -m 700 "$SCRATCH/locks2"
	ln -s "$SCRATCH/victim3" "$SCRATCH/locks2/cbackup.lock"
	CBACKUP_LOCK_DIR=$SCRATCH/locks2 backup 1
	test_has "$CB_ERR" "lock file .*cbackup\.lock"
	test ! -e "$SCRATCH/victim3"
'

test_done
