#!/bin/bash
# scripts/layers.py, part of `make lint` and so of `make check`: it fails
# when a file uses or includes a module of a folder above its own (ORDER in
# scripts/layers.py), when a header includes a header of a folder above
# its own, when a folder is not placed in ORDER, or when files use each
# other, directly or around a circle; each case of tests/layers-fixtures is
# named, a clean tree passes, and so does src/.
. "$(dirname "$0")/lib.sh"

FIX=$TOP/tests/layers-fixtures
layers() { python3 "$TOP/scripts/layers.py" "$@"; }

test_expect_success 'the ground floor calling a module above it is named' '
	test_must_fail layers --root "$FIX/up" >out
	cat out
	echo "layers: src/core/floor.c (ground floor) uses src/stage/walk.c: cb_walk_tree" >want
	test_cmp want out
'

test_expect_success 'the ground floor including a header of a module above it is named' '
	test_must_fail layers --root "$FIX/upinc" >out
	cat out
	echo "layers: src/core/floor.c (ground floor) includes cb_walk.h, a header of src/stage/walk.c" >want
	test_cmp want out
'

test_expect_success 'a folder above its own, a header including one above it, a folder not in ORDER: each named' '
	test_must_fail layers --root "$FIX/upfolder" >out
	cat out
	cat >want <<-\WANT
	layers: src/extra/ is not in ORDER (scripts/layers.py): say where it stands
	layers: src/archive/tar.c (archive/) uses src/stage/walk.c: cb_walk_tree
	layers: include/cb_floor.h includes cb_tar.h, a header of src/archive/tar.c
	WANT
	test_cmp want out
'

test_expect_success 'each cycle is named, also through a definition on two lines' '
	test_must_fail layers --root "$FIX/cycle" >out
	cat out
	cat >want <<-\WANT
	layers: a cycle: src/archive/list.c -> src/archive/scan.c (cb_scan_feed); src/archive/scan.c -> src/archive/list.c (cb_list_add)
	layers: a cycle: src/core/path.c -> src/core/util.c (cb_util_alloc); src/core/util.c -> src/core/path.c (cb_path_push)
	WANT
	test_cmp want out
'

test_expect_success 'an arrow down is no problem' '
	layers --root "$FIX/good" >out
	test_cmp /dev/null out
'

test_expect_success 'src/ keeps its layers' '
	layers
'

test_done
