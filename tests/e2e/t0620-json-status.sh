#!/bin/bash
# Machine-readable status (issue 19): `backup --output-format json` prints
# one JSON document on stdout at the end of the job (the log stays on
# stderr), checked field by field for a job with a good and a failing
# guest; `json-status = DIR` writes the same document as
# DIR/cbackup-job-<start>.json (0644, no .tmp left); `list --output-format
# json` prints one JSON array; --stdout with json is a usage error. A
# config error reaches monitoring: the document (status "error", each
# error with file, line, key, message), json-status and mail when the
# file still says where.
. "$(dirname "$0")/lib.sh"

D=$SCRATCH/dump
CONF=$SCRATCH/c.conf
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3

# jq EXPR: evaluate a Python expression on the document in $CB_OUT (as d)
jq() { "$PY" -c "import json,sys; d = json.load(open(sys.argv[1])); print($1)" "${2:-$CB_OUT}"; }

test_expect_success 'setup: a good guest, a guest whose root is missing, a frozen writer' '
	make_small_tree "$SCRATCH/ct101" web-101
	head -c 2M /dev/urandom >"$SCRATCH/ct101/srv/data/noise.bin"
	mkdir "$SCRATCH/tmp" "$D" "$SCRATCH/status"
	cat >"$CONF" <<-CONF
	tmpdir = $SCRATCH/tmp
	dumpdir = $D
	json-status = $SCRATCH/status
	[ct 101]
	root = $SCRATCH/ct101
	freeze-cmd = true
	thaw-cmd = true
	[ct 102]
	root = $SCRATCH/ct102-missing
	CONF
'

test_expect_success 'backup --output-format json: one valid JSON document on stdout' '
	cbackup_run 2 101 102 --config "$CONF" --output-format json
	"$PY" -m json.tool "$CB_OUT" >pretty
	test_lacks "$CB_OUT" "^(INFO|WARN|ERROR):"
	test_has "$CB_ERR" "^INFO: Backup job finished with errors\$"
	cp "$CB_OUT" job.json
'

