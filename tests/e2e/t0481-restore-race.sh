#!/bin/bash
# Restore into a directory another user owns (a container's rootfs, owned
# by its mapped root) is race-free (issue 25 item 5): that user runs a
# renameat2(RENAME_EXCHANGE) loop turning every directory of the archive
# into a symlink to an outside directory and back, while root restores
# with --force, many times over. cbackup extracts into a fresh root-only
# directory by its fd and swaps the whole tree in by names in the
# parent's fd, so nothing ever lands outside. Both ways: beside DESTDIR,
# and inside it when DESTDIR is a mount point.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/e2e/lib-attacker.sh"

DUMP=$SCRATCH/dump TMPD=$SCRATCH/tmp OUT=$SCRATCH/outside
TRIES=${CB_RACE_TRIES:-12}
NAMES=$(seq -f d%g 0 29 | tr '\n' ' ')

# outside_untouched: the attacker's target got nothing and kept its mode
outside_untouched() {
	local left
	left=$(find "$OUT" -mindepth 1 | head -n 5)
	[ -z "$left" ] || { echo "landed outside DESTDIR: $left"; return 1; }
	[ "$(stat -c '%a %u' "$OUT")" = "755 0" ] || { stat "$OUT"; return 1; }
}

# race DEST [ARGS]: one restore --force [ARGS] into DEST (owned by the
# attacker, holding an old tree with the archive's directory names) under
# the exchange loop
race() {
	local dest=$1 n rc=0 xpid
	shift
	find "$dest" -mindepth 1 -delete
	for n in $NAMES; do
		mkdir "$dest/$n"
		echo old >"$dest/$n/old"
	done
	chown -R 65534:65534 "$dest"
	rm -f "$SCRATCH/stop"
	# shellcheck disable=SC2086
	as_nobody "$HELPERS/exchanger" "$dest" "$OUT" "$SCRATCH/stop" $NAMES >"$SCRATCH/xcount" &
	xpid=$!
	cleanup_pid "$xpid"
	wait_for 5 test -L "$dest/.x-d29"
	"$CBACKUP" restore --force "$@" "$A" "$dest" >"$CB_OUT" 2>"$CB_ERR" || rc=$?
	touch "$SCRATCH/stop"
	wait "$xpid"
	echo "restore exit $rc, $(cat "$SCRATCH/xcount") exchanges"
	cat "$CB_ERR"
	outside_untouched
	# the attacker was at work (exchanges happened)
	test "$(cat "$SCRATCH/xcount")" -gt 0
	# a failure is counted, the tries go on: what lands outside matters most;
	# --path meeting a symlink on its way down DESTDIR refuses it: counted
	if [ "$rc" = 1 ] && [ $# != 0 ] && grep -q "is not a directory (a symlink is not followed)" "$CB_ERR"; then
		rc=refused
	fi
	echo "$rc" >>"$SCRATCH/rcs"
	# --path: the attacker goes on swapping in the tree that is theirs
	if [ "$rc" != 0 ] || [ $# != 0 ]; then return 0; fi
	# the restored tree is the archive's, owned as archived
	test "$(cat "$dest/d7/f3")" = "file 7 3"
	test "$(stat -c %u "$dest/d7/f3")" = 65534
}

# all_restored [EXTRA]: every try exited 0 (or was EXTRA)
all_restored() {
	local ok="0${1:+|$1}"
	[ -z "$(grep -vxE "$ok" "$SCRATCH/rcs")" ] && return 0
	echo "failed restores: $(grep -cvxE "$ok" "$SCRATCH/rcs") of $(wc -l <"$SCRATCH/rcs")"
	return 1
}

test_expect_success ROOT 'setup: a guest owned by its mapped root, 30 directories of 30 files' '
	mkdir -p "$SCRATCH/src" "$DUMP" "$TMPD" "$OUT"
	for n in $NAMES; do
		mkdir "$SCRATCH/src/$n"
		for f in $(seq 0 29); do echo "file ${n#d} $f" >"$SCRATCH/src/$n/f$f"; done
	done
	chown -R 65534:65534 "$SCRATCH/src"
	chmod 755 "$OUT"
	cbackup_run 0 backup --root "$SCRATCH/src" --id 480 --dumpdir "$DUMP" --tmpdir "$TMPD"
	find_archive "$DUMP" ct 480 .zst >archive-name
'

test_expect_success ROOT "DESTDIR owned by the attacker, exchange loop, $TRIES restores: nothing outside" '
	A=$(cat archive-name)
	find "$OUT" -mindepth 1 -delete
	mkdir -p "$SCRATCH/ct/rootfs"
	: >"$SCRATCH/rcs"
	for i in $(seq "$TRIES"); do
		echo "--- try $i"
		race "$SCRATCH/ct/rootfs"
	done
	all_restored
	# no private directory of a restore is left beside it
	test -z "$(find "$SCRATCH/ct" -maxdepth 1 -name ".cbackup-restore-*")"
'

test_expect_success ROOT,TMPFS "DESTDIR a mount point owned by the attacker, $TRIES restores: nothing outside" '
	A=$(cat archive-name)
	find "$OUT" -mindepth 1 -delete
	mount_tmpfs "$SCRATCH/mnt/rootfs" 64M
	: >"$SCRATCH/rcs"
	for i in $(seq "$TRIES"); do
		echo "--- try $i"
		race "$SCRATCH/mnt/rootfs"
	done
	all_restored
	test -z "$(find "$SCRATCH/mnt/rootfs" -maxdepth 1 -name ".cbackup-restore-*")"
'

test_expect_success ROOT "restore --path into the attacker's DESTDIR, $TRIES times: nothing outside" '
	A=$(cat archive-name)
	find "$OUT" -mindepth 1 -delete
	: >"$SCRATCH/rcs"
	for i in $(seq "$TRIES"); do
		echo "--- try $i"
		race "$SCRATCH/ct/rootfs" --path d7 --path d12/f3 --path ./d20/
	done
	all_restored refused
	# not refused every time: the chosen paths did get restored
	grep -qx 0 "$SCRATCH/rcs"
'

test_done
