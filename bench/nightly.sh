#!/bin/bash
# Benchmark (not a test): a nightly backup as it runs on a host, cbackup
# against its peers, on the same trees, interleaved in one run (issue 16).
#
#   bench/nightly.sh          (the rows below, issue 16)
#   bench/nightly.sh nights   (seven nights against borg, restic and
#                             vzdump's way: bench/nights.sh, issue 27)
#
# Trees:
#   distro  a copy of the real Debian root at DISTROOT (default /work/distroot,
#           read only: waits for DISTROOT/.ready, then copies it with cp -a)
#   big     a generated tree of BIG entries (default 1000000: 1000 per
#           directory, 9 in 10 files empty, the rest 100 bytes)
# Rows (medians of N runs, the order of the peers turned each round):
#   cold pass 1, tmpdir on the disk and on a tmpfs: rsync -aHAX, cp -a,
#     cbackup's first sync with 1 worker and with the default (online
#     cores), read from its log ("first sync finished (S seconds)")
#   second night, 1% of the files changed: the whole backup (zstd) with
#     keep-staging 1 against vzdump's way (rsync, rsync again, tar | zstd -T0,
#     rm -rf of the copy)
#   pass 2 with 10 files changed between the passes (a pre-stop hook), on
#     the big tree; rsync's second pass after the same change
#   maximum RSS of cbackup per entry of the big tree (/usr/bin/time)
# Environment: N=3 runs, BIG=1000000 entries (BIG=0: no big tree), SKIP_TMPFS=1,
#   SKIP_DISTRO=1 (no distro rows), BIG_N=N runs on the big tree,
#   BENCH_TMP=/var/tmp (scratch directory there, removed at exit; needs
#   room for the trees, a copy of each and an archive).
# Page caches are NOT dropped (shared machine): every run is warm, for all.
set -eu
# seven nights against borg, restic and vzdump's way (issue 27)
[ "${1:-}" != nights ] || exec bash "$(dirname "$0")/nights.sh"
cd "$(dirname "$0")/.."
TOP=$(pwd)
CB=$TOP/cbackup
N=${N:-3}
BIG=${BIG:-1000000}
BIG_N=${BIG_N:-$N}
DISTROOT=${DISTROOT:-/work/distroot}
work=$(mktemp -d "${BENCH_TMP:-/var/tmp}/cbackup-nightly.XXXXXX")
cleanup() {
	mountpoint -q "$work/tmpfs" && umount "$work/tmpfs"
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# cbackup's locks in the scratch directory: other jobs on this machine
# (benchmarks of others) hold the host's global lock for minutes
export CBACKUP_LOCK_DIR=$work/locks
mkdir -m 700 "$CBACKUP_LOCK_DIR"

. bench/lib.sh
log_secs() { sed -n "s/^INFO: $1 sync finished (\([0-9.]*\) seconds)$/\1/p" "$2" | head -n 1; }
rec() { echo "$2" >>"$work/r.$1"; }   # KEY VALUE

# timed KEY CMD...: wall time of CMD into r.KEY
timed() {
	local key=$1 t0
	shift
	sync
	t0=$(now)
	"$@" >/dev/null
	rec "$key" "$(elapsed "$t0" "$(now)")"
}

gen_big() {  # DIR ENTRIES
	python3 - "$1" "$2" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d)
data = b"x" * 100
for i in range(n):
    if i % 1000 == 0:
        sub = os.path.join(d, "d%04d" % (i // 1000))
        os.mkdir(sub)
        continue
    fd = os.open(os.path.join(sub, "f%d" % i), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    if i % 10 == 0:
        os.write(fd, data)
    os.close(fd)
PY
}

# ---- the peers -------------------------------------------------------------

rsync_copy() { rsync -aHAX --numeric-ids --one-file-system "$1/" "$2/"; }
cp_copy() { cp -a "$1" "$2"; }

# cbackup_cold SRC TMPDIR KEY WORKERS: a whole backup; its first sync's time
cbackup_cold() {
	local id=cold$RANDOM
	mkdir -p "$2"
	# as timed does for the peers: the previous removal is not charged to it
	sync
	"$CB" backup --root "$1" --id "$id" --tmpdir "$2" --stdout --compress 0 \
		--freeze-cmd true --thaw-cmd true --stage-workers "$4" 2>"$work/cb.log" >/dev/null
	rec "$3" "$(log_secs first "$work/cb.log")"
}

# cold_round SRC TMPDIR TAG ROUND: every peer once, the order turned
cold_round() {
	local src=$1 tmp=$2 tag=$3 r=$4 peers="rsync cp cb1 cbN" p
	[ $((r % 2)) = 0 ] && peers="cbN cb1 cp rsync"
	for p in $peers; do
		case $p in
		rsync) timed "$tag.rsync" rsync_copy "$src" "$tmp/copy" ;;
		cp) timed "$tag.cp" cp_copy "$src" "$tmp/copy" ;;
		cb1) cbackup_cold "$src" "$tmp" "$tag.cb1" 1 ;;
		cbN) cbackup_cold "$src" "$tmp" "$tag.cbN" 0 ;;
		esac
		rm -rf "$tmp/copy"
	done
}

