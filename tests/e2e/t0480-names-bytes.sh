#!/bin/bash
# Names are bytes (issue 25, items 2 and 9): a guest's file name or link
# target that is not UTF-8 (`touch $'caf\xe9'`) is archived as raw bytes in
# a pax header with hdrcharset=BINARY (the backup does not fail, nor warn),
# extracted byte for byte by cbackup restore (whole and --path), GNU tar and
# bsdtar. Everything printed is safe: `cbackup ls` quotes names as tar -tv
# does (\n, \033, \ooo), and every JSON output (ls --json, backup
# --output-format json, json-status files, list --output-format json) is
# valid JSON whose *_b64 members give the exact bytes back.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
D=$SCRATCH/dump
MANIFEST="python3 $TOP/tests/helpers/manifest.py"
LONG=$(printf 'long%.0s' $(seq 40))

test_expect_success ROOT 'setup: a guest with names that are not UTF-8 or hold control bytes' '
	mkdir -p "$SRC/etc" "$SRC/d"$'\''\xe9'\''"ir" "$SCRATCH/tmp" "$D"
	echo guest >"$SRC/etc/hostname"
	echo cafe >"$SRC/caf"$'\''\xe9'\''
	echo deep >"$SRC/d"$'\''\xe9'\''"ir/$LONG"$'\''\xfe'\''
	ln -s "tar"$'\''\xff'\''"get" "$SRC/li"$'\''\xfe'\''"nk"
	ln "$SRC/caf"$'\''\xe9'\'' "$SRC/hard"$'\''\xe9'\''
	echo forged >"$SRC/nl"$'\''\nERROR: x\033[2J'\''
	echo c1 >"$SRC/c1"$'\''\xc2\x85'\''
	echo bs >"$SRC/back\\slash"
	echo ok >"$SRC/ünïcödé"
	$MANIFEST --skip-root "$SRC" >src.manifest
'

test_expect_success ROOT 'backup: exit 0, no warning, hdrcharset=BINARY in the archive' '
	cbackup_run 0 backup --root "$SRC" --id 480 --tmpdir "$SCRATCH/tmp" --dumpdir "$D" --verbose
	a=$(find_archive "$D" ct 480 .zst)
	test_lacks "$CB_ERR" "^(ERROR|WARN: .*(translate|UTF-8))"
	test_lacks "$CB_ERR" "translate"
	test_has "$CB_ERR" "^INFO: .\./caf\\\\351.: name or link target not UTF-8: archived as raw bytes \(pax hdrcharset=BINARY\)"
	zstd -dc "$a" >plain.tar
	test_has plain.tar "hdrcharset=BINARY"
'

test_expect_success ROOT 'cbackup restore: every name and link target byte for byte' '
	a=$(find_archive "$D" ct 480 .zst)
	cbackup_run 0 restore "$a" "$SCRATCH/r1"
	$MANIFEST --skip-root "$SCRATCH/r1" >r1.manifest
	test_cmp src.manifest r1.manifest
'

test_expect_success ROOT 'cbackup restore --path of a directory whose name is not UTF-8' '
	a=$(find_archive "$D" ct 480 .zst)
	cbackup_run 0 restore "$a" "$SCRATCH/r2" --path "./d"$'\''\xe9'\''"ir"
	test "$(cat "$SCRATCH/r2/d"$'\''\xe9'\''"ir/$LONG"$'\''\xfe'\'')" = deep
'

test_expect_success ROOT 'GNU tar extracts the same bytes' '
	mkdir "$SCRATCH/r3"
	tar -xpf plain.tar -C "$SCRATCH/r3" 2>tar.err
	# GNU tar 1.34 does not know the keyword: it says so, exit 0
	test_has tar.err "Ignoring unknown extended header keyword .hdrcharset."
	$MANIFEST --skip-root "$SCRATCH/r3" >r3.manifest
	test_cmp src.manifest r3.manifest
'

test_expect_success ROOT,BSDTAR 'bsdtar extracts the same bytes' '
	mkdir "$SCRATCH/r4"
	bsdtar -xpf plain.tar -C "$SCRATCH/r4"
	$MANIFEST --skip-root "$SCRATCH/r4" >r4.manifest
	test_cmp src.manifest r4.manifest
'

test_expect_success ROOT 'a GNU tar archive with raw names (no hdrcharset): restored exactly, WARN lines' '
	mkdir -p gt/src
	echo data >"gt/src/$LONG"$'\''\xe9'\''
	tar --format=posix -cf gt/g.tar -C gt/src .
	zstd -q gt/g.tar -o gt/g.tar.zst
	cbackup_run 0 restore gt/g.tar.zst "$SCRATCH/r5"
	test "$(cat "$SCRATCH/r5/$LONG"$'\''\xe9'\'')" = data
	test_has "$CB_ERR" "^WARN: .*can.t be converted"
	cbackup_run 0 verify gt/g.tar.zst
	test_has "$CB_ERR" "^WARN: .\./long.*\\\\351.: Pathname can.t be converted"
'

test_expect_success ROOT 'cbackup ls quotes names exactly as tar -tv does' '
	a=$(find_archive "$D" ct 480 .zst)
	cbackup_run 0 ls "$a"
	tar -tvf plain.tar 2>/dev/null >tar.list
	test_cmp tar.list "$CB_OUT"
	test_has "$CB_OUT" " \./nl\\\\nERROR: x\\\\033\[2J\$"
	test_has "$CB_OUT" " \./caf\\\\351\$"
	test_has "$CB_OUT" " \./c1\\\\302\\\\205\$"
	test_has "$CB_OUT" " \./li\\\\376nk -> tar\\\\377get\$"
	test_has "$CB_OUT" " \./back\\\\\\\\slash\$"
	test_has "$CB_OUT" " \./ünïcödé\$"
	test_lacks "$CB_OUT" "[[:cntrl:]]"
	test "$(wc -l <"$CB_OUT")" = "$(wc -l <tar.list)"
'

# ls --json output and a tree: every line a JSON object; the names its
# path/link members (or their _b64 members) give are the tree's, byte for
# byte; a member with U+FFFD always has its _b64 beside it
JSONL_NAMES='
import base64, json, os, sys
names, links = set(), set()
for line in open(sys.argv[1], "rb"):
    d = json.loads(line)
    for k in ("path", "link"):
        if k not in d: continue
        assert "\ufffd" not in d[k] or k + "_b64" in d, d
        raw = base64.b64decode(d[k + "_b64"]) if k + "_b64" in d else d[k].encode()
        (names if k == "path" else links).add(raw)
want = {b"./"}
for top, dirs, files in os.walk(sys.argv[2].encode()):
    rel = b"." + top[len(sys.argv[2].encode()):]
    want |= {rel + b"/" + n + b"/" for n in dirs} | {rel + b"/" + n for n in files}
assert names == want, (names ^ want)
assert links == {b"tar\xffget", b"./caf\xe9"}, links
'

test_expect_success ROOT 'ls --json: valid JSON; the _b64 members give the names back byte for byte' '
	a=$(find_archive "$D" ct 480 .zst)
	cbackup_run 0 ls --json "$a"
	python3 -c "import json,sys; [json.loads(l) for l in sys.stdin]" <"$CB_OUT"
	python3 -c "$JSONL_NAMES" "$CB_OUT" "$SRC"
'

test_expect_success ROOT 'backup --output-format json and json-status with a name that is not UTF-8' '
	mkdir "$SCRATCH/status"
	# (a root that does not exist: a configuration error, exit 2, issue 28)
	cbackup_run 2 backup --root "$SCRATCH/gone"$'\''\xe9\n\033'\'' --id 481 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$D" --output-format json --json-status "$SCRATCH/status"
	python3 -c "import json,sys; json.load(sys.stdin)" <"$CB_OUT"
	for f in "$SCRATCH"/status/*.json; do
		python3 -c "import json,sys; json.load(sys.stdin)" <"$f"
	done
	python3 -c "
import base64, json, sys
d = json.load(open(sys.argv[1]))
raw = base64.b64decode(d[\"command_b64\"])
assert b\"gone\\xe9\\n\\x1b\" in raw, raw
assert \"gone\\ufffd\\n\\x1b\" in d[\"command\"], d[\"command\"]
g = d[\"guests\"][0]
assert b\"gone\\xe9\" in base64.b64decode(g[\"error_b64\"]), g
" "$CB_OUT"
'

test_expect_success ROOT 'list: notes that are not UTF-8, in JSON (exact) and as text (quoted)' '
	a=$(find_archive "$D" ct 480 .zst)
	printf "note \351\033[1m\n" >"$a.notes"
	cbackup_run 0 list --dumpdir "$D" --output-format json
	python3 -c "
import base64, json, sys
d = json.load(open(sys.argv[1]))
assert base64.b64decode(d[0][\"notes_b64\"]) == b\"note \\xe9\\x1b[1m\", d  # the file'"'"'s newline is not the note'"'"'s
" "$CB_OUT"
	cbackup_run 0 list --dumpdir "$D"
	test_has "$CB_OUT" " note \\\\351\\\\033\\[1m\$"
	test_lacks "$CB_OUT" "[[:cntrl:]]"
'

test_done
