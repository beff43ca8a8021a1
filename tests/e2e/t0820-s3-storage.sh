#!/bin/bash
# An S3 storage in the configuration: [storage NAME] with type = s3,
# endpoint, bucket, prefix, region, credentials (an AWS shared-credentials
# file, read as a key file) or the environment's keys, profile,
# upload-parallel. Errors name the file, the line and the key; the
# storage's "type" and the command line's --type (the guest's) both still
# work. A backup to an S3 storage checks it before the guest is touched:
# a missing bucket, refused keys, an endpoint that does not answer each
# give one ERROR naming the storage, exit 2, the guest never frozen, no
# object written; one that passes takes the night as a unit store in the
# bucket, restored and verified as STORAGE:NAME (on a real radosgw,
# scripts/rgw.sh).
. "$(dirname "$0")/lib.sh"

# conf FILE STORAGE-LINES...: a configuration with CT 101 (a freeze and a
# thaw that leave marks) going to [storage offsite], whose keys are given
conf() {
	local f=$1
	shift
	mkdir -p "$SCRATCH/root/etc" "$SCRATCH/dump" "$SCRATCH/tmp"
	echo "hello" >"$SCRATCH/root/etc/motd"
	{
		echo "dumpdir = $SCRATCH/dump"
		echo "tmpdir = $SCRATCH/tmp"
		echo "storage = offsite"
		echo "[ct 101]"
		echo "root = $SCRATCH/root"
		echo "freeze-cmd = touch $SCRATCH/froze"
		echo "thaw-cmd = touch $SCRATCH/thawed"
		echo "[storage offsite]"
		printf "%s\n" "$@"
	} >"$f"
}

