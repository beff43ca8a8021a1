#!/bin/bash
# Benchmark (not a test): the seven nights of bench/nights.sh (the Debian
# root + a 24 MiB database, ~1 % changed a night, bench/guest.sh) to an
# S3 store, cbackup against restic and vzdump's way + rclone, all on ONE
# throwaway radosgw (scripts/rgw.sh), each tool in a bucket of its own;
# and the directory store of cbackup against borg on a loop-mounted ext4
# (issue 41). Each night every tool backs up the same tree, the order
# turned each night (and each round):
#   cbs3     cbackup backup --config CONF --storage offsite ([storage
#            offsite] type = s3, endpoint, bucket; the keys from the
#            environment), every other setting its default (no dumpdir:
#            the night's log is in the store and TMPDIR/cbackup/ct-100.log)
#   restic   0.14, -r s3:ENDPOINT/BUCKET, backup
#   vzrclone vzdump's way (rsync -aHAX twice, tar | zstd -T0 to a local
#            file), then rclone copy of that file to the bucket (provider
#            Ceph, path style), the local file removed
#   cbs3enc  (only when named in TOOLS) as cbs3, encrypted: --storage
#            offsite-enc, a bucket of its own, --encryption-key (a key
#            made by `cbackup key create`): issue 42's row on the store
#   cbstore  cbackup backup --layout store --dumpdir EXT4DIR
#   borg     1.2, -e none, create --compression zstd,3, on the same ext4
# Per tool, medians over ROUNDS rounds: night 1 wall; wall and CPU (user +
# sys of the client, /usr/bin/time; radosgw's own CPU not counted) of
# nights 2..N summed; bytes added per night (the bucket's stored bytes,
# radosgw-admin bucket stats, or du of the directory: mean of nights
# 2..N) and the storage after N nights; the bytes a backup night
# downloads (radosgw's get_b counter around it, mean of nights 2..N);
# what the client keeps between nights (tmpdir/cache, on the same ext4:
# the free space of a shared /var/tmp would decide cbackup's keep-staging
# auto); after the last night (S3 tools only) a full restore of it
# (cbackup restore offsite:NAME, restic restore latest, rclone copy +
# zstd -dc | tar -x, each into the loop-mounted ext4) and one small file back (cbackup restore --path,
# restic dump, rclone copy + zstd -dc | tar -x of one member), wall.
# Then the ratios against issue 41's targets.
# Environment: NIGHTS=7 ROUNDS=3 DISTROOT=/work/distroot CB=./cbackup
#   TOOLS="cbs3 restic vzrclone cbstore borg" (cbs3 and restic at least)
#   RESTORES=3 (whole restores a tool after the last night: the median)
#   PRIO=1 (radosgw and every tool in a cpu cgroup of the highest weight,
#   bench/lib.sh cpu_priority: other jobs on a shared machine weigh on
#   none of them; the disk stays shared)
#   SMALL=etc/debian_version (the one file) BENCH_TMP=/var/tmp (scratch,
#   removed at exit: ~2x the root, a sparse ext4 image of IMG_SIZE=16G,
#   radosgw's 20 GB sparse OSD file).
# Page caches are NOT dropped (shared machine): every run is warm, for all.
set -eu
cd "$(dirname "$0")/.."
TOP=$(pwd)
CB=${CB:-$TOP/cbackup}   # CB=a copy of it: a rebuild during the run does not reach it
NIGHTS=${NIGHTS:-7}
ROUNDS=${ROUNDS:-3}
DISTROOT=${DISTROOT:-/work/distroot}
IMG_SIZE=${IMG_SIZE:-16G}
SMALL=${SMALL:-etc/debian_version}
TOOLS=${TOOLS:-cbs3 restic vzrclone cbstore borg}
# the tools a full restore and one small file are timed for, and the
# ones with a bucket of their own
S3TOOLS=$(for t in cbs3 restic vzrclone; do case " $TOOLS " in *" $t "*) printf '%s ' "$t" ;; esac; done)
BUCKETS=$(for t in cbs3 cbs3enc restic vzrclone; do case " $TOOLS " in *" $t "*) printf '%s ' "$t" ;; esac; done)
. bench/lib.sh

for t in borg restic rclone rsync zstd radosgw mkfs.ext4 /usr/bin/time; do
	command -v "$t" >/dev/null || { echo "missing: $t (scripts/deps.sh; apt-get install borgbackup restic rclone time)" >&2; exit 2; }
