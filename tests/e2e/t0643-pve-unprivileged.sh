#!/bin/bash
# An unprivileged Proxmox VE container is archived with its IDs as the
# container sees them, as vzdump archives it:
# - pve-container src/PVE/LXC.pm parse_id_maps(): the map is the config's
#   lxc.idmap lines ("u|g CT HOST COUNT"), else for "unprivileged: 1"
#   u and g 0 100000 65536;
# - src/PVE/VZDump/LXC.pm archive(): tar runs under the userns command of
#   that map, so owners, ACL entries and file capabilities come out shifted
#   back; src/PVE/LXC/Create.pm restore_tar_archive_command() extracts
#   under the same map, which shifts them again.
# Here the test extracts as root with pct restore's tar flags (no user
# namespace) and compares with the tree as the container sees it; an ID the
# map has no place for is an error naming the file.
. "$(dirname "$0")/lib.sh"

H=$SCRATCH/host
D=$SCRATCH/dump
export CBACKUP_PVE_DIR=$H/pve
VIEW=$SCRATCH/view                        # the tree as the container sees it
SUBVOL=$H/vz/images/643/subvol-643-disk-0.subvol

# shift_tree DIR N: every owner, ACL entry and file capability root of DIR
# moved up by N, as the host sees an unprivileged container's files
shift_tree() {
	local f
	(cd "$1" && getfacl -R -P -n -s . 2>/dev/null) >"$SCRATCH/acl.txt"
	find "$1" ! -type s -printf '%U %G %m %y %p\0' | while IFS=' ' read -r -d '' u g m y f; do
		chown -h "$((u + $2)):$((g + $2))" "$f"
		if [ "$y" != l ]; then chmod "$m" "$f"; fi   # chown dropped set-id bits
	done
	# (no "# owner:"/"# group:" lines: setfacl --restore would set them back)
	awk -v n="$2" -F: '/^# (owner|group):/ { next }
		/^(user|group|default:user|default:group):[0-9]+:/ {
		i = ($1 == "default") ? 3 : 2; $i += n } { print }' OFS=: "$SCRATCH/acl.txt" |
		(cd "$1" && setfacl --restore=-)
}

pct_restore_tar() {  # ARCHIVE ROOT (Create.pm's flags; see t0641)
	tar xpf - --zstd --totals --one-file-system -p --sparse --numeric-owner --acls --xattrs \
		--xattrs-include=user.* --xattrs-include=security.capability \
		--warning=no-file-ignored --warning=no-xattr-write -C "$2" --skip-old-files \
		--anchored --exclude "./dev/*" <"$1"
}

test_expect_success 'setup: PVE host, CT 643 unprivileged (no lxc.idmap: 100000/65536)' '
	mkdir -p "$H/pve/lxc" "$D" "$SCRATCH/tmp" "$(dirname "$SUBVOL")"
	printf "dir: local\n\tpath %s\n\tcontent rootdir,backup\n" "$H/vz" >"$H/pve/storage.cfg"
	printf "%s\n" "arch: amd64" "hostname: ct643" "memory: 512" "ostype: debian" \
		"rootfs: local:643/subvol-643-disk-0.subvol,size=8G" "unprivileged: 1" \
		>"$H/pve/lxc/643.conf"
	printf "dumpdir = %s\ntmpdir = %s\n" "$D" "$SCRATCH/tmp" >"$SCRATCH/c.conf"
'

test_expect_success ROOT,SETCAP,ACL 'owners, ACLs and the capability come out as the container sees them' '
	make_full_tree "$VIEW"
	mkdir "$VIEW/etc"
	echo ct643 >"$VIEW/etc/hostname"
	touch -d "$NS_TIME" "$VIEW/etc/hostname" "$VIEW/etc"
	cp -a "$VIEW" "$SUBVOL"
	shift_tree "$SUBVOL" 100000
	# a capability set inside the container: the kernel stores it namespaced
	# (revision 3) with the host uid of the container'"'"'s root
	setfattr -n security.capability -v 0x0100000300200000000000000000000000000000a0860100 \
		"$SUBVOL/capable"
	test "$(stat -c %u:%g "$SUBVOL/owned")" = 101234:105678
	cbackup_run 0 643 --config "$SCRATCH/c.conf"
	test_has "$CB_ERR" "INFO: unprivileged container: IDs archived as it sees them \\(ID map u 0 100000 65536, g 0 100000 65536\\)"
	a=$(find_archive "$D" ct 643 .zst)
	tar --zstd -tvf "$a" ./owned | grep -q " 1234/5678 "
	mkdir "$SCRATCH/out"
	pct_restore_tar "$a" "$SCRATCH/out"
	rm -r "$SCRATCH/out/etc/vzdump"
	touch -r "$VIEW/etc" "$SCRATCH/out/etc"
	compare_trees --no-root-mtime "$VIEW" "$SCRATCH/out"
