#!/bin/bash
# Guest discovery (issue 28, item 2): --all backs up every guest the host
# has, as vzdump --all does: LXC containers ($CBACKUP_LXC_DIR/NAME/config),
# Proxmox containers and VMs ($CBACKUP_PVE_DIR/lxc, qemu-server, volumes
# through storage.cfg), not only the sections written by hand. A section
# overrides what was found; a stopped guest is backed up without a freeze;
# one whose volume cannot be resolved fails with file:line, the others are
# still backed up; `cbackup guests` says what, from where, in which mode.
# A running Proxmox VM is a real QEMU (TCG) with its QMP socket in
# $CBACKUP_QEMU_RUN_DIR.
# The host trees live under $SCRATCH/host; the running container is a real
# LXC busybox container when Debian's lxc can start one here, else a real
# cgroup made by the test where lxc would put the container's.
. "$(dirname "$0")/lib.sh"

H=$SCRATCH/host
D=$SCRATCH/dump
CONF=$SCRATCH/cbackup.conf
export CBACKUP_LXC_DIR=$H/lxc CBACKUP_PVE_DIR=$H/pve CBACKUP_QEMU_RUN_DIR=$H/run
NAME=cbe2e$$       # unique: lxc names the cgroup lxc.payload.NAME host-wide

# lxc_tree NAME: a stopped LXC container as lxc-create leaves it
lxc_tree() {
	make_small_tree "$H/lxc/$1/rootfs" "$1"
	cat >"$H/lxc/$1/config" <<-EOF
	# as lxc-create writes it
	lxc.rootfs.path = dir:$H/lxc/$1/rootfs
	lxc.uts.name = $1
	lxc.mount.entry = shm dev/shm tmpfs defaults,create=dir 0 0
	lxc.mount.entry = $H/data-$1 srv/shared none bind,create=dir 0 0
	lxc.mount.entry = /usr/lib usr/lib none ro,bind 0 0
	EOF
}

test_expect_success 'setup: a host with LXC and Proxmox guests' '
	mkdir -p "$H/lxc" "$H/pve/lxc" "$H/pve/qemu-server" "$H/run" "$D" "$SCRATCH/tmp" \
		"$H/vz/images/201" "$H/vz/images/300" "$H/vz/images/203" "$H/hand"
	make_small_tree "$H/hand" hand
	printf "tmpdir = %s\ndumpdir = %s\n\n[ct 100]\nroot = %s\nfreeze-cmd = true\nthaw-cmd = true\n" \
		"$SCRATCH/tmp" "$D" "$H/hand" >"$CONF"
	# storage.cfg: stanzas with tab-indented keys (printf: <<- would strip the tabs)
	printf "dir: local\n\tpath %s\n\tcontent iso,vztmpl,backup,images,rootdir\n\n" "$H/vz" \
		>"$H/pve/storage.cfg"
	printf "lvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\tcontent rootdir,images\n" \
		>>"$H/pve/storage.cfg"
'

test_expect_success '--all before: the hand-written section only' '
	cbackup_run 0 --all --config "$CONF" --dry-run
	test_has "$CB_ERR" "Starting Backup of VM 100 "
	test_lacks "$CB_ERR" "$NAME"
'

