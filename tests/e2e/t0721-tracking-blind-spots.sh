#!/bin/bash
# Change tracking never gives a wrong archive (issue 24): the nine
# situations where the tracked final sync once archived stale content or
# metadata without a word. Each is made between the passes (pre-stop hook)
# on a loop-mounted ext4, xfs and btrfs (where the kernel has them), the
# tree's manifest is taken at the freeze (pre-restart hook), and the archive
# is compared with it twice: restored by `cbackup restore` (every field,
# chattr flags included) and by GNU tar (which has no chattr flags).
#   1 a bind mount into the root from outside it, changed under its source
#   2 chattr +i +a -i +d (FS_IOC_SETFLAGS raises no event)
#   3 a shared writable mapping written, then made PROT_READ / PROT_NONE
#   4 a loop device over a file in the root, written through /dev/loopN
#   5 a write through open_by_handle_at on an evicted (disconnected) dentry
#   6 a directory moved out, changed two levels down, and moved back
#   7 a directory, and the guest root, whose name ends in " (deleted)"
#   8 a change in a directory whose absolute path is over 4096 bytes
#   9 keep-staging 1 with situation 4, over two runs
#  10 a handle the kernel cannot open though its inode exists (ENOMEM, seen
#     on a busy host): looked up by the inode number the handle carries
# T0721_FS="ext4" runs on those file systems only (default: ext4 xfs btrfs).
. "$(dirname "$0")/lib.sh"

MANIFEST="python3 $TOP/tests/helpers/manifest.py"
HOOK=$SCRATCH/hook.sh

if ! [ "$(id -u)" = 0 ]; then
	test_skip "tracking blind spots" "needs root (loop mounts, chattr, losetup)"
	test_done
fi

# The hook runs $SCRATCH/change.sh before the freeze, takes the manifest
# of $SRC (exported) at it
cat >"$HOOK" <<EOF
#!/bin/bash
case \$1 in
pre-stop) bash -e "$SCRATCH/change.sh" >>"$SCRATCH/change.log" 2>&1 || exit 1 ;;
pre-restart) $MANIFEST "\$SRC" >"$SCRATCH/at-freeze" ;;
esac
exit 0
EOF
chmod +x "$HOOK"

# fs_mount FS: a fresh FS on a loop image at $FSM, the guest root $SRC and
# a directory outside it ($OUT) on it
fs_mount() {
	local img=$SCRATCH/$1.img
	FS=$1 FSM=$SCRATCH/fs-$1
	[ -e "$img" ] && return 0
	truncate -s 512M "$img"
	mkfs."$1" -q "$img" >/dev/null 2>&1 || mkfs."$1" "$img" >/dev/null 2>&1 || return 1
	mkdir -p "$FSM"
	mount -o loop "$img" "$FSM" || return 1
	cleanup_mount "$FSM"
	cleanup_flags "$FSM"
}

