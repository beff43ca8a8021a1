#!/bin/bash
# Mail report (issue 19), as vzdump's: one message piped to `sendmail -t`
# (here a stand-in on PATH that saves its arguments and stdin; sendmail's
# command line is the interface) at the end of a job: subject "cbackup
# backup status (HOST): backup successful|failed", a table of the guests
# with totals, each guest's log (over 1 MiB: a note instead). Sent also
# when the job cannot start (lock timeout, failing job hook); nothing with
# mailnotification failure after a good job; a failing sendmail is a WARN
# and never fails the backup.
. "$(dirname "$0")/lib.sh"

D=$SCRATCH/dump
MAIL=$SCRATCH/mail
CONF=$SCRATCH/c.conf
export PATH="$SCRATCH/bin:$PATH"

test_expect_success 'setup: two guests, a sendmail stand-in on PATH' '
	make_small_tree "$SCRATCH/ct101" web-101
	make_small_tree "$SCRATCH/ct102" db-102
	mkdir "$SCRATCH/tmp" "$D" "$MAIL" "$SCRATCH/bin"
	cat >"$CONF" <<-CONF
	tmpdir = $SCRATCH/tmp
	dumpdir = $D
	mailto = root@example.com, backup-admin@example.org
	; a name without "/": searched in PATH, where the stand-in is
	sendmail = sendmail
	[ct 101]
	root = $SCRATCH/ct101
	[ct 102]
	root = $SCRATCH/ct102
	CONF
	# message N: $MAIL/N.argv (one argument a line) and $MAIL/N.msg;
	# exits with $SENDMAIL_EXIT (default 0)
	cat >"$SCRATCH/bin/sendmail" <<-"SH"
	#!/bin/sh
	n=$(ls "$MAIL_DIR" | grep -c "\.msg$")
	n=$((n + 1))
	printf "%s\n" "$@" >"$MAIL_DIR/$n.argv"
	cat >"$MAIL_DIR/$n.msg"
	if [ "${SENDMAIL_EXIT:-0}" != 0 ]; then
		echo "sendmail: cannot connect to mail relay" >&2
		exit "$SENDMAIL_EXIT"
	fi
	exit 0
	SH
	chmod +x "$SCRATCH/bin/sendmail"
'

