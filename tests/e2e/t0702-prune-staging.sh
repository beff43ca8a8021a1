#!/bin/bash
# Kept staging copies (issue 16, item 1): `cbackup list` shows each one
# with the space it takes; `cbackup prune --staging` removes the kept
# copies (of one guest, or all) and nothing else: not another guest's whose
# ID starts the same (7020) or that has the same names plus a tail
# (702.stage), not the backups, not a copy whose guest is being
# backed up (its lock is held). Copies of guests no longer configured
# (issue 38: keep-staging auto keeps copies by default) are listed apart,
# and `prune --staging` without an ID removes those only; --all every one.
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
	cbackup_run 0 backup --root "$SRC" --id 703 $OPTS --keep-staging 0 \
		--freeze-cmd true --thaw-cmd true
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

test_expect_success ROOT 'prune --staging removes every copy of a guest not configured (all here)' '
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

CONF=$SCRATCH/c.conf

test_expect_success ROOT 'setup: kept copies of 720 (configured) and 721 (no longer)' '
	mkdir -p "$SCRATCH/tmp2"
	cat >"$CONF" <<-EOF
	tmpdir = $SCRATCH/tmp2
	dumpdir = $SCRATCH/dump
	[ct 720]
	root = $SRC
	freeze-cmd = true
	thaw-cmd = true
	[ct 721]
	root = $SRC
	freeze-cmd = true
	thaw-cmd = true
	EOF
	cbackup_run 0 backup 720 721 --config "$CONF" --keep-staging 1
	sed -i "/^\[ct 721\]/,\$d" "$CONF"
	test -d "$SCRATCH/tmp2/cbackup/cbackup-721.stage"
'

test_expect_success ROOT 'list shows the copy of a guest no longer configured apart' '
	cbackup_run 0 list --config "$CONF"
	cat "$CB_OUT"
	sed -n "/KEPT STAGING COPY (keep-staging)/,/^\$/p" "$CB_OUT" >"$SCRATCH/kept"
	sed -n "/NO LONGER CONFIGURED/,\$p" "$CB_OUT" >"$SCRATCH/orphans"
	test_has "$SCRATCH/kept" "^720 +[34]MB +$SCRATCH/tmp2/cbackup/cbackup-720\\.stage\$"
	test_lacks "$SCRATCH/kept" "cbackup-721"
	test_has "$SCRATCH/orphans" "^721 +[34]MB +$SCRATCH/tmp2/cbackup/cbackup-721\\.stage\$"
	test_lacks "$SCRATCH/orphans" "cbackup-720"
'

test_expect_success ROOT 'prune --staging --dry-run names the orphan only, removes nothing' '
	cbackup_run 0 prune --staging --dry-run --config "$CONF"
	test_has "$CB_ERR" "721: would remove the kept staging copy"
	test_lacks "$CB_ERR" "720: would remove"
	test -d "$SCRATCH/tmp2/cbackup/cbackup-721.stage"
'

test_expect_success ROOT 'prune --staging removes the copy of the guest no longer configured' '
	cbackup_run 0 prune --staging --config "$CONF"
	test_has "$CB_ERR" "721: removed the kept staging copy"
	test_lacks "$CB_ERR" "720: removed"
	test_must_fail test -e "$SCRATCH/tmp2/cbackup/cbackup-721.stage"
	test -d "$SCRATCH/tmp2/cbackup/cbackup-720.stage"
	cbackup_run 0 list --config "$CONF"
	test_lacks "$CB_OUT" "NO LONGER CONFIGURED"
'

test_expect_success ROOT 'prune --staging --all removes every kept copy' '
	cbackup_run 0 prune --staging --all --config "$CONF"
	test_has "$CB_ERR" "720: removed the kept staging copy"
	test_must_fail test -e "$SCRATCH/tmp2/cbackup"
'

test_expect_success ROOT 'setup: kept copies in a guest'"'"'s own tmpdir (730) and a storage'"'"'s (731, then removed)' '
	mkdir -p "$SCRATCH/tmp3" "$SCRATCH/tmp4" "$SCRATCH/tmp5"
	cat >"$CONF" <<-EOF
	tmpdir = $SCRATCH/tmp3
	dumpdir = $SCRATCH/dump
	[storage fast]
	path = $SCRATCH/dump
	tmpdir = $SCRATCH/tmp5
	[ct 730]
	root = $SRC
	tmpdir = $SCRATCH/tmp4
	freeze-cmd = true
	thaw-cmd = true
	[ct 731]
	root = $SRC
	storage = fast
	freeze-cmd = true
	thaw-cmd = true
	EOF
	cbackup_run 0 backup 730 731 --config "$CONF" --keep-staging 1
	test -d "$SCRATCH/tmp4/cbackup/cbackup-730.stage"
	test -d "$SCRATCH/tmp5/cbackup/cbackup-731.stage"
	sed -i "/^\[ct 731\]/,\$d" "$CONF"
'

test_expect_success ROOT 'list shows the copies in every tmpdir the configuration names' '
	cbackup_run 0 list --config "$CONF"
	cat "$CB_OUT"
	sed -n "/KEPT STAGING COPY (keep-staging)/,/^\$/p" "$CB_OUT" >"$SCRATCH/kept"
	sed -n "/NO LONGER CONFIGURED/,\$p" "$CB_OUT" >"$SCRATCH/orphans"
	test_has "$SCRATCH/kept" "^730 +[34]MB +$SCRATCH/tmp4/cbackup/cbackup-730\\.stage\$"
	test_has "$SCRATCH/orphans" "^731 +[34]MB +$SCRATCH/tmp5/cbackup/cbackup-731\\.stage\$"
'

test_expect_success ROOT 'prune --staging finds the orphan in a storage'"'"'s tmpdir; --all the guest'"'"'s own' '
	cbackup_run 0 prune --staging --config "$CONF"
	test_has "$CB_ERR" "731: removed the kept staging copy"
	test_must_fail test -e "$SCRATCH/tmp5/cbackup/cbackup-731.stage"
	test -d "$SCRATCH/tmp4/cbackup/cbackup-730.stage"
	cbackup_run 0 prune --staging --all --config "$CONF"
	test_has "$CB_ERR" "730: removed the kept staging copy"
	test_must_fail test -e "$SCRATCH/tmp4/cbackup/cbackup-730.stage"
'

test_done
