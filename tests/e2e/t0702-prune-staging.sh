#!/bin/bash
# Kept staging copies (issue 16, item 1): `cbackup list` shows each one
# with the space it takes; `cbackup prune --staging` removes the kept
# copies (of one guest, or all) and nothing else: not another guest's whose
# ID starts the same (7020) or that has the same names plus a tail
# (702.stage), not the backups, not a copy whose guest is being
# backed up (its lock is held).
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
PRIV=$SCRATCH/tmp/cbackup
OPTS="--tmpdir $SCRATCH/tmp --dumpdir $SCRATCH/dump"
mkdir -p "$SCRATCH/tmp" "$SCRATCH/dump"

test_expect_success ROOT 'setup: kept copies of 702, 7020 and 702.stage, none of 703' '
	mkdir -p "$SRC/sub"
	head -c 3M /dev/urandom >"$SRC/big"
	echo small >"$SRC/sub/small"
	for id in 702 7020 702.stage; do
		cbackup_run 0 backup --root "$SRC" --id $id $OPTS --keep-staging 1 \
			--freeze-cmd true --thaw-cmd true
	done
	cbackup_run 0 backup --root "$SRC" --id 703 $OPTS --freeze-cmd true --thaw-cmd true
	test -d "$PRIV/cbackup-702.stage"
	test -s "$PRIV/cbackup-702.stage.index"
	test -d "$PRIV/cbackup-7020.stage"
	test_must_fail test -e "$PRIV/cbackup-703.stage"
	ls "$SCRATCH/dump" >"$SCRATCH/dump-before"
'

test_expect_success ROOT 'list shows each kept copy and its size' '
	cbackup_run 0 list $OPTS
	cat "$CB_OUT"
	test_has "$CB_OUT" "^702 +[34]MB +$PRIV/cbackup-702\\.stage\$"
	test_has "$CB_OUT" "^7020 +[34]MB +$PRIV/cbackup-7020\\.stage\$"
	test_lacks "$CB_OUT" "cbackup-703\\.stage"
	cbackup_run 0 list 702 $OPTS
	test_lacks "$CB_OUT" "cbackup-7020\\.stage"
	test_has "$CB_OUT" "cbackup-702\\.stage\$"
'

test_expect_success ROOT 'prune --dry-run --staging removes nothing' '
	cbackup_run 0 prune 702 --staging --dry-run $OPTS
	test_has "$CB_ERR" "would remove the kept staging copy"
	test -d "$PRIV/cbackup-702.stage"
'

test_expect_success ROOT 'prune --staging leaves a copy whose guest is being backed up' '
	hold_lock "$CBACKUP_LOCK_DIR/cbackup-702.lock"
	cbackup_run 1 prune 702 --staging $OPTS
	release_lock "$HOLD_PID" "$CBACKUP_LOCK_DIR/cbackup-702.lock"
	test_has "$CB_ERR" "^WARN: 702: being backed up"
	test -d "$PRIV/cbackup-702.stage"
'

test_expect_success ROOT 'prune 702 --staging removes its copy and companions only' '
	cbackup_run 0 prune 702 --staging $OPTS
	test_has "$CB_ERR" "702: removed the kept staging copy"
	ls -a "$PRIV" >"$SCRATCH/left"
	cat "$SCRATCH/left"
	test_lacks "$SCRATCH/left" "^cbackup-702\\.stage(\\.owner|\\.index|\\.xattrs)?\$"
	test_has "$SCRATCH/left" "^cbackup-702\\.stage\\.stage\$"
	test_has "$SCRATCH/left" "^cbackup-702\\.stage\\.stage\\.index\$"
	test_has "$SCRATCH/left" "^cbackup-7020\\.stage\$"
	test_has "$SCRATCH/left" "^cbackup-7020\\.stage\\.index\$"
	ls "$SCRATCH/dump" >"$SCRATCH/dump-after"
	test_cmp "$SCRATCH/dump-before" "$SCRATCH/dump-after"
'

test_expect_success ROOT 'prune --staging removes every kept copy; a backup starts fresh' '
	cbackup_run 0 prune --staging $OPTS
	test_must_fail test -e "$PRIV"
	ls "$SCRATCH/dump" >"$SCRATCH/dump-after"
	test_cmp "$SCRATCH/dump-before" "$SCRATCH/dump-after"
	cbackup_run 0 list $OPTS
	test_lacks "$CB_OUT" "KEPT STAGING"
	cbackup_run 0 backup --root "$SRC" --id 7020 $OPTS --keep-staging 1 \
		--freeze-cmd true --thaw-cmd true
	test_lacks "$CB_ERR" "^WARN: "
'

test_done
