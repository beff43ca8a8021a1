#!/bin/bash
# A parallel cold copy (issue 16, item 2): pass 1 with 1, 2 and 8 workers
# (stage-workers) leaves the same staging tree, equal to the source in
# every field manifest.py sees (hardlinks across directories resolved
# once, directory times set after their entries), and archives with the
# same members. keep-staging 1 so that the staged tree stays to be read.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
MANIFEST="python3 $TOP/tests/helpers/manifest.py"
mkdir -p "$SCRATCH/tmp"

test_expect_success ROOT,ACL,SETCAP 'setup: a full tree, 3000 small files, hardlinks across directories' '
	make_full_tree "$SRC"
	make_many_files "$SRC/many" 3000
	for i in 0 1 2 3 4 5; do ln "$SRC/many/many0/f$i" "$SRC/many/many5/link$i"; done
	ln "$SRC/random.bin" "$SRC/many/many3/random-link"
	find "$SRC/many" -depth -exec touch -h -d "$NS_TIME" {} +
	$MANIFEST "$SRC" >"$SCRATCH/src.manifest"
'

for w in 1 2 8; do
	test_expect_success ROOT,ACL,SETCAP "pass 1 with $w worker(s): staged tree equals the source" "
		mkdir \"\$SCRATCH/dump-$w\"
		cbackup_run 0 backup --root \"\$SRC\" --id 703$w --tmpdir \"\$SCRATCH/tmp\" \\
			--dumpdir \"\$SCRATCH/dump-$w\" --keep-staging 1 --stage-workers $w \\
			--freeze-cmd true --thaw-cmd true
		test_lacks \"\$CB_ERR\" '^(WARN|ERROR): '
		\$MANIFEST \"\$SCRATCH/tmp/cbackup/cbackup-703$w.stage\" >\"\$SCRATCH/stage-$w.manifest\"
		test_cmp \"\$SCRATCH/src.manifest\" \"\$SCRATCH/stage-$w.manifest\"
		archive=\$(find_archive \"\$SCRATCH/dump-$w\" ct 703$w .zst)
		zstd -dc \"\$archive\" | tar --numeric-owner -tvf - | LC_ALL=C sort >\"\$SCRATCH/members-$w\"
	"
done

test_expect_success ROOT,ACL,SETCAP 'the archives of 1, 2 and 8 workers have the same members' '
	test -s "$SCRATCH/members-1"
	test_cmp "$SCRATCH/members-1" "$SCRATCH/members-2"
	test_cmp "$SCRATCH/members-1" "$SCRATCH/members-8"
	test_cmp "$SCRATCH/stage-1.manifest" "$SCRATCH/stage-8.manifest"
'

test_expect_success ROOT,ACL,SETCAP 'a keep-staging delta with 8 workers copies only the change' '
	echo changed >"$SRC/many/many2/f1000"
	cbackup_run 0 backup --root "$SRC" --id 7038 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/dump-8" --keep-staging 1 --stage-workers 8 \
		--freeze-cmd true --thaw-cmd true
	test "$(grep -m1 "Number of files transferred:" "$CB_ERR" | sed "s/.*: //")" = 1
	$MANIFEST "$SRC" >"$SCRATCH/src.manifest"
	$MANIFEST "$SCRATCH/tmp/cbackup/cbackup-7038.stage" >"$SCRATCH/stage-8.manifest"
	test_cmp "$SCRATCH/src.manifest" "$SCRATCH/stage-8.manifest"
'

test_done
