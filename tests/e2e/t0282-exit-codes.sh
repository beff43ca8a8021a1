#!/bin/bash
# Exit codes monitoring can rely on (issue 28, item 2), one table in
# cbackup(8) that this test keeps: 0 ok, 1 a guest failed, 2 configuration
# or usage (a missing root, tmpdir, dumpdir, a section without root, a
# cgroup without a freezer: each naming FILE:LINE or the option), 3 the
# lock, 128+N on a signal (130 SIGINT, 143 SIGTERM), 141 quietly when the
# reader of standard output went away (`| head`), as tar.
# Configuration errors before the first guest still alert (item 5): JSON
# output, the json-status file and the mail.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
D=$SCRATCH/dump
CONF=$SCRATCH/c.conf
MAIL=$SCRATCH/mail
export PATH="$SCRATCH/bin:$PATH"

test_expect_success 'setup: a guest, a config with a broken guest, a sendmail stand-in' '
	make_small_tree "$SRC" exit-ct
	mkdir -p "$SCRATCH/tmp" "$D" "$SCRATCH/status" "$MAIL" "$SCRATCH/bin"
	printf "#!/bin/sh\ncat >\"%s/msg.\$\$\"\n" "$MAIL" >"$SCRATCH/bin/sendmail"
	chmod +x "$SCRATCH/bin/sendmail"
	cat >"$CONF" <<-CONF
	tmpdir = $SCRATCH/tmp
	dumpdir = $D
	mailto = root@example.com
	sendmail = sendmail
	mailnotification = failure
	json-status = $SCRATCH/status

	[ct 101]
	root = $SRC
	freeze-cmd = true
	thaw-cmd = true

	[ct 102]
	root = $SCRATCH/ct102-gone

	[ct 103]
	mode = stop
	CONF
'

test_expect_success 'the table in cbackup(8) lists every status of include/cb_exit.h' '
	sed -n "/^\\.SH EXIT STATUS/,/^\\.SH /p" "$TOP/man/cbackup.8" >table
	for st in 0 1 2 3 130 143 141; do
		grep -Ex "\\.B $st" table
	done
	for v in $(sed -nE "s/.*CB_EXIT_[A-Z]+ = ([0-9]+),.*/\\1/p" "$TOP/include/cb_exit.h"); do
		grep -Eq "\\.B $v\$|$v \\+|128 \\+" table
	done
'

test_expect_success 'a root that does not exist: exit 2 naming FILE:LINE, the others backed up' '
	cbackup_run 2 101 102 --config "$CONF"
	test_has "$CB_ERR" "^ERROR: Backup of VM 102 failed - $CONF:14: key .root.: root .*ct102-gone. does not exist"
	find_archive "$D" ct 101 .zst
'

test_expect_success 'a section without root: exit 2 naming its line' '
	cbackup_run 2 103 --config "$CONF"
	test_has "$CB_ERR" "^ERROR: Backup of VM 103 failed - $CONF:16: \\[ct 103\\]: CT 103 has no root directory \\(set root = DIR\\)"
'

test_expect_success 'missing tmpdir and dumpdir: exit 2 naming the option or FILE:LINE' '
	cbackup_run 2 backup --root "$SRC" --id 104 --tmpdir "$SCRATCH/no-tmp" --dumpdir "$D"
	test_has "$CB_ERR" "option --tmpdir: tmpdir .*no-tmp. does not exist"
	printf "dumpdir = %s\n" "$SCRATCH/no-dump" >nodump.conf
	cbackup_run 2 backup --root "$SRC" --id 104 --tmpdir "$SCRATCH/tmp" --config nodump.conf
	test_has "$CB_ERR" "nodump.conf:1: key .dumpdir.: dumpdir .*no-dump. does not exist"
	cbackup_run 2 list --config nodump.conf
	test_has "$CB_ERR" "nodump.conf:1: key .dumpdir."
	cbackup_run 2 prune --config nodump.conf
'

test_expect_success ROOT,CGROUP2 'a freeze cgroup without a freezer (not a cgroup): exit 2' '
	mkdir "$SCRATCH/not-a-cgroup"
	cbackup_run 2 backup --root "$SRC" --id 105 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--freeze-cgroup "$SCRATCH/not-a-cgroup"
	test_has "$CB_ERR" "option --freeze-cgroup: freeze cgroup .* not found"