test_expect_success ROOT 'a container added later is found by --all; a stopped one is backed up as it is' '
	lxc_tree "$NAME"
	mkdir -p "$H/data-$NAME"
	echo "shared" >"$H/data-$NAME/kept"
	cbackup_run 0 guests --config "$CONF"
	cat "$CB_OUT"
	test_has "$CB_OUT" "^CT $NAME: backed up, mode suspend, stopped \\(freeze cgroup .lxc\\.payload\\.$NAME. does not exist\\): as it is, without a freeze\$"
	test_has "$CB_OUT" "^  found in .$H/lxc/$NAME/config.\$"
	test_has "$CB_OUT" "^  mount point .$H/data-$NAME,/srv/shared.\$"
	test_has "$CB_OUT" "^  not backed up: $H/lxc/$NAME/config:6: mount entry ./usr/lib.: a read-only bind"
	rm -f "$D"/*
	cbackup_run 0 --all --config "$CONF"
	test_has "$CB_ERR" "INFO: Starting Backup of VM $NAME \\(lxc\\)"
	test_has "$CB_ERR" "INFO: status = stopped \\("
	a=$(find_archive "$D" ct "$NAME" .zst)
	tar -xOf "$a" ./etc/hostname | grep -qx "$NAME"
	tar -xOf "$a" ./srv/shared/kept | grep -qx shared
	tar -xOf "$a" ./etc/cbackup/guest.conf | grep -q "^lxc.rootfs.path = dir:$H/lxc/$NAME/rootfs"
	test -n "$(find_archive "$D" ct 100 .zst)"
'

test_expect_success ROOT 'Proxmox: volumes through storage.cfg, backup=1 mount points, templates skipped, an unresolvable volume is an ERROR with file:line, the others backed up' '
	# CT 201 on a dir storage: rootfs, a volume mount point with backup=1,
	# one without, a bind mount (vzdump backs up neither)
	make_small_tree "$H/vz/images/201/subvol-201-disk-0.subvol" ct201
	mkdir -p "$H/vz/images/201/subvol-201-disk-1.subvol" "$H/bind201"
	echo "in mp0" >"$H/vz/images/201/subvol-201-disk-1.subvol/rows"
	# unprivileged: its files are the host'"'"'s IDs 100000 and up (PVE'"'"'s map)
	chown -R 100000:100000 "$H/vz/images/201"
	cat >"$H/pve/lxc/201.conf" <<-EOF
	arch: amd64
	hostname: ct201
	mp0: local:201/subvol-201-disk-1.subvol,mp=/var/lib/db,backup=1,size=0T
	mp1: local:201/subvol-201-disk-2.subvol,mp=/scratch,size=0T
	mp2: $H/bind201,mp=/mnt/bind
	rootfs: local:201/subvol-201-disk-0.subvol,size=0T
	unprivileged: 1

	[before-upgrade]
	rootfs: local:201/subvol-201-disk-9.subvol,size=0T
	EOF
	printf "rootfs: local:202/subvol-202-disk-0.subvol,size=0T\ntemplate: 1\n" >"$H/pve/lxc/202.conf"
	# CT 203: its rootfs on an LVM-thin storage: a block device
	printf "hostname: ct203\nrootfs: local-lvm:vm-203-disk-0,size=8G\n" >"$H/pve/lxc/203.conf"
	# VM 300: a raw disk, a CD-ROM, a disk with backup=0
	head -c 1M /dev/urandom >"$H/vz/images/300/vm-300-disk-0.raw"
	cat >"$H/pve/qemu-server/300.conf" <<-EOF
	boot: order=scsi0
	ide2: local:iso/debian.iso,media=cdrom,size=600M
	scsi0: local:300/vm-300-disk-0.raw,size=1M
	scsi1: local-lvm:vm-300-disk-1,backup=0,size=32G
	EOF
	rm -f "$D"/*
	cbackup_run 2 --all --config "$CONF"
	test_has "$CB_ERR" "INFO: skipping CT 202 - a template \\($H/pve/lxc/202.conf:2\\)"
	# an LVM-thin volume is /dev/VG/LV (t0291 backs up images); here it is not active
	test_has "$CB_ERR" "ERROR: Backup of VM 203 failed - $H/pve/lxc/203.conf:2: root ./dev/pve/vm-203-disk-0. does not exist \\(a logical volume not active\\? lvchange -ay it\\)"
	a=$(find_archive "$D" ct 201 .zst)
	tar -xOf "$a" ./etc/hostname | grep -qx ct201
	tar -xOf "$a" ./var/lib/db/rows | grep -qx "in mp0"
	tar -tf "$a" >list
	test_lacks list "^\\./scratch/.|^\\./mnt/bind/."
	v=$(find_archive "$D" vm 300 .zst)
	tar -tf "$v" >vlist
	test_has vlist "vm-300-disk-0.raw"
	test_lacks vlist "debian.iso|disk-1"
	test -n "$(find_archive "$D" ct "$NAME" .zst)"
	test -n "$(find_archive "$D" ct 100 .zst)"
	test_lacks "$CB_ERR" "Backup of VM 202"
'

test_expect_success ROOT 'cbackup guests: what, from where, in which mode, why not' '
	cbackup_run 2 guests --config "$CONF"
	cat "$CB_OUT"
	test_has "$CB_OUT" "^CT 100: backed up, mode suspend, running\$"
	test_has "$CB_OUT" "^  section \\[ct 100\\] $CONF:4\$"
	test_has "$CB_OUT" "^CT 201: backed up, mode suspend, stopped \\(freeze cgroup .lxc/201. does not exist\\)"
	test_has "$CB_OUT" "^  root .$H/vz/images/201/subvol-201-disk-0.subvol.\$"
	test_has "$CB_OUT" "^  mount point .$H/vz/images/201/subvol-201-disk-1.subvol,/var/lib/db.\$"
	test_has "$CB_OUT" "^  not backed up: $H/pve/lxc/201.conf:4: mp1 .local:201/subvol-201-disk-2.subvol.: backup=1 not set"
	test_has "$CB_OUT" "^  not backed up: $H/pve/lxc/201.conf:5: mp2 .$H/bind201.: a bind or device mount point"
	test_has "$CB_OUT" "^CT 202: skipped - a template"
	test_has "$CB_OUT" "^CT 203: ERROR: $H/pve/lxc/203.conf:2: root ./dev/pve/vm-203-disk-0. does not exist"
	test_has "$CB_OUT" "^VM 300: backed up, mode suspend, stopped \\(qmp socket .$H/run/300.qmp. does not exist\\)"
	test_has "$CB_OUT" "^  disk .$H/vz/images/300/vm-300-disk-0.raw.\$"
	test_has "$CB_OUT" "^  not backed up: $H/pve/qemu-server/300.conf:4: scsi1 .local-lvm:vm-300-disk-1.: backup=0"
	cbackup_run 0 --all --config "$CONF" --exclude 203 --dry-run
	test_has "$CB_ERR" "INFO: dry run: CT 201 found in .$H/pve/lxc/201.conf.\$"
	test_has "$CB_ERR" "INFO: dry run: mode stop: the guest is stopped, backed up as it is without a freeze \(suspend configured\)\$"
	test_has "$CB_ERR" "INFO: dry run: CT 201: $H/pve/lxc/201.conf:5: mp2"
	test_has "$CB_ERR" "INFO: skipping CT 202 - a template"
'

test_expect_success ROOT 'a Proxmox CT whose cgroup is missing: pct status decides; running is an ERROR with nothing archived' '
	# a stand-in for Proxmox'"'"'s pct (as t0291 has one for lxc-info)
	mkdir -p "$SCRATCH/bin"
	printf "#!/bin/sh\n[ \"\$1 \$2\" = \"status 201\" ] && echo \"status: \$(cat %s)\"\n" \
		"$SCRATCH/pct-says" >"$SCRATCH/bin/pct"
	chmod +x "$SCRATCH/bin/pct"
	echo running >"$SCRATCH/pct-says"
	rm -f "$D"/cbackup-ct-201-* "$D"/vzdump-lxc-201-*
	PATH=$SCRATCH/bin:$PATH cbackup_run 1 201 --config "$CONF"
	test_has "$CB_ERR" "^ERROR: Backup of VM 201 failed - freeze cgroup .* does not exist, but CT 201 runs: .pct status 201. says running"
	test -z "$(find "$D" -name "cbackup-ct-201-*.tar*" -o -name "vzdump-lxc-201-*.tar*")"
	PATH=$SCRATCH/bin:$PATH cbackup_run 2 guests --config "$CONF"   # 203 is in error too
	test_has "$CB_OUT" "^CT 201: ERROR: .* but CT 201 runs"
	echo stopped >"$SCRATCH/pct-says"
	PATH=$SCRATCH/bin:$PATH cbackup_run 0 201 --config "$CONF"
	test_has "$CB_ERR" "INFO: status = stopped \\(freeze cgroup"
	test -n "$(find_archive "$D" ct 201 .zst)"
'

test_expect_success 'a place that cannot be read is a warning, not silence' '
	ln -s loop "$SCRATCH/loop"
	CBACKUP_LXC_DIR=$SCRATCH/loop cbackup_run 2 guests --config "$CONF"
	test_has "$CB_ERR" "^WARN: guest discovery: cannot read .$SCRATCH/loop.: Too many levels of symbolic links\$"
'

test_expect_success ROOT 'a [ct ID] section overrides what was found; it mends an unresolvable volume' '
	make_small_tree "$SCRATCH/other203" other203
	printf "\n[ct %s]\nexclude-path = /srv/data\n\n[ct 203]\nroot = %s\n" "$NAME" \
		"$SCRATCH/other203" >>"$CONF"
	rm -f "$D"/*
	cbackup_run 0 --all --config "$CONF"
	a=$(find_archive "$D" ct "$NAME" .zst)
	tar -tf "$a" >list
	test_lacks list "^\\./srv/data/."
	test_has list "^\\./srv/shared/kept\$"
	tar -xOf "$(find_archive "$D" ct 203 .zst)" ./etc/hostname | grep -qx other203
	cbackup_run 0 guests --config "$CONF"
	test_has "$CB_OUT" "^  section \\[ct $NAME\\] $CONF:[0-9]+ overrides what was found\$"
	test_has "$CB_OUT" "^CT 203: backed up"
	test_has "$CB_OUT" "^  root .$SCRATCH/other203.\$"
'

test_expect_success ROOT 'more layouts: a zfspool dataset, a cgroup set by lxc.cgroup.dir, an LVM rootfs, a name that is no ID' '
	printf "zfspool: tank\n\tpool rpool/data\n\tmountpoint %s\n\tcontent rootdir\n" \
		"$H/zfs" >>"$H/pve/storage.cfg"
	make_small_tree "$H/zfs/subvol-204-disk-0" ct204
	printf "rootfs: tank:subvol-204-disk-0,size=8G\n" >"$H/pve/lxc/204.conf"
	make_small_tree "$H/lxc/cg$$/rootfs" cg
	printf "lxc.rootfs.path = %s\nlxc.cgroup.dir = machines/cg%s\nlxc.include = /usr/share/lxc/config/common.conf\n" \
		"$H/lxc/cg$$/rootfs" "$$" >"$H/lxc/cg$$/config"
	make_small_tree "$H/lxc/cgc$$/rootfs" cgc
	printf "lxc.cgroup.dir.container = inner/cgc\nlxc.rootfs.path = dir:%s\nlxc.cgroup.dir = outer/cgc\n" \
		"$H/lxc/cgc$$/rootfs" >"$H/lxc/cgc$$/config"
	mkdir -p "$H/lxc/lvm$$" "$H/lxc/.hidden"
	printf "lxc.rootfs.path = lvm:/dev/vg0/lvm%s\n" "$$" >"$H/lxc/lvm$$/config"
	printf "lxc.rootfs.path = dir:/x\n" >"$H/lxc/.hidden/config"
	mkdir -p "$H/lxc/bad name"
	printf "lxc.rootfs.path = dir:/x\n" >"$H/lxc/bad name/config"
	# Proxmox'"'"'s default container volume on a dir storage: a raw image
	# (here one without a file system: t0291 backs up real ones)
	mkdir -p "$H/vz/images/206"
	head -c 64K /dev/zero >"$H/vz/images/206/vm-206-disk-0.raw"
	printf "rootfs: local:206/vm-206-disk-0.raw,size=8G\n" >"$H/pve/lxc/206.conf"
	# pct writes a running container'"'"'s lxc config beside: the same guest
	mkdir -p "$H/lxc/204"
	printf "lxc.rootfs.path = /var/lib/lxc/204/rootfs\n" >"$H/lxc/204/config"
	# a configuration another user may write names what root archives: refused
	printf "rootfs: /etc\n" >"$H/pve/lxc/205.conf"
	chmod 666 "$H/pve/lxc/205.conf"
	cbackup_run 2 guests --config "$CONF"
	cat "$CB_OUT"
	test_has "$CB_OUT" "^CT 205: ERROR: guest configuration .$H/pve/lxc/205.conf. is not trusted: .*mode 0666"
	test_lacks "$CB_OUT" "^  root ./etc.\$"
	test_has "$CB_OUT" "^CT 204: backed up, mode suspend, stopped"
	test "$(grep -c "^CT 204:" "$CB_OUT")" = 1
	test_has "$CB_OUT" "^CT 206: backed up, mode suspend, stopped"
	test_has "$CB_OUT" "^    stopped: mounted read-only from .$H/vz/images/206/vm-206-disk-0.raw. for the copy"
	test_has "$CB_OUT" "^  root .$H/zfs/subvol-204-disk-0.\$"
	test_has "$CB_OUT" "^  freeze cgroup .machines/cg$$.\$"
	test_has "$CB_OUT" "^  freeze cgroup .inner/cgc.\$"
	test_has "$CB_OUT" "^  not backed up: $H/lxc/cg$$/config:3: lxc.include ./usr/share/lxc/config/common.conf. is not read"
	# lvm:DEVICE is reached as a Proxmox CT'"'"'s volume (t0291); an LV that is
	# not there (or not active) is an error naming the line and the fix
	test_has "$CB_OUT" "^CT lvm$$: ERROR: $H/lxc/lvm$$/config:1: root ./dev/vg0/lvm$$. does not exist \\(a logical volume not active\\? lvchange -ay it\\)"
	test_has "$CB_OUT" "^CT bad name: skipped - its name is no guest ID"
	test_lacks "$CB_OUT" "hidden"
	rm -f "$D"/*
	cbackup_run 2 --all --config "$CONF"
	test_has "$CB_ERR" "ERROR: Backup of VM lvm$$ failed - $H/lxc/lvm$$/config:1: "
	test_has "$CB_ERR" "ERROR: Backup of VM 205 failed - .*205.conf"
	test_has "$CB_ERR" "ERROR: Backup of VM 206 failed - stopped container.s volume 206: volume .$H/vz/images/206/vm-206-disk-0.raw. holds no ext2/3/4 or xfs file system"
	test -z "$(ls "$D" | grep "vzdump-lxc-205-.*\.tar")"
	test_has "$CB_ERR" "INFO: skipping CT bad name - its name is no guest ID"
	tar -xOf "$(find_archive "$D" ct 204 .zst)" ./etc/hostname | grep -qx ct204
	tar -xOf "$(find_archive "$D" ct "cg$$" .zst)" ./etc/hostname | grep -qx cg
	rm -rf "$H/lxc/lvm$$" "$H/lxc/.hidden" "$H/lxc/bad name" "$H/lxc/cg$$" "$H/lxc/cgc$$" \
		"$H/pve/lxc/204.conf" \
		"$H/pve/lxc/205.conf" "$H/pve/lxc/206.conf" "$H/lxc/204"
'

test_expect_success ROOT,QEMU 'a running Proxmox VM: found, its QMP socket in the run directory, backed up as (qemu)' '
	qemu_start vm300 "$H/run/300.qmp" "$H/vz/images/300/vm-300-disk-0.raw:raw"
	cbackup_run 0 guests --config "$CONF"
	test_has "$CB_OUT" "^VM 300: backed up, mode suspend, running\$"
	test_has "$CB_OUT" "^  qmp .$H/run/300.qmp.\$"
	rm -f "$D"/cbackup-vm-300-*
	cbackup_run 0 300 --config "$CONF"
	test_has "$CB_ERR" "INFO: Starting Backup of VM 300 \(qemu\)\$"
	test_has "$CB_ERR" "INFO: status = running"
	tar -xOf "$(find_archive "$D" vm 300 .zst)" ./vm-300-disk-0.raw | cmp - "$H/vz/images/300/vm-300-disk-0.raw"
	vm_status_is "$H/run/300.qmp" running
	qemu_stop "$H/run/300.qmp" "$QEMU_PID"
'

# lxc_runs: Debian's lxc can start a busybox container here
LXC_WHY=
if ! command -v lxc-create >/dev/null || ! command -v lxc-start >/dev/null; then
	LXC_WHY="no lxc-create/lxc-start (apt-get install lxc)"
elif ! command -v busybox >/dev/null; then
	LXC_WHY="no busybox for lxc's busybox template"
elif [ "$(id -u)" != 0 ]; then
	LXC_WHY="not root"
fi

RUN=${NAME}r
# lxc leaves an empty lxc.pivot cgroup in each hierarchy when a container
# stops: removed if this test made it
PIVOTS=$(for d in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
	[ -d "$d/lxc.pivot" ] || echo "$d/lxc.pivot"; done)
lxc_cleanup() {
	local p
	lxc-stop -P "$H/lxc" -n "$RUN" -k >/dev/null 2>&1
	for p in $PIVOTS; do [ -d "$p" ] && rmdir "$p" 2>/dev/null; done
	return 0
}
if [ -z "$LXC_WHY" ]; then
	printf "lxc.net.0.type = empty\nlxc.apparmor.profile = unconfined\n" >"$SCRATCH/lxc-default.conf"
	if ! lxc-create -P "$H/lxc" -n "$RUN" -f "$SCRATCH/lxc-default.conf" -t busybox \
		>"$SCRATCH/lxc-create.log" 2>&1; then
		LXC_WHY="lxc-create -t busybox failed: $(tail -1 "$SCRATCH/lxc-create.log")"
	elif ! lxc-start -P "$H/lxc" -n "$RUN" -l DEBUG -o "$SCRATCH/lxc-start.log" \
		>"$SCRATCH/lxc-start.out" 2>&1; then
		LXC_WHY="lxc-start failed: $(grep -m1 ERROR "$SCRATCH/lxc-start.log")"
	else
		# the test's status survives the container's cleanup (_lib_cleanup exits with $?)
		trap '_rc=$?; lxc_cleanup; (exit "$_rc"); _lib_cleanup' EXIT
	fi
fi

if [ -z "$LXC_WHY" ]; then
	test_expect_success ROOT,CGROUP2 'a running LXC busybox container: found, frozen for the final sync, thawed' '
		wait_for 10 lxc-info -P "$H/lxc" -n "$RUN" -s
		lxc-info -P "$H/lxc" -n "$RUN" -s | grep -q RUNNING
		echo "written in the guest" >"$H/lxc/$RUN/rootfs/root-note"
		cbackup_run 0 guests --config "$CONF"
		test_has "$CB_OUT" "^CT $RUN: backed up, mode suspend, running\$"
		cbackup_run 0 "$RUN" --config "$CONF"
		test_has "$CB_ERR" "INFO: status = running"
		test_has "$CB_ERR" "suspending guest"
		test_has "$CB_ERR" "resuming guest"
		tar -tf "$(find_archive "$D" ct "$RUN" .zst)" | grep -qx "./root-note"
		lxc-info -P "$H/lxc" -n "$RUN" -s | grep -q RUNNING
		test_lacks "$(cgroup2_mount)/lxc.payload.$RUN/cgroup.events" "^frozen 1"
	'
	test_expect_success ROOT,CGROUP2 'a mistyped freeze-cgroup for the running LXC container: lxc-info says RUNNING, ERROR, nothing archived' '
		rm -f "$D"/cbackup-ct-"$RUN"-*
		cbackup_run 1 "$RUN" --config "$CONF" --freeze-cgroup "lxc.payload.typo-$RUN"
		test_has "$CB_ERR" "^ERROR: Backup of VM $RUN failed - freeze cgroup .lxc\\.payload\\.typo-$RUN. does not exist, but CT $RUN runs: .lxc-info -n $RUN -s. says RUNNING"
		test -z "$(find "$D" -name "cbackup-ct-$RUN-*.tar*")"
	'
	test_expect_success ROOT,CGROUP2 'mode stop on the LXC container: lxc-stop -P DIR, one copy, lxc-start, running again' '
		rm -f "$D"/cbackup-ct-"$RUN"-*
		cbackup_run 0 "$RUN" --config "$CONF" --mode stop --stopwait 1
		test_has "$CB_ERR" "INFO: backup mode: stop"
		test_has "$CB_ERR" "INFO: stopping virtual guest"
		test_has "$CB_ERR" "INFO: restarting guest"
		test_lacks "$CB_ERR" "suspending guest"
		tar -tf "$(find_archive "$D" ct "$RUN" .zst)" | grep -qx "./root-note"
		wait_for 10 lxc-info -P "$H/lxc" -n "$RUN" -s
		lxc-info -P "$H/lxc" -n "$RUN" -s | grep -q RUNNING
	'
else
	test_skip 'a running LXC busybox container' "$LXC_WHY"
	test_skip 'a mistyped freeze-cgroup for the running LXC container' "$LXC_WHY"
	test_skip 'mode stop on the LXC container' "$LXC_WHY"
fi

test_expect_success ROOT,CGROUP2 'a running container where lxc puts its cgroup (a cgroup made by the test)' '
	base=$(make_cgroup v2)
	mkdir "$base/lxc.payload.$NAME"
	cleanup_cgroup "$base/lxc.payload.$NAME"
	start_guest "$base/lxc.payload.$NAME" sleep 600
	wait_for 5 grep -q . "$base/lxc.payload.$NAME/cgroup.procs"   # it moves itself there
	CBACKUP_CGROUP_DIR=$base cbackup_run 0 "$NAME" --config "$CONF"
	test_has "$CB_ERR" "INFO: status = running"
	test_has "$CB_ERR" "suspending guest \\(cgroup2\\)"
	test_has "$CB_ERR" "resuming guest"
	test_lacks "$base/lxc.payload.$NAME/cgroup.events" "^frozen 1"
'

test_done
