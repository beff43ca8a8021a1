#!/bin/bash
# Snapshot mode walks the snapshot from the fd it opened when the snapshot
# was taken (issue 25 item 6): a user who can write the volume's parent
# renames the root-only snapshot directory aside after the thaw and puts a
# symlink to another tenant's tree in its place (here from the
# post-restart hook, as that user's process could, at the moment that
# matters). The other tree is never archived: the backup fails with an
# error naming the replaced directory, and no archive is left.
. "$(dirname "$0")/lib.sh"
. "$TOP/tests/e2e/lib-attacker.sh"

B=$SCRATCH/btrfs
TMPD=$SCRATCH/tmp
DUMP=$SCRATCH/dump
HOOK=$SCRATCH/hook.sh

if why=$(loop_fs_unavailable btrfs); then
	test_skip 'btrfs snapshot mode' "$why"
	test_done
fi

# the hook, after the thaw: as the attacker, the snapshot directory aside
# and a symlink to the other tenant's tree in its place
cat >"$HOOK" <<EOF
#!/bin/sh
[ "\$1" = post-restart ] || exit 0
setpriv --reuid=65534 --regid=65534 --clear-groups -- sh -c '
	mv "$B/.cbackup-snap-\$0" "$B/aside" && ln -s other "$B/.cbackup-snap-\$0"' "\$3"
EOF
chmod 755 "$HOOK"

test_expect_success 'setup: btrfs, a subvolume guest, another tenant, a parent the attacker owns' '
	make_loop_fs btrfs "$B" 512M
	btrfs -q subvolume create "$B/ct"
	mkdir -p "$TMPD" "$DUMP" "$B/other/ct" "$B/ct/etc"
	echo guest >"$B/ct/etc/hostname"
	echo OTHER-TENANT-SECRET >"$B/other/ct/secret"
	chmod 700 "$B/other"
	chown 65534:65534 "$B"
'

test_expect_success 'the snapshot directory replaced by a symlink: the backup fails naming it, nothing of the other tree archived' '
	cbackup_run 1 backup --root "$B/ct" --id 655 --tmpdir "$TMPD" --dumpdir "$DUMP" \
		--mode snapshot --script "$HOOK"
	cat "$CB_ERR"
	test -L "$B/.cbackup-snap-655"
	error_names 655 "archive: " "snapshot directory .*\.cbackup-snap-655. was replaced while the backup ran \(it is now a symlink\)"
	test -z "$(find "$DUMP" -name "*.tar*")"
	test_must_fail grep -r OTHER-TENANT-SECRET "$DUMP"
	# the snapshot itself was still removed (by its directory fd)
	btrfs subvolume list "$B" >"$SCRATCH/subvols"
	test_lacks "$SCRATCH/subvols" "aside/ct"
'

test_expect_success 'without the attacker the same backup works' '
	rm -f "$B/.cbackup-snap-655"
	rm -rf "$B/aside"
	cbackup_run 0 backup --root "$B/ct" --id 656 --tmpdir "$TMPD" --dumpdir "$DUMP" --mode snapshot
	a=$(find_archive "$DUMP" ct 656 .zst)
	zstd -dc <"$a" | tar -xOf - ./etc/hostname >hostname
	test "$(cat hostname)" = guest
'

test_done