'

test_expect_success '--stdout to a terminal: usage error (exit 2), no failure mail' '
	rm -f "$MAIL"/msg.*
	script -qec "$CBACKUP 101 --config $CONF --stdout; echo rc=\$?" /dev/null >tty.out 2>&1
	cat tty.out
	test_has tty.out "rc=2"
	test_has tty.out "refusing to write an archive to a terminal"
	test_lacks tty.out "Starting Backup"
'

test_expect_success 'a configuration error before the first guest still alerts: JSON, json-status, mail' '
	rm -f "$MAIL"/msg.* "$SCRATCH/status"/*
	cbackup_run 2 999 --config "$CONF" --output-format json
	test_has "$CB_ERR" "^ERROR: guest .999. is not defined"
	test_has "$CB_OUT" "\"exit_status\": 2"
	test_has "$CB_OUT" "\"error\": \"guest .999. is not defined"
	test_has "$SCRATCH"/status/cbackup-job-*.json "\"exit_status\": 2"
	test_has "$MAIL"/msg.* "Backup job failed - guest .999. is not defined"
'

test_expect_success 'a storage the command line names and nothing defines (a crontab typo): the file'"'"'s mailto and json-status still alert' '
	rm -f "$MAIL"/msg.* "$SCRATCH/status"/*
	cbackup_run 2 101 --config "$CONF" --storage nas1 --output-format json
	test_has "$CB_ERR" "^ERROR: option --storage: storage .nas1. is not defined"
	test_has "$CB_OUT" "\"exit_status\": 2"
	test_has "$CB_OUT" "\"error\": \"option --storage: storage .nas1. is not defined"
	test_has "$SCRATCH"/status/cbackup-job-*.json "\"exit_status\": 2"
	test_has "$MAIL"/msg.* "Backup job failed - option --storage: storage .nas1. is not defined"
'

# signal_run SIG: a backup held in its backup-start hook gets SIG
signal_run() {
	printf "#!/bin/sh\n[ \"\$1\" = backup-start ] && { touch \"%s/in-hook\"; sleep 30; }\nexit 0\n" \
		"$SCRATCH" >"$SCRATCH/hold-hook"
	chmod +x "$SCRATCH/hold-hook"
	rm -f "$SCRATCH/in-hook"
	"$CBACKUP" 101 --config "$CONF" --script "$SCRATCH/hold-hook" >/dev/null 2>"$SCRATCH/sig.err" &
	pid=$!
	wait_for 20 test -e "$SCRATCH/in-hook"
	kill "-$1" "$pid"
	rc=0
	wait "$pid" || rc=$?
	echo "$rc"
}

test_expect_success 'SIGINT: exit 130; SIGTERM: exit 143' '
	test "$(signal_run INT)" = 130
	test_has "$SCRATCH/sig.err" "signal INT"
	test "$(signal_run TERM)" = 143
	test_has "$SCRATCH/sig.err" "signal TERM"
'

test_expect_success 'cbackup ls ARCHIVE | head: quiet, status 141 (as tar killed by SIGPIPE)' '
	mkdir -p "$SCRATCH/many"
	make_many_files "$SCRATCH/many" 6000
	cbackup_run 0 backup --root "$SCRATCH/many" --id 110 --tmpdir "$SCRATCH/tmp" --dumpdir "$D"
	a=$(find_archive "$D" ct 110 .zst)
	for i in 1 2 3; do
		set +e
		"$CBACKUP" ls "$a" 2>ls.err | head -n 1 >/dev/null
		st=("${PIPESTATUS[@]}")
		set -e
		test "${st[0]}" = 141
		test_lacks ls.err "ERROR|Broken pipe"
	done
'

test_expect_success 'backup --stdout | head -c: quiet, status 141, no ERROR' '
	head -c 4M /dev/urandom >"$SRC/srv/data/noise.bin"
	set +e
	"$CBACKUP" backup --root "$SRC" --id 111 --tmpdir "$SCRATCH/tmp" --stdout --compress 0 \
		2>stdout.err | head -c 1000 >/dev/null
	st=("${PIPESTATUS[@]}")
	set -e
	cat stdout.err
	test "${st[0]}" = 141
	test_lacks stdout.err "^ERROR|Broken pipe"
	test_has stdout.err "standard output closed by its reader"
'

test_done
