#!/bin/bash
# A config-driven job over three guests, one of them broken (its root is
# missing): the broken one is an "ERROR: Backup of VM N failed - reason"
# naming FILE:LINE, the job goes on, the others are archived with a .sha256
# that `sha256sum -c` accepts, and the job ends "with errors" and exit 2 (a
# configuration error: issue 28).
# --all --exclude, ID order, storage sections and precedence, --dumpdir
# overriding the storage, --quiet, usage errors (exit 2).
. "$(dirname "$0")/lib.sh"

CONF=$SCRATCH/cbackup.conf
DUMP=$SCRATCH/nas

test_expect_success 'setup: three guests, 102 without its root' '
	make_small_tree "$SCRATCH/ct101" web
	make_small_tree "$SCRATCH/ct103" db
	mkdir "$SCRATCH/tmp" "$DUMP"
	cat >"$CONF" <<-CONF
	tmpdir = $SCRATCH/tmp
	storage = nas
	compress = zstd

	[storage nas]
	path = $DUMP
	compress = gzip

	[ct 101]
	root = $SCRATCH/ct101

	[ct 102]
	root = $SCRATCH/ct102-missing

	[ct 103]
	root = $SCRATCH/ct103
	compress = lzo
	CONF
'

test_expect_success '--all: the broken guest fails, the job goes on, exit 2' '
	cbackup_run 2 --all --config "$CONF"
	cat "$CB_ERR"
	grep -x "INFO: starting new backup job: cbackup --all --config $CONF" "$CB_ERR"
	grep -E "^ERROR: Backup of VM 102 failed - $CONF:[0-9]+: key .root.: root .*ct102-missing. does not exist" "$CB_ERR"
	grep -x "INFO: Finished Backup of VM 101 ([0-9][0-9]:[0-9][0-9]:[0-9][0-9])" "$CB_ERR"
	grep -x "INFO: Finished Backup of VM 103 ([0-9][0-9]:[0-9][0-9]:[0-9][0-9])" "$CB_ERR"
	test_must_fail grep "Finished Backup of VM 102" "$CB_ERR"
	test "$(tail -n 1 "$CB_ERR")" = "INFO: Backup job finished with errors"
	test_must_fail grep "finished successfully" "$CB_ERR"
'

test_expect_success 'storage section and guest section decide the codec' '
	# [storage nas] compress = gzip; [ct 103] compress = lzo wins over it
	a101=$(find_archive "$DUMP" ct 101 .gz)
	a103=$(find_archive "$DUMP" ct 103 .lzo)
	gzip -dc "$a101" | tar -xOf - ./etc/hostname | grep -x web
	lzop -dc "$a103" | tar -xOf - ./etc/hostname | grep -x db
	test -z "$(ls "$DUMP" | grep -E "^vzdump-lxc-102-.*\.tar")"
	no_tmp_files "$DUMP"
'

test_expect_success 'the guests ran in file order, each with its own .log' '
	grep -E "^INFO: Starting Backup of VM" "$CB_ERR" >order
	printf "INFO: Starting Backup of VM %s (lxc)\n" 101 102 103 | diff -u - order
	a101=$(find_archive "$DUMP" ct 101 .gz)
	grep -Ex "${TS}INFO: Starting Backup of VM 101 \(lxc\)" "${a101%.tar.gz}.log"
	test_must_fail grep "CT 103" "${a101%.tar.gz}.log"
	# the failed guest keeps its log, with the reason (as vzdump does)
	grep -E "^${TS}ERROR: Backup of VM 102 failed - " "$DUMP"/vzdump-lxc-102-*.log
'

test_expect_success '.sha256 files check out with sha256sum -c in the dump directory' '
	cd "$DUMP"
	ls *.sha256 >sums
	test "$(wc -l <sums)" = 2
	for s in *.sha256; do
		grep -Eq "^[0-9a-f]{64}  vzdump-lxc-10[13]-[0-9_-]+\.tar\.(gz|lzo)$" "$s"
		sha256sum -c "$s"
	done
	rm sums
'

test_expect_success '.sha256 detects a changed archive' '
	d=$SCRATCH/copy
	mkdir "$d"
	cp -p "$DUMP"/vzdump-lxc-101-* "$d"/
	cd "$d"
	a=$(find_archive . ct 101 .gz)
	printf "X" | dd of="$a" bs=1 seek=100 conv=notrunc status=none
	test_must_fail sha256sum -c "$a.sha256"
