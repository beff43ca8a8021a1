#!/bin/bash
# Benchmark (not a test): two cbackup binaries side by side on the same
# guest, night after night, for a change that must not slow nights down:
# BEFORE (default /work/main/cbackup) and this tree's cbackup (CB), each
# night both back up the same tree, the order turned each night and each
# round. The guest and its nightly change (~1 %) are bench/guest.sh's: the
# Debian root at DISTROOT plus a 24 MiB database. A night is `cbackup
# backup --compress zstd`, every other setting its default (keep-staging
# auto), each binary its own tmpdir and dump dir on BENCH_TMP (default
# /var/tmp). ROUNDS (default 3) rounds of NIGHTS (default 7) nights, a
# fresh guest each round. Per binary, medians over the rounds: night 1
# wall, CPU (user + sys) and peak RSS (/usr/bin/time); nights 2..N wall and
# CPU, summed. Page caches are not dropped: every run is warm, for both.
#
#   BEFORE=/tmp/old/cbackup ROUNDS=5 NIGHTS=4 bash bench/nights-ab.sh
set -eu
cd "$(dirname "$0")/.."
TOP=$(pwd)
CB=${CB:-$TOP/cbackup}
BEFORE=${BEFORE:-/work/main/cbackup}
NIGHTS=${NIGHTS:-7}
ROUNDS=${ROUNDS:-3}
DISTROOT=${DISTROOT:-/work/distroot}
. bench/lib.sh

work=$(mktemp -d "${BENCH_TMP:-/var/tmp}/cbackup-ab.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
export CBACKUP_LOCK_DIR=$work/locks
mkdir -m 700 "$CBACKUP_LOCK_DIR"
SRC=$work/src
. bench/guest.sh

# night WHO BIN N: one night of BIN, timed into $work/r.WHO.*
night() {
	local wall user sys rss
	mkdir -p "$work/tmp-$1" "$work/dump-$1"
	sync
	/usr/bin/time -f "%e %U %S %M" -o "$work/time" "$2" backup --root "$SRC" --id 100 \
		--type ct --tmpdir "$work/tmp-$1" --dumpdir "$work/dump-$1" --compress zstd \
		--freeze-cmd true --thaw-cmd true 2>>"$work/$1.log" ||
		{ echo "$1 failed on night $3" >&2; tail -5 "$work/$1.log" >&2; exit 1; }
	read -r wall user sys rss <"$work/time"
	if [ "$3" = 1 ]; then
		echo "$wall" >>"$work/r.$1.night1"
		awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }' >>"$work/r.$1.cpu1"
		echo "$rss" >>"$work/r.$1.rss1"
	else
		echo "$wall" >>"$work/n.$1.wall"
		awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }' >>"$work/n.$1.cpu"
	fi
}

sum() { awk '{ s += $1 } END { printf "%.3f\n", s }' "$1"; }

for r in $(seq 1 "$ROUNDS"); do
	echo "== round $r/$ROUNDS: copying the guest ..."
	make_guest
	rm -rf "$work"/tmp-* "$work"/dump-* "$work"/n.*
	for n in $(seq 1 "$NIGHTS"); do
		[ "$n" = 1 ] || change "$n" >/dev/null
		if [ $(((n + r) % 2)) = 0 ]; then
			night before "$BEFORE" "$n"
			night after "$CB" "$n"
		else
			night after "$CB" "$n"
			night before "$BEFORE" "$n"
		fi
	done
	for who in before after; do
		[ "$NIGHTS" -lt 2 ] && continue
		sum "$work/n.$who.wall" >>"$work/r.$who.wall"
		sum "$work/n.$who.cpu" >>"$work/r.$who.cpu"
	done
	echo "   done, load $(cut -d' ' -f1-3 /proc/loadavg)"
	cut -d' ' -f1 /proc/loadavg >>"$work/load"
done

echo "medians of $ROUNDS round(s), load average (1 min) after each: $(tr '\n' ' ' <"$work/load")"
echo "| | before ($BEFORE) | after ($CB) |"
echo "|---|---|---|"
row() {  # LABEL KEY UNIT [DIVISOR]
	printf '| %s | %s %s | %s %s |\n' "$1" \
		"$(median "$work/r.before.$2" | awk -v d="${4:-1}" '{ printf "%.2f", $1 / d }')" "$3" \
		"$(median "$work/r.after.$2" | awk -v d="${4:-1}" '{ printf "%.2f", $1 / d }')" "$3"
}
row "night 1 wall" night1 s
row "night 1 CPU (user+sys)" cpu1 s
row "night 1 peak RSS" rss1 MiB 1024
if [ "$NIGHTS" -ge 2 ]; then
	row "nights 2-$NIGHTS wall, total" wall s
	row "nights 2-$NIGHTS CPU, total" cpu s
fi
# every round's figure, for the spread behind each median
for f in "$work"/r.*; do
	echo "${f##*/r.}: $(tr '\n' ' ' <"$f")"
done