'

test_expect_success ROOT,SETCAP,ACL 'cbackup restore --map-ids CONFIG: the host'"'"'s IDs again, as pct restore gives them (owners, ACLs, the namespaced capability)' '
	a=$(find_archive "$D" ct 643 .zst)
	cbackup_run 0 restore "$a" "$SCRATCH/back" --map-ids "$H/pve/lxc/643.conf"
	test "$(stat -c %u:%g "$SCRATCH/back/owned")" = 101234:105678
	touch -r "$SUBVOL/etc" "$SCRATCH/back/etc"
	compare_trees --no-root-mtime "$SUBVOL" "$SCRATCH/back"
	getfattr --absolute-names -e hex -n security.capability "$SCRATCH/back/capable" >caps
	test_has caps "=0x0100000300200000000000000000000000000000a0860100$"
	# a map without room for an ID: the restore fails naming the entry
	printf "%s\n" "unprivileged: 1" "rootfs: local:1/x,size=1G" "lxc.idmap: u 0 100000 1000" \
		"lxc.idmap: g 0 100000 65536" >"$SCRATCH/small.conf"
	cbackup_run 1 restore "$a" "$SCRATCH/back2" --map-ids "$SCRATCH/small.conf"
	test_has "$CB_ERR" " 1234 is outside the ID map of --map-ids"
	cbackup_run 2 restore "$a" "$SCRATCH/back3" --map-ids "$SCRATCH/c.conf"
	test_has "$CB_ERR" "not the config of an unprivileged container"
'

test_expect_success ROOT 'an ID outside the map: an error naming the file, no archive' '
	rm -f "$D"/*
	touch "$SUBVOL/outside"
	chown 5:100005 "$SUBVOL/outside"
	cbackup_run 1 643 --config "$SCRATCH/c.conf"
	error_names 643 "" "./outside.: owner uid 5 is outside the container.s ID map"
	test -z "$(ls "$D" | grep "\\.tar")"
	no_tmp_files "$D"
	rm "$SUBVOL/outside"
'

test_expect_success ROOT 'lxc.idmap lines are the map (one uid passed through), as parse_id_maps()' '
	rm -f "$D"/*
	mkdir -p "$H/vz/images/644/subvol-644-disk-0.subvol/srv"
	r=$H/vz/images/644/subvol-644-disk-0.subvol
	printf "%s\n" "rootfs: local:644/subvol-644-disk-0.subvol,size=8G" "unprivileged: 1" \
		"lxc.idmap: u 0 200000 1000" "lxc.idmap: g 0 200000 1000" \
		"lxc.idmap: u 1000 1000 1" "lxc.idmap: g 1000 1000 1" \
		"lxc.idmap: u 1001 201001 64535" "lxc.idmap: g 1001 201001 64535" >"$H/pve/lxc/644.conf"
	echo a >"$r/srv/passed"
	echo b >"$r/srv/high"
	chown -R 200000:200000 "$r"
	chown 1000:1000 "$r/srv/passed"
	chown 202000:202000 "$r/srv/high"
	cbackup_run 0 644 --config "$SCRATCH/c.conf"
	a=$(find_archive "$D" ct 644 .zst)
	tar --zstd -tvf "$a" --numeric-owner >list
	test_has list " 0/0 .* \\./\$"
	test_has list " 1000/1000 .* \\./srv/passed\$"
	test_has list " 2000/2000 .* \\./srv/high\$"
'

test_expect_success ROOT 'an lxc.idmap line not understood: an error naming the config, before any copy' '
	rm -f "$D"/*
	printf "%s\n" "rootfs: local:644/subvol-644-disk-0.subvol,size=8G" "lxc.idmap: u 0 x 1000" \
		>"$H/pve/lxc/645.conf"
	cbackup_run 1 645 --config "$SCRATCH/c.conf"
	error_names 645 "preflight: " "645\.conf.: cannot parse lxc\.idmap .u 0 x 1000."
	test_lacks "$CB_ERR" "starting first sync"
	test -z "$(ls "$D" | grep "\.tar")"
'

test_done
