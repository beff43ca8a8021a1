#!/bin/bash
# A Proxmox VE container's backup carries its config where PVE looks, so
# that `pct restore` and the GUI's "Show Configuration" take it as vzdump's:
# - pve-container src/PVE/VZDump/LXC.pm, assemble(): the config is written
#   to ./etc/vzdump/pct.conf without lock, snapshots, parent and pending;
#   ./etc/vzdump/pct.fw is /etc/pve/firewall/ID.fw, or empty when there is
#   none; archive(): tar gets those two first, then the root.
# - pve-storage src/PVE/Storage.pm, extract_vzdump_config_tar(): `tar tf`
#   until a name matches ./etc/vzdump/(pct|vps).conf ("archive contains no
#   configuration file" otherwise), then `tar -xpOf A NAME --occurrence`.
# - pve-container src/PVE/LXC/Create.pm, restore_tar_archive_command():
#   tar xpf - --zstd --totals, Plugin.pm's COMMON_TAR_FLAGS, -C ROOT
#   --skip-old-files --anchored --exclude ./dev/*; then
#   restore_configuration_from_etc_vzdump() unlinks ROOT/etc/vzdump/pct.conf
#   (and a non-empty pct.fw).
# A guest whose config is not a PVE one keeps ./etc/cbackup/guest.conf.
. "$(dirname "$0")/lib.sh"

H=$SCRATCH/host
D=$SCRATCH/dump
export CBACKUP_PVE_DIR=$H/pve
SUBVOL=$H/vz/images/641/subvol-641-disk-0.subvol

# pve-storage Plugin.pm COMMON_TAR_FLAGS and Create.pm's command around them
pct_restore_tar() {  # ARCHIVE ROOT
	tar xpf - --zstd --totals --one-file-system -p --sparse --numeric-owner --acls --xattrs \
		--xattrs-include=user.* --xattrs-include=security.capability \
		--warning=no-file-ignored --warning=no-xattr-write -C "$2" --skip-old-files \
		--anchored --exclude "./dev/*" <"$1"
}

test_expect_success 'setup: a PVE host with CT 641 (dir storage, subvol rootfs), a firewall file' '
	mkdir -p "$H/pve/lxc" "$H/pve/firewall" "$D" "$SCRATCH/tmp" "$(dirname "$SUBVOL")"
	printf "dir: local\n\tpath %s\n\tcontent iso,vztmpl,backup,images,rootdir\n" "$H/vz" \
		>"$H/pve/storage.cfg"
	cat >"$H/pve/lxc/641.conf" <<-EOF
	#web server, nightly
	arch: amd64
	cores: 2
	features: nesting=1
	hostname: ct641
	lock: backup
	memory: 2048
	net0: name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:24:11:2A:3B:4C,ip=dhcp,type=veth
	ostype: debian
	parent: before-upgrade
	rootfs: local:641/subvol-641-disk-0.subvol,size=8G
	swap: 512

	[before-upgrade]
	arch: amd64
	hostname: ct641
	memory: 1024
	ostype: debian
	rootfs: local:641/subvol-641-disk-0.subvol,size=8G
	snaptime: 1733400000
	EOF
	grep -v "^lock:\|^parent:" "$H/pve/lxc/641.conf" | sed "/^\$/,\$d" >"$SCRATCH/stripped.conf"
	printf "[OPTIONS]\nenable: 1\n\n[RULES]\nIN ACCEPT -p tcp -dport 22\n" >"$H/pve/firewall/641.fw"
	printf "dumpdir = %s\ntmpdir = %s\n" "$D" "$SCRATCH/tmp" >"$SCRATCH/c.conf"
'

test_expect_success ROOT,SETCAP,ACL 'CT 641: ./etc/vzdump/pct.conf and pct.fw first, stripped as vzdump' '
	make_full_tree "$SUBVOL"
	mkdir "$SUBVOL/etc"
	echo ct641 >"$SUBVOL/etc/hostname"
	touch -d "2020-02-02 02:02:02" "$SUBVOL/etc/hostname" "$SUBVOL/etc" "$SUBVOL"
	cbackup_run 0 641 --config "$SCRATCH/c.conf"
	a=$(find_archive "$D" ct 641 .zst)
	test_has "$D/$(basename "${a%.tar.zst}").log" "INFO: creating vzdump archive .$a."
	tar tf "$a" | head -n 3 >first
	printf "./etc/vzdump/pct.conf\n./etc/vzdump/pct.fw\n./\n" >expected
	test_cmp expected first
	# what extract_vzdump_config_tar() runs
	tar -xpOf "$a" ./etc/vzdump/pct.conf --occurrence >got.conf
	test_cmp "$SCRATCH/stripped.conf" got.conf
	test_lacks got.conf "^lock:|^parent:|^\\[|snaptime"
	tar -xpOf "$a" ./etc/vzdump/pct.fw --occurrence >got.fw
	test_cmp "$H/pve/firewall/641.fw" got.fw
	tar tvf "$a" ./etc/vzdump/pct.conf | grep -q "^-rw-r--r-- 0/0 "
	tar tf "$a" >members
	test_lacks members "etc/cbackup"
