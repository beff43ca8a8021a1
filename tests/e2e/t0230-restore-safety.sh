#!/bin/bash
# Restore safety (issue 5, item 3): crafted archives (built with python3's
# tarfile) try to write outside DESTDIR: "..", absolute names, a symlink
# and then a file through it, hardlinks to outside paths, a hardlink to a
# symlink that points outside, a directory swapped for a symlink before
# its permissions are fixed up; device nodes as non-root; names with
# newlines and invalid UTF-8. Nothing may ever appear or change outside
# DESTDIR, refusals are clear errors (exit 1), and a non-empty DESTDIR
# needs --force.
. "$(dirname "$0")/lib.sh"

OUT=$SCRATCH/outside ARCH=$SCRATCH/arch

outside_manifest() {
	(cd "$OUT" && find . -printf "%p %y %m %s %T@ %l\n" | LC_ALL=C sort
	 cat target)
}

# outside_untouched: nothing outside DESTDIR appeared or changed
outside_untouched() {
	outside_manifest >"$SCRATCH/outside.now"
	diff -u "$SCRATCH/outside.before" "$SCRATCH/outside.now" || { echo "outside changed"; return 1; }
	[ "$(ls -A "$SCRATCH" | grep -v -E "^(outside|arch|locks|dest-.*|cb\.std.*|outside\..*|\.test-.*|\.cleanup-.*)$")" = "" ] ||
		{ echo "new entries beside DESTDIR:"; ls -la "$SCRATCH"; return 1; }
}

# refused NAME: restore fails with a clear error naming the archive, exit 1
refused() {
	cbackup_run 1 restore "$ARCH/$1.tar" "$SCRATCH/dest-$1"
	cat "$CB_ERR"
	grep -E "^ERROR: restore of '.*$1\.tar' failed - " "$CB_ERR"
	outside_untouched
}

test_expect_success 'setup: an outside directory to protect, crafted archives' '
	mkdir -p "$OUT/dir" "$ARCH"
	echo original >"$OUT/target"
	chmod 0600 "$OUT/target"
	chmod 0700 "$OUT/dir"
	python3 - "$ARCH" "$OUT" <<-\PY
	import io, sys, tarfile
	arch, out = sys.argv[1], sys.argv[2]

	def member(name, kind=tarfile.REGTYPE, data=b"", link="", mode=0o644):
	    ti = tarfile.TarInfo(name)
	    ti.type, ti.mode, ti.linkname, ti.mtime = kind, mode, link, 1600000000
	    ti.size = len(data) if kind == tarfile.REGTYPE else 0
	    if kind == tarfile.CHRTYPE:
	        ti.devmajor, ti.devminor = 1, 3   # /dev/null (0:0 is a whiteout anyone may make)
	    return ti, io.BytesIO(data) if ti.size else None

	def make(name, members, fmt=tarfile.PAX_FORMAT):
	    with tarfile.open("%s/%s.tar" % (arch, name), "w", format=fmt) as t:
	        t.addfile(*member("./", tarfile.DIRTYPE, mode=0o755))
	        for m in members:
	            t.addfile(*member(*m))

	D, S, H, C = tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE
	make("dotdot", [("./ok", tarfile.REGTYPE, b"ok\n"), ("../outside/target", tarfile.REGTYPE, b"PWNED\n")])
	make("dotdot-deep", [("a/b/../../../outside/new", tarfile.REGTYPE, b"PWNED\n")])
	make("absolute", [(out + "/new", tarfile.REGTYPE, b"PWNED\n")])
	make("symlink-abs-then-file", [("./link", S, b"", out), ("./link/new", tarfile.REGTYPE, b"PWNED\n")])
	make("symlink-rel-then-file", [("./sub", D), ("./sub/up", S, b"", "../../outside"),
	                               ("./sub/up/new", tarfile.REGTYPE, b"PWNED\n")])
	make("symlink-then-overwrite", [("./t", S, b"", out + "/target"), ("./t", tarfile.REGTYPE, b"PWNED\n")])
	make("hardlink-dotdot", [("./h", H, b"", "../outside/target")])
	make("hardlink-abs", [("./h", H, b"", out + "/target")])
	make("hardlink-to-symlink", [("./s", S, b"", out + "/target"), ("./h", H, b"PWNED\n", "./s")])
	make("dir-then-symlink", [("./d", D, b"", "", 0o777), ("./d", S, b"", out + "/dir")])
	make("device", [("./ok", tarfile.REGTYPE, b"ok\n"), ("./null", C)])
	make("odd-names", [("./new\nline", tarfile.REGTYPE, b"nl\n"), ("./bad-\udcff\udcfe-utf8", tarfile.REGTYPE, b"x\n"),
	                   ("./dir\nwith\nnewlines", D), ("./dir\nwith\nnewlines/f", tarfile.REGTYPE, b"f\n")],
	     fmt=tarfile.GNU_FORMAT)
	make("twice", [("./d", D, b"", "", 0o700), ("./d/f", tarfile.REGTYPE, b"first\n"), ("./d", D, b"", "", 0o751),
	               ("./d/f", tarfile.REGTYPE, b"second\n"), ("./s", S, b"", out + "/dir"), ("./s", D, b"", "", 0o705),
	               ("./s/in", tarfile.REGTYPE, b"in\n"), ("./e", D, b"", "", 0o777), ("./e", S, b"", out + "/dir"),
	               ("./h", H, b"", "./d/f"), ("./p", tarfile.FIFOTYPE), ("./p", S, b"", "d/f")])
	make("good", [("./etc", D), ("./etc/hostname", tarfile.REGTYPE, b"ct\n"), ("./rel", S, b"", "etc/hostname"),
	              ("./abs", S, b"", "/etc/passwd")])
	PY
	ls -la "$ARCH"
	# GNU tar 1.34 writes "\xff" names only as the surrogate escape; check the raw bytes
	python3 -c "import tarfile,sys; print([m.name for m in tarfile.open(sys.argv[1])])" "$ARCH/odd-names.tar"
	outside_manifest >"$SCRATCH/outside.before"
