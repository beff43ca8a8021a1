# tests/e2e/lib.sh: sourced by every tests/e2e/tNNNN-*.sh (git's test-lib
# style, TAP output).
#
#   test_expect_success [PREREQ] 'description' 'body'
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
test_count=0
test_failed=0
declare -A _prereq_cache=()

# ---- cleanup -------------------------------------------------------------

cleanup_pid()    { echo "$1" >>"$SCRATCH/.cleanup-pids"; }
cleanup_cgroup() { echo "$1" >>"$SCRATCH/.cleanup-cgroups"; }
cleanup_mount()  { echo "$1" >>"$SCRATCH/.cleanup-mounts"; }

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
			[ -s "$cg/cgroup.procs" ] || break
			while read -r p; do kill -KILL "$p"; done <"$cg/cgroup.procs"
			sleep 0.02
		done
		rmdir "$cg" || echo "# cleanup: cannot remove cgroup $cg" >&2
	done < <(_lines_reversed "$SCRATCH/.cleanup-cgroups")
}

_lib_cleanup() {
	local rc=$? pid m
	set +e
	_cleanup_cgroups_thaw 2>/dev/null
	while IFS= read -r pid; do
		# guests run setsid'd: their group is theirs alone
		kill -CONT -- "-$pid" "$pid" 2>/dev/null
		kill -KILL -- "-$pid" "$pid" 2>/dev/null
	done < <(_lines_reversed "$SCRATCH/.cleanup-pids")
	_cleanup_cgroups_remove 2>/dev/null
	while IFS= read -r m; do
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
	# not in an if: bash ignores set -e inside a condition
	(set -e; cd "$SCRATCH"; eval "$body") >"$out" 2>&1 </dev/null
	if [ $? = 0 ]; then
		echo "ok $test_count - $desc"
		[ "${TEST_VERBOSE:-0}" = 1 ] && sed 's/^/# /' "$out"
	else
		test_failed=$((test_failed + 1))
		echo "not ok $test_count - $desc"
		sed 's/^/# /' "$out"
	fi
	return 0
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

# test_must_fail CMD...: CMD must fail (a plain `! CMD` is ignored by set -e)
test_must_fail() {
	if "$@"; then
		echo "unexpected success: $*"
		return 1
	fi
	return 0
}

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

# ---- helpers (C, compiled once into build/e2e-helpers) -------------------

build_helpers() {
	local src bin
	mkdir -p "$HELPERS" || return 1
	for src in "$TOP"/tests/helpers/*.c; do
		bin=$HELPERS/$(basename "$src" .c)
		[ "$bin" -nt "$src" ] && continue
		cc -O2 -Wall -Wextra -Werror -o "$bin.$$" "$src" && mv -f "$bin.$$" "$bin" || return 1
	done
}
build_helpers || { echo "Bail out! cannot build tests/helpers"; exit 1; }

# ---- running cbackup -----------------------------------------------------

# cbackup_run RC ARGS...: run cbackup, output in $CB_OUT / $CB_ERR; fail
# (showing both) unless it exits with RC.
cbackup_run() {
	local want=$1 rc=0
	shift
	"$CBACKUP" "$@" >"$CB_OUT" 2>"$CB_ERR" || rc=$?
	[ "$rc" = "$want" ] && return 0
	echo "cbackup $* exited with $rc, expected $want"
	echo "--- stdout:"; cat "$CB_OUT"
	echo "--- stderr:"; cat "$CB_ERR"
	return 1
}

# find_archive DUMPDIR TYPE ID EXT: the one archive, checked against the
# naming contract (cbackup-ct-101-2026_12_02-10_14_07.tar.zst)
find_archive() {
	local dir=$1 type=$2 id=$3 ext=$4 f n=0 found=
	for f in "$dir"/cbackup-"$type-$id"-*.tar"$ext"; do
		[ -e "$f" ] || continue
		n=$((n + 1)); found=$f
	done
	if [ "$n" != 1 ]; then
		echo "expected one cbackup-$type-$id-*.tar$ext in $dir, found $n:" >&2
		ls -la "$dir" >&2
		return 1
	fi
	if ! [[ $(basename "$found") =~ ^cbackup-$type-$id-[0-9]{4}_[0-9]{2}_[0-9]{2}-[0-9]{2}_[0-9]{2}_[0-9]{2}\.tar${ext//./\\.}$ ]]; then
		echo "archive name '$found' does not follow the naming contract" >&2
		return 1
	fi
	echo "$found"
}

# no_leftovers DIR: no .tmp files (and nothing else named cbackup-*.tar*)
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

# counter_advances SIDEFILE: the writer is running (counter moves in 300 ms)
counter_advances() {
	local a b
	a=$(side_counter "$1")
	sleep 0.3
	b=$(side_counter "$1")
	[ "$b" -gt "$a" ] || { echo "writer counter stuck at $a"; return 1; }
}

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

cd "$SCRATCH" || exit 1