# change_some SRC EVERY: append a line to one regular file in EVERY
change_some() {
	find "$1" -type f -size +0 -perm -u=w | awk -v e="$2" 'NR % e == 0' |
		while IFS= read -r f; do printf 'night %s\n' "$RANDOM" >>"$f"; done
}

vzdump_way() {  # SRC TMP: two rsyncs, tar | zstd, the copy removed
	rsync_copy "$1" "$2/vz"
	rsync_copy "$1" "$2/vz"
	tar --numeric-owner --xattrs --acls -C "$2/vz" -cf - . | zstd -q -T0 >"$work/vz.tar.zst"
	rm -rf "$2/vz" "$work/vz.tar.zst"
}

cbackup_night() {  # SRC TMP
	mkdir -p "$work/dump"
	"$CB" backup --root "$1" --id night --tmpdir "$2" --dumpdir "$work/dump" --compress zstd \
		--keep-staging 1 --freeze-cmd true --thaw-cmd true 2>"$work/night.log"
	rm -rf "$work/dump"
}

night_round() {  # SRC TMP ROUND
	change_some "$1" 100
	if [ $(($3 % 2)) = 1 ]; then
		timed night.vz vzdump_way "$1" "$2"
		timed night.cb cbackup_night "$1" "$2"
	else
		timed night.cb cbackup_night "$1" "$2"
		timed night.vz vzdump_way "$1" "$2"
	fi
	rec night.cbp1 "$(log_secs first "$work/night.log")"
}

# pass2_round SRC ROUND: 10 files changed between the passes (pre-stop
# hook); cbackup's final sync from its log, rsync's second pass after the
# same kind of change, max RSS of cbackup
pass2_round() {
	local src=$1 hook=$work/hook.sh
	cat >"$hook" <<EOF
#!/bin/bash
[ "\$1" = pre-stop ] || exit 0
for i in 1 2 3 4 5 6 7 8 9 10; do
	k=\$((i * $((BIG / 1000)) / 11))
	echo "\$RANDOM" >>"$src/\$(printf d%04d "\$k")/f\$((k * 1000 + 1))"
done
EOF
	chmod +x "$hook"
	mkdir -p "$work/tmp"
	/usr/bin/time -f %M -o "$work/rss" "$CB" backup --root "$src" --id big --tmpdir "$work/tmp" \
		--stdout --compress 0 --freeze-cmd true --thaw-cmd true --verbose \
		--script "$hook" 2>"$work/big.log" >/dev/null
	rec big.cbp1 "$(log_secs first "$work/big.log")"
	# the frozen pass is a few ms: the verbose line has them
	rec big.cbp2 "$(sed -n 's/^INFO: final sync took \([0-9.]*\) ms$/\1/p' "$work/big.log" |
		awk '{ print $1 / 1000 }')"
	rec big.rss "$(cat "$work/rss")"
	rsync_copy "$src" "$work/tmp/rs"
	"$hook" pre-stop
	timed big.rsp2 rsync_copy "$src" "$work/tmp/rs"
	rm -rf "$work/tmp/rs"
}

# ---- the table -------------------------------------------------------------