done
work=$(mktemp -d "${BENCH_TMP:-/var/tmp}/cbackup-s3nights.XXXXXX")
RGW=$work/rgw
cleanup() {
	bash "$TOP/scripts/rgw.sh" stop "$RGW" >/dev/null 2>&1 || true
	mountpoint -q "$work/mnt" 2>/dev/null && umount "$work/mnt"
	cpu_priority_end
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export CBACKUP_LOCK_DIR=$work/locks RESTIC_PASSWORD=bench BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes
mkdir -m 700 "$CBACKUP_LOCK_DIR"
SRC=$work/src
MNT=$work/mnt
rec() { echo "$2" >>"$work/r.$1"; }   # KEY VALUE

# the guest and its nightly change: make_guest, change NIGHT (bench/guest.sh)
. bench/guest.sh

# ---- the tools --------------------------------------------------------------

# run_tool TOOL KEEP NIGHT: one night's backup (BUCKET_TOOL names the bucket)
run_tool() {
	local keep=$2/$1 b
	mkdir -p "$keep"
	case $1 in
	cbs3)
		"$CB" backup --config "$work/cb.conf" --storage offsite \
			--root "$SRC" --id 100 --type ct --tmpdir "$keep" \
			--freeze-cmd true --thaw-cmd true 2>>"$work/cbackup.log" ;;
	cbs3enc)
		"$CB" backup --config "$work/cb.conf" --storage offsite-enc \
			--root "$SRC" --id 100 --type ct --tmpdir "$keep" --encryption-key "$work/key" \
			--freeze-cmd true --thaw-cmd true 2>>"$work/cbackup.log" ;;
	restic)
		b=s3:$CB_S3_ENDPOINT/$BUCKET_restic
		[ "$3" != 1 ] || restic -q init -r "$b" --cache-dir "$keep" >/dev/null
		restic -q -r "$b" --cache-dir "$keep" backup "$SRC" >/dev/null ;;
	vzrclone)
		rsync -aHAX --numeric-ids --one-file-system "$SRC/" "$keep/vz/"
		rsync -aHAX --numeric-ids --one-file-system "$SRC/" "$keep/vz/"
		tar --numeric-owner --xattrs --acls -C "$keep/vz" -cf - . | zstd -q -T0 >"$keep/n$3.tar.zst"
		rm -rf "$keep/vz"
		rclone copy "$keep/n$3.tar.zst" "X:$BUCKET_vzrclone"
		rm -f "$keep/n$3.tar.zst" ;;
	cbstore)
		mkdir -p "$MNT/cbstore"
		"$CB" backup --layout store --dumpdir "$MNT/cbstore" --root "$SRC" --id 100 --type ct \
			--tmpdir "$keep" --freeze-cmd true --thaw-cmd true 2>>"$work/cbackup.log" ;;
	borg)
		[ -d "$MNT/borg" ] || BORG_BASE_DIR=$keep borg init -e none "$MNT/borg"
		BORG_BASE_DIR=$keep borg create --compression zstd,3 "$MNT/borg::n$3" "$SRC" ;;
	esac
}
# last_cb KEEP: the name of cbs3's newest night (its log file's)
last_cb() {
	sed -n "s/.*creating vzdump archive 'offsite:\(.*\)\.tar\.zst'.*/\1/p" "$1/cbs3/cbackup/ct-100.log"
}
# restore_tool TOOL KEEP DEST: the last night back, whole, into DEST
restore_tool() {
	mkdir -p "$3"
	case $1 in
	cbs3)
		"$CB" restore --config "$work/cb.conf" "offsite:$(last_cb "$2").tar.zst" "$3" --force \
			2>>"$work/cbackup.log" ;;
	restic)
		restic -q -r "s3:$CB_S3_ENDPOINT/$BUCKET_restic" --cache-dir "$2/restic" restore latest \
			--target "$3" >/dev/null ;;
	vzrclone)
		rclone copy "X:$BUCKET_vzrclone/n$NIGHTS.tar.zst" "$3.dl"
		zstd -dc "$3.dl/n$NIGHTS.tar.zst" | tar --numeric-owner --xattrs --acls -xpf - -C "$3"
		rm -rf "$3.dl" ;;
	esac
}
# small_tool TOOL KEEP DEST: the one small file $SMALL of the last night into DEST
small_tool() {
	mkdir -p "$3"
	case $1 in
	cbs3)
		"$CB" restore --config "$work/cb.conf" "offsite:$(last_cb "$2").tar.zst" "$3" --path "$SMALL" \
			2>>"$work/cbackup.log" ;;
	restic)
		restic -q -r "s3:$CB_S3_ENDPOINT/$BUCKET_restic" --cache-dir "$2/restic" dump latest \
			"$SRC/$SMALL" >"$3/small" ;;
	vzrclone)
		rclone copy "X:$BUCKET_vzrclone/n$NIGHTS.tar.zst" "$3.dl"
		zstd -dc "$3.dl/n$NIGHTS.tar.zst" | tar --numeric-owner -xpf - -C "$3" "./$SMALL"
		rm -rf "$3.dl" ;;
	esac
}
export -f run_tool restore_tool small_tool last_cb
export NIGHTS SMALL CB SRC MNT work

