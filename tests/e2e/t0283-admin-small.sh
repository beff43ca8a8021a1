#!/bin/bash
# Smaller things of an admin's first week (issue 28, item 11): the hook's
# STOREID is not the storage --dumpdir replaced; verify takes several
# archives (each checked, exit 1 when any failed).
. "$(dirname "$0")/lib.sh"

test_expect_success 'setup: a guest, a config whose storage --dumpdir replaces' '
	make_small_tree "$SCRATCH/src" small
	mkdir -p "$SCRATCH/tmp" "$SCRATCH/nas" "$SCRATCH/dump"
	printf "#!/bin/sh\necho \"\$1 STOREID=\${STOREID:-none} DUMPDIR=\$DUMPDIR\" >>\"%s/trace\"\n" \
		"$SCRATCH" >"$SCRATCH/hook"
	chmod +x "$SCRATCH/hook"
	printf "tmpdir = %s\nstorage = nas\n[storage nas]\npath = %s\n" "$SCRATCH/tmp" "$SCRATCH/nas" >c.conf
'

test_expect_success '--dumpdir replaces the storage: the hook gets no STOREID of it' '
	cbackup_run 0 backup --root "$SCRATCH/src" --id 1 --config c.conf --dumpdir "$SCRATCH/dump" \
		--script "$SCRATCH/hook" --freeze-cmd true --thaw-cmd true
	cat "$SCRATCH/trace"
	test_has "$SCRATCH/trace" "^job-start STOREID=none DUMPDIR=$SCRATCH/dump\$"
	test_has "$SCRATCH/trace" "^backup-end STOREID=none DUMPDIR=$SCRATCH/dump\$"
	test_lacks "$SCRATCH/trace" "STOREID=nas"
	rm "$SCRATCH/trace"
	cbackup_run 0 backup --root "$SCRATCH/src" --id 1 --config c.conf \
		--script "$SCRATCH/hook" --freeze-cmd true --thaw-cmd true
	test_has "$SCRATCH/trace" "^job-start STOREID=nas DUMPDIR=$SCRATCH/nas\$"
'

test_expect_success 'verify A B: both checked; a bad one fails the run, the good one still says ok' '
	a=$(find_archive "$SCRATCH/dump" ct 1 .zst)
	b=$(find_archive "$SCRATCH/nas" ct 1 .zst)
	cbackup_run 0 verify "$a" "$b"
	test_has "$CB_ERR" "^INFO: archive .$a. is good: "
	test_has "$CB_ERR" "^INFO: archive .$b. is good: "
	cp "$b" "$SCRATCH/bad.tar.zst"
	printf "garbage" | dd of="$SCRATCH/bad.tar.zst" bs=1 seek=100 conv=notrunc status=none
	cbackup_run 1 verify "$SCRATCH/bad.tar.zst" "$a"
	test_has "$CB_ERR" "^ERROR: verify of .*bad.tar.zst. failed"
	test_lacks "$CB_ERR" "verify of .$a. failed"
	test_has "$CB_ERR" "^INFO: archive .$a. is good: "
'

test_done
