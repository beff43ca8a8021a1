#!/bin/bash
# Benchmark (not a test): seven nights of a guest that changes ~1 % a night,
# cbackup against borg, restic and vzdump's way, the dump directory on a
# loop-mounted btrfs (cbackup's copied units are clones) and on a
# loop-mounted ext4 (no clones: every cbackup archive is written whole)
# (issue 27). Run as `bench/nightly.sh nights` or directly.
#
# The guest: a copy of the Debian root at DISTROOT (read only; waits for
# DISTROOT/.ready) plus a 24 MiB database file. Before each night 2..N:
#   4 logs get ~50 KB appended each (~200 KB), dpkg's status is rewritten
#   by tmp + rename, 1,536 random 4 KiB pages of the database are rewritten
#   in place, 300 small files are added and the previous night's 300
#   removed, one package's files are "reinstalled": the same bytes and
#   mtime under new inodes (cp -p + mv). Seeded: every round and every
#   file system sees the same changes.
# Each night every tool backs up the same tree, the order turned each night:
#   cbackup  backup --keep-staging 1 --compress zstd (reuse 1, the default)
#   cbdef    cbackup as installed: backup --compress zstd, every other
#            setting its default (keep-staging auto)
#   cbenc    cbackup encrypted: as cbackup, with --encryption-key (a key
#            made by `cbackup key create`)
#   borg     1.2, repository -e none, create --compression zstd,3
#   borgenc  borg as above, repository -e repokey-blake2
#   restic   0.14 (always encrypted), backup
#   vzdump   rsync -aHAX twice, tar | zstd -T0, the copy removed
# Per tool and file system, medians over ROUNDS rounds: wall and CPU
# (user + sys, /usr/bin/time) of nights 2..N summed, bytes the dump
# directory grew by per night (mean of nights 2..N), its storage after N
# nights (btrfs: exclusive + shared extents counted once; ext4: du), and
# what the tool keeps between nights outside the dump directory (cbackup's
# staging copy with its index, borg's and restic's caches); night 1's wall
# time and peak RSS; and after the last night RESTORES (default 3) full
# restores of it (cbackup restore, borg extract, restic restore, zstd -dc |
# tar -x), wall and CPU (medians of all), and one small file (SMALL,
# default etc/debian_version) of it, wall.
# Environment: NIGHTS=7 ROUNDS=3 FS="btrfs ext4" DISTROOT=/work/distroot
#   TOOLS (a subset, in this order) SMALL RESTORES
#   PRIO=1 (every tool's nights in a cpu cgroup of the highest weight,
#   bench/lib.sh cpu_priority: other jobs on a shared machine weigh on none
#   of them; the disk stays shared. Not the restores: see unprioritized)
#   BENCH_TMP=/var/tmp (scratch, removed at exit: the guest, and 3 images
#   of IMG_SIZE=32G, sparse: the two dump dirs' file systems, where the
#   restores go too, and a fresh ext4 each round for the tmpdirs and
#   caches, see fresh_keep).
# Page caches are NOT dropped (shared machine): every run is warm, for all.
set -eu
cd "$(dirname "$0")/.."
TOP=$(pwd)
CB=${CB:-$TOP/cbackup}
NIGHTS=${NIGHTS:-7}
ROUNDS=${ROUNDS:-3}
FS=${FS:-btrfs ext4}
DISTROOT=${DISTROOT:-/work/distroot}
IMG_SIZE=${IMG_SIZE:-32G}
RESTORES=${RESTORES:-3}
TOOLS=${TOOLS:-cbackup cbdef cbenc borg borgenc restic vzdump}
SMALL=${SMALL:-etc/debian_version}
. bench/lib.sh

for t in borg restic rsync zstd btrfs mkfs.ext4 /usr/bin/time; do
	command -v "$t" >/dev/null || { echo "missing: $t (apt-get install borgbackup restic btrfs-progs time)" >&2; exit 2; }
