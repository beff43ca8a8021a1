#!/bin/bash
# Excludes (vzdump's rule: a leading '/' anchors at the guest root, other
# globs match at any depth; stdexcludes) apply to staging and archive alike;
# the progress line shows on a terminal only and never in the log file;
# the backup's ends at 100%, and restore and verify have theirs.
. "$(dirname "$0")/lib.sh"

D=$SCRATCH/dump
T=$SCRATCH/tmp
R=$SCRATCH/ct

list_archive() { zstd -dc "$(find_archive "$D" ct 101 .zst)" | tar -tf - | LC_ALL=C sort; }

test_expect_success 'setup' '
	mkdir -p "$D" "$T" "$R/tmp/sub" "$R/var/tmp" "$R/var/run" "$R/srv/tmp" "$R/srv/cache" "$R/etc"
	echo keep >"$R/etc/keep.conf"
	echo x >"$R/tmp/junk"; echo x >"$R/tmp/sub/deep"
	echo x >"$R/var/tmp/junk"; echo 42 >"$R/var/run/app.pid"; echo x >"$R/var/run/app.sock.txt"
	echo x >"$R/srv/tmp/not-anchored"; echo x >"$R/srv/cache/a.log"; echo x >"$R/etc/b.log"
	echo x >"$R/srv/cache/keep.dat"
'

