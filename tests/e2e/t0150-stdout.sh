#!/bin/bash
# --stdout: the archive of exactly one guest on standard output (logs on
# stderr), nothing written to the dump directory; pipes to zstd -d | tar;
# two guests with --stdout are a usage error (exit 2).
. "$(dirname "$0")/lib.sh"

D=$SCRATCH/dump

test_expect_success 'setup' '
	make_small_tree "$SCRATCH/ct101" web
	make_small_tree "$SCRATCH/ct102" db
	mkdir "$SCRATCH/tmp" "$D"
	cat >"$SCRATCH/c.conf" <<-CONF
	tmpdir = $SCRATCH/tmp
	dumpdir = $D
	[ct 101]
	root = $SCRATCH/ct101
	[ct 102]
	root = $SCRATCH/ct102
	compress = gzip
	CONF
'

test_expect_success 'backup --root T --stdout | zstd -dc | tar -t lists the tree' '
	"$CBACKUP" backup --root "$SCRATCH/ct101" --id 101 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--stdout --keep-staging 0 2>err | zstd -dc | tar -tf - >list
	cat err
	LC_ALL=C sort list >got
	(cd "$SCRATCH/ct101" && find . -mindepth 1 | sed "s|^\./||" |
		while read -r p; do if [ -d "$p" ]; then echo "./$p/"; else echo "./$p"; fi; done
	 echo ./) | LC_ALL=C sort >want
	diff -u want got
	grep -x "INFO: Backup job finished successfully" err
'

test_expect_success '--stdout writes nothing to the dump directory and leaves no staging' '
	test -z "$(ls -A "$D")"
	test -z "$(ls -A "$SCRATCH/tmp")"
'

test_expect_success 'the stream is the archive only: its contents round-trip' '
	"$CBACKUP" backup --root "$SCRATCH/ct101" --id 101 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--stdout 2>/dev/null >"$SCRATCH/stream.tar.zst"
	zstd -t "$SCRATCH/stream.tar.zst"
	mkdir "$SCRATCH/out"
	zstd -dc "$SCRATCH/stream.tar.zst" | tar -xf - -C "$SCRATCH/out"
	cmp "$SCRATCH/ct101/srv/data/random.bin" "$SCRATCH/out/srv/data/random.bin"
	diff -r "$SCRATCH/ct101" "$SCRATCH/out"
'

test_expect_success 'a configured guest with --stdout, its own codec (gzip)' '
	"$CBACKUP" 102 --config "$SCRATCH/c.conf" --stdout 2>err | gzip -dc | tar -xOf - ./etc/hostname >host
	grep -x db host
	test -z "$(ls -A "$D")"
'

test_expect_success 'two guests with --stdout: exit 2, nothing written' '
	cbackup_run 2 101 102 --config "$SCRATCH/c.conf" --stdout
	grep -E "^ERROR: .*--stdout.*one guest" "$CB_ERR"
	test ! -s "$CB_OUT"
	cbackup_run 2 --all --config "$SCRATCH/c.conf" --stdout
	test ! -s "$CB_OUT"
	test -z "$(ls -A "$D")"
'

test_expect_success 'a guest whose root is missing with --stdout: exit 2 (configuration)' '
	rc=0
	"$CBACKUP" backup --root "$SCRATCH/missing" --id 103 --tmpdir "$SCRATCH/tmp" --stdout \
		>"$SCRATCH/out.bin" 2>err || rc=$?
	test "$rc" = 2
	grep -E "^ERROR: Backup of VM 103 failed - option --root: root .*missing. does not exist" err
'

test_done
