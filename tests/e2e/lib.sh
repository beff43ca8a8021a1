# tests/e2e/lib.sh: sourced by every tests/e2e/tNNNN-*.sh (git's test-lib
# style, TAP output).
#
#   test_expect_success [PREREQ] 'description' 'body'
#   test_when_finished 'cmd'   (inside a body: run cmd when it ends)
#   test_skip 'description' 'reason'
#   test_done
#
# A body runs in a subshell with `set -e`; its output is shown only when it
# fails. Everything a test creates lives in $SCRATCH (a fresh mktemp -d) or
# is registered with cleanup_pid / cleanup_cgroup / cleanup_mount: the EXIT
# trap thaws and removes cgroups, kills processes, unmounts and removes
# $SCRATCH, even when a test fails or the script is interrupted.
# Prerequisites: ROOT CGROUP2 CGROUP1 TMPFS BSDTAR SETCAP ACL.

set -u
export LC_ALL=C.UTF-8 TZ=UTC

TEST_NAME=$(basename "$0" .sh)
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CBACKUP=${CBACKUP:-$TOP/cbackup}
HELPERS=$TOP/build/e2e-helpers
SCRATCH=$(mktemp -d "/tmp/cbackup-e2e-$TEST_NAME.XXXXXX") || exit 1
CB_OUT=$SCRATCH/cb.stdout
CB_ERR=$SCRATCH/cb.stderr
# cbackup's global and per-guest locks live here, never in the host's
# /run/lock: a test neither waits for nor blocks a real backup job.
export CBACKUP_LOCK_DIR=$SCRATCH/locks
mkdir -m 700 -p "$CBACKUP_LOCK_DIR" || exit 1
# --all finds the host's guests (LXC, Proxmox VE): a test finds only those it
# made, never the host's (t0284 points these at trees of its own)
export CBACKUP_LXC_DIR=$SCRATCH/no-lxc CBACKUP_PVE_DIR=$SCRATCH/no-pve \
	CBACKUP_QEMU_RUN_DIR=$SCRATCH/no-qemu-run
test_count=0
test_failed=0
declare -A _prereq_cache=()

# ---- cleanup -------------------------------------------------------------

cleanup_pid()    { echo "$1" >>"$SCRATCH/.cleanup-pids"; }
cleanup_cgroup() { echo "$1" >>"$SCRATCH/.cleanup-cgroups"; }
cleanup_mount()  { echo "$1" >>"$SCRATCH/.cleanup-mounts"; }
cleanup_loop()   { echo "$1" >>"$SCRATCH/.cleanup-loops"; }   # a /dev/loopN to detach
cleanup_flags()  { echo "$1" >>"$SCRATCH/.cleanup-flags"; }   # a tree to chattr -i -a
cleanup_cmd()    { echo "$1" >>"$SCRATCH/.cleanup-cmds"; }    # a command (e.g. stop a service)

_lines_reversed() { [ -f "$1" ] && tac "$1"; return 0; }

_cleanup_cgroups_thaw() {
	local cg
	while IFS= read -r cg; do
		[ -e "$cg/cgroup.freeze" ] && echo 0 >"$cg/cgroup.freeze"
		[ -e "$cg/freezer.state" ] && echo THAWED >"$cg/freezer.state"
	done < <(_lines_reversed "$SCRATCH/.cleanup-cgroups")
	return 0
}

_cleanup_cgroups_remove() {
	local cg p i
	while IFS= read -r cg; do
		[ -d "$cg" ] || continue
		for i in $(seq 100); do
			cgroup_empty "$cg" && break
			while read -r p; do kill -KILL "$p"; done <"$cg/cgroup.procs"
			sleep 0.02
		done
		rmdir "$cg" || echo "# cleanup: cannot remove cgroup $cg" >&2
	done < <(_lines_reversed "$SCRATCH/.cleanup-cgroups")
}

_lib_cleanup() {
	local rc=$? pid m
	set +e
	while IFS= read -r m; do
		eval "$m" >/dev/null 2>&1
	done < <(_lines_reversed "$SCRATCH/.cleanup-cmds")
	_cleanup_cgroups_thaw 2>/dev/null
	while IFS= read -r pid; do
		# guests run setsid'd: their group is theirs alone
		kill -CONT -- "-$pid" "$pid" 2>/dev/null
		kill -KILL -- "-$pid" "$pid" 2>/dev/null
	done < <(_lines_reversed "$SCRATCH/.cleanup-pids")
	_cleanup_cgroups_remove 2>/dev/null
	while IFS= read -r m; do
		chattr -R -i -a "$m" 2>/dev/null
	done < <(_lines_reversed "$SCRATCH/.cleanup-flags")
	while IFS= read -r m; do
		losetup -d "$m" 2>/dev/null
	done < <(_lines_reversed "$SCRATCH/.cleanup-loops")
	while IFS= read -r m; do
		# one the test unmounted itself: nothing to say (a FUSE mount
		# whose daemon died fails mountpoint(1) but is still listed)
		awk -v m="$m" '$2 == m { f = 1 } END { exit !f }' /proc/self/mounts || continue
		umount "$m" 2>/dev/null || umount -l "$m"
	done < <(_lines_reversed "$SCRATCH/.cleanup-mounts")
	cd /
	rm -rf "$SCRATCH"
	exit "$rc"
}
trap _lib_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# ---- TAP -----------------------------------------------------------------

