#!/bin/bash
# No limit from path length (issue 14, point 4): a guest tree whose paths
# run past PATH_MAX (4096 bytes), with a file, a symlink and a fifo at the
# bottom carrying xattrs and ACLs, is backed up as it was: the staging
# engine and the archive walk reach every entry through directory fds,
# never by a path from the root. No tar restores paths that long (GNU tar:
# "File name too long"), so the archive is checked by restoring its lower
# 15 levels with GNU tar --strip-components; cbackup restores it whole,
# every directory's mode and times included.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
MANIFEST="python3 $TOP/tests/helpers/manifest.py"

test_expect_success ROOT,ACL 'setup: 30 directories of 200-byte names (paths of 6000 bytes)' '
	mkdir -p "$SRC" "$SCRATCH/tmp" "$SCRATCH/dump"
	python3 - "$SRC" <<-"PY"
	import os, sys
	os.chdir(sys.argv[1])
	for i in range(30):
	    d = ("%02d" % i) + "d" * 198
	    os.mkdir(d)
	    os.chdir(d)
	open("file", "w").write("at the bottom\n")
	os.setxattr("file", "user.deep", b"yes")
	os.symlink("file", "link")
	os.setxattr("link", "trusted.deep", b"link", follow_symlinks=False)
	os.mkfifo("fifo")
	os.link("fifo", "fifo2")
	os.setxattr("fifo", "trusted.deep", b"fifo", follow_symlinks=False)
	PY
	(cd "$SRC" && find . -name file -execdir setfacl -m u:3000000001:r file \;)
	$MANIFEST "$SRC" >"$SCRATCH/source"
	test "$(awk "{ print length(\$1) }" "$SCRATCH/source" | sort -n | tail -1)" -gt 6000
	$MANIFEST --skip-root --descend 15 "$SRC" >"$SCRATCH/source-15"
'

test_expect_success ROOT,ACL 'backup, then GNU tar: the same tree' '
	cbackup_run 0 backup --root "$SRC" --id 475 --tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/dump"
	archive=$(find_archive "$SCRATCH/dump" ct 475 .zst)
	mkdir "$SCRATCH/t"
	zstd -dc <"$archive" | tar --numeric-owner --xattrs --xattrs-include="*" --acls \
		--strip-components=16 -xpf - -C "$SCRATCH/t"
	$MANIFEST --skip-root "$SCRATCH/t" >tar
	test_cmp "$SCRATCH/source-15" tar
	# and every entry is in the archive, under its whole name
	zstd -dc <"$archive" | tar -tf - | sed "s,/\$,," | sort >names
	awk "{ print \$1 }" "$SCRATCH/source" | sed "s,^\.\$,.,;s,^[^.],./&," | sort >want
	test_cmp want names
'

test_expect_success ROOT,ACL 'cbackup restore: the same tree, directory times and modes at every depth' '
	archive=$(find_archive "$SCRATCH/dump" ct 475 .zst)
	# modes and times the restore cannot get by chance, deepest levels too
	python3 - "$SRC" <<-"PY"
	import os, stat, sys
	t = 981173106123456789
	for top, dirs, files, fd in os.fwalk(sys.argv[1], topdown=False):
	    for n in dirs + files:
	        if stat.S_ISDIR(os.stat(n, dir_fd=fd, follow_symlinks=False).st_mode):
	            os.chmod(n, 0o750, dir_fd=fd)
	        os.utime(n, ns=(t, t), dir_fd=fd, follow_symlinks=False)
	PY
	$MANIFEST "$SRC" >"$SCRATCH/source-dated"
	rm -f "$SCRATCH/dump"/*
	cbackup_run 0 backup --root "$SRC" --id 475 --tmpdir "$SCRATCH/tmp" --dumpdir "$SCRATCH/dump"
	archive=$(find_archive "$SCRATCH/dump" ct 475 .zst)
	cbackup_run 0 restore "$archive" "$SCRATCH/r"
	$MANIFEST "$SCRATCH/r" >restored
	test_cmp "$SCRATCH/source-dated" restored
'

test_done