# guest: an empty guest root (named $1 under $FSM, default guest)
guest() {
	awk -v p="$FSM/" 'index($2, p) == 1 { print $2 }' /proc/self/mounts | sort -r |
		while read -r m; do umount "$m"; done
	chattr -R -i -a "$FSM" 2>/dev/null || true
	rm -rf "$FSM"/*
	export SRC=$FSM/${1:-guest}
	OUT=$FSM/outside
	mkdir -p "$SRC/etc" "$OUT"
	echo base >"$SRC/etc/base"
}

# backup ID ARGS...: a suspend-mode backup of $SRC running change.sh (with
# max-freeze 900, as t0720: the frozen hook takes a manifest, slow under
# load; the cases check exactness, not the freeze bound); the archive must restore (both ways) to the manifest at the freeze. With
# LONG_PATHS set, paths over 4096 bytes: GNU tar cannot make them, it
# reads the files' contents out instead, and `cbackup restore` cannot set
# the deepest directories' times (libarchive), left out of the compare
backup() {
	local id=$1 archive
	shift
	mkdir -p "$SCRATCH/dump-$id" "$SCRATCH/tmp"
	cbackup_run 0 backup --root "$SRC" --id "$id" --tmpdir "$SCRATCH/tmp" \
		--dumpdir "$SCRATCH/dump-$id" --script "$HOOK" --verbose --max-freeze 900 "$@"
	cp "$CB_ERR" "$SCRATCH/log-$id"
	archive=$(find_archive "$SCRATCH/dump-$id" ct "$id" .zst)
	test_has "$SCRATCH/log-$id" "^INFO: pass 2: tracked|^INFO: pass 2: full walk"
	rm -rf "$SCRATCH/dump-$id"/*.log
	chattr -R -i -a "$SCRATCH/rc-$id" 2>/dev/null || true
	rm -rf "$SCRATCH/rc-$id" "$SCRATCH/rt-$id"
	cleanup_flags "$SCRATCH/rc-$id"
	cbackup_run 0 restore "$archive" "$SCRATCH/rc-$id"
	if [ -n "${LONG_PATHS:-}" ]; then
		$MANIFEST --ignore dir-mtime "$SCRATCH/rc-$id" >"$SCRATCH/rc-$id.manifest"
		$MANIFEST --ignore dir-mtime "$SRC" >"$SCRATCH/at-freeze"  # frozen no more, unchanged
		test_cmp "$SCRATCH/at-freeze" "$SCRATCH/rc-$id.manifest"
		zstd -dc <"$archive" | tar -xOf - --wildcards "*/new" >"$SCRATCH/new-$id"
		echo new | test_cmp - "$SCRATCH/new-$id"
		zstd -dc <"$archive" | tar -xOf - --wildcards "*/f" >"$SCRATCH/f-$id"
		printf "f\nmore\n" | test_cmp - "$SCRATCH/f-$id"
		return 0
	fi
	$MANIFEST "$SCRATCH/rc-$id" >"$SCRATCH/rc-$id.manifest"
	test_cmp "$SCRATCH/at-freeze" "$SCRATCH/rc-$id.manifest"
	mkdir "$SCRATCH/rt-$id"
	zstd -dc <"$archive" | tar --numeric-owner --xattrs --xattrs-include="*" -xpf - -C "$SCRATCH/rt-$id"
	$MANIFEST --ignore fflags "$SCRATCH/rt-$id" >"$SCRATCH/rt-$id.manifest"
	sed -E 's/ [^ ]+$/ -/' "$SCRATCH/at-freeze" >"$SCRATCH/at-freeze.noflags"
	sed -E 's/ [^ ]+$/ -/' "$SCRATCH/rt-$id.manifest" >"$SCRATCH/rt-$id.noflags"
	test_cmp "$SCRATCH/at-freeze.noflags" "$SCRATCH/rt-$id.noflags"
	chattr -R -i -a "$SCRATCH/rc-$id" 2>/dev/null || true
	rm -rf "$SCRATCH/rc-$id" "$SCRATCH/rt-$id"
}

# go_guest CGROUP CMD...: CMD as the guest's process; the hook's change.sh
# lets it go ($SCRATCH/go) and waits until it says done
go_change() {
	cat >"$SCRATCH/change.sh" <<-EOF
	touch "$SCRATCH/go"
	for i in \$(seq 1 200); do [ -e "$SCRATCH/done" ] && exit 0; sleep 0.05; done
	exit 1
	EOF
}

# 3: writes through shared writable mappings of files whose fds are
# closed, then the mappings made read-only and inaccessible
cat >"$SCRATCH/mapper.py" <<'EOF'
import ctypes, os, sys, time
go, done = sys.argv[1:3]
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                      ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
maps = []
for path in sys.argv[3:]:
    fd = os.open(path, os.O_RDWR)
    # not Python's mmap module: it keeps a duplicate of the descriptor
    maps.append(libc.mmap(None, 4096, 3, 1, fd, 0))  # PROT_READ|WRITE, MAP_SHARED
    os.close(fd)
open(done + ".ready", "w").close()
while not os.path.exists(go):
    time.sleep(0.02)
time.sleep(0.05)  # the mtime moves visibly
for i, addr in enumerate(maps):
    ctypes.memmove(addr, b"MAPPED", 6)
    if libc.mprotect(addr, 4096, 1 if i == 0 else 0) != 0:  # PROT_READ, PROT_NONE
        sys.exit("mprotect failed")
open(done, "w").close()
while True:
    time.sleep(1)
EOF