'

test_expect_success '../ path: refused, nothing outside' '
	refused dotdot
	grep "unsafe path" "$CB_ERR"
'

test_expect_success 'a/b/../../../ path: refused, nothing outside' '
	refused dotdot-deep
	grep "unsafe path" "$CB_ERR"
'

test_expect_success 'absolute path: refused, nothing outside' '
	refused absolute
	grep "unsafe path" "$CB_ERR"
'

# through_symlink NAME LINK: refused (exit 1, clear error), or the symlink
# was replaced by a real directory inside DESTDIR; never written outside
through_symlink() {
	local d=$SCRATCH/dest-$1 rc=0
	"$CBACKUP" restore "$ARCH/$1.tar" "$d" >"$CB_OUT" 2>"$CB_ERR" || rc=$?
	cat "$CB_ERR"; echo "exit status $rc"
	outside_untouched
	if [ "$rc" = 1 ]; then
		grep -E "^ERROR: restore of .*$1\.tar.* failed - " "$CB_ERR"
	else
		[ "$rc" = 0 ]
		test ! -L "$d/$2" && test -d "$d/$2" && grep -x PWNED "$d/$2/new"
	fi
}

test_expect_success 'symlink to an outside directory, then a file through it: never followed' '
	through_symlink symlink-abs-then-file link
'

test_expect_success 'relative symlink climbing out, then a file through it: never followed' '
	through_symlink symlink-rel-then-file sub/up
'

test_expect_success 'symlink to an outside file, then a regular file of that name: the symlink is replaced, not followed' '
	rc=0
	"$CBACKUP" restore "$ARCH/symlink-then-overwrite.tar" "$SCRATCH/dest-sto" >"$CB_OUT" 2>"$CB_ERR" || rc=$?
	cat "$CB_ERR"
	[ "$rc" -lt 128 ]
	outside_untouched
	if [ "$rc" = 0 ]; then
		test -f "$SCRATCH/dest-sto/t"
		test ! -L "$SCRATCH/dest-sto/t"
		grep -x PWNED "$SCRATCH/dest-sto/t"
	fi
'

test_expect_success 'hardlink to ../outside: refused' '
	refused hardlink-dotdot
	grep "unsafe target" "$CB_ERR"
'

test_expect_success 'hardlink to an absolute outside path: refused' '
	refused hardlink-abs
	grep "unsafe target" "$CB_ERR"
'