done
work=$(mktemp -d "${BENCH_TMP:-/var/tmp}/cbackup-nights.XXXXXX")
cleanup() {
	cpu_priority_end
	for m in "$work"/mnt-*; do mountpoint -q "$m" 2>/dev/null && umount "$m"; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export CBACKUP_LOCK_DIR=$work/locks RESTIC_PASSWORD=bench BORG_PASSPHRASE=bench BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes
mkdir -m 700 "$CBACKUP_LOCK_DIR"
SRC=$work/src
rec() { echo "$3" >>"$work/r.$1.$2"; }   # FS KEY VALUE

# the guest and its nightly change: make_guest, change NIGHT (bench/guest.sh)
. bench/guest.sh

# ---- the tools --------------------------------------------------------------

# run_tool TOOL DUMP KEEP NIGHT: one night's backup
run_tool() {
	local dump=$2/$1 keep=$3/$1
	mkdir -p "$keep"
	case $1 in
	cbackup)
		mkdir -p "$dump"
		"$CB" backup --root "$SRC" --id 100 --type ct --tmpdir "$keep" --dumpdir "$dump" \
			--compress zstd --keep-staging 1 --freeze-cmd true --thaw-cmd true \
			2>>"$work/cbackup.log" ;;
	cbenc)
		mkdir -p "$dump"
		"$CB" backup --root "$SRC" --id 100 --type ct --tmpdir "$keep" --dumpdir "$dump" \
			--compress zstd --keep-staging 1 --freeze-cmd true --thaw-cmd true \
			--encryption-key "$work/key" 2>>"$work/cbackup.log" ;;
	cbdef)
		mkdir -p "$dump"
		"$CB" backup --root "$SRC" --id 100 --type ct --tmpdir "$keep" --dumpdir "$dump" \
			--compress zstd --freeze-cmd true --thaw-cmd true 2>>"$work/cbackup.log" ;;
	borg)
		[ -d "$dump" ] || BORG_BASE_DIR=$keep borg init -e none "$dump"
		BORG_BASE_DIR=$keep borg create --compression zstd,3 "$dump::n$4" "$SRC" ;;
	borgenc)
		[ -d "$dump" ] || BORG_BASE_DIR=$keep borg init -e repokey-blake2 "$dump"
		BORG_BASE_DIR=$keep borg create --compression zstd,3 "$dump::n$4" "$SRC" ;;
	restic)
		[ -d "$dump" ] || restic -q init -r "$dump" --cache-dir "$keep"
		restic -q -r "$dump" --cache-dir "$keep" backup "$SRC" >/dev/null ;;
	vzdump)
		mkdir -p "$dump"
		rsync -aHAX --numeric-ids --one-file-system "$SRC/" "$keep/vz/"
		rsync -aHAX --numeric-ids --one-file-system "$SRC/" "$keep/vz/"
		tar --numeric-owner --xattrs --acls -C "$keep/vz" -cf - . | zstd -q -T0 >"$dump/n$4.tar.zst"
		rm -rf "$keep/vz" ;;
	esac
}
# restore_tool TOOL DUMP DEST [FILE]: the last night back into DEST, whole
# or only FILE (relative to the guest's root)
restore_tool() {
	local dump=$2/$1 one=${4:-}
	mkdir -p "$3"
	if [ -n "$one" ]; then
		case $1 in
		cbackup|cbdef)
			"$CB" restore "$(ls -t "$dump"/*.tar.zst | head -n 1)" "$3" --force --path "$one" 2>>"$work/cbackup.log" ;;
		cbenc)
			"$CB" restore "$(ls -t "$dump"/*.tar.zst.cbenc | head -n 1)" "$3" --force --path "$one" \
				--encryption-key "$work/key" 2>>"$work/cbackup.log" ;;
		borg|borgenc)
			(cd "$3" && borg extract "$dump::n$NIGHTS" "${SRC#/}/$one") ;;
		restic)
			restic -q -r "$dump" restore latest --target "$3" --include "$SRC/$one" >/dev/null ;;
		vzdump)
			zstd -dc "$dump/n$NIGHTS.tar.zst" | tar -xpf - -C "$3" "./$one" ;;
		esac
		return
	fi
	case $1 in
	cbackup|cbdef)
		"$CB" restore "$(ls -t "$dump"/*.tar.zst | head -n 1)" "$3" --force 2>>"$work/cbackup.log" ;;
	cbenc)
		"$CB" restore "$(ls -t "$dump"/*.tar.zst.cbenc | head -n 1)" "$3" --force \
			--encryption-key "$work/key" 2>>"$work/cbackup.log" ;;
	borg|borgenc)
		(cd "$3" && borg extract "$dump::n$NIGHTS") ;;
	restic)
		restic -q -r "$dump" restore latest --target "$3" >/dev/null ;;
	vzdump)
		zstd -dc "$dump/n$NIGHTS.tar.zst" | tar --numeric-owner --xattrs --acls -xpf - -C "$3" ;;
	esac
}
export -f run_tool restore_tool
export NIGHTS
export CB SRC work