row() {  # LABEL PEER-KEY CBACKUP-KEY [PEER-NAME]
	local p c
	[ -s "$work/r.$2" ] && [ -s "$work/r.$3" ] || return 0
	p=$(median "$work/r.$2")
	c=$(median "$work/r.$3")
	awk -v l="$1" -v p="$p" -v c="$c" -v n="${4:-}" 'BEGIN {
		printf "| %-44s | %9.3f s | %9.3f s | %5.2fx %s |\n", l, p, c, (p > 0 ? c / p : 0), n }'
}

table() {
	echo
	echo "medians of $N runs ($BIG_N on the big tree, $BIG entries), warm page cache; ratio = cbackup / peer"
	echo "| step | peer | cbackup | ratio |"
	echo "|---|---|---|---|"
	for t in distro.disk distro.tmpfs big.disk; do
		row "$t: cold pass 1, 1 worker vs rsync -aHAX" "$t.rsync" "$t.cb1" rsync
		row "$t: cold pass 1, $(nproc) workers vs rsync -aHAX" "$t.rsync" "$t.cbN" rsync
		row "$t: cold pass 1, 1 worker vs cp -a" "$t.cp" "$t.cb1" "cp -a"
		row "$t: cold pass 1, $(nproc) workers vs cp -a" "$t.cp" "$t.cbN" "cp -a"
	done
	row "distro: 2nd night 1% changed, whole zstd backup" night.vz night.cb "vzdump's way"
	row "big: pass 2, 10 changes (frozen)" big.rsp2 big.cbp2 "rsync 2nd pass"
	if [ -s "$work/r.night.cbp1" ]; then
		echo "distro 2nd night: cbackup's first sync (keep-staging delta) $(median "$work/r.night.cbp1") s"
	fi
	if [ -s "$work/r.big.rss" ]; then
		awk -v kb="$(median "$work/r.big.rss")" -v n="$BIG" 'BEGIN {
			printf "big: max RSS %.1f MiB, %.0f bytes per entry (%d entries)\n",
				kb / 1024, kb * 1024 / n, n }'
	fi
}

# ---- run -------------------------------------------------------------------

run_distro() {
	echo "waiting for $DISTROOT/.ready ..."
	while [ ! -e "$DISTROOT/.ready" ]; do sleep 10; done
	cp -a "$DISTROOT" "$work/distro"
	rm -f "$work/distro/.ready"
	echo "distro: $(find "$work/distro" | wc -l) entries, $(du -sh "$work/distro" | cut -f1)"
	mkdir -p "$work/disk"
	if [ "${SKIP_TMPFS:-0}" != 1 ]; then
		mkdir -p "$work/tmpfs"
		mount -t tmpfs -o size=4g tmpfs "$work/tmpfs"
	fi
	for r in $(seq 1 "$N"); do
		echo "distro round $r/$N ..."
		cold_round "$work/distro" "$work/disk" distro.disk "$r"
		[ "${SKIP_TMPFS:-0}" = 1 ] || cold_round "$work/distro" "$work/tmpfs" distro.tmpfs "$r"
	done
	echo "distro: the first night (keep-staging 1) ..."
	cbackup_night "$work/distro" "$work/disk"
	for r in $(seq 1 "$N"); do
		echo "distro second night $r/$N ..."
		night_round "$work/distro" "$work/disk" "$r"
	done
	rm -rf "$work/distro" "$work/disk"
}

run_big() {
	echo "generating the big tree ($BIG entries) ..."
	gen_big "$work/big" "$BIG"
	mkdir -p "$work/disk"
	for r in $(seq 1 "$BIG_N"); do
		echo "big round $r/$BIG_N ..."
		cold_round "$work/big" "$work/disk" big.disk "$r"
		pass2_round "$work/big" "$r"
	done
}

[ -x "$CB" ] || make -s
[ "${SKIP_DISTRO:-0}" = 1 ] || run_distro
[ "$BIG" -gt 0 ] && run_big
table | tee "$work/../cbackup-nightly-table.$$"
echo "(table also in ${BENCH_TMP:-/var/tmp}/cbackup-nightly-table.$$)"
