#!/bin/bash
# Removing the staging copy (issue 16, item 2): with keep-staging 0 the
# copy is moved aside once the archive is renamed and removed by worker
# threads in the background, so neither the guest's result line
# ("Finished Backup of ...") nor the job's waits for it: a file made
# immutable in the copy (backup-end hook) makes the removal fail, and that
# WARN comes after the job's last line. When cbackup exits normally
# nothing is left in the tmpdir. A killed run's trash is removed by the
# next run of the guest; a live run's trash is left alone.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
PRIV=$SCRATCH/tmp/cbackup
HOOK=$SCRATCH/hook.sh
mkdir -p "$SCRATCH/tmp" "$SCRATCH/dump"

test_expect_success ROOT 'setup: a guest of 2000 files' '
	make_many_files "$SRC" 2000
	cat >"$HOOK" <<-EOF
	#!/bin/bash
	[ "\$1" = backup-end ] && chattr +i "$PRIV/cbackup-704.stage/many1/f600"
	exit 0
	EOF
	chmod +x "$HOOK"
'

test_expect_success ROOT 'the copy is removed without a trace at exit' '
	cbackup_run 0 backup --root "$SRC" --id 704 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/dump" --freeze-cmd true --thaw-cmd true --keep-staging 0 --stage-workers 2
	test_lacks "$CB_ERR" "^(WARN|ERROR): "
	test_must_fail test -e "$PRIV"
	dir_empty "$SCRATCH/tmp"
'

# line_of FILE ERE: the number of the first line matching
line_of() { grep -n -m1 -E "$2" "$1" | cut -d: -f1; }

test_expect_success ROOT 'the removal runs after the guest'"'"'s and the job'"'"'s result lines' '
	cbackup_run 0 backup --root "$SRC" --id 704 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/dump" --freeze-cmd true --thaw-cmd true --keep-staging 0 --script "$HOOK" \
		--stage-workers 2
	find "$PRIV" -name f600 -exec chattr -i {} +
	cat "$CB_ERR"
	warn=$(line_of "$CB_ERR" "^WARN: cannot remove the staging copy")
	test -n "$warn"
	test "$(line_of "$CB_ERR" "^INFO: Finished Backup of VM 704")" -lt "$warn"
	test "$(line_of "$CB_ERR" "^INFO: Backup job finished successfully")" -lt "$warn"
'

test_expect_success ROOT 'a killed run'"'"'s trash goes with the next run, a live one'"'"'s stays' '
	mkdir -p -m 700 "$PRIV"
	dead=$(sh -c "echo \$\$")
	sleep 300 &
	live=$!
	cleanup_pid "$live"
	mkdir -p "$PRIV/.trash-cbackup-704.stage.$dead/cbackup-704.stage/sub"
	echo x >"$PRIV/.trash-cbackup-704.stage.$dead/cbackup-704.stage/sub/f"
	mkdir -p "$PRIV/.trash-cbackup-704.stage.$live/cbackup-704.stage"
	mkdir -p "$PRIV/.trash-cbackup-7040.stage.$dead"
	cbackup_run 0 backup --root "$SRC" --id 704 --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/dump" --freeze-cmd true --thaw-cmd true --keep-staging 0
	ls -A "$PRIV" >"$SCRATCH/left"
	cat "$SCRATCH/left"
	test_lacks "$SCRATCH/left" "^\\.trash-cbackup-704\\.stage\\.$dead\$"
	# the run of the test before, killed or failed: its trash went too
	test "$(grep -c "^\\.trash-cbackup-704\\.stage" "$SCRATCH/left")" = 1
	test_has "$SCRATCH/left" "^\\.trash-cbackup-704\\.stage\\.$live\$"
	test_has "$SCRATCH/left" "^\\.trash-cbackup-7040\\.stage\\.$dead\$"
	test_lacks "$SCRATCH/left" "^cbackup-704\\.stage"
'

test_done