export MAIL_DIR=$MAIL
mails() { ls "$MAIL" | grep -c "\.msg$" || true; }
reset_mail() { rm -f "$MAIL"/*; }

test_expect_success 'a successful job with mailnotification failure sends nothing' '
	reset_mail
	cbackup_run 0 101 --config "$CONF" --mailnotification failure
	test "$(mails)" = 0
	test_lacks "$CB_ERR" "mail report"
'

test_expect_success 'a successful job (mailnotification always, the default) sends one message' '
	reset_mail
	cbackup_run 0 101 --config "$CONF"
	test "$(mails)" = 1
	test_cmp - "$MAIL/1.argv" <<-EOF
	-t
	-i
	EOF
	host=$(hostname | cut -d. -f1)
	test_has "$MAIL/1.msg" "^Subject: cbackup backup status \\($host\\): backup successful\$"
	test_has "$MAIL/1.msg" "^To: root@example.com, backup-admin@example.org\$"
	test_has "$MAIL/1.msg" "^101 +web-101 +ok +[0-9:]{8} +[0-9.]+[KMGT]B +$D/vzdump-lxc-101-.*\\.tar\\.zst\$"
	test_has "$MAIL/1.msg" "^TOTAL +1 guest\\(s\\), 0 not ok"
	test_has "$MAIL/1.msg" "^101: ${TS}INFO: Finished Backup of VM 101"
	test_has "$CB_ERR" "^INFO: mail report sent to root@example.com, backup-admin@example.org\$"
'

test_expect_success 'one failing guest: one message, subject failed, both rows and both logs' '
	reset_mail
	# 102 fails on its configuration (its root is gone: exit 2), 101 is fine
	mv "$SCRATCH/ct102" "$SCRATCH/ct102.away"
	cbackup_run 2 101 102 --config "$CONF" --mailnotification failure
	mv "$SCRATCH/ct102.away" "$SCRATCH/ct102"
	test "$(mails)" = 1
	m=$MAIL/1.msg
	test_has "$m" "^Subject: cbackup backup status \\(.*\\): backup failed\$"
	test_has "$m" "^101 +web-101 +ok +[0-9:]{8} +[0-9.]+[KMGT]B +$D/vzdump-lxc-101-"
	test_has "$m" "^102 +CT102 +failed +[0-9:]{8} +- +.*:[0-9]+: key .root.: root .*ct102. does not exist"
	test_has "$m" "^TOTAL +2 guest\\(s\\), 1 not ok"
	test_has "$m" "^101: ${TS}INFO: Starting Backup of VM 101 \\(lxc\\)\$"
	test_has "$m" "^101: ${TS}INFO: Finished Backup of VM 101"
	test_has "$m" "^102: ${TS}INFO: Starting Backup of VM 102 \\(lxc\\)\$"
	test_has "$m" "^102: ${TS}ERROR: Backup of VM 102 failed - .*root .*does not exist"
'

test_expect_success 'the lock is not obtained (exit 3): a message says so' '
	reset_mail
	hold_lock "$CBACKUP_LOCK_DIR/cbackup.lock"
	cbackup_run 3 101 --config "$CONF" --lockwait 0.01 --mailnotification failure
	release_lock "$HOLD_PID" "$CBACKUP_LOCK_DIR/cbackup.lock"
	test "$(mails)" = 1
	test_has "$MAIL/1.msg" "^Subject: cbackup backup status \\(.*\\): backup failed\$"
	test_has "$MAIL/1.msg" "^Backup job failed - can.t acquire lock .* - got timeout\$"
	test_has "$MAIL/1.msg" "^101 +- +skipped "
'

test_expect_success 'a failing job hook (job-start): a message says so' '
	reset_mail
	printf "#!/bin/sh\n[ \"\$1\" = job-start ] && exit 5\nexit 0\n" >"$SCRATCH/hook"
	chmod +x "$SCRATCH/hook"
	cbackup_run 1 101 --config "$CONF" --script "$SCRATCH/hook" --mailnotification failure
	test "$(mails)" = 1
	test_has "$MAIL/1.msg" "^Subject: .*: backup failed\$"
	test_has "$MAIL/1.msg" "^Backup job failed - .*job-start"
'

test_expect_success 'a failing sendmail is a WARN, the backup still exits 0' '
	reset_mail
	SENDMAIL_EXIT=75 cbackup_run 0 101 --config "$CONF"
	test "$(mails)" = 1
	test_has "$CB_ERR" "^WARN: cannot send the mail report: mail program .sendmail. exited with status 75: sendmail: cannot connect to mail relay\$"
	test_has "$CB_ERR" "^INFO: Backup job finished successfully\$"
'

test_expect_success 'a missing mail program is a WARN, exit 0' '
	reset_mail
	cbackup_run 0 101 --config "$CONF" --sendmail "$SCRATCH/no-such-sendmail"
	test_has "$CB_ERR" "^WARN: cannot send the mail report: mail program .*no-such-sendmail. exited with status 127: cannot execute"
'

test_expect_success 'a guest log over 1 MiB is replaced by a note' '
	reset_mail
	# the hook prints 1.5 MiB at backup-start: it goes into the guest log
	printf "#!/bin/sh\n[ \"\$1\" = backup-start ] && head -c 1500000 /dev/zero | tr \"\\\\0\" x | fold -w 100\nexit 0\n" >"$SCRATCH/big-hook"
	chmod +x "$SCRATCH/big-hook"
	cbackup_run 0 101 --config "$CONF" --script "$SCRATCH/big-hook"
	log=$(ls "$D"/vzdump-lxc-101-*.log | tail -n 1)
	test "$(stat -c %s "$log")" -gt 1048576
	test "$(mails)" = 1
	test_has "$MAIL/1.msg" "^101: log file .* is larger than 1 MiB \\([0-9]+ bytes\\): not included"
	test_lacks "$MAIL/1.msg" "xxxxxxxxxx"
	test "$(stat -c %s "$MAIL/1.msg")" -lt 65536
'

test_expect_success 'the mail program runs without a shell (a path with a blank and a ;)' '
	reset_mail
	mkdir -p "$SCRATCH/odd dir;x"
	cp "$SCRATCH/bin/sendmail" "$SCRATCH/odd dir;x/send mail"
	cbackup_run 0 101 --config "$CONF" --sendmail "$SCRATCH/odd dir;x/send mail"
	test "$(mails)" = 1
	test_has "$MAIL/1.msg" "^Subject: cbackup backup status .*: backup successful\$"
'

test_expect_success 'a mail program that never reads a 1 MB report: killed at mail-timeout, the job finishes' '
	reset_mail
	# the report holds the guest log: the hook prints 800 kB into it (each
	# line 20 bytes more with its timestamp: under the 1 MiB of a log
	# that is left out)
	printf "#!/bin/sh\n[ \"\$1\" = backup-start ] && head -c 800000 /dev/zero | tr \"\\\\0\" x | fold -w 100\nexit 0\n" >"$SCRATCH/mb-hook"
	chmod +x "$SCRATCH/mb-hook"
	printf "#!/bin/sh\necho \$\$ >%s/deaf.pid\nexec sleep 100000\n" "$SCRATCH" >"$SCRATCH/bin/deaf-sendmail"
	chmod +x "$SCRATCH/bin/deaf-sendmail"
	# (timeout: on a cbackup that blocks, the test fails instead of hanging)
	rc=0
	timeout 120 "$CBACKUP" 101 --config "$CONF" --script "$SCRATCH/mb-hook" \
		--sendmail deaf-sendmail --mail-timeout 2 >"$CB_OUT" 2>"$CB_ERR" || rc=$?
	cat "$CB_ERR" | grep -v xxxx
	test "$rc" = 0
	log=$(ls "$D"/vzdump-lxc-101-*.log | tail -n 1)
	test "$(stat -c %s "$log")" -gt 800000
	test "$(stat -c %s "$log")" -lt 1048576
	test_has "$CB_ERR" "^WARN: cannot send the mail report: mail program .deaf-sendmail. did not read the report within 2 seconds: killed"
	test_must_fail kill -0 "$(cat "$SCRATCH/deaf.pid")"
'

test_expect_success 'a bad mailto is a configuration error with file:line (exit 2)' '
	reset_mail
	printf "dumpdir = %s\nmailto = root@example.com, <evil>\n[ct 101]\nroot = %s\n" "$D" "$SCRATCH/ct101" >bad.conf
	cbackup_run 2 101 --config bad.conf
	test_has "$CB_ERR" "^ERROR: bad.conf:2: key .mailto.: invalid mail address .<evil>."
	test "$(mails)" = 0
'

test_done
