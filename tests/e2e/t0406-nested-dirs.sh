#!/bin/bash
# Never copy into itself (issue 37): a tmpdir inside the guest's root (the
# root itself, a directory in it, or bound into it with mount --bind)
# would have the first sync copy its own staging copy without end; a dump
# directory inside the root would have the next night archive the
# previous archives. Found by device and inode as the walk meets them,
# they are left out with a line saying so; a dump directory that IS the
# root (or a mount point's source) cannot be left out: refused, exit 2. `timeout` turns an endless run
# into a failure instead of a hang.
. "$(dirname "$0")/lib.sh"

CT=$SCRATCH/ct
D=$SCRATCH/dump
T=$SCRATCH/tmp
LIMIT=${NESTED_LIMIT:-120}

# cbackup, killed if it runs on (a copy of itself): a failure, not a hang
cbackup_bounded() { timeout -s KILL "$LIMIT" "$TOP/cbackup" "$@"; }

test_expect_success 'setup: a guest root with data in usr/local and var/backups' '
	make_small_tree "$CT" nested
	mkdir -p "$CT/usr/local/bin" "$CT/var/backups" "$CT/mnt/tmp" "$CT/mnt/dump" "$D" "$T"
	echo "guest tool" >"$CT/usr/local/bin/tool"
	echo "guest backup" >"$CT/var/backups/guest-own.tar"
'

# listing ID: the member list of guest ID's newest archive in DIR
listing() {
	tar -tf "$(ls -t "$1"/vzdump-lxc-"$2"-*.tar.zst "$1"/cbackup-ct-"$2"-*.tar.zst 2>/dev/null | head -1)"
}

test_expect_success 'tmpdir = the guest root: the directory cbackup makes there is left out, the backup ends' '
	CBACKUP=cbackup_bounded cbackup_run 0 backup --root "$CT" --id 601 --tmpdir "$CT" --dumpdir "$D"
	test_has "$CB_ERR" "^INFO: leaving out ./cbackup.: cbackup.s own directory in tmpdir"
	listing "$D" 601 >list
	test_has list "^\./usr/local/bin/tool$"
	test_lacks list "^\./cbackup"
	# keep-staging auto keeps no copy in a tmpdir inside the guest
	test_has "$CB_ERR" "^INFO: keep-staging auto: not kept: the tmpdir .* is inside the guest.s root"
	test_must_fail test -e "$CT/cbackup"
'

test_expect_success 'tmpdir = ROOT/usr/local: left out there, the guest data beside it kept' '
	CBACKUP=cbackup_bounded cbackup_run 0 backup --root "$CT" --id 602 --tmpdir "$CT/usr/local" \
		--dumpdir "$D"
	test_has "$CB_ERR" "^INFO: leaving out ./usr/local/cbackup.: cbackup.s own directory in tmpdir"
	listing "$D" 602 >list
	test_has list "^\./usr/local/bin/tool$"
	test_lacks list "^\./usr/local/cbackup"
'

test_expect_success ROOT 'tmpdir bound into the root (mount --bind): found by device and inode' '
	mkdir -p "$SCRATCH/bound-tmp"
	mount --bind "$SCRATCH/bound-tmp" "$CT/mnt/tmp"
	cleanup_mount "$CT/mnt/tmp"
	# --keep-staging 0: a copy kept in this tmpdir would be seen, through
	# the bind mount, by the next cases, which use other tmpdirs (one
	# tmpdir leaves out every copy in it: cbackup/ as a whole)
	CBACKUP=cbackup_bounded cbackup_run 0 backup --root "$CT" --id 603 \
		--tmpdir "$SCRATCH/bound-tmp" --dumpdir "$D" --keep-staging 0
	test_has "$CB_ERR" "^INFO: leaving out ./mnt/tmp/cbackup.: cbackup.s own directory in tmpdir"
	listing "$D" 603 >list
	test_lacks list "^\./mnt/tmp/cbackup"
'

# two_nights ID DUMPDIR: two backups of CT, both kept
two_nights() {
	CBACKUP=cbackup_bounded cbackup_run 0 backup --root "$CT" --id "$1" --tmpdir "$T" \
		--dumpdir "$2" --prune-backups keep-all=1
	CBACKUP=cbackup_bounded cbackup_run 0 backup --root "$CT" --id "$1" --tmpdir "$T" \
		--dumpdir "$2" --prune-backups keep-all=1
}

test_expect_success 'dump dir inside the root: the next night does not archive the last one' '
	two_nights 604 "$CT/var/backups"
	test_has "$CB_ERR" "^WARN: leaving out ./var/backups.: it is the dump directory"
	listing "$CT/var/backups" 604 >list
	test_has list "^\./usr/local/bin/tool$"
	test_lacks list "(cbackup-ct|vzdump-lxc)-604|guest-own"
'

test_expect_success ROOT 'dump dir bound into the root: found by device and inode' '
	mkdir -p "$SCRATCH/bound-dump"
	mount --bind "$SCRATCH/bound-dump" "$CT/mnt/dump"
	cleanup_mount "$CT/mnt/dump"
	two_nights 605 "$SCRATCH/bound-dump"
	test_has "$CB_ERR" "^WARN: leaving out ./mnt/dump.: it is the dump directory"
	listing "$SCRATCH/bound-dump" 605 >list
	test_lacks list "(cbackup-ct|vzdump-lxc)-605"
'

test_expect_success 'dump dir = the guest root: refused, exit 2, nothing archived' '
	mkdir -p "$SCRATCH/ct2/etc"
	echo x >"$SCRATCH/ct2/etc/hostname"
	CBACKUP=cbackup_bounded cbackup_run 2 backup --root "$SCRATCH/ct2" --id 606 --tmpdir "$T" \
		--dumpdir "$SCRATCH/ct2"
	test_has "$CB_ERR" "^ERROR: Backup of VM 606 failed - .*dump directory .* is the guest.s root"
	test -z "$(find "$SCRATCH/ct2" -name "cbackup-*.tar*")"
'

test_done
