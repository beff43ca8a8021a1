#!/bin/bash
# vzdump's notes-template, protected and maxfiles (issue 19):
# notes-template with every variable ({{cluster}} {{guestname}} {{node}}
# {{vmid}}, cbackup's {{type}}, "\n") -> ARCHIVE.notes (0644, shown by
# `cbackup list`, removed by prune with its archive); an unknown variable
# is a config error with file:line; protected 1 -> ARCHIVE.protected, kept
# by prune; maxfiles N = keep-last=N with a WARN; maxfiles beside
# prune-backups (in one section, or both on the command line) = exit 2.
. "$(dirname "$0")/lib.sh"

D=$SCRATCH/dump
CONF=$SCRATCH/c.conf
NODE=$(hostname | cut -d. -f1)

test_expect_success 'setup: a guest with a host name' '
	make_small_tree "$SCRATCH/ct101" web-101
	mkdir "$SCRATCH/tmp" "$D"
	cat >"$CONF" <<-CONF
	tmpdir: $SCRATCH/tmp
	dumpdir: $D
	[ct 101]
	root = $SCRATCH/ct101
	CONF
'

test_expect_success 'notes-template with every variable: ARCHIVE.notes, mode 0644 under umask 077' '
	cat >notes.conf <<-CONF
	notes-template: {{guestname}} ({{type}} {{vmid}}) on {{node}}, cluster {{cluster}}\\nsecond line \\\\ end
	CONF
	cat "$CONF" >>notes.conf
	(umask 077; cbackup_run 0 101 --config notes.conf)
	a=$(find_archive "$D" ct 101 .zst)
	printf "%s\n" "web-101 (ct 101) on $NODE, cluster $NODE" "second line \\ end" >expected
	test_cmp expected "$a.notes"
	test "$(stat -c %a "$a.notes")" = 644
	test ! -e "$a.protected"
'

test_expect_success 'cbackup list shows the first line of the notes' '
	cbackup_run 0 list --config "$CONF"
	test_has "$CB_OUT" "^101 .* vzdump-lxc-101-.*\\.tar\\.zst  web-101 \\(ct 101\\) on $NODE, cluster $NODE\$"
	test_lacks "$CB_OUT" "second line"
'

test_expect_success 'list --output-format json: the notes without the trailing newline (as vzdump)' '
	cbackup_run 0 list 101 --config "$CONF" --output-format json
	cat "$CB_OUT"
	python3 -c "
import json, sys
notes = [e[\"notes\"] for e in json.load(open(sys.argv[1]))]
want = sys.argv[2] + \"\\n\" + sys.argv[3]
assert notes == [want], (notes, want)
" "$CB_OUT" "web-101 (ct 101) on $NODE, cluster $NODE" "second line \\ end"
'

test_expect_success 'prune removes the notes with the archive' '
	a=$(find_archive "$D" ct 101 .zst)
	sleep 1.1
	cbackup_run 0 101 --config "$CONF" --notes-template "newer"
	cbackup_run 0 prune 101 --config "$CONF" --prune-backups keep-last=1
	test ! -e "$a"
	test ! -e "$a.notes"
	b=$(find_archive "$D" ct 101 .zst)
	test "$(cat "$b.notes")" = newer
'

test_expect_success 'an unknown template variable is a config error with file:line (exit 2)' '
	printf "dumpdir: %s\nnotes-template: {{guestname}} {{vmname}}\n" "$D" >bad.conf
	cbackup_run 2 backup --root "$SCRATCH/ct101" --config bad.conf
	test_has "$CB_ERR" "^ERROR: bad.conf:2: key .notes-template.: unknown variable .\\{\\{vmname\\}\\}."
'

test_expect_success 'protected 1: ARCHIVE.protected (0644), and prune keeps it' '
	rm -f "$D"/vzdump-lxc-* "$D"/cbackup-*
	cbackup_run 0 101 --config "$CONF" --protected 1
	a=$(find_archive "$D" ct 101 .zst)
	test -f "$a.protected"
	test "$(stat -c %a "$a.protected")" = 644
	sleep 1.1
	cbackup_run 0 101 --config "$CONF" --prune-backups keep-last=1
	test -e "$a"
	test "$(ls "$D"/vzdump-lxc-101-*.tar.zst | wc -l)" = 2
	cbackup_run 0 list --config "$CONF"
	test_has "$CB_OUT" "^101 +ct .* yes +yes .*$(basename "$a")"
'

test_expect_success 'maxfiles 1 alone: keep-last=1, with a WARN naming file:line' '
	rm -f "$D"/vzdump-lxc-* "$D"/cbackup-*
	printf "maxfiles: 1\n" >max.conf
	cat "$CONF" >>max.conf
	cbackup_run 0 101 --config max.conf
	sleep 1.1
	cbackup_run 0 101 --config max.conf
	test_has "$CB_ERR" "^WARN: max.conf:1: key .maxfiles. is deprecated: it means prune-backups = keep-last=1; write that instead\$"
	test_has "$CB_ERR" "^INFO: prune older backups with retention: keep-last=1\$"
	test "$(ls "$D"/vzdump-lxc-101-*.tar.zst | wc -l)" = 1
'

test_expect_success 'maxfiles on the command line: a WARN, keep-last=N' '
	cbackup_run 0 101 --config "$CONF" --maxfiles 1
	test_has "$CB_ERR" "^WARN: option --maxfiles is deprecated: it means --prune-backups keep-last=1"
	test "$(ls "$D"/vzdump-lxc-101-*.tar.zst | wc -l)" = 1
'

test_expect_success 'maxfiles and prune-backups both set: exit 2 with file:line, nothing touched' '
	rm -f "$D"/vzdump-lxc-* "$D"/cbackup-*
	printf "dumpdir: %s\nmaxfiles: 3\nprune-backups: keep-daily=7\n" "$D" >both.conf
	cbackup_run 2 backup --root "$SCRATCH/ct101" --config both.conf
	test_has "$CB_ERR" "^ERROR: both.conf:3: keys .maxfiles. and .prune-backups. are both set \\(the other at line 2\\); keep only prune-backups\$"
	cbackup_run 2 101 --config "$CONF" --maxfiles 3 --prune-backups keep-last=2
	test_has "$CB_ERR" "^ERROR: options --maxfiles and --prune-backups are both given"
	test -z "$(ls "$D")"
'

test_expect_success 'maxfiles 0 is a bad value (vzdump: at least 1)' '
	printf "dumpdir: %s\nmaxfiles: 0\n" "$D" >zero.conf
	cbackup_run 2 backup --root "$SCRATCH/ct101" --config zero.conf
	test_has "$CB_ERR" "^ERROR: zero.conf:2: key .maxfiles.: invalid value .0."
'

test_done