test_expect_success() {
	local prereq= desc body out
	if [ $# = 3 ]; then prereq=$1; shift; fi
	desc=$1 body=$2
	test_count=$((test_count + 1))
	if [ -n "$prereq" ] && ! test_have_prereq "$prereq"; then
		echo "ok $test_count - $desc # skip missing prerequisite $prereq"
		return 0
	fi
	out=$SCRATCH/.test-$test_count.out
	_when_finished=$SCRATCH/.when-finished-$test_count
	# not in an if: bash ignores set -e inside a condition
	(set -e; cd "$SCRATCH"; eval "$body") >"$out" 2>&1 </dev/null
	local rc=$?
	_run_when_finished >>"$out" 2>&1 || rc=1
	if [ $rc = 0 ]; then
		echo "ok $test_count - $desc"
		[ "${TEST_VERBOSE:-0}" = 1 ] && sed 's/^/# /' "$out"
	else
		test_failed=$((test_failed + 1))
		echo "not ok $test_count - $desc"
		sed 's/^/# /' "$out"
	fi
	return 0
}

# test_when_finished 'CMD': run CMD when this test body ends, passed or
# failed (git's meaning): the undo of something the body changed outside
# $SCRATCH (a sysctl, a mount it made after cleanup_mount could not be used).
# The commands run newest first, outside the body's subshell; one that
# fails fails the test.
test_when_finished() {
	printf '%s\n' "$*" >>"$_when_finished"
}

_run_when_finished() {
	local cmd rc=0
	[ -s "$_when_finished" ] || return 0
	while IFS= read -r cmd; do
		(cd "$SCRATCH" && eval "$cmd") || { echo "test_when_finished: '$cmd' failed"; rc=1; }
	done < <(tac "$_when_finished")
	rm -f "$_when_finished"
	return $rc
}

test_skip() {
	test_count=$((test_count + 1))
	echo "ok $test_count - $1 # skip $2"
}

test_done() {
	echo "1..$test_count"
	[ "$test_failed" = 0 ] && exit 0
	echo "# failed $test_failed of $test_count"
	exit 1
}

# ---- assertions (git's test-lib names and meanings) ---------------------
#
# A body runs under `set -e`, which ignores `! cmd` and every `a && b` but the
# last: write one assertion per line with these (tests/lint.sh enforces it).

# test_must_fail [ok=signal] CMD...: CMD exits non-zero. A death by signal
# (status > 128), "not found" (127) or "not executable" (126) is a failure
# too, unless ok=signal is given: a crash is not the refusal being tested.
test_must_fail() {
	local ok= rc=0
	case $1 in ok=*) ok=${1#ok=}; shift ;; esac
	"$@" || rc=$?
	if [ "$rc" = 0 ]; then
		echo "test_must_fail: command succeeded: $*"
		return 1
	elif [ "$rc" -gt 128 ] && [ "$ok" != signal ]; then
		echo "test_must_fail: killed by signal $((rc - 128)): $*"
		return 1
	elif [ "$rc" = 126 ] || [ "$rc" = 127 ]; then
		echo "test_must_fail: cannot run (status $rc): $*"
		return 1
	fi
	return 0
}

# test_has FILE ERE: some line of FILE matches ERE
test_has() {
	grep -Eq -- "$2" "$1" && return 0
	echo "test_has: no line of '$1' matches '$2'; it has:"
	head -n 40 "$1"
	return 1
}

# test_lacks FILE ERE: FILE exists and no line matches ERE (prints those that do)
test_lacks() {
	[ -r "$1" ] || { echo "test_lacks: cannot read '$1'"; return 1; }
	grep -E -- "$2" "$1" >/dev/null || return 0
	echo "test_lacks: '$1' has lines matching '$2':"
	grep -E -- "$2" "$1" | head -n 40
	return 1
}

# test_cmp EXPECTED ACTUAL: identical files (shows the diff)
test_cmp() { diff -u -- "$1" "$2"; }

# ---- prerequisites -------------------------------------------------------

cgroup2_mount() { awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts; }
cgroup1_freezer_mount() {
	awk '$3 == "cgroup" && $4 ~ /(^|,)freezer(,|$)/ { print $2; exit }' /proc/self/mounts
}

_probe_cgroup() {  # MOUNT CONTROLFILE
	local d="$1/cbe2e-probe-$$"
	[ -n "$1" ] && mkdir "$d" 2>/dev/null || return 1
	local ok=1
	[ -e "$d/$2" ] && ok=0
	rmdir "$d"
	return $ok
}

_check_prereq() {
	case $1 in
	ROOT)    [ "$(id -u)" = 0 ] ;;
	CGROUP2) _probe_cgroup "$(cgroup2_mount)" cgroup.freeze ;;
	CGROUP1) _probe_cgroup "$(cgroup1_freezer_mount)" freezer.state ;;
	TMPFS)   mkdir -p "$SCRATCH/.tmpfs-probe" &&
		 mount -t tmpfs -o size=1m tmpfs "$SCRATCH/.tmpfs-probe" 2>/dev/null &&
		 umount "$SCRATCH/.tmpfs-probe" ;;
	BSDTAR)  command -v bsdtar >/dev/null ;;
	SETCAP)  command -v setcap >/dev/null ;;
	ACL)     command -v setfacl >/dev/null && command -v getfacl >/dev/null ;;
	QEMU)    command -v qemu-system-x86_64 >/dev/null && command -v qemu-img >/dev/null &&
		 command -v python3 >/dev/null ;;
	*)       echo "# unknown prerequisite $1" >&2; return 1 ;;
	esac
}

