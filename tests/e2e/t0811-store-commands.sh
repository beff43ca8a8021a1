#!/bin/bash
# Commands on a unit store's nights, named STORAGE:NAME (issue 41): list
# shows the nights, restore (whole and --path) gives the tree back byte
# for byte, ls reads the catalog, verify checks every unit's digest and
# names a damaged or missing unit with every night it breaks.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
STORE=$SCRATCH/store
CONF=$SCRATCH/cbackup.conf


night() {
	sleep 1.1
	cbackup_run 0 backup --config "$CONF" --storage offsite --root "$SRC" --id "$1" --type ct \
		--unit-size 1
}

nights() { ls -1 "$STORE/nights/" | grep "^cbackup-ct-$1-"; }

test_expect_success ROOT 'list shows the nights of a store, of every guest' '
	store_setup 300
	night 101
	printf "night 2\n" >>"$SRC/var/log/syslog"
	night 101
	sleep 1.1
	cbackup_run 0 backup --config "$CONF" --storage offsite --root "$SRC" --id 102 --type ct \
		--unit-size 1 --output-format json
	n=$(nights 102)
	test_has "$CB_ERR" "INFO: creating vzdump archive .offsite:$n."
	python3 -c "import json, sys; g = json.load(open(sys.argv[1]))[\"guests\"][0]; assert g[\"archive\"] == \"offsite:\" + sys.argv[2], g" "$CB_OUT" "$n"
	cbackup_run 0 list --config "$CONF" --storage offsite
	test "$(grep -c "cbackup-ct-101-.*\.tar\.zst" "$CB_OUT")" = 2
	test_has "$CB_OUT" "^102 +ct .* zstd +no +yes .*cbackup-ct-102-"
	cbackup_run 0 list 101 --config "$CONF" --storage offsite --output-format json
	python3 -c "import json, sys; l = json.load(open(sys.argv[1])); assert len(l) == 2 and l[0][\"archive\"].startswith(\"offsite:cbackup-ct-101-\"), l" "$CB_OUT"
'

test_expect_success ROOT 'restore STORAGE:NAME gives the tree back; --path only those; nothing left in the tmpdir' '
	n=$(nights 101 | tail -n 1)
	cbackup_run 0 restore --config "$CONF" "offsite:$n" "$SCRATCH/r1"
	diff -r "$SRC" "$SCRATCH/r1"
	cbackup_run 0 restore --config "$CONF" "offsite:$n" "$SCRATCH/r2" --path ./usr/share/f20.txt
	cmp "$SRC/usr/share/f20.txt" "$SCRATCH/r2/usr/share/f20.txt"
	test "$(find "$SCRATCH/r2" -type f | wc -l)" = 1
	test_lacks <(ls "$SCRATCH/tmp/cbackup") "cbackup-ct-101-.*\.tar"
	# the older night is the tree before the change
	o=$(nights 101 | head -n 1)
	cbackup_run 0 restore --config "$CONF" "offsite:$o" "$SCRATCH/r3" --path ./var/log/syslog
	test_lacks "$SCRATCH/r3/var/log/syslog" "night 2"
'

