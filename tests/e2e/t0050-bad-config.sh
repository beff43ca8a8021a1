#!/bin/bash
# Configuration errors: a bad value is exit 2 naming FILE:LINE and the key
# (nothing touched); an unknown key is an error (exit 2) with its line and
# the key it most looks like, a relative path too (issue 28); vzdump's
# "key: value" lines work; every error of a file is said in one run.
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
	test -z "$(find "$SCRATCH/dump10" "$SCRATCH/tmp10" -mindepth 1)"
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

test_expect_success 'unknown key: exit 2 with FILE:LINE and a did-you-mean, nothing touched' '
	cat >"$SCRATCH/unknown.conf" <<-CONF
	tmpdir = $SCRATCH/tmp
	dumpdir = $SCRATCH/dump
	compres = zstd
	CONF
	cbackup_run 2 backup --root "$SRC" --id 503 --config "$SCRATCH/unknown.conf"
	cat "$CB_ERR"
	test_has "$CB_ERR" "^ERROR: $SCRATCH/unknown.conf:3: unknown key .compres. \\(did you mean .compress.\\?\\)"
	test -z "$(ls -A "$SCRATCH/dump")"
	printf "frobnicate = 1\n" >"$SCRATCH/unknown2.conf"
	cbackup_run 2 backup --root "$SRC" --id 503 --config "$SCRATCH/unknown2.conf"
	test_has "$CB_ERR" "unknown2.conf:1: unknown key .frobnicate. \\(the keys are in cbackup.conf\\(5\\)\\)"
'

test_expect_success 'a vzdump key cbackup ignores: still a warning, the backup proceeds' '
	cat >"$SCRATCH/ignored.conf" <<-CONF
	tmpdir = $SCRATCH/tmp
	dumpdir = $SCRATCH/dump
	pool = production
	CONF
	cbackup_run 0 backup --root "$SRC" --id 503 --config "$SCRATCH/ignored.conf"
	test_has "$CB_ERR" "^WARN: $SCRATCH/ignored.conf:3: key .pool. is a vzdump option cbackup ignores"
	find_archive "$SCRATCH/dump" ct 503 .zst
'

test_expect_success 'a relative path: exit 2 with FILE:LINE' '
	printf "tmpdir = tmp\n" >"$SCRATCH/relative.conf"
	cbackup_run 2 backup --root "$SRC" --id 504 --config "$SCRATCH/relative.conf"
	test_has "$CB_ERR" "relative.conf:1: key .tmpdir.: relative path .tmp."
'

test_expect_success 'a typo in a prune-backups rule: exit 2 with FILE:LINE' '
	printf "prune-backups = keep-lst=3\n" >"$SCRATCH/prune.conf"
	cbackup_run 2 backup --root "$SRC" --id 505 --tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/dump" \
		--config "$SCRATCH/prune.conf"
	test_has "$CB_ERR" "prune.conf:1: key .prune-backups.: unknown prune rule .keep-lst. \\(did you mean .keep-last.\\?\\)"
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

test_expect_success 'every error of a file in one run: each with FILE:LINE, key and accepted values' '
	mkdir "$SCRATCH/tmp10" "$SCRATCH/dump10"
	cat >"$SCRATCH/many.conf" <<-CONF
	tmpdir = $SCRATCH/tmp10
	dumpdir = $SCRATCH/dump10
	mode = fast
	compres = zstd
	this line is no key
	[ct 506]
	root = $SRC
	compress = brotli
	[storage nas]
	path = relative/dir
	CONF
	cbackup_run 2 506 --config "$SCRATCH/many.conf"
	test_has "$CB_ERR" "^ERROR: $SCRATCH/many.conf:3: key .mode.: .*fast.*suspend\\|stop\\|snapshot"
	test_has "$CB_ERR" "^ERROR: $SCRATCH/many.conf:4: unknown key .compres. \\(did you mean .compress.\\?\\)"
	test_has "$CB_ERR" "^ERROR: $SCRATCH/many.conf:5: syntax error"
	test_has "$CB_ERR" "^ERROR: $SCRATCH/many.conf:8: key .compress.: .*brotli.*zstd"
	test_has "$CB_ERR" "^ERROR: $SCRATCH/many.conf:10: key .path.: relative path"
	test "$(grep -c "^ERROR: $SCRATCH/many.conf:" "$CB_ERR")" = 5
	test -z "$(find "$SCRATCH/dump10" "$SCRATCH/tmp10" -mindepth 1)"
'

test_done