# stored TOOL: bytes the tool's bucket or directory holds
stored() {
	local b
	case $1 in
	cbstore|borg)
		# the clients' tmpdirs and caches are in $MNT/keep, not counted
		[ -d "$MNT/$1" ] || { echo 0; return; }
		sync -f "$MNT/$1"
		du -sB1 "$MNT/$1" | cut -f1 ;;
	*)
		b=BUCKET_$1
		radosgw-admin -c "$RGW/ceph.conf" bucket stats --bucket="${!b}" 2>/dev/null |
			python3 -c 'import json, sys
try:
    print(json.load(sys.stdin)["usage"].get("rgw.main", {}).get("size", 0))
except ValueError:
    print(0)' ;;
	esac
}

# got_bytes: the bytes radosgw has sent so far (its perf counter get_b)
got_bytes() {
	ceph --admin-daemon "$RGW/run/client.rgw.cb.asok" perf dump 2>/dev/null |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["rgw"]["get_b"])' 2>/dev/null || echo 0
}

# timed TOOL KEEP NIGHT: one night, wall and CPU into n.TOOL.*, growth,
# and what the night downloaded from radosgw
timed() {
	local tool=$1 before after wall user sys rss got
	before=$(stored "$tool")
	got=$(got_bytes)
	sync
	/usr/bin/time -f "%e %U %S %M" -o "$work/time" bash -c 'set -e; run_tool "$@"' _ "$tool" "$2" "$3" ||
		{ echo "$tool failed on night $3" >&2; tail -5 "$work/cbackup.log" >&2; exit 1; }
	after=$(stored "$tool")
	got=$(($(got_bytes) - got))
	read -r wall user sys rss <"$work/time"
	if [ "$3" = 1 ]; then
		echo "$wall" >"$work/n.$tool.night1"
		return 0
	fi
	echo "$wall" >>"$work/n.$tool.wall"
	awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }' >>"$work/n.$tool.cpu"
	echo $((after - before)) >>"$work/n.$tool.added"
	echo "$got" >>"$work/n.$tool.got"
}

# walltime FUNC TOOL KEEP DEST: wall seconds of one restore
walltime() {
	/usr/bin/time -f "%e" -o "$work/time" bash -c 'set -e; "$@"' _ "$@" ||
		{ echo "$1 $2 failed" >&2; tail -5 "$work/cbackup.log" >&2; exit 1; }
	cat "$work/time"
}

sum() { awk '{ s += $1 } END { printf "%.3f\n", s }' "$1"; }
mean() { awk '{ s += $1 } END { printf "%.0f\n", NR ? s / NR : 0 }' "$1"; }

# buckets R: fresh buckets for round R (restic creates its own at init)
buckets() {
	export BUCKET_cbs3=cbs3-r$1 BUCKET_cbs3enc=cbs3enc-r$1 BUCKET_restic=restic-r$1 \
		BUCKET_vzrclone=vzrclone-r$1
	rclone mkdir "X:$BUCKET_cbs3"
	rclone mkdir "X:$BUCKET_cbs3enc"
	rclone mkdir "X:$BUCKET_vzrclone"
	cat >"$work/cb.conf" <<-EOF
	[storage offsite]
	type = s3
	endpoint = $CB_S3_ENDPOINT
	bucket = $BUCKET_cbs3

	[storage offsite-enc]
	type = s3
	endpoint = $CB_S3_ENDPOINT
	bucket = $BUCKET_cbs3enc
	EOF
}