'

test_expect_success '--all --exclude 102: exit 0, finished successfully' '
	mkdir "$SCRATCH/dump2"
	cbackup_run 0 --all --exclude 102 --config "$CONF" --dumpdir "$SCRATCH/dump2"
	test "$(tail -n 1 "$CB_ERR")" = "INFO: Backup job finished successfully"
	test_must_fail grep -E "CT 102|^ERROR" "$CB_ERR"
	find_archive "$SCRATCH/dump2" ct 101 .gz
	find_archive "$SCRATCH/dump2" ct 103 .lzo
	test -z "$(ls "$SCRATCH/dump2" | grep -e -102-)"
	cd "$SCRATCH/dump2" && sha256sum -c ./*.sha256
'

test_expect_success '--dumpdir wins over the storage path' '
	test "$(ls "$SCRATCH/dump2" | grep -c "\.tar\.")" = 6    # 2 archives + 2 .sha256 + 2 .idx
	test "$(ls "$DUMP" | grep -c "^vzdump-lxc-10[13]-.*\.tar\.\(gz\|lzo\)$")" = 2
'

test_expect_success 'cbackup ID...: the guests given, in the order given' '
	mkdir "$SCRATCH/dump3"
	cbackup_run 0 103 101 --config "$CONF" --dumpdir "$SCRATCH/dump3"
	grep -E "^INFO: Starting Backup of VM" "$CB_ERR" >order
	printf "INFO: Starting Backup of VM %s (lxc)\n" 103 101 | diff -u - order
	find_archive "$SCRATCH/dump3" ct 101 .gz
	find_archive "$SCRATCH/dump3" ct 103 .lzo
'

test_expect_success 'a named broken guest alone: exit 2, nothing archived' '
	mkdir "$SCRATCH/dump4"
	cbackup_run 2 102 --config "$CONF" --dumpdir "$SCRATCH/dump4"
	grep -E "^ERROR: Backup of VM 102 failed - " "$CB_ERR"
	test "$(tail -n 1 "$CB_ERR")" = "INFO: Backup job finished with errors"
	test -z "$(ls "$SCRATCH/dump4" | grep "\.tar")"
'

test_expect_success '--quiet: only warnings and errors on stderr, the .log has all' '
	mkdir "$SCRATCH/dump5"
	cbackup_run 2 --all --quiet --config "$CONF" --dumpdir "$SCRATCH/dump5"
	grep -E "^ERROR: Backup of VM 102 failed - " "$CB_ERR"
	test_must_fail grep "^INFO:" "$CB_ERR"
	a=$(find_archive "$SCRATCH/dump5" ct 101 .gz)
	grep -Ex "${TS}INFO: Finished Backup of VM 101 \([0-9]{2}:[0-9]{2}:[0-9]{2}\)" "${a%.tar.gz}.log"
'

test_expect_success 'an ID not in the config: exit 2, nothing touched' '
	mkdir "$SCRATCH/dump6"
	# the copies the runs above kept (keep-staging auto) stay as they are
	ls -lAR --time-style=full-iso "$SCRATCH/tmp" >"$SCRATCH/tmp-before"
	cbackup_run 2 101 999 --config "$CONF" --dumpdir "$SCRATCH/dump6"
	grep -E "^ERROR: .*999" "$CB_ERR"
	test -z "$(ls -A "$SCRATCH/dump6")"
	ls -lAR --time-style=full-iso "$SCRATCH/tmp" >"$SCRATCH/tmp-after"
	test_cmp "$SCRATCH/tmp-before" "$SCRATCH/tmp-after"
'

test_expect_success 'everything excluded, or IDs with --all: exit 2' '
	cbackup_run 2 --all --exclude 101,102,103 --config "$CONF" --dumpdir "$SCRATCH/dump6"
	grep "^ERROR: " "$CB_ERR"
	cbackup_run 2 101 --all --config "$CONF" --dumpdir "$SCRATCH/dump6"
	grep "^ERROR: " "$CB_ERR"
	test -z "$(ls -A "$SCRATCH/dump6")"
'

test_done