# nothing_touched: no freeze, no staging copy, no archive (the log of an
# S3 night is in the tmpdir)
nothing_touched() {
	test ! -e "$SCRATCH/froze"
	test ! -e "$SCRATCH/thawed"
	test_must_fail ls "$SCRATCH"/dump/*.tar*
	test -z "$(ls -A "$SCRATCH/tmp/cbackup" 2>/dev/null | grep -v "^ct-10[12]\.log$")"
}

test_expect_success 'type = s3 without endpoint and bucket: exit 2, each missing key named with the file and line' '
	conf c.conf "type = s3" "prefix = cb/night"
	cbackup_run 2 list --config c.conf
	test_has "$CB_ERR" "c.conf:8: \[storage offsite\] is type = s3 \(line 9\) but has no key .endpoint."
	test_has "$CB_ERR" "c.conf:8: \[storage offsite\] is type = s3 \(line 9\) but has no key .bucket."
'

test_expect_success 'a bucket key in a directory storage, bad endpoint, bucket, prefix, region, type: each an error with its line and key' '
	conf c.conf "path = $SCRATCH/dump" "bucket = night" "[storage b]" "type = s3" \
		"endpoint = ftp://host" "bucket = a/b" "prefix = ../x" "region = us east" "type = vm" \
		"upload-parallel = 0"
	cbackup_run 2 list --config c.conf
	cat "$CB_ERR"
	test_has "$CB_ERR" "c.conf:10: key .bucket.: only an S3 storage has it, and \[storage offsite\] is a directory \(add type = s3\)"
	test_has "$CB_ERR" "c.conf:13: key .endpoint.: invalid value .ftp://host."
	test_has "$CB_ERR" "c.conf:14: key .bucket.: invalid value .a/b."
	test_has "$CB_ERR" "c.conf:15: key .prefix.: invalid value .\.\./x."
	test_has "$CB_ERR" "c.conf:16: key .region.: invalid value .us east."
	test_has "$CB_ERR" "c.conf:17: key .type.: invalid value .vm. \(accepted: dir\|s3\)"
	test_has "$CB_ERR" "c.conf:18: key .upload-parallel.: invalid value .0. \(accepted: 1-64\)"
'

test_expect_success 'type: a storage key in [storage], the guest type on the command line; neither elsewhere' '
	conf c.conf "type = dir" "path = $SCRATCH/dump"
	cbackup_run 0 backup --config c.conf --dry-run 101
	cbackup_run 0 backup --config c.conf --root "$SCRATCH/root" --id 7 --type ct --storage offsite --dry-run
	test_has "$CB_ERR" "Starting Backup of VM 7 \(lxc\)"
	cbackup_run 2 backup --config c.conf --root "$SCRATCH/root" --id 7 --type s3 --dry-run
	test_has "$CB_ERR" "option --type: invalid value .s3. \(accepted: ct\|vm\)"
	printf "type = s3\n" >g.conf
	cbackup_run 2 list --config g.conf
	test_has "$CB_ERR" "g.conf:1: key .type. is not allowed in the global section \(allowed: \[storage\]\)"
	printf "[ct 5]\nroot = /x\ntype = vm\n" >v.conf
	cbackup_run 2 list --config v.conf
	test_has "$CB_ERR" "v.conf:3: key .type. is not allowed in a \[ct\] section \(allowed: \[storage\]\)"
'

test_expect_success 'credentials: a file others may read, or owned by another user, or without the profile: refused, naming the file' '
	conf c.conf "type = s3" "endpoint = http://127.0.0.1:1" "bucket = night" \
		"credentials = $SCRATCH/cred" "profile = backup"
	printf "[default]\naws_access_key_id = A\naws_secret_access_key = S\n" >cred
	chmod 644 cred
	cbackup_run 2 backup --config c.conf 101
	test_has "$CB_ERR" "ERROR: Backup of VM 101 failed - storage .offsite.: credentials .$SCRATCH/cred. has mode 0644: group or others may read it \(chmod 600"
	chmod 600 cred
	cbackup_run 2 backup --config c.conf 101
	test_has "$CB_ERR" "storage .offsite.: credentials .$SCRATCH/cred. has no profile \[backup\]"
	chown nobody cred
	cbackup_run 2 backup --config c.conf 101
	test_has "$CB_ERR" "storage .offsite.: credentials .$SCRATCH/cred. is owned by uid [0-9]+, neither root nor this user"
	chown 0 cred
	printf "[backup]\naws_access_key_id = A\n" >>cred
	cbackup_run 2 backup --config c.conf 101
	test_has "$CB_ERR" "storage .offsite.: credentials .$SCRATCH/cred.: profile \[backup\] lacks aws_secret_access_key"
	nothing_touched
'

test_expect_success 'no credentials key and no keys in the environment: one error saying where keys come from' '
	conf c.conf "type = s3" "endpoint = http://127.0.0.1:1" "bucket = night"
	(unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY; cbackup_run 2 backup --config c.conf 101)
	test_has "$CB_ERR" "ERROR: Backup of VM 101 failed - storage .offsite.: no keys: set credentials = FILE in \[storage offsite\], or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
	nothing_touched
'

test_expect_success 'an endpoint that does not answer: exit 2 at preflight naming the storage, the guest never frozen' '
	conf c.conf "type = s3" "endpoint = http://127.0.0.1:1" "bucket = night"
	AWS_ACCESS_KEY_ID=a AWS_SECRET_ACCESS_KEY=b cbackup_run 2 backup --config c.conf 101
	test "$(grep -c "^ERROR" "$CB_ERR")" = 1
	test_has "$CB_ERR" "^ERROR: Backup of VM 101 failed - storage .offsite.: endpoint http://127.0.0.1:1 does not answer: HEAD .night."
	nothing_touched
'

test_expect_success '--dumpdir replaces an S3 storage: the backup goes to the directory, no store checked' '
	conf c.conf "type = s3" "endpoint = http://127.0.0.1:1" "bucket = night"
	mkdir -p other other-tmp
	cbackup_run 0 backup --config c.conf --dumpdir "$SCRATCH/other" --tmpdir "$SCRATCH/other-tmp" 101
	find_archive other ct 101 .zst >/dev/null
	rm -f froze thawed
'

test_expect_success '--storage and --dumpdir together are refused (exit 2), nothing touched, as vzdump does' '
	conf c.conf "type = s3" "endpoint = http://127.0.0.1:1" "bucket = night"
	mkdir both
	cbackup_run 2 backup --config c.conf --storage offsite --dumpdir "$SCRATCH/both" 101
	test "$(grep -c "^ERROR" "$CB_ERR")" = 1
	test_has "$CB_ERR" "^ERROR: options --storage and --dumpdir are both given"
	nothing_touched
	test -z "$(ls -A both)"
'

need_rgw 'preflight on a real radosgw'

# s3 ARGS...: stock curl on the store, signed (the way out of docs/object-storage.md)
s3() {
	curl -sf --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@"
}

# no_objects BUCKET: the bucket holds no object
no_objects() {
	s3 "$CB_S3_ENDPOINT/$1?list-type=2" >listing
	test_lacks listing "<Key>"
}

test_expect_success 'setup: a bucket, and a credentials file with the keys under a profile' '
	s3 -X PUT "$CB_S3_ENDPOINT/night" >/dev/null
	printf "# written by hand\n[default]\naws_access_key_id = nobody\naws_secret_access_key = x\n\n" >cred
	printf "[backup]\naws_access_key_id = %s\naws_secret_access_key = %s\n" \
		"$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >>cred
	chmod 600 cred
	no_objects night
'

test_expect_success 'a bucket that does not exist: exit 2 naming the storage and the bucket, the guest never frozen' '
	conf c.conf "type = s3" "endpoint = $CB_S3_ENDPOINT" "bucket = nosuch" \
		"credentials = $SCRATCH/cred" "profile = backup"
	cbackup_run 2 backup --config c.conf 101
	test "$(grep -c "^ERROR" "$CB_ERR")" = 1
	test_has "$CB_ERR" "^ERROR: Backup of VM 101 failed - storage .offsite.: bucket .nosuch. does not exist at $CB_S3_ENDPOINT"
	nothing_touched
	test_must_fail s3 -o /dev/null "$CB_S3_ENDPOINT/nosuch?list-type=2"
'

test_expect_success 'keys the store refuses (the default profile): exit 2 naming the storage, access denied, nothing written' '
	conf c.conf "type = s3" "endpoint = $CB_S3_ENDPOINT" "bucket = night" \
		"credentials = $SCRATCH/cred"
	cbackup_run 2 backup --config c.conf 101
	test "$(grep -c "^ERROR" "$CB_ERR")" = 1
	test_has "$CB_ERR" "^ERROR: Backup of VM 101 failed - storage .offsite.: bucket .night. at $CB_S3_ENDPOINT: access denied"
	nothing_touched
	no_objects night
'

test_expect_success 'the right keys (profile backup, or the environment): a night in the bucket, under the prefix; restore (whole, --path) and verify give it back; no local dumpdir needed' '
	conf c.conf "type = s3" "endpoint = $CB_S3_ENDPOINT" "bucket = night" "prefix = cb/host1" \
		"credentials = $SCRATCH/cred" "profile = backup"
	mkdir -p "$SCRATCH/root/usr/lib"
	head -c 3000000 /dev/urandom >"$SCRATCH/root/usr/lib/blob"
	ln "$SCRATCH/root/etc/motd" "$SCRATCH/root/usr/lib/motd-link"
	# an S3 night needs no local dumpdir: its log is the store'\''s, and TMPDIR/cbackup/ct-ID.log
	sed "s|^dumpdir = .*|dumpdir = $SCRATCH/nosuch|" c.conf >n.conf
	cbackup_run 0 backup --config n.conf 101
	test ! -e "$SCRATCH/nosuch"
	test_has "$SCRATCH/tmp/cbackup/ct-101.log" "INFO: Finished Backup of VM 101"
	test -e "$SCRATCH/froze"
	s3 "$CB_S3_ENDPOINT/night?list-type=2" >listing
	test_has listing "<Key>cb/host1/nights/vzdump-lxc-101-"
	test_has listing "<Key>cb/host1/units/"
	test_lacks listing "<Key>(nights|units)/"
	cbackup_run 0 list --config c.conf --storage offsite
	n=$(grep -o "vzdump-lxc-101-[0-9_-]*\.tar\.zst" "$CB_OUT")
	# listing a bucket needs no local dumpdir
	cbackup_run 0 list --config n.conf --storage offsite
	test_has "$CB_OUT" "^101 .* $n"
	cbackup_run 0 restore --config c.conf "offsite:$n" back
	diff -r "$SCRATCH/root" back
	test "$(stat -c %i back/etc/motd)" = "$(stat -c %i back/usr/lib/motd-link)"
	cbackup_run 0 restore --config c.conf "offsite:$n" one --path ./usr/lib/motd-link
	cmp "$SCRATCH/root/etc/motd" one/usr/lib/motd-link
	cbackup_run 0 verify --config c.conf "offsite:$n"
	conf c.conf "type = s3" "endpoint = $CB_S3_ENDPOINT" "bucket = night" "prefix = cb/host1"
	echo "night 2" >>"$SCRATCH/root/etc/motd"
	sleep 1.1
	cbackup_run 0 backup --config c.conf 101
	cbackup_run 0 list --config c.conf --storage offsite
	test "$(grep -c "vzdump-lxc-101-" "$CB_OUT")" = 2
	rm -rf froze thawed "$SCRATCH/tmp/cbackup"
'

test_expect_success 'a hook on an S3 night: TARGET is STORAGE:NAME, what restore takes; no DUMPDIR (none is used); the dry run names the bucket' '
	conf c.conf "type = s3" "endpoint = $CB_S3_ENDPOINT" "bucket = night" "prefix = cb/hook" \
		"credentials = $SCRATCH/cred" "profile = backup"
	test_when_finished "rm -rf froze thawed \"$SCRATCH/tmp/cbackup\""
	printf "#!/bin/sh\necho \"\$1 \${DUMPDIR-none} \${STOREID-none} \${TARGET-none}\" >>%s/hook.trace\n" \
		"$SCRATCH" >hook
	chmod +x hook
	cbackup_run 0 backup --config c.conf --script "$SCRATCH/hook" 101
	cat hook.trace
	test_has hook.trace "^job-start none offsite none$"
	test_has hook.trace "^backup-end none offsite offsite:vzdump-lxc-101-[0-9_-]*\.tar\.zst$"
	test_has hook.trace "^job-end none offsite none$"
	test_lacks hook.trace "$SCRATCH/dump"
	t=$(sed -n "s/^backup-end none offsite //p" hook.trace)
	cbackup_run 0 restore --config c.conf "$t" hooked
	diff -r "$SCRATCH/root" hooked
	cbackup_run 0 backup --config c.conf --dry-run 101
	test_has "$CB_ERR" "^INFO: dry run: storage .offsite.: S3 bucket .night. at $CB_S3_ENDPOINT, prefix .cb/hook., no dumpdir$"
	test_has "$CB_ERR" "^INFO: dry run: archive .offsite:vzdump-lxc-101-[0-9_-]*\.tar\.zst.$"
	test_lacks "$CB_ERR" "dry run: dumpdir"
'

# got_bytes: what radosgw has sent so far (its perf counter get_b)
got_bytes() {
	ceph --admin-daemon "$RGW_DIR/run/client.rgw.cb.asok" perf dump |
		python3 -c "import json, sys; print(json.load(sys.stdin)[\"rgw\"][\"get_b\"])"
}

test_expect_success 'a night after a change downloads no unit: neither those it copies (the local cache has them) nor those it writes' '
	conf c.conf "type = s3" "endpoint = $CB_S3_ENDPOINT" "bucket = night" "prefix = cb/dl"
	test_when_finished "rm -rf froze thawed \"$SCRATCH/tmp/cbackup\" \"$SCRATCH/root/usr/lib/text\""
	# 4 MB of text: units of some 800 KB compressed
	head -c 3000000 /dev/urandom | base64 >"$SCRATCH/root/usr/lib/text"
	cbackup_run 0 backup --config c.conf --keep-staging 1 101
	head -c 3000000 /dev/urandom | base64 >"$SCRATCH/root/usr/lib/text"
	sleep 1.1
	before=$(got_bytes)
	cbackup_run 0 backup --config c.conf --keep-staging 1 101
	got=$(( $(got_bytes) - before ))
	test_has "$CB_ERR" "[1-9][0-9]* new written .* [1-9][0-9]* of them copied, not compressed again \([1-9][0-9]* read from the local unit cache\)"
	echo "downloaded: $got bytes"
	test "$got" -gt 0
	test "$got" -lt 300000
'

test_expect_success 'two guests on one storage: each fails with the storage'\''s error, the job exits 2' '
	conf c.conf "type = s3" "endpoint = $CB_S3_ENDPOINT" "bucket = nosuch"
	printf "[ct 102]\nroot = %s\nstorage = offsite\n" "$SCRATCH/root" >>c.conf
	cbackup_run 2 backup --config c.conf 101 102
	test "$(grep -c "^ERROR: Backup of VM 10[12] failed - storage .offsite.: bucket .nosuch. does not exist" "$CB_ERR")" = 2
	nothing_touched
'

test_expect_success 'two hosts back one guest up to one bucket: the second fails naming the first; its lock goes with it' '
	conf c.conf "type = s3" "endpoint = $CB_S3_ENDPOINT" "bucket = night" "prefix = cb/two"
	echo "two hosts" >>"$SCRATCH/root/etc/motd"
	# another host shares the bucket only: its own dumpdir and lock directory
	sed -e "s|^dumpdir = .*|dumpdir = $SCRATCH/dump-b|" -e "s|^tmpdir = .*|tmpdir = $SCRATCH/tmp-b|" c.conf >b.conf
	mkdir -p "$SCRATCH/dump-b" "$SCRATCH/tmp-b"
	mkdir -m 0700 "$SCRATCH/locks-a"
	rm -f "$FAULT_LOG"
	# host A, held when it writes its catalog (its units are in the bucket,
	# its manifest not yet)
	CBACKUP_LOCK_DIR=$SCRATCH/locks-a \
	with_fault_bg "open:SIGSTOP:.tar.zst.idx" \
		"$CBACKUP" backup --config c.conf 101 >a.out 2>a.err
	pid=$FAULT_PID
	cleanup_pid "$pid"
	wait_for 60 grep -q "^State:.*stopped" /proc/$pid/status 2>/dev/null || { cat a.err; false; }
	sleep 1.1
	cbackup_run 1 backup --config b.conf 101
	test_has "$CB_ERR" "^ERROR: Backup of VM 101 failed - .*CT 101 is being backed up to offsite by host .* pid $pid since"
	kill -CONT "$pid"
	rc=0
	wait "$pid" || rc=$?
	cat a.err
	test "$rc" = 0
	cbackup_run 0 list --config c.conf --storage offsite
	test "$(grep -c "vzdump-lxc-101-" "$CB_OUT")" = 1
	s3 "$CB_S3_ENDPOINT/night?list-type=2&prefix=cb%2Ftwo%2Flocks%2F" >listing
	test_lacks listing "<Key>"
	# the lock was released: host B goes now
	sleep 1.1
	cbackup_run 0 backup --config b.conf 101
	rm -rf froze thawed "$SCRATCH/tmp/cbackup"
'

# rgw_count KEY: radosgw's counter KEY (its perf dump: requests, gets, failed ones)
rgw_count() {
	ceph --admin-daemon "$RGW_DIR/run/client.rgw.cb.asok" perf dump |
		python3 -c "import json, sys; print(json.load(sys.stdin)[\"rgw\"][sys.argv[1]])" "$1"
}

test_expect_success 'a new unit goes up in one request: no HEAD before it (a 404), no read back after' '
	conf c.conf "type = s3" "endpoint = $CB_S3_ENDPOINT" "bucket = night" "prefix = cb/one"
	mkdir -p "$SCRATCH/root/var"
	seq 1 6000000 >"$SCRATCH/root/var/numbers"
	f0=$(rgw_count failed_req)
	g0=$(rgw_count get)
	cbackup_run 0 backup --config c.conf 101 --unit-size 1
	n=$(sed -n "s/.*unit store .offsite.: [0-9]* units, \([0-9]*\) new written.*/\1/p" "$CB_ERR")
	test "$n" -ge 30
	failed=$(( $(rgw_count failed_req) - f0 ))
	gets=$(( $(rgw_count get) - g0 ))
	echo "$n units: $failed failed requests, $gets gets"
	# a few for the night itself (listings, its mark, the lock, the manifest), not one a unit
	test "$failed" -lt 15
	test "$gets" -lt 15
	rm -rf froze thawed "$SCRATCH/tmp/cbackup" "$SCRATCH/root/var/numbers"
'

test_done