'

test_expect_success ROOT,SETCAP,ACL 'pct restore'"'"'s tar command restores the root: exit 0, the same tree (owners, xattrs, ACLs)' '
	a=$(find_archive "$D" ct 641 .zst)
	mkdir "$SCRATCH/pct-root"
	pct_restore_tar "$a" "$SCRATCH/pct-root" 2>tar.err || { cat tar.err; false; }
	# restore_configuration_from_etc_vzdump() then takes the config out
	test -s "$SCRATCH/pct-root/etc/vzdump/pct.conf"
	rm -r "$SCRATCH/pct-root/etc/vzdump"
	# as with vzdump'"'"'s own archives: --skip-old-files keeps ROOT as pct made
	# it, and ./etc (made for ./etc/vzdump/pct.conf, first) gets the times
	# of the extraction; everything else is the guest'"'"'s
	touch -r "$SUBVOL/etc" "$SCRATCH/pct-root/etc"
	compare_trees --no-root-mtime "$SUBVOL" "$SCRATCH/pct-root"
'

test_expect_success ROOT 'no firewall file: an empty ./etc/vzdump/pct.fw, as vzdump' '
	rm -f "$D"/* "$H/pve/firewall/641.fw"
	cbackup_run 0 641 --config "$SCRATCH/c.conf"
	a=$(find_archive "$D" ct 641 .zst)
	tar tvf "$a" ./etc/vzdump/pct.fw | grep -q "^-rw-r--r-- 0/0 *0 "
'

test_expect_success ROOT 'guest-config given by hand: a PVE config goes to pct.conf, an LXC one to ./etc/cbackup/guest.conf' '
	rm -f "$D"/*
	cp "$H/pve/lxc/641.conf" "$SCRATCH/642.conf"
	cbackup_run 0 backup --root "$SUBVOL" --id 642 --guest-config "$SCRATCH/642.conf" \
		--dumpdir "$D" --tmpdir "$SCRATCH/tmp"
	a=$(find_archive "$D" ct 642 .zst)
	test "$(tar tf "$a" | head -n 1)" = ./etc/vzdump/pct.conf
	tar -xpOf "$a" ./etc/vzdump/pct.conf --occurrence >got.conf
	test_cmp "$SCRATCH/stripped.conf" got.conf
	printf "lxc.uts.name = ct643\nlxc.rootfs.path = dir:/x\n" >"$SCRATCH/643.conf"
	cbackup_run 0 backup --root "$SUBVOL" --id 643 --guest-config "$SCRATCH/643.conf" \
		--dumpdir "$D" --tmpdir "$SCRATCH/tmp"
	a=$(find_archive "$D" ct 643 .zst)
	test_cmp "$SCRATCH/643.conf" <(tar -xOf "$a" ./etc/cbackup/guest.conf)
	tar tf "$a" >members
	test_lacks members "etc/vzdump"
'

test_expect_success ROOT 'cbackup restore leaves the config out of the restored root' '
	a=$(find_archive "$D" ct 642 .zst)
	cbackup_run 0 restore "$a" "$SCRATCH/cb-root"
	test ! -e "$SCRATCH/cb-root/etc/vzdump/pct.conf"
	test ! -e "$SCRATCH/cb-root/etc/vzdump/pct.fw"
	test -s "$SCRATCH/cb-root/etc/hostname"
	# asked for by name, it is restored
	a=$(find_archive "$D" ct 642 .zst)
	cbackup_run 0 restore "$a" "$SCRATCH/cb-conf" --path ./etc/vzdump/pct.conf
	test_cmp "$SCRATCH/stripped.conf" "$SCRATCH/cb-conf/etc/vzdump/pct.conf"
	a=$(find_archive "$D" ct 643 .zst)
	cbackup_run 0 restore "$a" "$SCRATCH/cb-root2"
	test ! -e "$SCRATCH/cb-root2/etc/cbackup/guest.conf"
'

test_done
