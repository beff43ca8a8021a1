#!/bin/bash
# Configuration errors: a bad value is exit 2 naming FILE:LINE and the key
# (nothing touched); an unknown key is a warning with its line and the
# backup goes on; vzdump's "key: value" lines work.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src

test_expect_success 'setup' '
	mkdir -p "$SRC/etc" "$SCRATCH/tmp" "$SCRATCH/dump"
	echo hello >"$SRC/etc/hostname"
'

test_expect_success 'mode = fast: exit 2 with FILE:LINE and the key' '
	cat >"$SCRATCH/bad.conf" <<-CONF
	# a comment
	tmpdir = $SCRATCH/tmp
	dumpdir = $SCRATCH/dump
	mode = fast
	compress = zstd
	CONF
	cbackup_run 2 backup --root "$SRC" --id 501 --config "$SCRATCH/bad.conf"
	cat "$CB_ERR"
	grep -F "$SCRATCH/bad.conf:4" "$CB_ERR"
	grep "mode" "$CB_ERR"
	grep -F "suspend|stop|snapshot" "$CB_ERR"
	test -z "$(find "$SCRATCH/dump" "$SCRATCH/tmp" -mindepth 1)"
'

test_expect_success 'bad value in a guest section: exit 2 with its line' '
	cat >"$SCRATCH/bad2.conf" <<-CONF
	tmpdir = $SCRATCH/tmp
	dumpdir = $SCRATCH/dump

	[ct 502]
	root = $SRC
	compress = brotli
	CONF
	cbackup_run 2 502 --config "$SCRATCH/bad2.conf"
	cat "$CB_ERR"
	grep -F "$SCRATCH/bad2.conf:6" "$CB_ERR"
	grep "compress" "$CB_ERR"
	test -z "$(ls -A "$SCRATCH/dump")"
'

test_expect_success 'unknown key: a warning with FILE:LINE, the backup proceeds' '
	cat >"$SCRATCH/unknown.conf" <<-CONF
	tmpdir = $SCRATCH/tmp
	dumpdir = $SCRATCH/dump
	frobnicate = 1
	compress = zstd
	CONF
	cbackup_run 0 backup --root "$SRC" --id 503 --config "$SCRATCH/unknown.conf"
	cat "$CB_ERR"
	grep -E "^WARN: .*$SCRATCH/unknown.conf:3.*frobnicate" "$CB_ERR"
	find_archive "$SCRATCH/dump" ct 503 .zst
'

test_expect_success 'vzdump-style "key: value" config works' '
	cat >"$SCRATCH/vzdump.conf" <<-CONF
	# vzdump default settings
	tmpdir: $SCRATCH/tmp
	dumpdir: $SCRATCH/dump
	compress: gzip
	mode: suspend
	CONF
	cbackup_run 0 backup --root "$SRC" --id 504 --config "$SCRATCH/vzdump.conf"
	archive=$(find_archive "$SCRATCH/dump" ct 504 .gz)
	gzip -dc <"$archive" | tar -xOf - ./etc/hostname | grep -x hello
'

test_expect_success 'vzdump-style bad value: exit 2 with FILE:LINE' '
	printf "dumpdir: %s\nmode: fast\n" "$SCRATCH/dump" >"$SCRATCH/vzbad.conf"
	cbackup_run 2 backup --root "$SRC" --id 505 --config "$SCRATCH/vzbad.conf"
	grep -F "$SCRATCH/vzbad.conf:2" "$CB_ERR"
	grep "mode" "$CB_ERR"
'

test_done
