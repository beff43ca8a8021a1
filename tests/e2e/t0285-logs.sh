#!/bin/bash
# Logs an admin and monitoring read (issue 28, item 6): every .log line
# carries vzdump's timestamp ("2026-12-03 03:00:01 INFO: ..."); vzdump's
# wording ("Backup of VM 101 (lxc)", "Backup job finished successfully" /
# "with errors"); one summary line per guest and per job to syslog; the
# final sync in words (no rsync counters for a tracked pass); the rate line
# names bwlimit when it set the pace.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
D=$SCRATCH/dump

test_expect_success 'setup' '
	make_small_tree "$SRC" logs-ct
	mkdir -p "$SCRATCH/tmp" "$D"
'

test_expect_success 'a .log line is vzdump'"'"'s: a timestamp, then the level; stderr has none' '
	cbackup_run 0 backup --root "$SRC" --id 101 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--freeze-cmd true --thaw-cmd true
	a=$(find_archive "$D" ct 101 .zst)
	log=${a%.tar.zst}.log
	cat "$log"
	test "$(grep -Ec "^$TS(INFO|WARN|ERROR): " "$log")" = "$(wc -l <"$log")"
	test_has "$log" "^${TS}INFO: Starting Backup of VM 101 \\(lxc\\)\$"
	test_has "$log" "^${TS}INFO: Finished Backup of VM 101 \\([0-9]{2}:[0-9]{2}:[0-9]{2}\\)\$"
	test_lacks "$CB_ERR" "^[0-9]"
	test_has "$CB_ERR" "^INFO: Backup job finished successfully\$"
'

test_expect_success 'vzdump'"'"'s failure wording: Backup of VM N failed, job finished with errors' '
	cbackup_run 1 backup --root "$SRC" --id 102 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--freeze-cmd false --thaw-cmd true
	test_has "$CB_ERR" "^ERROR: Backup of VM 102 failed - "
	test_has "$CB_ERR" "^INFO: Backup job finished with errors\$"
'

test_expect_success 'the final sync in words, no rsync counters for it' '
	cbackup_run 0 backup --root "$SRC" --id 103 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--freeze-cmd true --thaw-cmd true
	sed -n "/starting final sync/,/final sync finished/p" "$CB_ERR" >final
	cat final
	test_has final "^INFO: final sync: (checked|compared all) [0-9]+ entr(y|ies) .*; copied [0-9]+ changed file\\(s\\) \\(.*\\), removed [0-9]+\$"
	test_lacks final "Number of files|Total file size"
	# the first sync keeps rsync'"'"'s counters, as vzdump'"'"'s log has them
	test_has "$CB_ERR" "^INFO: Number of files: [0-9]+"
'

test_expect_success 'bwlimit that set the pace is named in the rate line' '
	head -c 1M /dev/urandom >"$SRC/srv/data/noise.bin"
	cbackup_run 0 backup --root "$SRC" --id 104 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--freeze-cmd true --thaw-cmd true --bwlimit 2048 --compress 0
	test_has "$CB_ERR" "^INFO: stage rates: .* - limited by bwlimit \\(2048 KB/s\\)\$"
	rm "$SRC/srv/data/noise.bin"
'