test_expect_success 'hardlink (with data) to a symlink pointing outside: the outside file is untouched' '
	rc=0
	"$CBACKUP" restore "$ARCH/hardlink-to-symlink.tar" "$SCRATCH/dest-hls" >"$CB_OUT" 2>"$CB_ERR" || rc=$?
	cat "$CB_ERR"; echo "exit status $rc"
	[ "$rc" = 0 ] || [ "$rc" = 1 ]
	outside_untouched
'

test_expect_success 'directory replaced by a symlink before its mode is fixed up: outside mode untouched' '
	rc=0
	"$CBACKUP" restore "$ARCH/dir-then-symlink.tar" "$SCRATCH/dest-dts" >"$CB_OUT" 2>"$CB_ERR" || rc=$?
	cat "$CB_ERR"; echo "exit status $rc"
	[ "$rc" = 0 ] || [ "$rc" = 1 ]
	[ "$(stat -c %a "$OUT/dir")" = 700 ]
	outside_untouched
'

test_expect_success 'names the archive holds twice: the last entry wins, nothing followed' '
	cbackup_run 0 restore "$ARCH/twice.tar" "$SCRATCH/dest-twice"
	d=$SCRATCH/dest-twice
	[ "$(stat -c %a "$d/d")" = 751 ]
	grep -x second "$d/d/f"
	test_must_fail test -L "$d/s"
	[ "$(stat -c %a "$d/s")" = 705 ]
	grep -x in "$d/s/in"
	[ "$(readlink "$d/e")" = "$OUT/dir" ]
	[ "$(stat -c %i "$d/h")" = "$(stat -c %i "$d/d/f")" ]
	[ "$(readlink "$d/p")" = d/f ]
	[ "$(stat -c %a "$OUT/dir")" = 700 ]
	outside_untouched
'

test_expect_success 'device node as non-root: a clear error, no crash, nothing outside' '
	mkdir "$SCRATCH/dest-dev"
	chown 65534:65534 "$SCRATCH/dest-dev"
	chmod 0755 "$ARCH" "$SCRATCH"
	chmod 0644 "$ARCH/device.tar"
	rc=0
	setpriv --reuid=65534 --regid=65534 --clear-groups -- \
		"$CBACKUP" restore "$ARCH/device.tar" "$SCRATCH/dest-dev" >"$CB_OUT" 2>"$CB_ERR" || rc=$?
	cat "$CB_ERR"; echo "exit status $rc"
	ls -la "$SCRATCH/dest-dev"
	[ "$rc" = 1 ]
	grep -E "^ERROR: restore of .*device\.tar.* failed - .*null" "$CB_ERR"
	test ! -e "$SCRATCH/dest-dev/null" || test ! -c "$SCRATCH/dest-dev/null"
	outside_untouched
'

test_expect_success 'names with newlines and invalid UTF-8: restored inside DESTDIR with their bytes' '
	cbackup_run 0 restore "$ARCH/odd-names.tar" "$SCRATCH/dest-odd"
	test -f "$SCRATCH/dest-odd/new
line"
	test -f "$SCRATCH/dest-odd/bad-$(printf "\377\376")-utf8"
	test -f "$SCRATCH/dest-odd/dir
with
newlines/f"
	outside_untouched
'

test_expect_success 'non-empty DESTDIR: refused without --force, replaced with it' '
	mkdir "$SCRATCH/dest-full"
	echo mine >"$SCRATCH/dest-full/keep"
	cbackup_run 1 restore "$ARCH/good.tar" "$SCRATCH/dest-full"
	grep -E "^ERROR: .*not empty.*--force" "$CB_ERR"
	test ! -e "$SCRATCH/dest-full/etc"
	cbackup_run 0 restore "$ARCH/good.tar" "$SCRATCH/dest-full" --force
	grep -x ct "$SCRATCH/dest-full/etc/hostname"
	test_must_fail test -e "$SCRATCH/dest-full/keep"
	[ "$(readlink "$SCRATCH/dest-full/abs")" = /etc/passwd ]
	outside_untouched
'

test_expect_success 'DESTDIR is a symlink to a directory: restored into its target, nothing else' '
	mkdir "$SCRATCH/dest-real"
	ln -s dest-real "$SCRATCH/dest-link"
	cbackup_run 0 restore "$ARCH/good.tar" "$SCRATCH/dest-link"
	grep -x ct "$SCRATCH/dest-real/etc/hostname"
	outside_untouched
'

test_done