# stored FSTYPE DIR: bytes the directory holds on its file system
stored() {
	if [ ! -d "$2" ]; then
		echo 0
		return
	fi
	sync -f "$2"
	if [ "$1" = btrfs ]; then
		btrfs filesystem du --raw -s "$2" | awk 'NR == 2 { printf "%.0f\n", $2 + $3 }'
	else
		du -sB1 "$2" | cut -f1
	fi
}

# fresh_keep: the tools' tmpdirs and caches (what each keeps between
# nights) on a fresh ext4 each round, as a host's /var/tmp: not in
# BENCH_TMP, where on this machine (a journal-less ext4, shared with other
# jobs) every create checks the free inodes it could take for a recent
# deletion (the kernel's recently_deleted(): 2-4 s of system time in a
# night 1 of cbackup after the round before removed its trees, where a
# fresh ext4 takes 1.2-1.6 s); the same for every tool
fresh_keep() {
	! mountpoint -q "$work/mnt-keep" || umount "$work/mnt-keep"
	loop_fs ext4 "$work/keep.img" "$work/mnt-keep" "$IMG_SIZE"
}

# timed_night FS TOOL DUMP KEEP NIGHT: wall and CPU into r.FS.*, growth
timed_night() {
	local fs=$1 tool=$2 before after
	before=$(stored "$fs" "$3/$tool")
	sync
	/usr/bin/time -f "%e %U %S %M" -o "$work/time" bash -c 'set -e; run_tool "$@"' _ "$tool" "$3" "$4" "$5" ||
		{ echo "$tool failed on night $5" >&2; tail -5 "$work/cbackup.log" >&2; exit 1; }
	after=$(stored "$fs" "$3/$tool")
	read -r wall user sys rss <"$work/time"
	if [ "$5" = 1 ]; then
		echo "$wall" >"$work/n.$tool.night1"
		echo "$((rss * 1024))" >"$work/n.$tool.rss1"
		return 0
	fi
	echo "$wall" >>"$work/n.$tool.wall"
	awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }' >>"$work/n.$tool.cpu"
	echo $((after - before)) >>"$work/n.$tool.added"
}

sum() { awk '{ s += $1 } END { printf "%.3f\n", s }' "$1"; }
mean() { awk '{ s += $1 } END { printf "%.0f\n", NR ? s / NR : 0 }' "$1"; }