test_expect_success ROOT 'restore --path fetches only the units its paths are in' '
	n=$(nights 101 | tail -n 1)
	grep "^unit " "$STORE/nights/$n" | cut -d" " -f2 >"$SCRATCH/units"
	test "$(wc -l <"$SCRATCH/units")" -gt 10
	# the middle units hidden: ./etc/conf (at the start) needs none of them
	mkdir "$SCRATCH/hidden"
	last=$(( $(wc -l <"$SCRATCH/units") - 2 ))
	for h in $(sed -n "6,${last}p" "$SCRATCH/units"); do
		mv "$STORE/units/${h:0:2}/$h" "$SCRATCH/hidden/"
	done
	cbackup_run 0 restore --config "$CONF" "offsite:$n" "$SCRATCH/p1" --path ./etc/conf
	cmp "$SRC/etc/conf" "$SCRATCH/p1/etc/conf"
	cbackup_run 1 restore --config "$CONF" "offsite:$n" "$SCRATCH/p2"
	test_has "$CB_ERR" "unit .units/.*. is missing"
	for f in "$SCRATCH"/hidden/*; do
		h=$(basename "$f")
		mv "$f" "$STORE/units/${h:0:2}/$h"
	done
'

test_expect_success ROOT 'ls STORAGE:NAME lists the entries from the catalog' '
	n=$(nights 101 | tail -n 1)
	cbackup_run 0 ls --config "$CONF" "offsite:$n" ./usr/share/f1.txt
	test_has "$CB_OUT" "\./usr/share/f1\.txt$"
'

test_expect_success ROOT 'an unknown night is an error naming it' '
	cbackup_run 1 restore --config "$CONF" offsite:cbackup-ct-101-2001_01_01-00_00_00.tar.zst "$SCRATCH/r4"
	test_has "$CB_ERR" "ERROR: restore of .offsite:cbackup-ct-101-2001_01_01-00_00_00.tar.zst. failed - storage .offsite.: no night"
'

test_expect_success ROOT 'verify: a good night; a flipped byte and a missing unit named with the nights they break' '
	n=$(nights 101 | tail -n 1)
	cbackup_run 0 verify --config "$CONF" "offsite:$n"
	test_has "$CB_ERR" "every unit is there and matches its digest"
	cbackup_run 0 verify --config "$CONF" offsite:
	# a unit every night has (the first: the tar start is the same)
	h=$(grep "^unit " "$STORE/nights/$n" | sed -n 1p | cut -d" " -f2)
	f=$STORE/units/${h:0:2}/$h
	python3 -c "import sys; f = open(sys.argv[1], \"r+b\"); f.seek(50); b = f.read(1); f.seek(50); f.write(bytes([b[0] ^ 1]))" "$f"
	cbackup_run 1 verify --config "$CONF" "offsite:$n"
	test_has "$CB_ERR" "ERROR: storage .offsite.: unit .units/${h:0:2}/$h. is damaged .*breaks .*cbackup-ct-101-.*cbackup-ct-102-"
	cbackup_run 1 restore --config "$CONF" "offsite:$n" "$SCRATCH/r5"
	test_has "$CB_ERR" "unit .units/${h:0:2}/$h. is damaged"
	test ! -e "$SCRATCH/r5/usr"
	rm "$f"
	# ls reads the catalog alone: no unit fetched
	cbackup_run 0 ls --config "$CONF" "offsite:$n" ./usr/share/f1.txt
	test_has "$CB_OUT" "\./usr/share/f1\.txt$"
	cbackup_run 1 verify --config "$CONF" offsite:
	test_has "$CB_ERR" "ERROR: storage .offsite.: unit .units/${h:0:2}/$h. is missing: breaks "
	test_has "$CB_ERR" "verify of .offsite:. failed - storage .offsite.: 1 unit\(s\) missing or damaged"
'

test_expect_success ROOT 'the next night writes the missing unit again; mount STORAGE:NAME shows it; its copy goes at unmount; index is refused' '
	night 101
	cbackup_run 0 verify --config "$CONF" "offsite:$(nights 101 | tail -n 1)"
	if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
		echo "# no /dev/fuse or fusermount3: mount not tried"
	else
		n=$(nights 101 | tail -n 1)
		mkdir "$SCRATCH/mnt"
		cleanup_mount "$SCRATCH/mnt"
		cbackup_run 0 mount --config "$CONF" "offsite:$n" "$SCRATCH/mnt"
		cmp "$SRC/usr/share/f20.txt" "$SCRATCH/mnt/usr/share/f20.txt"
		fusermount3 -u "$SCRATCH/mnt"
		wait_for 10 test_must_fail mountpoint -q "$SCRATCH/mnt"
		wait_for 10 test_lacks <(ls "$SCRATCH/tmp/cbackup") "\.tar\.zst"
	fi
	cbackup_run 1 index --config "$CONF" "offsite:$(nights 101 | tail -n 1)"
	test_has "$CB_ERR" "keeps its catalog in its manifest"
'

test_expect_success ROOT 'a damaged manifest is refused naming its night, and stops a collection' '
	n=$(nights 102)
	cp "$STORE/nights/$n" "$SCRATCH/m.bak"
	sed -i "s/^size .*/size 1/" "$STORE/nights/$n"
	cbackup_run 1 restore --config "$CONF" "offsite:$n" "$SCRATCH/r6"
	test_has "$CB_ERR" "manifest of .$n. is damaged"
	cbackup_run 1 verify --config "$CONF" offsite:
	test_has "$CB_ERR" "manifest of .$n. is damaged"
	units=$(find "$STORE/units" -type f | wc -l)
	cbackup_run 1 prune --config "$CONF" --storage offsite --prune-backups keep-all=1
	test_has "$CB_ERR" "garbage collection of storage .offsite. failed - nothing collected: .*manifest of .$n. is damaged"
	test "$(find "$STORE/units" -type f | wc -l)" = "$units"
	cp "$SCRATCH/m.bak" "$STORE/nights/$n"
	cbackup_run 0 verify --config "$CONF" offsite:
'

test_expect_success ROOT 'notes and protection are in the manifest: list shows them, prune keeps it; an unknown storage is named' '
	sleep 1.1
	cbackup_run 0 backup --config "$CONF" --storage offsite --root "$SRC" --id 103 --type ct \
		--protected 1 --notes-template "db {{vmid}}"
	test_lacks <(ls "$STORE") "\.notes$|\.protected$"
	cbackup_run 0 list 103 --config "$CONF" --storage offsite
	test_has "$CB_OUT" "^103 +ct .* yes +yes +no +cbackup-ct-103-.*  db 103$"
	sleep 1.1
	cbackup_run 0 backup --config "$CONF" --storage offsite --root "$SRC" --id 103 --type ct
	# keep-last=1 keeps the newest; the older one is protected
	cbackup_run 0 prune 103 --config "$CONF" --storage offsite --prune-backups keep-last=1
	test "$(nights 103 | wc -l)" = 2
	cbackup_run 1 restore --config "$CONF" "nosuch:$(nights 103 | head -n 1)" "$SCRATCH/r7"
	test_has "$CB_ERR" "no storage .nosuch. in the configuration"
'

test_expect_success ROOT 'every file type restored from a store as it was: metadata, xattrs, ACLs, hardlinks, sparse files' '
	make_full_tree "$SCRATCH/full"
	sleep 1.1
	cbackup_run 0 backup --config "$CONF" --storage offsite --root "$SCRATCH/full" --id 104 --type ct
	cbackup_run 0 restore --config "$CONF" "offsite:$(nights 104)" "$SCRATCH/r8"
	compare_trees "$SCRATCH/full" "$SCRATCH/r8"
	# and GNU tar reads the units as they are
	mkdir "$SCRATCH/r9"
	grep "^unit " "$STORE/nights/$(nights 104)" | while read -r _ h _; do
		cat "$STORE/units/${h:0:2}/$h"
	done | zstd -dc | tar --xattrs --xattrs-include="*" --acls --numeric-owner -xpf - -C "$SCRATCH/r9"
	compare_trees "$SCRATCH/full" "$SCRATCH/r9"
'

test_expect_success ROOT 'a hook on a store night: TARGET is STORAGE:NAME (no file of that path), what restore takes; DUMPDIR the store' '
	printf "#!/bin/sh\necho \"\$1 \${DUMPDIR-none} \${TARGET-none}\" >>%s/hook.trace\n" "$SCRATCH" \
		>"$SCRATCH/hook"
	chmod +x "$SCRATCH/hook"
	sleep 1.1
	cbackup_run 0 backup --config "$CONF" --storage offsite --root "$SRC" --id 105 --type ct \
		--script "$SCRATCH/hook"
	cat "$SCRATCH/hook.trace"
	test_has "$SCRATCH/hook.trace" "^backup-end $STORE offsite:$(nights 105)$"
	test_has "$CB_ERR" "INFO: Finished Backup of VM 105"
	t=$(sed -n "s|^backup-end $STORE ||p" "$SCRATCH/hook.trace")
	cbackup_run 0 restore --config "$CONF" "$t" "$SCRATCH/r10"
	diff -r "$SRC" "$SCRATCH/r10"
	cbackup_run 0 backup --config "$CONF" --storage offsite --root "$SRC" --id 105 --type ct --dry-run
	test_has "$CB_ERR" "^INFO: dry run: archive .offsite:cbackup-ct-105-[0-9_-]*\.tar\.zst.$"
'

test_done