# test_have_prereq A,B: all of them (cached)
test_have_prereq() {
	local p
	for p in ${1//,/ }; do
		if [ -z "${_prereq_cache[$p]:-}" ]; then
			if _check_prereq "$p" >/dev/null 2>&1; then
				_prereq_cache[$p]=yes
			else
				_prereq_cache[$p]=no
			fi
		fi
		[ "${_prereq_cache[$p]}" = yes ] || return 1
	done
}

# ---- helpers (C, built by `make helpers` into build/e2e-helpers) ---------

# the Makefile's rule, run here too so that a script started by hand (or a
# helper added since the last make) finds them up to date
build_helpers() { make --no-print-directory -s -C "$TOP" helpers >&2; }
build_helpers || { echo "Bail out! cannot build tests/helpers"; exit 1; }

# ---- object storage ------------------------------------------------------

# start_rgw: a throwaway Ceph RADOS Gateway on 127.0.0.1 for this script
# (scripts/rgw.sh, stopped at exit); exports CB_S3_ENDPOINT,
# AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY. Fails saying why (the caller
# skips its S3 cases with that reason).
start_rgw() {
	RGW_DIR=$SCRATCH/rgw
	cleanup_cmd "bash '$TOP/scripts/rgw.sh' stop '$RGW_DIR'"
	bash "$TOP/scripts/rgw.sh" start "$RGW_DIR" >"$SCRATCH/rgw.out" 2>&1 ||
		{ RGW_WHY=$(tail -n 1 "$SCRATCH/rgw.out"); return 1; }
	set -a
	. "$RGW_DIR/env"
	set +a
}

# need_rgw WHAT: start_rgw, or skip WHAT saying why and end the script
# there (the cases before it have run)
need_rgw() {
	if ! command -v radosgw >/dev/null; then
		test_skip "$1" 'radosgw is not installed (make deps installs Ceph)'
		test_done
	fi
	if ! start_rgw; then
		test_skip "$1" "scripts/rgw.sh could not start it: $RGW_WHY"
		test_done
	fi
}

# ---- running cbackup -----------------------------------------------------

# the timestamp that starts every line of a guest's .log, as vzdump's
# ("2026-12-03 03:00:01 INFO: ..."): grep -E "^${TS}INFO: ..." FILE.log
TS='[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} '

# cbackup_run RC ARGS...: run cbackup, output in $CB_OUT / $CB_ERR; fail
# (showing both) unless it exits with RC. CB_STAGE_WORKERS=N runs every
# backup with --stage-workers N (to run a script unchanged with 1, 2, 8).
cbackup_run() {
	local want=$1 rc=0
	shift
	if [ -n "${CB_STAGE_WORKERS:-}" ] && [ "${1:-}" = backup ]; then
		set -- "$@" --stage-workers "$CB_STAGE_WORKERS"
	fi
	"$CBACKUP" "$@" >"$CB_OUT" 2>"$CB_ERR" || rc=$?
	[ "$rc" = "$want" ] && return 0
	echo "cbackup $* exited with $rc, expected $want"
	echo "--- stdout:"; cat "$CB_OUT"
	echo "--- stderr:"; cat "$CB_ERR"
	return 1
}

# archive_prefix TYPE ID: how cbackup names that guest's archives: a
# container whose ID Proxmox VE can hold (pve-storage archive_info:
# [1-9][0-9]{2,8}) as vzdump does, vzdump-lxc-ID-; others (and every guest
# when ARCHIVE_NAME=cbackup, the archive-name key) cbackup-TYPE-ID-
archive_prefix() {
	if [ "$1" = ct ] && [ "${ARCHIVE_NAME:-vzdump}" != cbackup ] &&
		[[ $2 =~ ^[1-9][0-9]{2,8}$ ]]; then
		echo "vzdump-lxc-$2"
	else
		echo "cbackup-$1-$2"
	fi
}

# find_archive DUMPDIR TYPE ID EXT: the one archive, checked against the
# naming contract (vzdump-lxc-101-2026_12_02-10_14_07.tar.zst,
# cbackup-ct-web-2026_12_02-10_14_07.tar.zst)
find_archive() {
	local dir=$1 type=$2 id=$3 ext=$4 f n=0 found= prefix
	prefix=$(archive_prefix "$type" "$id")
	for f in "$dir/$prefix"-*.tar"$ext"; do
		[ -e "$f" ] || continue
		n=$((n + 1)); found=$f
	done
	if [ "$n" != 1 ]; then
		echo "expected one $prefix-*.tar$ext in $dir, found $n:" >&2
		ls -la "$dir" >&2
		return 1
	fi
	if ! [[ $(basename "$found") =~ ^$prefix-[0-9]{4}_[0-9]{2}_[0-9]{2}-[0-9]{2}_[0-9]{2}_[0-9]{2}\.tar${ext//./\\.}$ ]]; then
		echo "archive name '$found' does not follow the naming contract" >&2
		return 1
	fi
	echo "$found"
}

# no_tmp_files DIR: no *.tmp file anywhere below DIR (prints those left)
no_tmp_files() {
	local left
	left=$(find "$1" -name '*.tmp' 2>/dev/null)
	[ -z "$left" ] && return 0
	echo "left-over temporary files: $left"
	return 1
}

# ---- guests: cgroups and processes ---------------------------------------

# make_cgroup v2|v1: create a fresh cgroup (registered for cleanup) and
# print its directory
make_cgroup() {
	local mnt d
	if [ "$1" = v2 ]; then mnt=$(cgroup2_mount); else mnt=$(cgroup1_freezer_mount); fi
	[ -n "$mnt" ] || { echo "no $1 freezer mount" >&2; return 1; }
	d=$mnt/cbe2e-$$-$RANDOM$RANDOM
	mkdir "$d" || return 1
	cleanup_cgroup "$d"
	echo "$d"
}

# cg_frozen DIR: exit 0 if frozen now
cg_frozen() {
	if [ -e "$1/cgroup.events" ]; then
		grep -qx 'frozen 1' "$1/cgroup.events"
	else
		grep -qx FROZEN "$1/freezer.state"
	fi
}

# start_guest CGROUP|"" CMD ARGS...: run CMD in a new session, moved into
# CGROUP before its exec; sets GUEST_PID (registered for cleanup)
start_guest() {
	local cg=$1
	shift
	(
		[ -n "$cg" ] && echo "$BASHPID" >"$cg/cgroup.procs"
		exec setsid "$@"
	) >>"$SCRATCH/guest.log" 2>&1 </dev/null &
	GUEST_PID=$!
	disown "$GUEST_PID" 2>/dev/null || true  # no "Killed" notice at cleanup
	cleanup_pid "$GUEST_PID"
	# the guest joins its cgroup from the background subshell: return only
	# once it is there, or a busy machine lets cbackup look first and find
	# the cgroup empty (t0281 case 10, t0284 case 12 failed that way under
	# load: "has no process")
	[ -z "$cg" ] || wait_for 10 grep -qx "$GUEST_PID" "$cg/cgroup.procs"
}

# start_writer CGROUP|"" FILE SIDEFILE: the numbered-line writer as guest;
# waits until it has written something
start_writer() {
	start_guest "$1" "$HELPERS/writer" "$2" "$3"
	wait_for 5 test -s "$3"
}

# side_counter FILE: the writer's counter
side_counter() { local c; c=$(cat "$1") && echo $((10#$c)); }

# wait_for SECONDS CMD...: poll CMD every 20 ms until it succeeds
wait_for() {
	local end=$((SECONDS + $1 + 1))
	shift
	while ! "$@"; do
		[ "$SECONDS" -ge "$end" ] && { echo "timed out waiting for: $*"; return 1; }
		sleep 0.02
	done
}

# cgroup_empty CG: no process left in the cgroup (cgroup files have size 0:
# test -s is always false there; read the file each time it is asked)
cgroup_empty() {
	! grep -q . "$1/cgroup.procs"
}

# counter_advances SIDEFILE: the writer is running (its counter moves)
# (waits up to 10 s for it: on a loaded machine a thawed writer may get no
# CPU for a while: a fixed 300 ms window was a timing threshold in disguise)
counter_advances() {
	local a
	a=$(side_counter "$1")
	wait_for 10 _counter_above "$1" "$a" >/dev/null || { echo "writer counter stuck at $a"; return 1; }
}
_counter_above() { [ "$(side_counter "$1")" -gt "$2" ]; }

# check_lines FILE: lines "N writer line ..." numbered 1..N, each complete
check_lines() {
	[ -s "$1" ] || { echo "'$1' is empty"; return 1; }
	[ "$(tail -c 1 "$1" | od -An -c | tr -d ' ')" = '\n' ] ||
		{ echo "'$1' ends with an incomplete line"; return 1; }
	awk '$1 != NR || NF != 5 { print "line " NR " broken: " $0; bad = 1; exit }
	     END { exit bad }' "$1"
}

# mount_tmpfs DIR SIZE
mount_tmpfs() {
	mkdir -p "$1" && mount -t tmpfs -o "size=$2" tmpfs "$1" && cleanup_mount "$1"
}

# ---- trees ---------------------------------------------------------------

NS_TIME='2020-01-02 03:04:05.123456789'

# make_full_tree DIR: every file type and metadata kind cbackup must keep
make_full_tree() {
	local d=$1
	mkdir -p "$d" && cd "$d" || return 1
	printf 'hello\n' >regular.txt
	: >empty
	head -c 3M /dev/urandom >random.bin
	yes 'compressible line of text for the codec' | head -c 2M >text.txt
	# sparse: 64 MiB apparent, two small data extents
	truncate -s 64M sparse.img
	printf 'data in the middle' | dd of=sparse.img bs=1M seek=10 conv=notrunc status=none
	head -c 8192 /dev/urandom | dd of=sparse.img bs=1M seek=40 conv=notrunc status=none
	ln -s /etc/hostname abs-link
	ln -s regular.txt rel-link
	ln -s does/not/exist dangling-link
	mkdir sub private sticky
	printf 'linked\n' >hardlink1
	ln hardlink1 sub/hardlink2
	ln hardlink1 hardlink3
	mkfifo fifo
	mknod chardev c 1 3
	mknod blockdev b 7 200
	"$HELPERS/mksock" "$d/socket"
	chmod 0700 private
	chmod 1777 sticky
	printf '#!/bin/sh\n' >setuid
	printf 'nobody may read\n' >noperm
	echo owned >owned
	echo 'spaces' >'name with spaces'
	echo 'unicode' >'ünïcödé-ファイル-ß'
	echo capable >capable
	echo xattrs >xattrs.txt
	echo acl >acl.txt
	chown 1234:5678 owned private sub/hardlink2 capable setuid
	chown -h 1234:5678 rel-link
	chmod 04755 setuid
	chmod 0000 noperm
	setfattr -n user.comment -v 'hello world' xattrs.txt
	setfattr -n user.binary -v 0x00ff10 xattrs.txt
	setfattr -n user.dir -v yes sub
	setcap cap_net_raw+ep capable
	setfacl -m u:1234:rx,g:5678:r acl.txt
	setfacl -m u:1234:rwx,d:u:1234:rx,d:g:5678:rx private
	local deep=deep/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z/this-is-a-long-directory-name-to-pass-one-hundred-characters
	mkdir -p "$deep"
	echo bottom >"$deep/$(printf 'long-file-name-%.0s' $(seq 12))end"
	echo private >private/secret
	# nanosecond times last, directories bottom-up
	find . -depth ! -type s -exec touch -h -d "$NS_TIME" {} +
	touch -h -d '2019-05-06 07:08:09.987654321' regular.txt rel-link sub
	cd - >/dev/null
}

# make_many_files DIR N: N small files in subdirectories of 500
make_many_files() {
	local d=$1 n=$2 i sub=
	for ((i = 0; i < n; i++)); do
		if ((i % 500 == 0)); then sub=$d/many$((i / 500)); mkdir -p "$sub"; fi
		echo "$i" >"$sub/f$i"
	done
}

# tree_manifest DIR [OPTS]: one sorted line per entry (sockets left out)
_tree_manifest() {
	local opts=$2
	(cd "$1" && find . ! -type s -printf '%p\t%y\t%U:%G\t%m\t%s\t%b\t%T@\t%l\t%n\t%i\n') |
	awk -F'\t' -v opts="$opts" '
	{
		path = $1; type = $2; size = ($2 == "f") ? $5 : "-"
		sparse = ($2 == "f" && $5 > 1048576 && $6 * 512 < $5 / 2) ? "sparse" : "dense"
		mtime = $7
		if (type == "l" && opts ~ /no-symlink-mtime/) mtime = "-"
		if (path == "." && opts ~ /no-root-mtime/) mtime = "-"
		links = (type == "d") ? "-" : $9
		line[path] = path "\t" type "\t" $3 "\t" $4 "\t" size "\t" mtime "\t->" $8 "\tlinks=" links "\t" sparse
		if (type != "d" && $9 > 1) { key = $10; if (!(key in first) || path < first[key]) first[key] = path; ino[path] = key }
	}
	END {
		for (p in line) print line[p] ((p in ino) ? "\tgroup=" first[ino[p]] : "")
	}' | LC_ALL=C sort
	(cd "$1" && find . \( -type c -o -type b \) -exec stat -c '%n dev=%t:%T' {} + | LC_ALL=C sort)
	(cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum)
}

# "# file: NAME" blocks (getfattr/getfacl -R) -> sorted "NAME<TAB>line"
_blocks_to_lines() {
	awk '/^# file: / { f = substr($0, 9); next } /^#/ || /^$/ { next } { print f "\t" $0 }' |
		LC_ALL=C sort
}

_tree_xattrs() {
	(cd "$1" && getfattr -R -P -h -d -m - -e hex . 2>/dev/null) | _blocks_to_lines |
		grep -v 'system\.posix_acl_'
	return 0
}

_tree_acls() {
	(cd "$1" && getfacl -R -P -n -s . 2>/dev/null) | _blocks_to_lines
}

# compare_trees [--no-acl] [--no-xattr] [--no-symlink-mtime] [--no-root-mtime] A B
# Type, owner, mode, size, nanosecond mtime, symlink target, hardlink
# groups, holes, device numbers, content, xattrs, ACLs; sockets of A must
# be absent from B. Prints the differences and fails if there are any.
compare_trees() {
	local opts= a b diffs=0
	while [ $# -gt 2 ]; do opts="$opts $1"; shift; done
	a=$1 b=$2
	_tree_manifest "$a" "$opts" >"$SCRATCH/.manifest-a"
	_tree_manifest "$b" "$opts" >"$SCRATCH/.manifest-b"
	diff -u "$SCRATCH/.manifest-a" "$SCRATCH/.manifest-b" || diffs=1
	if [[ $opts != *no-xattr* ]]; then
		_tree_xattrs "$a" >"$SCRATCH/.xattr-a"
		_tree_xattrs "$b" >"$SCRATCH/.xattr-b"
		[ -s "$SCRATCH/.xattr-a" ] || { echo "no xattrs in '$a'?"; diffs=1; }
		diff -u "$SCRATCH/.xattr-a" "$SCRATCH/.xattr-b" || diffs=1
	fi
	if [[ $opts != *no-acl* ]]; then
		_tree_acls "$a" >"$SCRATCH/.acl-a"
		_tree_acls "$b" >"$SCRATCH/.acl-b"
		diff -u "$SCRATCH/.acl-a" "$SCRATCH/.acl-b" || diffs=1
	fi
	if [ -n "$(find "$b" -type s)" ]; then
		echo "sockets in '$b': $(find "$b" -type s)"; diffs=1
	fi
	[ "$diffs" = 0 ] || { echo "trees '$a' and '$b' differ"; return 1; }
}

# ---- jobs, locks, retention (issue 4) ------------------------------------

# make_small_tree DIR [HOSTNAME]: a tiny guest root (a few files, a subdir,
# /etc/hostname)
make_small_tree() {
	mkdir -p "$1/etc" "$1/srv/data" "$1/var/log" || return 1
	echo "${2:-guest}" >"$1/etc/hostname"
	printf 'line %s\n' $(seq 200) >"$1/srv/data/lines.txt"
	head -c 64K /dev/urandom >"$1/srv/data/random.bin"
	echo "booted" >"$1/var/log/messages"
}

# make_reuse_tree DIR N: a guest root for the unit-reuse tests (issue 27):
# N compressible text files (different per file) under usr/share, a 3 MiB
# random file, a gzip file (stored raw), a log and a config file
make_reuse_tree() {
	local i
	mkdir -p "$1/etc" "$1/var/log" "$1/usr/share" || return 1
	for i in $(seq 1 "$2"); do
		seq "$i" 7 $((i * 900)) | head -c 20000 >"$1/usr/share/f$i.txt"
	done
	head -c 3M /dev/urandom >"$1/usr/share/big.bin"
	seq 1 400000 | gzip -1 >"$1/usr/share/data.gz"
	seq 1 100000 >"$1/var/log/syslog"
	printf 'conf\n' >"$1/etc/conf"
}

# store_setup N: a guest tree of N files in $SRC, and a configuration
# $CONF whose [storage offsite] is a unit store in $STORE (issue 41)
store_setup() {
	mkdir -p "$STORE" "$SCRATCH/tmp" || return 1
	make_reuse_tree "$SRC" "$1" || return 1
	cat >"$CONF" <<-EOF
	tmpdir = $SCRATCH/tmp
	archive-name = cbackup
	[storage offsite]
	path = $STORE
	layout = store
	EOF
}

# now_s: wall clock in seconds with decimals; elapsed_since T0: seconds since
now_s() { date +%s.%N; }
elapsed_since() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.2f\n", b - a }'; }

# at_least A B: A >= B (decimals)
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }

# lock_is_held FILE: another process holds an flock on FILE
lock_is_held() { ! flock -n "$1" true 2>/dev/null; }
lock_is_free() { flock -n "$1" true 2>/dev/null; }

# hold_lock FILE: hold an flock on FILE from a background process in its own
# session (registered for cleanup); sets HOLD_PID. release_lock PID FILE:
# kill it and wait until FILE is free.
hold_lock() {
	start_guest "" flock -o "$1" sleep 300
	HOLD_PID=$GUEST_PID
	wait_for 5 lock_is_held "$1"
}
release_lock() {
	kill -KILL -- "-$1" "$1" 2>/dev/null
	wait_for 5 lock_is_free "$2"
}

# synthetic_backup DUMPDIR TYPE ID STAMP [EXT]: an (empty) archive named as
# cbackup names them, with its .log and .sha256, for retention tests;
# STAMP is YYYY_MM_DD-HH_MM_SS. Prints the archive path.
synthetic_backup() {
	local name=cbackup-$2-$3-$4.tar${5-.zst}
	local empty=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
	: >"$1/$name" && echo "log of $4" >"$1/cbackup-$2-$3-$4.log" &&
		echo "$empty  $name" >"$1/$name.sha256" && echo "$1/$name"
}

# prune_marks_table: a set of backup times of one guest, newest first, each
# with the mark Proxmox VE's prune gives it under keep-last=2,keep-hourly=2,
# keep-daily=2,keep-weekly=2,keep-monthly=2,keep-yearly=2 with the two
# "protected" ones protected ("MARK STAMP (RULE)"), worked by hand from
# pve-storage src/PVE/Storage.pm prune_mark_backup_group(): each rule, in
# the order last, hourly, daily, weekly (ISO %V/%G), monthly, yearly, walks
# the unmarked backups newest first, skips those whose time slot already
# holds a kept backup, keeps the first of each new slot (up to its count)
# and marks the others of that slot remove (t0130, t0642)
prune_marks_table() {
	cat <<'EOF'
protected 2021_01_12-13_00_00 (protected)
keep 2021_01_12-12_30_00 (keep-last)
keep 2021_01_12-12_10_00 (keep-last)
keep 2021_01_12-11_50_00 (keep-hourly)
remove 2021_01_12-11_20_00
keep 2021_01_12-09_00_00 (keep-hourly)
remove 2021_01_12-08_00_00
keep 2021_01_11-23_00_00 (keep-daily)
remove 2021_01_11-01_00_00
keep 2021_01_10-10_00_00 (keep-daily)
remove 2021_01_09-10_00_00
keep 2021_01_02-10_00_00 (keep-weekly)
remove 2020_12_29-10_00_00
keep 2020_12_20-10_00_00 (keep-weekly)
remove 2020_12_10-10_00_00
keep 2020_11_15-10_00_00 (keep-monthly)
remove 2020_11_01-10_00_00
keep 2020_10_05-10_00_00 (keep-monthly)
remove 2020_09_05-10_00_00
keep 2019_06_01-10_00_00 (keep-yearly)
remove 2019_03_01-10_00_00
protected 2019_01_01-10_00_00 (protected)
keep 2018_06_01-10_00_00 (keep-yearly)
remove 2017_06_01-10_00_00
EOF
}

# written_seconds LOGFILE: the seconds the "Total bytes written: N (…, R/s)"
# line implies (N / R)
written_seconds() {
	sed -n 's/.*Total bytes written: \([0-9]*\) ([^,]*, \([0-9.]*\)\([KMGT]*\)i*B\/s).*/\1 \2 \3/p' "$1" |
	awk '{ m = 1; if ($3 == "K") m = 1024; if ($3 == "M") m = 1048576; if ($3 == "G") m = 1073741824
	       printf "%.2f\n", $1 / ($2 * m) }'
}

cd "$SCRATCH" || exit 1

# ---- fault injection (tests t02NN-*) -------------------------------------
#
# FAULTINJECT is the LD_PRELOAD shim of tests/helpers/faultinject.c (see
# there for CB_FAULT). Use it as a prefix of cbackup_run:
#   with_fault 'read:EIO:/src/big' cbackup_run 1 backup ...
# Every fault that fired is logged to $FAULT_LOG.

FAULTINJECT=$HELPERS/faultinject.so
FAULT_LOG=$SCRATCH/fault.log

with_fault() {
	local spec=$1
	shift
	# ASan (SAN=1 builds) wants to be first in the library list
	CB_FAULT=$spec CB_FAULT_LOG=$FAULT_LOG LD_PRELOAD=$FAULTINJECT \
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 "$@"
}

# with_fault_bg SPEC CMD...: with_fault, CMD in the background (a fault
# that holds it, SIGSTOP, is the usual reason); its pid in FAULT_PID.
# with_fault itself is a function: $! after it would be its subshell's.
with_fault_bg() {
	local spec=$1
	shift
	CB_FAULT=$spec CB_FAULT_LOG=$FAULT_LOG LD_PRELOAD=$FAULTINJECT \
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 "$@" &
	FAULT_PID=$!
}

# fault_fired PATTERN: the shim logged a fault matching PATTERN
fault_fired() {
	grep -E -- "$1" "$FAULT_LOG" 2>/dev/null && return 0
	echo "the fault '$1' never fired (fault log: $(cat "$FAULT_LOG" 2>/dev/null))"
	return 1
}

# storage_snapshot DIR FILE: name, size, mtime and inode of every archive
# (and .sha256) in DIR: any rewrite, rename over or removal shows. (.tmp
# files are no_tmp_files' business.)
storage_snapshot() {
	(cd "$1" && find . -maxdepth 1 -type f \( -name 'cbackup-*' -o -name 'vzdump-*' \) ! -name '*.log' \
		! -name '*.tmp' ! -name '*.verified' -printf '%f %s %T@ %i\n' | LC_ALL=C sort) >"$2"
}

# storage_unchanged DIR FILE: the archives are exactly those of the snapshot
storage_unchanged() {
	storage_snapshot "$1" "$2.now"
	diff -u "$2" "$2.now" && return 0
	echo "the archives in '$1' changed (- before, + after)"
	return 1
}

# dir_empty DIR [WHAT]: DIR has no entries
dir_empty() {
	[ -z "$(ls -A "$1")" ] && return 0
	echo "${2:-left} in '$1':"; ls -la "$1"
	return 1
}

# error_names ID PHASE-ERE CAUSE-ERE: the ERROR line of guest ID names both
error_names() {
	grep -E "^ERROR: Backup of VM $1 failed - $2.*$3" "$CB_ERR" && return 0
	echo "no line 'ERROR: Backup of .. $1 failed - $2 ... $3' in:"
	cat "$CB_ERR"
	return 1
}

# guest_thawed CGROUP SIDEFILE: not frozen, and the writer moves on
guest_thawed() {
	if cg_frozen "$1"; then
		echo "guest '$1' is left frozen"
		echo 0 >"$1/cgroup.freeze"
		return 1
	fi
	counter_advances "$2"
}

# locks_free DIR...: every lock file in DIR can be taken at once
locks_free() {
	local f d
	for d in "$@"; do
		for f in "$d"/*.lock "$d"/.*.lock; do
			[ -e "$f" ] || continue
			flock -n "$f" true || { echo "lock '$f' is still held"; return 1; }
		done
	done
}

# ---- VMs: QEMU and QMP (t03NN-*) -----------------------------------------
#
# qmp SOCKET COMMAND [JSON-ARGS] runs one QMP command on its own connection
# (tests/helpers/qmp.py); `qmp SOCKET status` prints running/paused/...

QMP_PY=$TOP/tests/helpers/qmp.py
# the system's python: a pyenv shim costs seconds per call on a busy host
QMP_PYTHON=python3
[ -x /usr/bin/python3 ] && QMP_PYTHON=/usr/bin/python3

qmp() { "$QMP_PYTHON" "$QMP_PY" "$@"; }

# qemu_start NAME SOCKET DRIVE-SPEC...: a daemonized TCG VM (no guest OS:
# the BIOS finds nothing to boot, the VM is "running" all the same), one
# virtio disk per DRIVE-SPEC (FILE:FORMAT), monitor on SOCKET; sets QEMU_PID
# (registered for cleanup) and waits until query-status says running
qemu_start() {
	local name=$1 sock=$2 spec drives=()
	shift 2
	for spec in "$@"; do
		drives+=(-drive "file=${spec%:*},format=${spec##*:},if=virtio")
	done
	rm -f "$SCRATCH/$name.pid"
	qemu-system-x86_64 -name "$name" -nodefaults -display none -machine pc,accel=tcg \
		-m 64 -S "${drives[@]}" -qmp "unix:$sock,server=on,wait=off" \
		-daemonize -pidfile "$SCRATCH/$name.pid" >>"$SCRATCH/qemu.log" 2>&1 || {
		echo "qemu-system-x86_64 failed:"; cat "$SCRATCH/qemu.log"; return 1
	}
	QEMU_PID=$(cat "$SCRATCH/$name.pid") || return 1
	cleanup_pid "$QEMU_PID"
	qmp "$sock" cont >/dev/null && wait_vm_status 5 "$sock" running
}

# qemu_stop SOCKET PID: QMP quit, SIGKILL if it lingers
qemu_stop() {
	qmp "$1" quit >/dev/null 2>&1
	wait_for 3 test ! -d "/proc/$2" >/dev/null || kill -KILL "$2" 2>/dev/null
	return 0
}

vm_status_is() { [ "$(qmp "$1" status)" = "$2" ]; }

# wait_vm_status SECONDS SOCKET STATUS
wait_vm_status() {
	wait_for "$1" vm_status_is "$2" "$3" && return 0
	echo "VM at '$2' is '$(qmp "$2" status)', not '$3'"
	return 1
}

# ---- file systems on loop devices (t065N-*) ------------------------------

# make_loop_fs btrfs|xfs|ext4 DIR SIZE: a fresh file system of that type
# (xfs with reflink=1) in a file under $SCRATCH, loop-mounted at DIR and
# registered with cleanup_mount (the loop device goes with the umount)
make_loop_fs() {
	local type=$1 dir=$2 img=$SCRATCH/.$(basename "$2").img
	mkdir -p "$dir" && truncate -s "$3" "$img" || return 1
	case $type in
	btrfs) mkfs.btrfs -q -f "$img" >/dev/null 2>&1 ;;  # -q still prints a NOTE
	xfs)   mkfs.xfs -q -f -m reflink=1 "$img" ;;
	ext4)  mkfs.ext4 -q -F "$img" ;;
	*)     false ;;
	esac || { echo "mkfs.$type failed"; return 1; }
	mount -o loop "$img" "$dir" || { echo "cannot loop-mount $type"; return 1; }
	cleanup_mount "$dir"
}

# loop_fs_unavailable TYPE...: prints why one of them cannot be made and
# mounted here (and succeeds), or fails when all of them can
loop_fs_unavailable() {
	local t
	[ "$(id -u)" = 0 ] || { echo "not root"; return 0; }
	for t in "$@"; do
		command -v "mkfs.$t" >/dev/null || { echo "mkfs.$t missing (make deps)"; return 0; }
		grep -qw "$t" /proc/filesystems || { echo "no $t in this kernel"; return 0; }
		make_loop_fs "$t" "$SCRATCH/.probe-$t" 320M >/dev/null 2>&1 ||
			{ echo "cannot make and loop-mount $t (loop devices?)"; return 0; }
		umount "$SCRATCH/.probe-$t" && rm -f "$SCRATCH/..probe-$t.img" &&
			sed -i "\|^$SCRATCH/.probe-$t\$|d" "$SCRATCH/.cleanup-mounts"
	done
	return 1
}

# fs_used DIR: bytes in use on DIR's file system, after a sync
fs_used() { sync -f "$1" && df -B1 --output=used "$1" | tail -n 1 | tr -d ' '; }
