# bench/lib.sh: helpers the benchmarks share (POSIX sh; sourced).
now() { date +%s.%N; }
# elapsed T0 T1: seconds between two now()s, 3 decimals, one line
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", b - a }'; }
# rotated N WORD...: the words turned left N times (N taken modulo their
# number), one line: an order that changes from run to run
rotated() {
	local n=$1
	shift
	for _ in $(seq 1 $((n % $#))); do set -- "$@" "$1"; shift; done
	echo "$*"
}
# loop_fs TYPE IMG MNT SIZE: a fresh file system (btrfs, ext4, or xfs with
# reflinks) in the sparse file IMG, mounted on MNT (made if missing). Its
# loop device does direct I/O (losetup --direct-io=on), as a disk would:
# a buffered one lets an fsync return once the blocks are in IMG's page
# cache (a tool that fsyncs often is flattered), and copies every block
# the file system writes through the host file system's write path on the
# cores the timed tools share (small: a full restore of the Debian root
# onto btrfs, 5 interleaved each, 1.99 CPU-s machine-wide against 1.94).
loop_fs() {
	local dev
	truncate -s 0 "$2" && truncate -s "$4" "$2" || return 1
	case $1 in
	btrfs) mkfs.btrfs -q -f "$2" >/dev/null 2>&1 ;;
	xfs) mkfs.xfs -q -f -m reflink=1 "$2" ;;
	ext4) mkfs.ext4 -q -F "$2" ;;
	*) echo "loop_fs: btrfs, ext4 or xfs, not '$1'" >&2; return 2 ;;
	esac || return 1
	mkdir -p "$3" && mount -o loop "$2" "$3" || return 1
	dev=$(findmnt -n -o SOURCE --mountpoint "$3")
	losetup --direct-io=on "$dev" 2>/dev/null ||
		echo "loop_fs: $dev ($3) does buffered I/O: the host cannot do direct I/O to $2" >&2
}
# stock_tar_x DEST [FILE]: GNU tar extracts FILE (default stdin) into DEST
# with the metadata cbackup restores (numeric owners, modes, every xattr,
# ACLs): the stock way a restore is compared with
stock_tar_x() { tar --numeric-owner --xattrs --xattrs-include='*' --acls -xpf "${2:--}" -C "$1"; }
# median FILE: of the numbers in FILE, one a line
median() { sort -n "$1" | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
# cpu_priority NAME: moves this shell (and what it starts from now on)
# into a cpu cgroup NAME of the highest weight (v2 cpu.weight 10000, v1
# cpu.shares 262144), so that on a machine other jobs keep busy the timed
# commands get the cores as on an idle one: every tool compared the same
# (the disk stays shared). cpu_priority_end moves it back and removes it.
# A benchmark's PRIO=1 option; prints what it did.
cpu_priority() {
	local v2=/sys/fs/cgroup v1=/sys/fs/cgroup/cpu
	if [ -e "$v2/cgroup.subtree_control" ] && grep -qw cpu "$v2/cgroup.subtree_control"; then
		CPU_PRIO_CG=$v2/$1 CPU_PRIO_PARENT=$v2
		mkdir -p "$CPU_PRIO_CG" && echo 10000 >"$CPU_PRIO_CG/cpu.weight"
	elif [ -e "$v1/cpu.shares" ]; then
		CPU_PRIO_CG=$v1/$1 CPU_PRIO_PARENT=$v1
		mkdir -p "$CPU_PRIO_CG" && echo 262144 >"$CPU_PRIO_CG/cpu.shares"
	else
		echo "PRIO=1: no cpu cgroup controller here: timed as the machine is" >&2
		return 0
	fi
	echo $$ >"$CPU_PRIO_CG/cgroup.procs"
	echo "PRIO=1: timed commands run in $CPU_PRIO_CG (highest cpu weight)"
}
cpu_priority_end() {
	[ -n "${CPU_PRIO_CG:-}" ] || return 0
	echo $$ >"$CPU_PRIO_PARENT/cgroup.procs"
	rmdir "$CPU_PRIO_CG" 2>/dev/null || true
}
# unprioritized CMD...: CMD out of cpu_priority's cgroup (in its parent),
# as a machine runs it. For restores: their writing waits on the kernel's
# writeback workers (btrfs's kworkers, seen in perf), which stay outside
# a cgroup that weighs 256 times theirs. On btrfs cbackup's restore
# against zstd -dc | tar -x measured 0.06 lower out of it, on average of
# 6 runs of 8 interleaved pairs (bench/restore-prio.sh; bench/README.md,
# "At e56bcf9"). Without cpu_priority: CMD.
unprioritized() {
	if [ -n "${CPU_PRIO_CG:-}" ]; then
		(echo "$BASHPID" >"$CPU_PRIO_PARENT/cgroup.procs" && exec "$@")
	else
		"$@"
	fi
}
# timing_table DIR BASE TITLE NAME...: DIR/NAME holds one "wall cpu" line
# a run; prints the medians of each NAME and the ratios against BASE's
timing_table() {
	local dir=$1 base=$2 title=$3 n w c bw bc
	shift 3
	_col() { awk -v c="$2" '{ print $c }' "$dir/$1" >"$dir/.col"; median "$dir/.col"; }
	bw=$(_col "$base" 1) bc=$(_col "$base" 2)
	printf "%-30s %8s %8s %11s %11s\n" "$title" wall cpu "wall/$base" "cpu/$base"
	for n in "$@"; do
		w=$(_col "$n" 1) c=$(_col "$n" 2)
		printf "%-30s %8s %8s %11s %11s\n" "$n" "$w" "$c" \
			"$(awk -v a="$w" -v b="$bw" 'BEGIN { printf "%.2fx", a / b }')" \
			"$(awk -v a="$c" -v b="$bc" 'BEGIN { printf "%.2fx", a / b }')"
	done
	rm -f "$dir/.col"
}
# start_rgw_env DIR OUT: a throwaway radosgw in DIR (scripts/rgw.sh; its
# output in OUT, shown when it cannot start), its S3 settings exported
# (CB_S3_ENDPOINT, AWS_*), and rclone's remote X on it (provider Ceph,
# path style; no CA bundle: rclone refuses one on a plain-http endpoint)
start_rgw_env() {
	bash scripts/rgw.sh start "$1" >"$2" 2>&1 || { cat "$2" >&2; return 1; }
	set -a
	. "$1/env"
	set +a
	unset AWS_CA_BUNDLE
	export RCLONE_CONFIG=/dev/null RCLONE_CONFIG_X_TYPE=s3 RCLONE_CONFIG_X_PROVIDER=Ceph \
		RCLONE_CONFIG_X_ENDPOINT=$CB_S3_ENDPOINT RCLONE_CONFIG_X_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID \
		RCLONE_CONFIG_X_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY RCLONE_CONFIG_X_FORCE_PATH_STYLE=true
}
