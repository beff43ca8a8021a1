#!/bin/bash
# The staging copy is private: it lives in <tmpdir>/cbackup/, a directory
# cbackup creates 0700 and checks on the open fd (owned by root, not a
# symlink, no group/other bits); each guest's staging directory is made
# with mkdirat and recorded with a marker, and nothing else found there is
# reused (keep-staging reuses only its own copy). Attacker: another local
# user (nobody) in the shared, sticky tmpdir.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/e2e/lib-attacker.sh"

DUMP=$SCRATCH/dump
TMPD=$SCRATCH/tmp
SRC=$SCRATCH/src

backup() {  # RC [OPTIONS...]
	local rc=$1
	shift
	cbackup_run "$rc" backup --root "$SRC" --id 101 --dumpdir "$DUMP" --tmpdir "$TMPD" \
		--prune-backups keep-all=1 "$@"
}

# archived_shadow: etc/shadow as the newest archive has it
archived_shadow() {
	local a
	a=$(ls -t "$DUMP"/*.tar.zst | head -1)
	zstd -dc "$a" | tar -xOf - ./etc/shadow
}

# plant_copy DIR [root]: a staging copy as nobody (or root) could make it:
# etc/shadow forged, with the size and mtime of the source's
plant_copy() {
	local as=as_nobody
	[ "${2-}" = root ] && as=
	$as mkdir -p "$1/etc" "$1/srv/data" "$1/var/log" "$1/pub"
	head -c "$(stat -c %s "$SRC/etc/shadow")" /dev/zero | tr '\0' F >"$SCRATCH/forged"
	chmod 0644 "$SCRATCH/forged"
	$as cp "$SCRATCH/forged" "$1/etc/shadow"
	$as touch -r "$SRC/etc/shadow" "$1/etc/shadow"
}

test_expect_success 'setup: a guest with a secret, a sticky world-writable tmpdir' '
	make_small_tree "$SRC"
	printf "root:\$6\$the-real-hash-of-the-guest-root:19000:0:99999:7:::\n" >"$SRC/etc/shadow"
	chmod 0640 "$SRC/etc/shadow"
	echo "guest data" >"$SRC/etc/secret"
	chmod 0644 "$SRC/etc/secret"
	mkdir -m 0777 "$SRC/pub"
	mkdir -p "$DUMP"
	mkdir -m 1777 "$TMPD"
	chmod 0755 "$SRC"
'

test_expect_success 'a staging dir planted at the old name is never used (--keep-staging 1)' '
	plant_copy "$TMPD/cbackup-101.stage"
	backup 0 --keep-staging 1
	archived_shadow >"$SCRATCH/got"
	test_cmp "$SRC/etc/shadow" "$SCRATCH/got"
	rm -rf "$DUMP"/* "$TMPD/cbackup"
'

test_expect_success 'a staging dir planted at the old name is never used (--keep-staging 0)' '
	backup 0 --keep-staging 0
	archived_shadow >"$SCRATCH/got"
	test_cmp "$SRC/etc/shadow" "$SCRATCH/got"
	rm -rf "$DUMP"/* "$TMPD/cbackup-101.stage"
'

test_expect_success 'a private dir pre-created by another user is refused, naming it and why' '
	as_nobody mkdir -m 0700 "$TMPD/cbackup"
	plant_copy "$TMPD/cbackup/cbackup-101.stage"
	backup 1 --keep-staging 1
	test_has "$CB_ERR" "^ERROR: Backup of VM 101 failed - staging: .*/tmp/cbackup. is owned by uid 65534, not by uid 0"
	test -z "$(ls "$DUMP"/*.tar.zst 2>/dev/null)"
	backup 1
	test_has "$CB_ERR" "owned by uid 65534"
	rm -rf "$TMPD/cbackup"
'

test_expect_success 'a symlink or an open private dir is refused' '
	mkdir -m 0700 "$SCRATCH/elsewhere"
	as_nobody ln -s "$SCRATCH/elsewhere" "$TMPD/cbackup"
	backup 1
	test_has "$CB_ERR" "cbackup. is a symlink"
	dir_empty "$SCRATCH/elsewhere"
	rm -f "$TMPD/cbackup"
	mkdir -m 0755 "$TMPD/cbackup"
	backup 1
	test_has "$CB_ERR" "cbackup. is accessible by group or others \(mode 0755"
	rmdir "$TMPD/cbackup"
'

test_expect_success 'a staging dir cbackup did not record is not reused (--keep-staging 1)' '
	mkdir -m 0700 "$TMPD/cbackup"
	plant_copy "$TMPD/cbackup/cbackup-101.stage" root
	backup 0 --keep-staging 1 --verbose
	test_lacks "$CB_ERR" "reusing the staging copy"
	archived_shadow >"$SCRATCH/got"
	test_cmp "$SRC/etc/shadow" "$SCRATCH/got"
'

test_expect_success 'keep-staging reuses its own copy, and only that' '
	backup 0 --keep-staging 1 --verbose
	test_has "$CB_ERR" "reusing the staging copy .*/tmp/cbackup/cbackup-101\.stage"
	test "$(mode_of "$TMPD/cbackup")" = 700
	ino=$(stat -c %i "$TMPD/cbackup/cbackup-101.stage")
	rm -rf "$TMPD/cbackup/cbackup-101.stage"
	plant_copy "$TMPD/cbackup/cbackup-101.stage" root
	backup 0 --keep-staging 1 --verbose
	test_lacks "$CB_ERR" "reusing the staging copy"
	archived_shadow >"$SCRATCH/got"
	test_cmp "$SRC/etc/shadow" "$SCRATCH/got"
	backup 0 --keep-staging 0
	test ! -e "$TMPD/cbackup"
	rm -f "$DUMP"/*
'

test_expect_success 'during a pre-stop hook nobody can read or write the staged copy' '
	rm -f "$DUMP"/*
	cat >"$SCRATCH/hook" <<-HOOK
	#!/bin/bash
	[ "\$1" = pre-stop ] || exit 0
	for p in "$TMPD/cbackup/cbackup-101.stage" "$TMPD/cbackup-101.stage"; do
		[ -d "\$p" ] || continue
		echo "staging \$p" >>"$SCRATCH/hook.out"
		setpriv --reuid=65534 --regid=65534 --clear-groups -- cat "\$p/etc/secret" >/dev/null 2>&1 &&
			echo "READ \$p/etc/secret" >>"$SCRATCH/hook.out"
		setpriv --reuid=65534 --regid=65534 --clear-groups -- ls "\$p/etc" >/dev/null 2>&1 &&
			echo "LIST \$p/etc" >>"$SCRATCH/hook.out"
		setpriv --reuid=65534 --regid=65534 --clear-groups -- touch "\$p/pub/injected" 2>/dev/null &&
			echo "WROTE \$p/pub/injected" >>"$SCRATCH/hook.out"
	done
	exit 0
	HOOK
	chmod +x "$SCRATCH/hook"
	backup 0 --script "$SCRATCH/hook"
	test_has "$SCRATCH/hook.out" "^staging "
	test_lacks "$SCRATCH/hook.out" "^(READ|LIST|WROTE)"
	a=$(find_archive "$DUMP" ct 101 .zst)
	zstd -dc "$a" | tar -tf - >"$SCRATCH/list"
	test_has "$SCRATCH/list" "^\./pub/$"
	test_lacks "$SCRATCH/list" "injected"
'

test_expect_success 'the private dir removed between its mkdir and its open is made again' '
	# what a job of several guests meets: the guest before removes its
	# copy in the background and, done, the private dir it leaves empty
	rm -rf "$TMPD/cbackup"
	rm -f "$FAULT_LOG"
	: >"$CB_OUT"
	: >"$CB_ERR"
	# held in its first open, right after the mkdir
	with_fault_bg "open:SIGSTOP:$TMPD/cbackup" \
		"$CBACKUP" backup --root "$SRC" --id 101 --dumpdir "$DUMP" --tmpdir "$TMPD" \
		--keep-staging 0 >"$CB_OUT" 2>"$CB_ERR"
	pid=$FAULT_PID
	wait_for 60 grep -q "^State:.*stopped" /proc/$pid/status || { kill -KILL "$pid"; false; }
	rmdir "$TMPD/cbackup" || { kill -KILL "$pid"; false; }
	kill -CONT "$pid"
	rc=0
	wait "$pid" || rc=$?
	cat "$CB_ERR"
	fault_fired "^open .*/cbackup"
	test "$rc" = 0
	test_lacks "$CB_ERR" "^ERROR"
'

test_done