# round R: a fresh guest, fresh buckets and directories, NIGHTS nights
round() {
	local r=$1 keep=$MNT/keep n i order t
	echo "== round $r/$ROUNDS: copying the guest ..."
	make_guest
	rm -rf "$MNT"/* "$keep" "$work"/n.*
	mkdir -p "$keep"
	buckets "$r"
	for n in $(seq 1 "$NIGHTS"); do
		[ "$n" = 1 ] || change "$n"
		set -- $TOOLS
		for i in $(seq 1 $(((n + r) % 5))); do set -- "$@" "$1"; shift; done
		order="$*"
		for t in $order; do timed "$t" "$keep" "$n"; done
		echo "   night $n done ($order), load $(cut -d' ' -f1-3 /proc/loadavg)"
		cut -d' ' -f1 /proc/loadavg >>"$work/load"
	done
	# RESTORES (default 3) whole restores a tool, into the ext4 of the
	# directory stores (as bench/restore-full.sh FS=ext4 and
	# bench/s3-restore.sh: the shared /var/tmp is other jobs' disk too),
	# the order turned each time, each after a sync (the nights' writeback
	# weighs on none of them); their median is the round's
	for i in $(seq 1 "${RESTORES:-3}"); do
		set -- $S3TOOLS
		[ $((i % 2)) = 1 ] || set -- $(printf '%s\n' "$@" | tac)
		for t in "$@"; do
			sync
			walltime restore_tool "$t" "$keep" "$MNT/rst-$t-$i" >>"$work/rw.$t"
		done
	done
	for t in $S3TOOLS; do
		rec "$t.rwall" "$(median "$work/rw.$t")"
		rm -f "$work/rw.$t"
		rec "$t.small" "$(walltime small_tool "$t" "$keep" "$work/one-$t")"
		cmp "$work/one-$t/$([ "$t" = restic ] && echo small || echo "$SMALL")" "$SRC/$SMALL" ||
			{ echo "$t: the one file came back different" >&2; exit 1; }
	done
	rm -rf "$MNT"/rst-* "$work"/one-*
	for t in $TOOLS; do
		rec "$t.night1" "$(cat "$work/n.$t.night1")"
		rec "$t.wall" "$(sum "$work/n.$t.wall")"
		rec "$t.cpu" "$(sum "$work/n.$t.cpu")"
		rec "$t.added" "$(mean "$work/n.$t.added")"
		case " $BUCKETS " in *" $t "*) rec "$t.got" "$(mean "$work/n.$t.got")" ;; esac
		rec "$t.storage" "$(stored "$t")"
		rec "$t.kept" "$(du -sB1 --exclude=ct-100.log "$keep/$t" | cut -f1)"
	done
	sed -n 's/.*INFO: \(unit store .*\)/   cbackup, last night: \1/p' "$work/cbackup.log" | tail -n 1
	# cbackup's log lines of the round kept beside the table (a run
	# that is slow shows its phases there)
	mv "$work/cbackup.log" "$out.cbackup-r$r.log"
	for t in $BUCKETS; do
		b=BUCKET_$t
		radosgw-admin -c "$RGW/ceph.conf" bucket rm --bucket="${!b}" --purge-objects >/dev/null 2>&1 || true
	done
}

mb() { awk -v b="$1" 'BEGIN { printf "%.1f MB", b / 1e6 }'; }

# ratio NAME A B TARGET: A/B against the target (at most TARGET)
ratio() {
	awk -v n="$1" -v a="$2" -v b="$3" -v t="$4" 'BEGIN {
		r = b > 0 ? a / b : 0
		printf "%s: %.2fx (target <= %sx) %s\n", n, r, t, (r <= t ? "met" : "NOT met") }'
}

table() {
	local t k v
	echo "nights 2-$NIGHTS, medians of $(wc -l <"$work/r.cbs3.wall") round(s), load average (1 min) during the nights: $(median "$work/load") median, $(sort -n "$work/load" | head -n 1)-$(sort -n "$work/load" | tail -n 1)"
	printf '| |'
	for t in $TOOLS; do
		case $t in
		cbs3) printf ' cbackup to S3 |' ;;
		cbs3enc) printf ' cbackup to S3, encrypted |' ;;
		restic) printf ' restic to S3 |' ;;
		vzrclone) printf " vzdump's way + rclone |" ;;
		cbstore) printf ' cbackup store on ext4 |' ;;
		borg) printf ' borg on ext4 |' ;;
		esac
	done
	printf '\n|---|'
	for t in $TOOLS; do printf -- '---|'; done
	echo
	for k in night1 wall cpu added got storage kept rwall small; do
		case $k in
		night1) printf '| night 1 wall |' ;;
		wall) printf '| nights 2-%s wall, total |' "$NIGHTS" ;;
		cpu) printf '| CPU (user+sys, client), total |' ;;
		added) printf '| bytes added per night (upload) |' ;;
		got) printf '| bytes downloaded per night (backup) |' ;;
		storage) printf '| storage after %s nights |' "$NIGHTS" ;;
		kept) printf '| kept between nights (tmpdir/cache) |' ;;
		rwall) printf '| full restore of night %s, wall |' "$NIGHTS" ;;
		small) printf '| one small file back, wall |' ;;
		esac
		for t in $TOOLS; do
			if [ ! -s "$work/r.$t.$k" ]; then
				printf ' - |'
				continue
			fi
			v=$(median "$work/r.$t.$k")
			case $k in
			wall|cpu|night1|rwall|small) printf ' %.1f s |' "$v" ;;
			*) printf ' %s |' "$(mb "$v")" ;;
			esac
		done
		echo
	done
	m() { median "$work/r.$1.$2"; }
	has() { case " $TOOLS " in *" $1 "*) return 0 ;; esac; return 1; }
	ratio "cbs3/restic bytes added per night" "$(m cbs3 added)" "$(m restic added)" 1.5
	ratio "cbs3/restic storage after $NIGHTS nights" "$(m cbs3 storage)" "$(m restic storage)" 1.5
	ratio "cbs3/restic CPU nights 2-$NIGHTS" "$(m cbs3 cpu)" "$(m restic cpu)" 1.0
	ratio "cbs3/restic wall nights 2-$NIGHTS" "$(m cbs3 wall)" "$(m restic wall)" 1.0
	ratio "cbs3/restic night 1 wall" "$(m cbs3 night1)" "$(m restic night1)" 0.7
	ratio "cbs3 restore --path / restic dump" "$(m cbs3 small)" "$(m restic small)" 0.2
	ratio "cbs3/restic full restore" "$(m cbs3 rwall)" "$(m restic rwall)" 0.8
	! has cbstore || ! has borg ||
		ratio "cbstore/borg storage on ext4" "$(m cbstore storage)" "$(m borg storage)" 1.5
	# issue 42's targets on the store: encryption against the plain night
	! has cbs3enc || {
		ratio "cbs3enc/cbs3 CPU nights 2-$NIGHTS" "$(m cbs3enc cpu)" "$(m cbs3 cpu)" 1.05
		ratio "cbs3enc/cbs3 storage after $NIGHTS nights" "$(m cbs3enc storage)" "$(m cbs3 storage)" 1.02
		ratio "cbs3enc/cbs3 bytes added per night" "$(m cbs3enc added)" "$(m cbs3 added)" 1.02
	}
}

echo "waiting for $DISTROOT/.ready ..."
while [ ! -e "$DISTROOT/.ready" ]; do sleep 10; done
[ -x "$CB" ] || make -s
# before radosgw starts: it is part of what is timed
[ "${PRIO:-0}" = 1 ] && cpu_priority "cbackup-s3nights-$$"
"$CB" key create "$work/key" >/dev/null 2>&1
echo "starting radosgw ..."
start_rgw_env "$RGW" "$work/rgw.out" || exit 1
truncate -s "$IMG_SIZE" "$work/ext4.img"
mkfs.ext4 -q -F "$work/ext4.img"
mkdir -p "$MNT"
mount -o loop "$work/ext4.img" "$MNT"
echo "guest: $(find "$DISTROOT" | wc -l) entries, $(du -sh "$DISTROOT" | cut -f1) + a 24 MiB database"
out=${BENCH_TMP:-/var/tmp}/cbackup-s3nights-table.$$
for r in $(seq 1 "$ROUNDS"); do
	round "$r"
	table >"$out"   # after every round: a run cut short keeps it
done
cat "$out"
echo "(table also in $out, cbackup's log lines in $out.cbackup-r*.log)"
