#!/bin/bash
# The archive walk never follows a symlink swapped into the staging tree
# (issue 13, point 2): every directory is opened relative to its parent's
# fd with O_NOFOLLOW|O_DIRECTORY and stat'ed on the fd that is then read,
# so a swap after the thaw (here from the post-restart hook, as another
# user's process could) cannot pull host files into the archive. A symlink
# is archived as a symlink.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
HOST=$SCRATCH/host
HOOK=$SCRATCH/hook.sh

# archive_texts ARCHIVE: the contents of every regular member
# every member's bytes (no name pattern: a racer that moved the staged
# directory away just as the walk listed the root leaves an archive of
# "./" alone, which is archived as found, and a pattern would match nothing)
archive_texts() { zstd -dc <"$1" | tar -xOf -; }

test_expect_success ROOT 'setup: a guest, host files with the same names' '
	mkdir -p "$SRC/d" "$HOST" "$SCRATCH/tmp"
	(cd "$SRC/d" && seq -f "f%g" 0 2999 | xargs touch)
	(cd "$HOST" && seq -f "f%g" 0 2999 | xargs touch)
	for f in "$SRC"/d/*; do echo guest >"$f"; done
	for f in "$HOST"/*; do echo HOST-SECRET >"$f"; done
	cat >"$HOOK" <<-"EOF"
	#!/bin/bash
	[ "$1" = post-restart ] || exit 0
	stage=$(find "$STAGE_PARENT" -type d -name "*.stage" -print -quit)
	echo "$stage" >"$STAGE_SEEN"
	case $SWAP in
	root)	mv "$stage" "$stage.moved"
		ln -s "$HOST_DIR" "$stage" ;;
	race)	setsid python3 "$RACER" "$stage/d" "$HOST_DIR" "$RACER_STOP" \
			>/dev/null 2>&1 </dev/null &
		echo $! >"$RACER_PID"
		for i in $(seq 250); do
			[ -e "$RACER_STOP.started" ] && break
			sleep 0.02
		done ;;
	esac
	EOF
	chmod +x "$HOOK"
	cat >"$SCRATCH/racer.py" <<-"EOF"
	import os, sys, time
	d, host, stop = sys.argv[1:4]
	n = 0
	end = time.time() + 120   # never outlives a test run that went wrong
	try:
	    while not os.path.exists(stop) and time.time() < end:
	        os.rename(d, d + ".real")
	        os.symlink(host, d)
	        os.unlink(d)
	        os.rename(d + ".real", d)
	        n += 1
	        if n == 10:
	            open(stop + ".started", "w").close()
	except OSError:
	    pass
	with open(stop + ".count", "w") as f:
	    f.write("%d\n" % n)
	EOF
'

backup() {  # ID RC [ARGS...]
	local id=$1 rc=$2
	shift 2
	mkdir -p "$SCRATCH/dump-$id"
	STAGE_PARENT=$SCRATCH/tmp STAGE_SEEN=$SCRATCH/stage-$id HOST_DIR=$HOST \
	RACER=$SCRATCH/racer.py RACER_STOP=$SCRATCH/stop-$id RACER_PID=$SCRATCH/racer-$id \
		cbackup_run "$rc" backup --root "$SRC" --id "$id" --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/dump-$id" --freeze-cmd true --thaw-cmd true --script "$HOOK" "$@"
}

test_expect_success ROOT 'the staging directory swapped for a symlink: refused, nothing of the host archived' '
	SWAP=root backup 465 1
	test -s "$SCRATCH/stage-465"
	test_has "$CB_ERR" "ERROR: Backup of VM 465 failed - .*symlink"
	for a in "$SCRATCH"/dump-465/*.tar.zst; do
		[ -e "$a" ] || continue
		archive_texts "$a" >texts
		test_lacks texts HOST-SECRET
	done
	# the host directory the symlink pointed at is untouched
	test "$(ls "$HOST" | wc -l)" = 3000
'

test_expect_success ROOT 'a staged directory flipping with a symlink to the host during the archive: never followed (archived as found, or the guest fails)' '
	for id in 466 467 468; do
		# the staging copy is kept: the racer stops before it is removed
		rc=0
		SWAP=race backup $id 0 --keep-staging 1 || rc=$?
		cleanup_pid "$(cat "$SCRATCH/racer-$id")"
		touch "$SCRATCH/stop-$id"
		wait_for 5 test -s "$SCRATCH/stop-$id.count"
		echo "racer flipped $(cat "$SCRATCH/stop-$id.count") times"
		test "$(cat "$SCRATCH/stop-$id.count")" -gt 0
		if [ "$rc" = 0 ]; then
			archive=$(find_archive "$SCRATCH/dump-$id" ct $id .zst)
			archive_texts "$archive" >texts-$id
			test_lacks texts-$id HOST-SECRET
		else
			# caught between its type and its read, the entry fails the
			# guest: refused, nothing of the host read, no archive
			test_has "$CB_ERR" "^ERROR: Backup of VM $id failed - archive: "
			no_tmp_files "$SCRATCH/dump-$id"
			test -z "$(ls "$SCRATCH/dump-$id" | grep "\.tar")"
		fi
		test "$(ls "$HOST" | wc -l)" = 3000
	done
'

test_done