# in_private_dev CMD...: run CMD in a private mount namespace whose /dev is a
# tmpfs with null, zero, urandom bound from the host's and a syslog socket
# /dev/log read into $SCRATCH/syslog.out (the host's /dev is not touched)
in_private_dev() {
	mkdir -p "$SCRATCH/realdev"
	rm -f "$SCRATCH/syslog.out" "$SCRATCH/syslog.out.ready"
	unshare -m --propagation private bash -c '
		set -e
		s=$1; shift
		mount --rbind /dev "$s/realdev"
		mount -t tmpfs -o size=1m tmpfs /dev
		for n in null zero urandom random; do
			touch "/dev/$n"
			mount --bind "$s/realdev/$n" "/dev/$n"
		done
		python3 -c "
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(\"/dev/log\")
open(sys.argv[1] + \".ready\", \"w\").close()
with open(sys.argv[1], \"ab\", buffering=0) as out:
    while True:
        out.write(s.recv(65536) + b\"\\n\")
" "$s/syslog.out" &
		rcv=$!
		for i in $(seq 250); do [ -e "$s/syslog.out.ready" ] && break; sleep 0.02; done
		rc=0
		"$@" || rc=$?
		sleep 0.2
		kill "$rcv"
		exit "$rc"
	' in_private_dev "$SCRATCH" "$@"
}

test_expect_success ROOT 'one syslog line per guest and per job (ident cbackup, facility daemon)' '
	command -v unshare
	rm -f "$SCRATCH/syslog.out"
	rc=0
	in_private_dev "$CBACKUP" backup --root "$SRC" --id 105 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$D" --freeze-cmd true --thaw-cmd true >out 2>err || rc=$?
	cat err
	test "$rc" = 0
	cat "$SCRATCH/syslog.out"
	# <30> = daemon.info, <27> = daemon.err
	test_has "$SCRATCH/syslog.out" "^[<]30[>].*cbackup\\[[0-9]+\\]: Finished Backup of VM 105 \\(lxc\\) \\([0-9:]{8}\\): $D/vzdump-lxc-105-"
	test_has "$SCRATCH/syslog.out" "^[<]30[>].*cbackup\\[[0-9]+\\]: Backup job finished successfully \\(0 of 1 guests failed\\)"
	test "$(wc -l <"$SCRATCH/syslog.out")" = 2
	rm -f "$SCRATCH/syslog.out"
	rc=0
	in_private_dev "$CBACKUP" backup --root "$SRC" --id 106 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$D" --freeze-cmd false --thaw-cmd true >out 2>err || rc=$?
	test "$rc" = 1
	cat "$SCRATCH/syslog.out"
	test_has "$SCRATCH/syslog.out" "^[<]27[>].*cbackup\\[[0-9]+\\]: Backup of VM 106 \\(lxc\\) failed - "
	test_has "$SCRATCH/syslog.out" "^[<]27[>].*cbackup\\[[0-9]+\\]: Backup job finished with errors \\(1 of 1 guests failed\\)"
'

test_expect_success ROOT 'a configuration error before the first guest: syslog too' '
	rm -f "$SCRATCH/syslog.out"
	rc=0
	: >empty.conf
	in_private_dev "$CBACKUP" 999 --config "$SCRATCH/empty.conf" >out 2>err || rc=$?
	test "$rc" = 2
	test_has "$SCRATCH/syslog.out" "^[<]27[>].*cbackup\\[[0-9]+\\]: Backup job failed - guest .999. is not defined"
'

test_expect_success ROOT 'globals that do not resolve (a bad value, an unknown key): stderr and syslog, exit 2' '
	printf "dumpdir: %s\ncompress: frob\n" "$D" >bad-value.conf
	rc=0
	in_private_dev "$CBACKUP" --all --config "$SCRATCH/bad-value.conf" >out 2>err || rc=$?
	cat err
	test "$rc" = 2
	test_has err "^ERROR: .*bad-value.conf:2: key .compress.: invalid value .frob."
	cat "$SCRATCH/syslog.out"
	test_has "$SCRATCH/syslog.out" "^[<]27[>].*cbackup\\[[0-9]+\\]: Backup job failed - .*bad-value.conf:2: key .compress.: invalid value .frob."
	printf "dumpdir = %s\ncompres = zstd\n" "$D" >typo.conf
	rc=0
	in_private_dev "$CBACKUP" --all --config "$SCRATCH/typo.conf" >out 2>err || rc=$?
	test "$rc" = 2
	test_has "$SCRATCH/syslog.out" "^[<]27[>].*cbackup\\[[0-9]+\\]: Backup job failed - .*typo.conf:2: unknown key .compres."
	test "$(wc -l <"$SCRATCH/syslog.out")" = 1
'

test_expect_success ROOT 'a bad value on the command line of a backup (cron'"'"'s): stderr and syslog, exit 2' '
	rc=0
	in_private_dev "$CBACKUP" --all --compress frob --dumpdir "$D" >out 2>err || rc=$?
	cat err
	test "$rc" = 2
	test_has err "^ERROR: .*frob"
	cat "$SCRATCH/syslog.out"
	test_has "$SCRATCH/syslog.out" "^[<]27[>].*cbackup\\[[0-9]+\\]: Backup job failed - .*frob"
	# not for the other commands: a mistyped ls is the admin'"'"'s at the terminal
	rc=0
	in_private_dev "$CBACKUP" ls --frobnicate x >out 2>err || rc=$?
	test "$rc" = 2
	test_lacks "$SCRATCH/syslog.out" "."
'

test_done
