#!/bin/bash
# keep-staging auto, the default (issue 38): the staging copy is kept when
# the tmpdir keeps at least keep-staging-free (20%, or a size) free after
# it, so that the second night's first sync is a delta without a word of
# configuration; otherwise it is removed as with keep-staging 0. An INFO
# line says which and why.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
BIG=$SCRATCH/big-tmp
SMALL=$SCRATCH/small-tmp
GUEST="--root $SRC --freeze-cmd true --thaw-cmd true --dumpdir $SCRATCH/dump"

# first_sync_copied: "Number of files transferred" of the first sync
first_sync_copied() {
	grep -m1 "Number of files transferred:" "$CB_ERR" | sed "s/.*: //"
}

test_expect_success ROOT,TMPFS 'setup: a 6 MiB tree, a 64 MiB and a 7 MiB tmpfs' '
	mkdir -p "$SRC/sub" "$SCRATCH/dump"
	head -c 5M /dev/urandom >"$SRC/big"
	head -c 1M /dev/urandom >"$SRC/sub/more"
	for i in 1 2 3 4 5; do echo "small $i" >"$SRC/sub/s$i"; done
	mount_tmpfs "$BIG" 64m
	mount_tmpfs "$SMALL" 7m
'

test_expect_success ROOT,TMPFS 'by default, with room, the copy is kept and the line says why' '
	cbackup_run 0 backup $GUEST --id 705 --tmpdir "$BIG"
	test_has "$CB_ERR" "^INFO: keep-staging auto: keeping the staging copy \\(tmpdir [0-9]+% free after it\\)"
	test -d "$BIG/cbackup/cbackup-705.stage"
	test -s "$BIG/cbackup/cbackup-705.stage.index"
	cbackup_run 0 list --tmpdir "$BIG" --dumpdir "$SCRATCH/dump"
	test_has "$CB_OUT" "^705 .*cbackup-705\\.stage\$"
'

test_expect_success ROOT,TMPFS 'the second night first sync is a delta from the kept copy' '
	echo changed >"$SRC/sub/s1"
	cbackup_run 0 backup $GUEST --id 705 --tmpdir "$BIG" --verbose
	test_has "$CB_ERR" "reusing the staging copy .*cbackup-705\\.stage"
	test "$(first_sync_copied)" = 1
	test_has "$CB_ERR" "^INFO: keep-staging auto: keeping the staging copy"
'

test_expect_success ROOT,TMPFS 'a small tmpdir: the copy is not kept, the line says why' '
	cbackup_run 0 backup $GUEST --id 706 --tmpdir "$SMALL"
	test_has "$CB_ERR" "^INFO: keep-staging auto: the staging copy is not kept: tmpdir would have [0-9]+% free, keep-staging-free is 20%"
	test_lacks "$CB_ERR" "^(WARN|ERROR): "
	test_must_fail test -e "$SMALL/cbackup/cbackup-706.stage"
	test_must_fail test -e "$SMALL/cbackup/cbackup-706.stage.index"
'

test_expect_success ROOT,TMPFS 'keep-staging 1 keeps the copy in the small tmpdir, with no auto line' '
	cbackup_run 0 backup $GUEST --id 707 --tmpdir "$SMALL" --keep-staging 1
	test_lacks "$CB_ERR" "keep-staging auto"
	test -d "$SMALL/cbackup/cbackup-707.stage"
	cbackup_run 0 prune 707 --staging --tmpdir "$SMALL" --dumpdir "$SCRATCH/dump"
'

test_expect_success ROOT,TMPFS 'keep-staging 0 never keeps it, with no auto line' '
	cbackup_run 0 backup $GUEST --id 708 --tmpdir "$BIG" --keep-staging 0
	test_lacks "$CB_ERR" "keep-staging auto"
	test_must_fail test -e "$BIG/cbackup/cbackup-708.stage"
'

test_expect_success ROOT,TMPFS 'keep-staging-free as a size: 60M free wanted in 64 MiB, not kept' '
	cbackup_run 0 backup $GUEST --id 709 --tmpdir "$BIG" --keep-staging-free 60M
	test_has "$CB_ERR" "^INFO: keep-staging auto: the staging copy is not kept: tmpdir would have [0-9.]+ ?[KMG]i?B free, keep-staging-free is 60M"
	test_must_fail test -e "$BIG/cbackup/cbackup-709.stage"
'

test_expect_success ROOT,TMPFS 'a kept copy in a tmpdir that filled up since is used once more, then removed' '
	cbackup_run 0 backup $GUEST --id 710 --tmpdir "$BIG" --keep-staging auto
	test -d "$BIG/cbackup/cbackup-710.stage"
	head -c 48M /dev/zero >"$BIG/filler"
	cbackup_run 0 backup $GUEST --id 710 --tmpdir "$BIG" --keep-staging auto
	rm "$BIG/filler"
	test_has "$CB_ERR" "^INFO: keep-staging auto: the staging copy is not kept: tmpdir has [0-9]+% free, keep-staging-free is 20%"
	# still the source of this run: nothing changed, nothing copied
	test "$(first_sync_copied)" = 0
	test_must_fail test -e "$BIG/cbackup/cbackup-710.stage"
'

test_expect_success 'bad values: exit 2 naming what is accepted' '
	cbackup_run 2 backup $GUEST --id 711 --tmpdir "$SCRATCH" --keep-staging=maybe
	test_has "$CB_ERR" "keep-staging.*0\\|1\\|auto"
	cbackup_run 2 backup $GUEST --id 711 --tmpdir "$SCRATCH" --keep-staging-free 120%
	test_has "$CB_ERR" "keep-staging-free"
	cbackup_run 2 backup $GUEST --id 711 --tmpdir "$SCRATCH" --keep-staging-free lots
	test_has "$CB_ERR" "keep-staging-free"
'

test_expect_success 'the config file takes keep-staging auto and keep-staging-free' '
	printf "keep-staging: auto\nkeep-staging-free: 30%%\n" >"$SCRATCH/c.conf"
	cbackup_run 0 backup $GUEST --id 712 --tmpdir "$SCRATCH" --config "$SCRATCH/c.conf" --dry-run
	printf "keep-staging = always\n" >"$SCRATCH/bad.conf"
	cbackup_run 2 backup $GUEST --id 712 --tmpdir "$SCRATCH" --config "$SCRATCH/bad.conf" --dry-run
	test_has "$CB_ERR" "bad\\.conf:1.*keep-staging"
'

test_done