test_expect_success 'stdexcludes: /tmp/?*, /var/tmp/?*, /var/run/?*.pid are left out, their dirs kept' '
	rm -rf "$D"/*
	"$CBACKUP" backup --root "$R" --id 101 --tmpdir "$T" --dumpdir "$D" --quiet
	list_archive >got
	test_has got "^\./tmp/\$"
	test_has got "^\./var/tmp/\$"
	test_has got "^\./var/run/\$"
	test_lacks got "^\./tmp/junk\$"
	test_lacks got "^\./tmp/sub"
	test_lacks got "^\./var/tmp/junk\$"
	test_lacks got "^\./var/run/app\.pid\$"
	grep -qx "./var/run/app.sock.txt" got
	grep -qx "./srv/tmp/not-anchored" got      # /tmp/?* is anchored at the root
	grep -qx "./etc/keep.conf" got
'

test_expect_success 'stdexcludes 0 keeps them' '
	rm -rf "$D"/*
	"$CBACKUP" backup --root "$R" --id 101 --tmpdir "$T" --dumpdir "$D" --quiet --stdexcludes 0
	list_archive >got
	grep -qx "./tmp/junk" got
	grep -qx "./tmp/sub/deep" got
	grep -qx "./var/tmp/junk" got
	grep -qx "./var/run/app.pid" got
'

test_expect_success 'exclude-path: unanchored globs match at any depth, anchored ones at the root' '
	rm -rf "$D"/*
	"$CBACKUP" backup --root "$R" --id 101 --tmpdir "$T" --dumpdir "$D" --quiet --stdexcludes 0 \
		--exclude-path "*.log" --exclude-path "/srv/cache/" --exclude-path "/var/run/?*.pid"
	list_archive >got
	test_lacks got "\.log\$"                  # ./etc/b.log and ./srv/cache/a.log
	test_lacks got "^\./srv/cache"             # the directory itself is excluded
	test_lacks got "app\.pid"
	grep -qx "./var/run/app.sock.txt" got
	grep -qx "./tmp/junk" got
	grep -qx "./etc/keep.conf" got
'

test_expect_success 'exclude-path lines from the config file apply too' '
	rm -rf "$D"/*
	cat >"$SCRATCH/c.conf" <<-CONF
	tmpdir = $T
	dumpdir = $D
	exclude-path = /etc/b.log
	[ct 101]
	root = $R
	exclude-path = srv/cache/keep.dat
	CONF
	"$CBACKUP" 101 --config "$SCRATCH/c.conf" --quiet
	list_archive >got
	test_lacks got "^\./etc/b\.log\$"
	test_lacks got "keep\.dat"
	grep -qx "./srv/cache/a.log" got
'

test_expect_success 'progress: shown on a terminal, never in the log file' '
	command -v script >/dev/null || { echo "script(1) missing"; false; }
	head -c 64M /dev/urandom >"$R/srv/big.bin"
	rm -rf "$D"/*
	# a guest of its own: the earlier cases kept 101'"'"'s staging copy
	# (keep-staging auto), and a first sync with nothing to copy draws no frame
	script -qec "$CBACKUP backup --root $R --id 106 --tmpdir $T --dumpdir $D --compress lzo --bwlimit 65536" \
		"$SCRATCH/tty.out" >/dev/null
	tr "\r" "\n" <"$SCRATCH/tty.out" | grep -a -q "^.*first sync: *[0-9]*% "
	tr "\r" "\n" <"$SCRATCH/tty.out" | grep -a -q "^.*archive: *[0-9]*% "
	log=$(ls "$D"/*.log)
	test_lacks "$log" "first sync: *[0-9]*%|archive: *[0-9]*%"
	test_lacks "$log" "$(printf "\r")"
'

test_expect_success 'progress: never when stderr is not a terminal' '
	rm -rf "$D"/*
	"$CBACKUP" backup --root "$R" --id 101 --tmpdir "$T" --dumpdir "$D" --compress lzo \
		--bwlimit 65536 2>err
	test_lacks err "first sync: *[0-9]*%|archive: *[0-9]*%"
	test_lacks err "$(printf "\r")"
'

# frames WHAT FILE: each progress frame of WHAT in a terminal transcript, one a line
frames() { tr "\r" "\n" <"$2" | grep -a -o "$1: *[0-9]*% .*" || true; }

test_expect_success 'progress: the backup reaches 100% (its total counts what the archive pass does)' '
	rm -rf "$D"/* "$SCRATCH/small"
	mkdir -p "$SCRATCH/small/d1" "$SCRATCH/small/d2"
	for i in $(seq 1 300); do echo "file $i" >"$SCRATCH/small/d$((i % 2 + 1))/f$i"; done
	head -c 2M /dev/urandom >"$SCRATCH/small/big.bin"
	script -qec "$CBACKUP backup --root $SCRATCH/small --id 102 --tmpdir $T --dumpdir $D" \
		"$SCRATCH/tty2.out" >/dev/null
	frames archive "$SCRATCH/tty2.out" >archive.frames
	frames "first sync" "$SCRATCH/tty2.out" >sync.frames
	cat archive.frames sync.frames
	test -s archive.frames
	tail -n 1 archive.frames | grep -q "^archive: 100% "
	tail -n 1 sync.frames | grep -q "^first sync: 100% "
'

test_expect_success 'progress: restore and verify show theirs on a terminal (percent, rate, ETA), ending at 100%' '
	a=$(find_archive "$D" ct 102 .zst)
	script -qec "$CBACKUP restore $a $SCRATCH/restored" "$SCRATCH/tty3.out" >/dev/null
	diff -r "$SCRATCH/small" "$SCRATCH/restored"
	frames restore "$SCRATCH/tty3.out" >restore.frames
	cat restore.frames
	test_has restore.frames "^restore: +[0-9]+% [0-9.]+[KMG]?i?B of [0-9.]+[KMG]?i?B, [0-9.]+[KMG]?i?B/s, ETA [0-9:-]+"
	tail -n 1 restore.frames | grep -q "^restore: 100% "
	script -qec "$CBACKUP restore $a $SCRATCH/restored2 --path ./d1" "$SCRATCH/tty4.out" >/dev/null
	frames restore "$SCRATCH/tty4.out" | tail -n 1 | grep -q "^restore: 100% "
	script -qec "$CBACKUP verify $a" "$SCRATCH/tty5.out" >/dev/null
	frames verify "$SCRATCH/tty5.out" >verify.frames
	cat verify.frames
	test_has verify.frames "^verify: +[0-9]+% .* of .*/s, ETA "
	tail -n 1 verify.frames | grep -q "^verify: 100% "
	"$CBACKUP" verify "$a" 2>err
	test_lacks err "verify: *[0-9]*%"
'

test_done
