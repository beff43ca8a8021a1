#!/bin/bash
# A full restore costs a bounded number of path lookups an entry (issue 38):
# no walk of every name from the top for every entry, no unlink of names
# in a tree cbackup makes from empty. Counted with strace -c around a
# restore of 2000 files (a count of system calls, not a time): opens,
# stats and unlinks together stay under 2 an entry, no unlink fails; the
# same without openat2 (strace makes it fail with ENOSYS, as on kernels
# before 5.6: the component walk), and the tree comes back exact. The
# space check before it reads the catalog, not a second decoding pass,
# also when a sparse file is in it.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src

# lookups FILE: opens + stats + unlinks that strace -c counted
lookups() {
	awk '$NF ~ /^(open|openat|openat2|creat|stat|lstat|newfstatat|fstatat64|statx|unlink|unlinkat|rmdir)$/ {
		n += $4 } END { print n + 0 }' "$1"
}

# failed_unlinks FILE: unlinks strace -c counted as errors
failed_unlinks() {
	awk '$NF ~ /^unlink(at)?$/ && NF == 6 { n += $5 } END { print n + 0 }' "$1"
}

# count_restore DEST [STRACE ARGS]: restore under strace -c, the counts checked
count_restore() {
	local dest=$1 entries calls
	shift
	strace -f -c -o "$SCRATCH/counts" "$@" "$CBACKUP" restore "$(cat archive-name)" "$dest" \
		>"$CB_OUT" 2>"$CB_ERR"
	cat "$CB_ERR"
	entries=$(sed -n "s/.*INFO: restored \([0-9]*\) entries.*/\1/p" "$CB_ERR")
	calls=$(lookups "$SCRATCH/counts")
	sort -k4 -n -r "$SCRATCH/counts" | head -n 12
	echo "$entries entries, $calls opens/stats/unlinks, $(failed_unlinks "$SCRATCH/counts") failed unlinks"
	test "$entries" -gt 2000
	test "$calls" -lt $((2 * entries))
	test "$(failed_unlinks "$SCRATCH/counts")" = 0
	tree_list "$dest" >restored
	test_cmp source restored
}

tree_list() { (cd "$1" && find . -mindepth 1 -printf '%p %y %m %U:%G %s %T@ %l\n' | LC_ALL=C sort); }

test_expect_success ROOT 'setup: 2000 files in 40 directories 3 levels deep, symlinks' '
	command -v strace
	mkdir -p "$SRC" "$SCRATCH/tmp" "$SCRATCH/dump"
	for d in $(seq 40); do
		sub=$SRC/top$((d % 4))/mid$((d % 8))/dir$d
		mkdir -p "$sub"
		for f in $(seq 50); do echo "$d $f" >"$sub/f$f"; done
		ln -s f1 "$sub/link"
		chmod 0750 "$sub"
	done
	find "$SRC" -exec touch -h -d "2001-02-03 04:05:06.5" {} +
	tree_list "$SRC" >source
	cbackup_run 0 backup --root "$SRC" --id 487 --tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/dump"
	find_archive "$SCRATCH/dump" ct 487 .zst >archive-name
'

test_expect_success ROOT 'full restore: under 2 opens/stats/unlinks an entry, no failed unlink' '
	count_restore "$SCRATCH/r1"
'

test_expect_success ROOT 'without openat2 (ENOSYS): the same bound, the same tree' '
	count_restore "$SCRATCH/r2" -e inject=openat2:error=ENOSYS
'

# archive_opens FILE: opens of the archive itself that strace -e trace=openat saw
archive_opens() { grep -c "\"$(cat archive-name)\"" "$1" || true; }

test_expect_success ROOT 'the space check takes the catalog: the archive is decoded once' '
	strace -f -e trace=openat -o "$SCRATCH/opens" "$CBACKUP" restore "$(cat archive-name)" "$SCRATCH/r3" \
		>"$CB_OUT" 2>"$CB_ERR"
	[ "$(archive_opens "$SCRATCH/opens")" = 1 ]
	# no catalog: the counting pass decodes it first, the restore is the same
	mv "$(cat archive-name).idx" "$SCRATCH/idx"
	strace -f -e trace=openat -o "$SCRATCH/opens" "$CBACKUP" restore "$(cat archive-name)" "$SCRATCH/r4" \
		>"$CB_OUT" 2>"$CB_ERR"
	mv "$SCRATCH/idx" "$(cat archive-name).idx"
	[ "$(archive_opens "$SCRATCH/opens")" = 2 ]
	tree_list "$SCRATCH/r4" >restored
	test_cmp source restored
'

test_expect_success ROOT 'a sparse file in it: the catalog still says what it takes, decoded once' '
	truncate -s 256M "$SRC/top0/db.img"
	printf "page" | dd of="$SRC/top0/db.img" bs=4096 seek=1000 conv=notrunc 2>/dev/null
	sleep 1.1
	cbackup_run 0 backup --root "$SRC" --id 488 --tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/dump"
	a=$(find_archive "$SCRATCH/dump" ct 488 .zst)
	strace -f -e trace=openat -o "$SCRATCH/opens" "$CBACKUP" restore "$a" "$SCRATCH/r5" \
		>"$CB_OUT" 2>"$CB_ERR"
	cat "$CB_ERR"
	test "$(grep -c "\"$a\"" "$SCRATCH/opens")" = 1
	cmp "$SRC/top0/db.img" "$SCRATCH/r5/top0/db.img"
	test "$(stat -c %b "$SCRATCH/r5/top0/db.img")" -lt 1024
	rm "$SRC/top0/db.img"
'

test_done
