#!/bin/bash
# An existing /etc/vzdump.conf works unchanged (issue 19): the file as
# Proxmox ships it (every setting commented out, its placeholders as
# documented), then with the settings of the vzdump documentation's
# example and an admin's usual ones uncommented, loads with exactly the
# documented warnings (one per key cbackup ignores, saying why; maxfiles'
# deprecation) and backs up: its mailto gets the report, its
# notes-template the notes, its prune-backups prunes.
. "$(dirname "$0")/lib.sh"

D=$SCRATCH/dump
MAIL=$SCRATCH/mail
export PATH="$SCRATCH/bin:$PATH"

test_expect_success 'setup: a guest, a sendmail stand-in, the shipped vzdump.conf' '
	make_small_tree "$SCRATCH/ct101" web-101
	mkdir "$SCRATCH/tmp" "$D" "$MAIL" "$SCRATCH/bin"
	printf "#!/bin/sh\nprintf \"%%s\\\\n\" \"\$@\" >\"%s/argv\"\ncat >\"%s/msg\"\n" "$MAIL" "$MAIL" >"$SCRATCH/bin/sendmail"
	chmod +x "$SCRATCH/bin/sendmail"
	# /etc/vzdump.conf as pve-manager installs it
	cat >shipped.conf <<-"EOF"
	# vzdump default settings

	#tmpdir: DIR
	#dumpdir: DIR
	#storage: STORAGE_ID
	#mode: snapshot|suspend|stop
	#bwlimit: KBPS
	#performance: [max-workers=N][,pbs-entries-max=N]
	#ionice: PRI
	#lockwait: MINUTES
	#stopwait: MINUTES
	#stdexcludes: BOOLEAN
	#mailto: ADDRESSLIST
	#prune-backups: keep-INTERVAL=N[,...]
	#script: FILENAME
	#exclude-path: PATHLIST
	#pigz: N
	#notes-template: {{guestname}}
	#pbs-change-detection-mode: legacy|data|metadata
	#fleecing: enabled=BOOLEAN,storage=STORAGE_ID
	EOF
'

test_expect_success 'the shipped file loads without a single warning' '
	cbackup_run 0 backup --root "$SCRATCH/ct101" --id 101 --config shipped.conf \
		--tmpdir "$SCRATCH/tmp" --dumpdir "$D" --freeze-cmd true --thaw-cmd true --dry-run
	test_lacks "$CB_ERR" "^(WARN|ERROR):"
'

test_expect_success 'uncommented as an admin would: only the documented warnings, and it works' '
	# the documentation example (tmpdir, storage, mode, bwlimit), then the
	# usual settings; "storage: local" names a Proxmox storage: --dumpdir
	# stands for it
	sed -e "s|^#tmpdir: DIR|tmpdir: $SCRATCH/tmp|" \
	    -e "s|^#storage: .*|storage: local|" \
	    -e "s|^#mode: .*|mode: snapshot|" \
	    -e "s|^#bwlimit: .*|bwlimit: 100000|" \
	    -e "s|^#performance: .*|performance: max-workers=8|" \
	    -e "s|^#ionice: .*|ionice: 7|" \
	    -e "s|^#lockwait: .*|lockwait: 180|" \
	    -e "s|^#stopwait: .*|stopwait: 10|" \
	    -e "s|^#stdexcludes: .*|stdexcludes: 1|" \
	    -e "s|^#mailto: .*|mailto: root@example.com|" \
	    -e "s|^#prune-backups: .*|prune-backups: keep-last=1,keep-weekly=2|" \
	    -e "s|^#exclude-path: .*|exclude-path: /var/log/?*|" \
	    -e "s|^#pigz: .*|pigz: 2|" \
	    -e "s|^#notes-template: |notes-template: |" \
	    -e "s|^#pbs-change-detection-mode: .*|pbs-change-detection-mode: metadata|" \
	    -e "s|^#fleecing: .*|fleecing: enabled=1,storage=local-lvm|" \
	    shipped.conf >vzdump.conf
	cat >>vzdump.conf <<-EOF
	mailnotification: always
	protected: 0
	remove: 1
	compress: zstd
	zstd: 0
	quiet: 0
	notification-mode: legacy-sendmail
	pool: production
	node: pve1
	EOF
	cat -n vzdump.conf
	cbackup_run 0 backup --root "$SCRATCH/ct101" --id 101 --config vzdump.conf \
		--dumpdir "$D" --freeze-cmd true --thaw-cmd true --sendmail sendmail
	grep -E "^(WARN|ERROR):" "$CB_ERR" >warnings
	cat >expected <<-EOF
	WARN: vzdump.conf:8: key '"'"'performance'"'"' is a vzdump option cbackup ignores (cbackup sizes its own copy and compression workers)
	WARN: vzdump.conf:19: key '"'"'pbs-change-detection-mode'"'"' is a vzdump option cbackup ignores (no Proxmox Backup Server target)
	WARN: vzdump.conf:20: key '"'"'fleecing'"'"' is a vzdump option cbackup ignores (cbackup copies to a staging directory instead of fleecing images)
	WARN: vzdump.conf:27: key '"'"'notification-mode'"'"' is a vzdump option cbackup ignores (cbackup mails through sendmail only: set mailto)
	WARN: vzdump.conf:28: key '"'"'pool'"'"' is a vzdump option cbackup ignores (no Proxmox resource pools: give guest IDs or --all)
	WARN: vzdump.conf:29: key '"'"'node'"'"' is a vzdump option cbackup ignores (cbackup backs up guests of this host only)
	EOF
	test_cmp expected warnings
	test_has "$CB_ERR" "^INFO: trying .suspend. mode instead\$"
	a=$(find_archive "$D" ct 101 .zst)
	test "$(cat "$a.notes")" = web-101
	test_has "$MAIL/msg" "^To: root@example.com\$"
	test_has "$MAIL/msg" "^Subject: cbackup backup status \\(.*\\): backup successful\$"