# loop_guest TEXT: a guest with a loop device ($dev) over img/disk; the
# change writes TEXT through it (loop_change TEXT BLOCK: another write)
loop_change() {
	cat >"$SCRATCH/change.sh" <<-EOF
	sleep 0.05
	printf $1 | dd of=$dev bs=4096 seek=${2:-3} oflag=direct,sync conv=notrunc,sync status=none
	EOF
}
loop_guest() {
	guest
	mkdir -p "$SRC/img"
	head -c 1M /dev/zero >"$SRC/img/disk"
	dev=$(losetup -f --show "$SRC/img/disk")
	cleanup_loop "$dev"
	loop_change "$1"
}

# long_dir: a directory under $SRC whose absolute path is over 4096 bytes
LONG=$(printf 'L%.0s' $(seq 1 250))
long_cd() { cd "$SRC"; for _ in $(seq 1 18); do mkdir -p "$LONG"; cd "$LONG"; done; }

run_cases() {
	local fs=$1 n=$2

	test_expect_success "$fs 1: a bind mount of a directory outside the root, changed under its source" '
		guest
		mkdir -p "$OUT/vol/sub" "$SRC/vol"
		echo a >"$OUT/vol/a"; echo b >"$OUT/vol/sub/b"
		mount --bind "$OUT/vol" "$SRC/vol"
		cleanup_mount "$SRC/vol"
		cat >"$SCRATCH/change.sh" <<-EOF
		echo more >>"$OUT/vol/a"; echo new >"$OUT/vol/sub/new"; chmod 600 "$OUT/vol/sub/b"
		mkdir "$OUT/vol/d2"
		EOF
		backup ${n}1
		test_has "$SCRATCH/log-${n}1" "change tracking: the bind mount ./vol. shows .*/outside/vol."
		umount "$SRC/vol"
	'

	test_expect_success "$fs 2: chattr +i +a -i +d" '
		guest
		mkdir -p "$SRC/fl/d"
		for f in i a u; do echo "$f" >"$SRC/fl/$f"; done
		chattr +i "$SRC/fl/u"
		cat >"$SCRATCH/change.sh" <<-EOF
		chattr +i "$SRC/fl/i"; chattr +a "$SRC/fl/a"; chattr -i "$SRC/fl/u"; chattr +d "$SRC/fl/d"
		EOF
		backup ${n}2
		test_has "$SCRATCH/at-freeze" "^fl/i .* i$"
	'

	test_expect_success "$fs 3: a shared writable mapping written, then made PROT_READ and PROT_NONE" '
		guest
		mkdir -p "$SRC/mm"
		head -c 4096 /dev/zero >"$SRC/mm/r"; head -c 4096 /dev/zero >"$SRC/mm/n"
		rm -f "$SCRATCH/go" "$SCRATCH/done" "$SCRATCH/done.ready"
		cg=$(make_cgroup v2)
		start_guest "$cg" python3 "$SCRATCH/mapper.py" "$SCRATCH/go" "$SCRATCH/done" "$SRC/mm/r" "$SRC/mm/n"
		wait_for 10 test -e "$SCRATCH/done.ready"
		go_change
		backup ${n}3 --freeze-cgroup "$cg"
		cp "/proc/$GUEST_PID/maps" "$SCRATCH/maps"
		test_has "$SCRATCH/maps" " r--s .*/mm/r$"
		test_has "$SCRATCH/maps" " ---s .*/mm/n$"
		kill -9 "$GUEST_PID"
	'

	test_expect_success "$fs 4: a loop device over a file in the root, written through /dev/loopN" '
		loop_guest LOOPWRITE
		backup ${n}4
		test_has "$SCRATCH/log-${n}4" "change tracking: $dev writes to inode $(stat -c %i "$SRC/img/disk") \(offset 0\): looked up in the tree"
		losetup -d "$dev"
	'

	test_expect_success "$fs 5: a write through open_by_handle_at on an evicted dentry" '
		guest
		mkdir -p "$SRC/nfs/a/b"
		echo x >"$SRC/nfs/a/b/f"
		"$HELPERS/handle-write" save "$SRC/nfs/a/b/f" "$SCRATCH/handle"
		cat >"$SCRATCH/change.sh" <<-EOF
		sleep 0.05
		# unused dentries are evicted (the slab caches of the host: only that)
		sync; echo 2 >/proc/sys/vm/drop_caches
		"$HELPERS/handle-write" write "$FSM" "$SCRATCH/handle" by-handle
		EOF
		backup ${n}5
		grep -q by-handle "$SRC/nfs/a/b/f"
		test_has "$SCRATCH/log-${n}5" "change tracking: .file inode $(stat -c %i "$SRC/nfs/a/b/f"). has a path that does not lead to it \(disconnected\): looked up in the tree by its inode"
	'

	test_expect_success "$fs 6: a directory moved out, changed two levels down, moved back" '
		guest
		mkdir -p "$SRC/mv/d/x/y"
		echo f >"$SRC/mv/d/x/y/f"
		cat >"$SCRATCH/change.sh" <<-EOF
		mv "$SRC/mv/d" "$OUT/d"
		chmod 700 "$OUT/d/x/y"; echo new >"$OUT/d/x/y/new"; echo more >>"$OUT/d/x/y/f"
		mv "$OUT/d" "$SRC/mv/d"
		EOF
		backup ${n}6
		test_has "$SCRATCH/log-${n}6" "change tracking: .d. was moved into a directory of the root: its subtree walked"
	'

	test_expect_success "$fs 7: a directory named \"... (deleted)\", and a guest root so named" '
		guest
		mkdir -p "$SRC/z (deleted)/q"
		echo f >"$SRC/z (deleted)/f"
		cat >"$SCRATCH/change.sh" <<-EOF
		echo more >>"$SRC/z (deleted)/f"; chmod 700 "$SRC/z (deleted)/q"
		echo new >"$SRC/z (deleted)/new"
		EOF
		backup ${n}7
		guest "root (deleted)"
		mkdir -p "$SRC/q"
		echo f >"$SRC/f"
		cat >"$SCRATCH/change.sh" <<-EOF
		echo more >>"$SRC/f"; echo new >"$SRC/new"; chmod 700 "$SRC/q"
		EOF
		backup ${n}8
	'

	test_expect_success "$fs 8: a change in a directory whose absolute path is over 4096 bytes" '
		guest
		(long_cd; echo f >f; echo g >g)
		cat >"$SCRATCH/change.sh" <<-EOF
		$(declare -f long_cd); LONG=$LONG; SRC="$SRC"
		long_cd; echo more >>f; echo new >new; chmod 600 g
		EOF
		LONG_PATHS=1 backup ${n}9
		test_has "$SCRATCH/log-${n}9" "change tracking: .directory inode [0-9]+. has a path of 4096 bytes or more: the directory looked up in the tree by its inode"
	'

	test_expect_success "$fs 10: a handle the kernel cannot open now (ENOMEM on a busy host)" '
		guest
		mkdir -p "$SRC/busy/d"
		echo old >"$SRC/busy/d/f"
		cat >"$SCRATCH/change.sh" <<-EOF
		sleep 0.05
		echo new >"$SRC/busy/d/f"
		echo added >"$SRC/busy/d/g"
		chmod 700 "$SRC/busy/d"
		EOF
		rm -f "$FAULT_LOG"
		with_fault "handle:ENOMEM:$SRC/busy/d" backup ${n}10
		fault_fired "^handle ENOMEM $SRC/busy/d$"
		test_lacks "$SCRATCH/log-${n}10" "not exact|whole walk"
		ino=$(stat -c %i "$SRC/busy/d")
		test_has "$SCRATCH/log-${n}10" "change tracking: .object inode $ino. has a handle the kernel cannot open now \(ENOMEM\): looked up in the tree by its inode"
		test_has "$SCRATCH/log-${n}10" "change tracking: directory inode $ino is ./busy/d.$"
	'
}

# 9: keep-staging 1, a loop device written between the passes of two runs
keep_staging_case() {
	local fs=$1 n=$2
	test_expect_success "$fs 9: keep-staging 1 and a loop device written, two runs" '
		loop_guest RUN1
		rm -rf "$SCRATCH/tmp"
		backup ${n}1 --keep-staging 1
		loop_change RUN2 17
		backup ${n}2 --keep-staging 1
		losetup -d "$dev"
	'
}

for fs in ${T0721_FS:-ext4 xfs btrfs}; do
	n=$((${#fs} == 4 ? 40 : ${#fs} == 3 ? 50 : 60))
	if ! command -v "mkfs.$fs" >/dev/null || ! fs_mount "$fs"; then
		test_skip "$fs: the nine situations" "cannot make and loop-mount $fs here"
		continue
	fi
	run_cases "$fs" "$n"
	keep_staging_case "$fs" "${n}9"
done

test_done