# round FS R: a fresh guest, fresh dump dirs, NIGHTS nights
round() {
	local fs=$1 r=$2 mnt=$work/mnt-$1 keep=$work/mnt-keep n i order
	echo "== $fs round $r/$ROUNDS: copying the guest ..."
	make_guest
	rm -rf "$mnt"/* "$work"/n.*
	fresh_keep
	for n in $(seq 1 "$NIGHTS"); do
		[ "$n" = 1 ] || change "$n"
		# the order turned each night (and each round)
		order=$(rotated $((n + r)) $TOOLS)
		for t in $order; do timed_night "$fs" "$t" "$mnt" "$keep" "$n"; done
		echo "   night $n done ($order), load $(cut -d' ' -f1-3 /proc/loadavg)"
		cut -d' ' -f1 /proc/loadavg >>"$work/load.$fs"
	done
	# the last night back, whole, RESTORES times, each tool in turn into a
	# tree of its own on the file system under test (the trees removed
	# only at the end: a create right after a big removal waits on it),
	# each after a sync, the order turned each time and each round; then
	# one small file
	for k in $(seq 1 "$RESTORES"); do
		for t in $(rotated $((r + k)) $TOOLS); do
			sync
			unprioritized /usr/bin/time -f "%e %U %S" -o "$work/time" \
				bash -c 'set -e; restore_tool "$@"' _ \
				"$t" "$mnt" "$mnt/rst-$t-$k" || { echo "$t restore failed" >&2; exit 1; }
			read -r wall user sys <"$work/time"
			rec "$fs" "$t.rwall" "$wall"
			rec "$fs" "$t.rcpu" "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')"
		done
	done
	for t in $TOOLS; do
		unprioritized /usr/bin/time -f "%e" -o "$work/time" bash -c 'set -e; restore_tool "$@"' _ \
			"$t" "$mnt" "$mnt/one-$t" "$SMALL" || { echo "$t restore of $SMALL failed" >&2; exit 1; }
		cmp -s "$mnt/one-$t/${SRC#/}/$SMALL" "$SRC/$SMALL" || cmp "$mnt/one-$t/$SMALL" "$SRC/$SMALL"
		rec "$fs" "$t.rone" "$(cat "$work/time")"
	done
	rm -rf "$mnt"/rst-* "$mnt"/one-*
	for t in $TOOLS; do
		rec "$fs" "$t.night1" "$(cat "$work/n.$t.night1")"
		rec "$fs" "$t.rss1" "$(cat "$work/n.$t.rss1")"
		rec "$fs" "$t.wall" "$(sum "$work/n.$t.wall")"
		rec "$fs" "$t.cpu" "$(sum "$work/n.$t.cpu")"
		rec "$fs" "$t.added" "$(mean "$work/n.$t.added")"
		rec "$fs" "$t.storage" "$(stored "$fs" "$mnt/$t")"
		rec "$fs" "$t.kept" "$(stored ext4 "$keep/$t")"
	done
	sed -n 's/.*INFO: \(reused .*\)/   cbackup, last night: \1/p' "$work/cbackup.log" | tail -n 1
	: >"$work/cbackup.log"
}

mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }

table() {
	local fs=$1 t k
	echo
	set -- $TOOLS
	echo "dump dir on $fs: nights 2-$NIGHTS, medians of $(wc -l <"$work/r.$fs.$1.wall") round(s), load average (1 min) during the nights: $(median "$work/load.$fs") median, $(sort -n "$work/load.$fs" | head -n 1)-$(sort -n "$work/load.$fs" | tail -n 1)"
	printf '|'
	for t in $TOOLS; do
		case $t in
		cbackup) printf ' | cbackup keep-staging 1' ;;
		cbdef) printf ' | cbackup as installed' ;;
		cbenc) printf ' | cbackup encrypted' ;;
		borgenc) printf ' | borg repokey-blake2' ;;
		vzdump) printf " | vzdump's way" ;;
		*) printf ' | %s' "$t" ;;
		esac
	done
	echo ' |'
	printf '|---|'
	for t in $TOOLS; do printf -- '---|'; done
	echo
	for k in night1 rss1 wall cpu added storage kept rwall rcpu rone; do
		case $k in
		night1) printf '| night 1 wall |' ;;
		rss1) printf '| night 1 peak RSS |' ;;
		rwall) printf '| full restore of night %s, wall |' "$NIGHTS" ;;
		rcpu) printf '| full restore, CPU |' ;;
		rone) printf '| one small file back (%s), wall |' "$SMALL" ;;
		wall) printf '| nights 2-%s wall, total |' "$NIGHTS" ;;
		cpu) printf '| CPU (user+sys), total |' ;;
		added) printf '| bytes added per night |' ;;
		storage) printf "| storage after $NIGHTS nights |" ;;
		kept) printf '| kept between nights (tmpdir/cache) |' ;;
		esac
		for t in $TOOLS; do
			v=$(median "$work/r.$fs.$t.$k")
			case $k in
			wall|cpu|night1|rwall|rcpu) printf ' %.1f s |' "$v" ;;
			rone) printf ' %.2f s |' "$v" ;;
			*) printf ' %s |' "$(mb "$v")" ;;
			esac
		done
		echo
	done
	has() { case " $TOOLS " in *" $1 "*) return 0 ;; esac; return 1; }
	ratio() {   # NAME A B KEY
		has "$2" && has "$3" || return 0
		awk -v a="$(median "$work/r.$fs.$2.$4")" -v b="$(median "$work/r.$fs.$3.$4")" -v n="$1" -v k="$4" \
			'BEGIN { printf "%s %s: %.3fx\n", n, k, (b > 0 ? a / b : 0) }'
	}
	for k in cpu wall added storage night1; do ratio "cbackup encrypted / plain (keep-staging 1)" cbenc cbackup "$k"; done
	ratio "cbackup encrypted / borg repokey-blake2" cbenc borgenc storage
	for c in restic borgenc borg; do ratio "cbackup encrypted / $c, one small file back," cbenc "$c" rone; done
	if has cbdef && has vzdump; then
		for k in rwall rcpu; do
			awk -v c="$(median "$work/r.$fs.cbdef.$k")" -v b="$(median "$work/r.$fs.vzdump.$k")" -v k="$k" \
				'BEGIN { printf "cbackup restore / zstd -dc | tar -x %s: %.2fx\n", k, (b > 0 ? c / b : 0) }'
		done
	fi
	has borg || return 0
	for k in wall cpu storage night1 rss1; do
		for c in cbackup cbdef; do
			has "$c" || continue
			awk -v c="$(median "$work/r.$fs.$c.$k")" -v b="$(median "$work/r.$fs.borg.$k")" -v k="$k" \
				-v n="$c" 'BEGIN { printf "%s/borg %s: %.2fx\n", n, k, (b > 0 ? c / b : 0) }'
		done
	done
}

echo "waiting for $DISTROOT/.ready ..."
while [ ! -e "$DISTROOT/.ready" ]; do sleep 10; done
[ -x "$CB" ] || make -s
"$CB" key create "$work/key" >/dev/null 2>&1
[ "${PRIO:-0}" = 1 ] && cpu_priority "cbackup-nights-$$"
for fs in $FS; do
	case $fs in btrfs|ext4) ;; *) echo "FS: btrfs or ext4" >&2; exit 2 ;; esac
	loop_fs "$fs" "$work/$fs.img" "$work/mnt-$fs" "$IMG_SIZE"
done
echo "guest: $(find "$DISTROOT" | wc -l) entries, $(du -sh "$DISTROOT" | cut -f1) + a 24 MiB database"
out=${BENCH_TMP:-/var/tmp}/cbackup-nights-table.$$
for r in $(seq 1 "$ROUNDS"); do
	for fs in $FS; do round "$fs" "$r"; done
	# the tables so far, after every round (a run cut short keeps them)
	for fs in $FS; do table "$fs"; done >"$out"
done
cat "$out"
echo "(table also in $out)"