'

test_expect_success 'its prune-backups prunes after the next backup' '
	sleep 1.1
	cbackup_run 0 backup --root "$SCRATCH/ct101" --id 101 --config vzdump.conf \
		--dumpdir "$D" --freeze-cmd true --thaw-cmd true --sendmail sendmail
	test_has "$CB_ERR" "^INFO: prune older backups with retention: keep-last=1, keep-weekly=2\$"
	test "$(ls "$D"/vzdump-lxc-101-*.tar.zst | wc -l)" = 1
'

test_expect_success 'an old vzdump.conf with maxfiles: the deprecation warning, keep-last' '
	sed "s/^prune-backups: .*/maxfiles: 2/" vzdump.conf >old.conf
	cbackup_run 0 backup --root "$SCRATCH/ct101" --id 101 --config old.conf \
		--dumpdir "$D" --freeze-cmd true --thaw-cmd true --sendmail sendmail --dry-run
	test_has "$CB_ERR" "^WARN: old.conf:14: key .maxfiles. is deprecated: it means prune-backups = keep-last=2; write that instead\$"
'

# issue 28: "storage: local" resolved through the host's storage.cfg (here
# a Proxmox tree under $SCRATCH/pve: CBACKUP_PVE_DIR), explained when it
# cannot be; exclude-path split on blanks as vzdump does
test_expect_success 'storage: local on a Proxmox host: its dump directory from storage.cfg' '
	mkdir -p "$SCRATCH/pve" "$SCRATCH/vz/dump"
	# indented with tabs, as Proxmox writes it
	printf "dir: local\n\tpath %s\n\tcontent iso,vztmpl,backup\n\npbs: pbs1\n\tdatastore store1\n\tserver 192.0.2.1\n\tcontent backup\n" \
		"$SCRATCH/vz" >"$SCRATCH/pve/storage.cfg"
	printf "tmpdir: %s\nstorage: local\n" "$SCRATCH/tmp" >pve.conf
	CBACKUP_PVE_DIR=$SCRATCH/pve cbackup_run 0 backup --root "$SCRATCH/ct101" --id 101 \
		--config pve.conf --freeze-cmd true --thaw-cmd true
	find_archive "$SCRATCH/vz/dump" ct 101 .zst
'

test_expect_success 'storage: a PBS storage: exit 2, FILE:LINE, what to set instead' '
	printf "tmpdir: %s\nstorage: pbs1\n" "$SCRATCH/tmp" >pbs.conf
	CBACKUP_PVE_DIR=$SCRATCH/pve cbackup_run 2 backup --root "$SCRATCH/ct101" --id 101 \
		--config pbs.conf --freeze-cmd true --thaw-cmd true
	test_has "$CB_ERR" "^ERROR: pbs.conf:2: key .storage.: storage .pbs1. \\(.*storage.cfg:5\\) is a Proxmox Backup Server: .*set dumpdir = DIR"
'

test_expect_success 'storage: local on a host without storage.cfg: exit 2, FILE:LINE and the fix' '
	CBACKUP_PVE_DIR=$SCRATCH/no-pve cbackup_run 2 backup --root "$SCRATCH/ct101" --id 101 \
		--config pve.conf --freeze-cmd true --thaw-cmd true
	test_has "$CB_ERR" "^ERROR: pve.conf:2: key .storage.: storage .local. is not defined: no \\[storage local\\] section, and this host has no .*no-pve/storage.cfg. \\(not Proxmox VE\\); set dumpdir = DIR, or --dumpdir"
'

test_expect_success 'exclude-path: two patterns on one line are two patterns (vzdump splits on blanks)' '
	mkdir -p "$SCRATCH/ct101/var/cache/apt/archives" "$SCRATCH/ct101/tmp"
	echo deb >"$SCRATCH/ct101/var/cache/apt/archives/big.deb"
	echo t >"$SCRATCH/ct101/tmp/scratch"
	mkdir "$SCRATCH/dx"
	printf "tmpdir: %s\nstdexcludes: 0\nexclude-path: /tmp/?* /var/cache/apt/archives/?*\n" \
		"$SCRATCH/tmp" >ex.conf
	cbackup_run 0 backup --root "$SCRATCH/ct101" --id 101 --config ex.conf \
		--dumpdir "$SCRATCH/dx" --freeze-cmd true --thaw-cmd true
	tar -tf "$(find_archive "$SCRATCH/dx" ct 101 .zst)" >list
	test_has list "^\\./var/cache/apt/archives/\$"
	test_lacks list "big\\.deb|tmp/scratch"
'

test_done