test_expect_success 'the job fields' '
	test "$(jq "d[\"exit_status\"]" job.json)" = 2
	test "$(jq "d[\"status\"]" job.json)" = failed
	test "$(jq "d[\"error\"]" job.json)" = None
	test "$(jq "d[\"host\"]" job.json)" = "$(hostname | cut -d. -f1)"
	test_has job.json "\"command\": \"cbackup 101 102 --config .* --output-format json\""
	test "$(jq "d[\"end_epoch\"] >= d[\"start_epoch\"] > 1700000000" job.json)" = True
	test "$(jq "d[\"start\"][:4] == str(__import__(\"time\").localtime(d[\"start_epoch\"]).tm_year)" job.json)" = True
	test "$(jq "len(d[\"guests\"])" job.json)" = 2
'

test_expect_success 'the good guest: archive, size, checksum, durations, freeze window, bytes stored raw' '
	g="d[\"guests\"][0]"
	a=$(find_archive "$D" ct 101 .zst)
	test "$(jq "$g[\"id\"], $g[\"type\"], $g[\"name\"], $g[\"status\"], $g[\"error\"]" job.json)" = "101 ct web-101 ok None"
	test "$(jq "$g[\"archive\"]" job.json)" = "$a"
	test "$(jq "$g[\"size\"]" job.json)" = "$(stat -c %s "$a")"
	test "$(jq "$g[\"sha256\"]" job.json)" = "$(sha256sum "$a" | cut -d" " -f1)"
	test "$(jq "$g[\"log\"]" job.json)" = "${a%.tar.zst}.log"
	for k in seconds first_sync_seconds final_sync_seconds freeze_seconds archive_seconds; do
		test "$(jq "isinstance($g[\"$k\"], float) and 0 <= $g[\"$k\"] < 60" job.json)" = True
	done
	test "$(jq "$g[\"freeze_seconds\"] >= $g[\"final_sync_seconds\"]" job.json)" = True
	test "$(jq "$g[\"seconds\"] >= $g[\"first_sync_seconds\"] + $g[\"archive_seconds\"]" job.json)" = True
	# 2 MiB of random bytes: the codec stores (most of) them raw
	test "$(jq "$g[\"stored_raw_bytes\"] >= 1048576" job.json)" = True
'

test_expect_success 'the failing guest: status, error, no archive' '
	g="d[\"guests\"][1]"
	test "$(jq "$g[\"id\"], $g[\"status\"]" job.json)" = "102 failed"
	jq "$g[\"error\"]" job.json | grep -E "^$CONF:[0-9]+: key .root.: root .*ct102-missing. does not exist"
	for k in archive size sha256 first_sync_seconds final_sync_seconds freeze_seconds archive_seconds stored_raw_bytes; do
		test "$(jq "$g[\"$k\"]" job.json)" = None
	done
'

test_expect_success 'json-status: the same document in DIR/cbackup-job-<start>.json, 0644, no .tmp' '
	ls "$SCRATCH/status" >names
	test "$(wc -l <names)" = 1
	grep -E "^cbackup-job-[0-9]{4}_[0-9]{2}_[0-9]{2}-[0-9]{2}_[0-9]{2}_[0-9]{2}\\.json\$" names
	f=$SCRATCH/status/$(cat names)
	test_cmp job.json "$f"
	test "$(stat -c %a "$f")" = 644
'

test_expect_success 'json-status: a symlink planted at the .tmp name is not followed' '
	rm -f "$SCRATCH/status"/*
	echo precious >"$SCRATCH/precious"
	# the names of the next few seconds, all planted
	for s in 0 1 2 3; do
		stamp=$(date -d "@$(($(date +%s) + s))" +%Y_%m_%d-%H_%M_%S)
		ln -s "$SCRATCH/precious" "$SCRATCH/status/cbackup-job-$stamp.json.tmp"
	done
	cbackup_run 0 101 --config "$CONF"
	test "$(cat "$SCRATCH/precious")" = precious
	test "$(ls "$SCRATCH/status" | grep -c "\\.json\$")" = 1
'

test_expect_success 'list --output-format json: one array, an object per backup' '
	cbackup_run 0 list --config "$CONF" --output-format json
	"$PY" -m json.tool "$CB_OUT" >/dev/null
	test "$(jq "len(d)")" = 2
	test "$(jq "\",\".join(sorted(d[0])), d[0][\"notes\"]")" = "archive,checksum,codec,epoch,id,notes,protected,size,time,type,verified None"
	test "$(jq "d[0][\"id\"], d[0][\"type\"], d[0][\"codec\"], d[0][\"checksum\"], d[0][\"protected\"]")" = "101 ct zstd True False"
	test "$(jq "d[0][\"epoch\"] >= d[1][\"epoch\"]")" = True
' 

test_expect_success '--stdout with --output-format json is a usage error (exit 2)' '
	cbackup_run 2 backup --root "$SCRATCH/ct101" --tmpdir "$SCRATCH/tmp" --stdout --output-format json
	test_has "$CB_ERR" "^ERROR: --stdout and --output-format json both want standard output\$"
'

test_expect_success 'a config error with --output-format json: a JSON document, json-status, mail' '
	mkdir -p "$SCRATCH/bin" "$SCRATCH/mail" "$SCRATCH/status2"
	printf "#!/bin/sh\ncat >\"%s/mail/msg\"\n" "$SCRATCH" >"$SCRATCH/bin/sendmail"
	chmod +x "$SCRATCH/bin/sendmail"
	cat >"$SCRATCH/broken.conf" <<-CONF
	tmpdir = $SCRATCH/tmp
	dumpdir = $D
	json-status = $SCRATCH/status2
	mailto = admin@example.com
	sendmail = $SCRATCH/bin/sendmail
	mode = fast
	compres = zstd
	[ct 101]
	root = $SCRATCH/ct101
	CONF
	cbackup_run 2 101 --config "$SCRATCH/broken.conf" --output-format json
	"$PY" -m json.tool "$CB_OUT" >/dev/null
	test "$(jq "d[\"status\"], d[\"exit_status\"], len(d[\"config_errors\"])")" = "error 2 2"
	test "$(jq "[(e[\"file\"], e[\"line\"], e[\"key\"]) for e in d[\"config_errors\"]] == \
		[(\"$SCRATCH/broken.conf\", 6, \"mode\"), (\"$SCRATCH/broken.conf\", 7, \"compres\")]")" = True
	jq "d[\"config_errors\"][0][\"message\"]" | grep "fast.*suspend|stop|snapshot"
	jq "d[\"config_errors\"][1][\"message\"]" | grep "did you mean .compress."
	test_cmp "$CB_OUT" "$SCRATCH/status2"/cbackup-job-*.json
	test_has "$SCRATCH/mail/msg" "^Subject: .*backup failed"
	test_has "$SCRATCH/mail/msg" "broken.conf:6: key .mode."
	test_has "$SCRATCH/mail/msg" "broken.conf:7: unknown key .compres."
'

test_expect_success 'a config error too broken to know json-status: the JSON document still' '
	printf "\\000binary\n" >"$SCRATCH/binary.conf"
	cbackup_run 2 101 --config "$SCRATCH/binary.conf" --output-format json
	test "$(jq "d[\"status\"], len(d[\"config_errors\"])")" = "error 1"
	jq "d[\"config_errors\"][0][\"message\"]" | grep "binary data"
'

test_done
