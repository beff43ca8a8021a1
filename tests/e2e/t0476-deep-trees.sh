#!/bin/bash
# No limit from nesting depth (issue 14, point 4): a guest 2000 directories
# deep is backed up, verified and restored with at most 1024 open files
# (`ulimit -n 1024`). Each walk (estimate, pass 1, pass 2, the archive
# walk, restore, the removal of the staging copy) holds a bounded number of
# directory fds whatever the depth: it closes fds of the levels above and
# opens them again from a held ancestor when it climbs back.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
HOOK=$SCRATCH/hook.sh
MANIFEST="python3 $TOP/tests/helpers/manifest.py"
DEPTH=2000

# limited ARGS...: cbackup under ulimit -n 1024 (output as cbackup_run)
limited() { (ulimit -n 1024 && cbackup_run "$@"); }

test_expect_success ROOT 'setup: 2000 nested directories, entries on every 100th level' '
	mkdir -p "$SRC" "$SCRATCH/tmp" "$SCRATCH/dump"
	python3 - "$SRC" "$DEPTH" <<-"PY"
	import os, sys
	os.chdir(sys.argv[1])
	for i in range(int(sys.argv[2])):
	    os.mkdir("d")
	    os.chdir("d")
	    if i % 100 == 99:
	        open("f", "w").write("level %d\n" % i)
	        os.symlink("f", "l")
	        os.link("f", "h")
	        os.mkfifo("p")
	open("bottom", "w").write("at the bottom\n")
	PY
	cat >"$HOOK" <<-EOF
	#!/bin/bash
	[ "\$1" = pre-stop ] || exit 0
	cd "$SRC/\$(printf "d/%.0s" \$(seq 1500))"
	echo changed-between-passes >new-in-pass-2
	cd "\$(printf "d/%.0s" \$(seq 400))"
	echo "level 1899, changed between the passes" >f
	rm -rf d
	EOF
	chmod +x "$HOOK"
'

test_expect_success ROOT 'backup under ulimit -n 1024 (pass 2 changes at depth 1500-2000), GNU tar: the tree at the freeze' '
	limited 0 backup --root "$SRC" --id 476 --tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/dump" \
		--freeze-cmd true --thaw-cmd true --script "$HOOK" --keep-staging 1
	archive=$(find_archive "$SCRATCH/dump" ct 476 .zst)
	$MANIFEST "$SRC" >source
	test_has source "/new-in-pass-2 "
	test_lacks source "(d/){1901}"
	mkdir "$SCRATCH/t"
	zstd -dc <"$archive" | tar --numeric-owner -xpf - -C "$SCRATCH/t"
	$MANIFEST "$SCRATCH/t" >tar
	test_cmp source tar
'

test_expect_success ROOT 'verify and restore under ulimit -n 1024: the same tree' '
	archive=$(find_archive "$SCRATCH/dump" ct 476 .zst)
	limited 0 verify "$archive"
	limited 0 restore "$archive" "$SCRATCH/r"
	$MANIFEST "$SCRATCH/r" >restored
	test_cmp source restored
'

test_expect_success ROOT 'a second run (pass 1 against the kept copy) removes a deep subtree and stays exact' '
	rm -rf "$SCRATCH/dump"/*
	(cd "$SRC/$(printf "d/%.0s" $(seq 1000))"; rm -rf d; echo new-at-1000 >g)
	limited 0 backup --root "$SRC" --id 476 --tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/dump" \
		--freeze-cmd true --thaw-cmd true --keep-staging 1
	archive=$(find_archive "$SCRATCH/dump" ct 476 .zst)
	$MANIFEST "$SRC" >source2
	test_has source2 "/g "
	rm -rf "$SCRATCH/t2"
	mkdir "$SCRATCH/t2"
	zstd -dc <"$archive" | tar --numeric-owner -xpf - -C "$SCRATCH/t2"
	$MANIFEST "$SCRATCH/t2" >tar2
	test_cmp source2 tar2
'

test_expect_success ROOT 'without keep-staging the deep staging copy is removed' '
	rm -rf "$SCRATCH/dump"/*
	limited 0 backup --root "$SRC" --id 476 --tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/dump" \
		--freeze-cmd true --thaw-cmd true --keep-staging 0
	find "$SCRATCH/tmp" -mindepth 2 >left
	test_lacks left "stage/"
'

test_done
