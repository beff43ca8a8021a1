#!/bin/bash
# The archive is the guest as it was at the freeze (issue 14, point 1):
# changes made between pass 1 and pass 2 (in the pre-stop hook, which runs
# after pass 1, right before the freeze) that keep the inode number (ext4
# hands a removed entry's inode to the next one made), or that put the
# mtime back, are archived as they are at the freeze, not as pass 1 saw
# them. With --keep-staging the next run's pass 1 decides by the same rule.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
HOOK=$SCRATCH/hook.sh

# backup ID ARGS...: suspend-mode backup of $SRC with the hook; the
# archive extracted (GNU tar) into $SCRATCH/out-ID
backup() {
	local id=$1
	shift
	mkdir -p "$SCRATCH/dump-$id" "$SCRATCH/tmp"
	cbackup_run 0 backup --root "$SRC" --id "$id" --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/dump-$id" --freeze-cmd true --thaw-cmd true \
		--script "$HOOK" "$@"
	archive=$(find_archive "$SCRATCH/dump-$id" ct "$id" .zst)
	rm -rf "$SCRATCH/out-$id"
	mkdir "$SCRATCH/out-$id"
	zstd -dc <"$archive" | tar --numeric-owner -xpf - -C "$SCRATCH/out-$id"
}

# same_data A B: same bytes
same_data() { cmp "$1" "$2"; }

test_expect_success ROOT 'setup: a guest with symlinks, devices, big files' '
	mkdir -p "$SRC/etc" "$SRC/dev" "$SRC/srv"
	ln -s target-aaa "$SRC/etc/link"
	mknod "$SRC/dev/node" c 1 3
	for f in big3 big4 big5 new-big; do head -c 1M /dev/urandom >"$SRC/srv/$f"; done
	touch -d "2020-01-01 00:00:00" "$SRC"/srv/*
	cat >"$HOOK" <<-"EOF"
	#!/bin/bash
	[ "$1" = pre-stop ] || exit 0
	sh -c "$PRESTOP"
	EOF
	chmod +x "$HOOK"
'

test_expect_success ROOT 'a symlink and a device made again between the passes keep the new target and rdev' '
	PRESTOP="ino=\$(stat -c %i $SRC/etc/link); sleep 0.01
		rm $SRC/etc/link; ln -s target-bbb $SRC/etc/link
		rm $SRC/dev/node; mknod $SRC/dev/node c 1 5
		echo \$ino \$(stat -c %i $SRC/etc/link) >$SCRATCH/inos" \
	backup 450
	cat "$SCRATCH/inos"
	test "$(readlink "$SCRATCH/out-450/etc/link")" = target-bbb
	test "$(stat -c %t:%T "$SCRATCH/out-450/dev/node")" = 1:5
'

test_expect_success ROOT 'a renamed file changed with its mtime put back is archived with its new bytes' '
	PRESTOP="printf changed | dd of=$SRC/srv/big3 bs=1 seek=1000 conv=notrunc status=none
		touch -d \"2020-01-01 00:00:00\" $SRC/srv/big3
		mv $SRC/srv/big3 $SRC/srv/moved" \
	backup 451
	same_data "$SRC/srv/moved" "$SCRATCH/out-451/srv/moved"
'

test_expect_success ROOT 'a file replaced by another of the same size and mtime (recycled inode) is not the old one' '
	PRESTOP="ino=\$(stat -c %i $SRC/srv/big4); rm $SRC/srv/big4
		cp -p $SRC/srv/new-big $SRC/srv/big-again
		echo \$ino \$(stat -c %i $SRC/srv/big-again) >$SCRATCH/inos" \
	backup 452
	cat "$SCRATCH/inos"
	same_data "$SRC/srv/big-again" "$SCRATCH/out-452/srv/big-again"
'

test_expect_success ROOT '--keep-staging: a change with the mtime put back between runs is archived' '
	PRESTOP=true backup 453 --keep-staging 1
	same_data "$SRC/srv/big5" "$SCRATCH/out-453/srv/big5"
	printf again | dd of="$SRC/srv/big5" bs=1 seek=5000 conv=notrunc status=none
	touch -d "2020-01-01 00:00:00" "$SRC/srv/big5"
	rm -rf "$SCRATCH/dump-453"
	PRESTOP=true backup 453 --keep-staging 1
	same_data "$SRC/srv/big5" "$SCRATCH/out-453/srv/big5"
'

test_expect_success ROOT '--keep-staging: a symlink made again between runs keeps its new target' '
	rm "$SRC/etc/link"
	ln -s target-ccc "$SRC/etc/link"
	rm -rf "$SCRATCH/dump-453"
	PRESTOP=true backup 453 --keep-staging 1
	test "$(readlink "$SCRATCH/out-453/etc/link")" = target-ccc
'

test_expect_success ROOT '--keep-staging: a damaged kept index means a full first sync' '
	idx=$SCRATCH/tmp/cbackup/cbackup-453.stage.index
	test -f "$idx"
	printf X | dd of="$idx" bs=1 seek=20 conv=notrunc status=none
	printf third | dd of="$SRC/srv/big5" bs=1 seek=7000 conv=notrunc status=none
	touch -d "2020-01-01 00:00:00" "$SRC/srv/big5"
	rm -rf "$SCRATCH/dump-453"
	PRESTOP=true backup 453 --keep-staging 1
	test_has "$CB_ERR" "WARN: staging index .* is damaged: full first sync"
	same_data "$SRC/srv/big5" "$SCRATCH/out-453/srv/big5"
'

test_done
