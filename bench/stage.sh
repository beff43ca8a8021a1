#!/bin/sh
# Benchmark (not a test): cbackup's staging passes against vzdump's rsync
# two-pass sync, on the same tree, in the same run.
#
#   bench/stage.sh [TREE]
#
# TREE: a directory to use (copied first with cp -a, because the "1%
# changed" step modifies files); default: a generated tree of >= 20,000
# entries and >= 1 GB (text-like, random, sparse, symlinks, hardlinks,
# deep dirs). Environment:
#   SCALE=100      size of the generated tree in percent (SCALE=5 for a quick try)
#   N=3            repetitions; medians are printed
#   BENCH_TMP=/var/tmp   where the scratch directory goes (removed at exit;
#                  needs room for 2*N+1 copies of the tree)
#
# Page caches are NOT dropped (shared machine): every run is warm, for both.
set -eu
cd "$(dirname "$0")/.."
SCALE=${SCALE:-100}
N=${N:-3}
work=$(mktemp -d "${BENCH_TMP:-/var/tmp}/cbackup-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
src=$work/src

scaled() { v=$(($1 * SCALE / 100)); [ "$v" -ge 1 ] && echo "$v" || echo 1; }
. bench/lib.sh

build_driver() {
	make -s build/rel/stage/stage.o build/rel/stage/stage_copy.o build/rel/stage/stage_index.o \
		build/rel/stage/stage_keep.o build/rel/stage/stage_pool.o \
		build/rel/core/util.o build/rel/core/private.o build/rel/core/log.o build/rel/core/cleanup.o build/rel/sink/throttle.o build/rel/core/progress.o
	cc -O2 -std=gnu11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Iinclude -o "$work/stage_bench" \
		bench/stage_bench.c build/rel/stage/stage.o build/rel/stage/stage_copy.o build/rel/stage/stage_index.o \
		build/rel/stage/stage_keep.o build/rel/stage/stage_pool.o \
		build/rel/core/util.o build/rel/core/private.o build/rel/core/log.o build/rel/core/cleanup.o build/rel/sink/throttle.o build/rel/core/progress.o \
		-lcrypto -lpthread
}

# Directories: NDIRS top-level dirs with a subdir each, and a 40-level chain.
make_dirs() {
	i=0
	while [ "$i" -lt "$1" ]; do
		d=$(printf 'd%04d' "$i")
		mkdir -p "$src/$d/sub"
		echo "$d" >>"$work/dirs"
		echo "$d/sub" >>"$work/dirs"
		i=$((i + 1))
	done
	p=deep
	for l in $(seq 1 40); do
		p=$p/level$l
		echo "$p" >>"$work/dirs"
	done
	mkdir -p "$src/$p"
}

# Text-like files (config, logs, source code look-alikes), 1-16 KiB each,
# spread round-robin over the dirs; awk writes them without a fork each.
make_text() {
	awk -v n="$1" -v root="$src" '
	BEGIN { srand(42); split("alpha beta gamma delta error warning info debug request user " \
		"session module config value return static struct include", w, " ") }
	{ dirs[NR] = $0 }
	END {
		for (i = 0; i < n; i++) {
			f = sprintf("%s/%s/t%06d.txt", root, dirs[i % NR + 1], i)
			size = 1024 + int(rand() * 15360)
			for (len = 0; len < size; len += length(line) + 1) {
				line = sprintf("%d %s %s=%d %s %s", len, w[int(rand() * 18) + 1],
					w[int(rand() * 18) + 1], int(rand() * 100000), w[int(rand() * 18) + 1],
					w[int(rand() * 18) + 1])
				print line > f
			}
			close(f)
		}
	}' "$work/dirs"
}

make_big_text() {
	mkdir -p "$src/logs"
	i=0
	while [ "$i" -lt "$1" ]; do
		awk -v mb="$2" 'BEGIN { srand(7); while (n < mb * 1048576) {
			l = sprintf("2026-01-%02d host app[%d]: request %d took %d ms status %d", \
				int(rand() * 28) + 1, int(rand() * 9999), n, int(rand() * 999), 200 + int(rand() * 3) * 100)
			print l; n += length(l) + 1 } }' >"$src/logs/app$i.log"
		i=$((i + 1))
	done
}

make_random() {
	mkdir -p "$src/blobs"
	i=0
	while [ "$i" -lt "$1" ]; do
		head -c 16M /dev/urandom >"$src/blobs/blob$i.bin"
		i=$((i + 1))
	done
}

# 64 MiB apparent size, three 1 MiB data islands.
make_sparse() {
	mkdir -p "$src/images"
	i=0
	while [ "$i" -lt "$1" ]; do
		f=$src/images/disk$i.img
		truncate -s 64M "$f"
		for off in 1 20 50; do
			head -c 1M /dev/urandom | dd of="$f" bs=1M seek="$off" conv=notrunc status=none
		done
		i=$((i + 1))
	done
}

make_links() {
	mkdir -p "$src/hl" "$src/sl"
	(cd "$src" && find d0* -name 't*' | awk -v n="$1" 'NR % 7 == 0 && c++ < n' |
		xargs ln -t hl)
	(cd "$src/sl" && find ../d0* -name 't*' | awk -v n="$2" 'NR % 5 == 1 && c++ < n' |
		xargs ln -s -t .)
}

gen_tree() {
	echo "generating the tree (SCALE=$SCALE%) ..."
	mkdir -p "$src"
	make_dirs "$(scaled 400)"
	make_text "$(scaled 17500)"
	make_big_text "$(scaled 4)" 64
	make_random "$(scaled 40)"
	make_sparse "$(scaled 20)"
	make_links "$(scaled 1000)" "$(scaled 2000)"
}

# The "1%" change: append a line to every 100th regular file (builtins only).
write_modify() {
	find "$src" -type f | awk 'NR % 100 == 0' >"$work/tochange"
	cat >"$work/modify.sh" <<EOF
i=0
while IFS= read -r f; do
	i=\$((i + 1))
	printf 'changed %d %d\n' "\$i" "\$\$" >>"\$f"
done <"$work/tochange"
EOF
}

rsync_sync() {
	rsync --stats -h -X -A --numeric-ids -aH --delete --no-whole-file --sparse \
		--one-file-system "$src/" "$1/" >/dev/null
}

timed_rsync() {
	sync
	t0=$(now)
	rsync_sync "$1"
	elapsed "$t0" "$(now)"
}

# Copies are moved aside, not deleted, until the end: on an ext4 without a
# journal, creating inodes right after deleting many is quadratic
# (ext4_new_inode skips "recently deleted" ones) and would dominate both
# tools' first sync.
retire() { mv "$1" "$work/trash/$(basename "$1").$2"; }

one_round() {
	timed_rsync "$work/rdst" >>"$work/r1"
	timed_rsync "$work/rdst" >>"$work/r2"
	sh "$work/modify.sh"
	timed_rsync "$work/rdst" >>"$work/r3"
	retire "$work/rdst" "$1"
	sync
	"$work/stage_bench" "$src" "$work/cdst" "sh $work/modify.sh" >"$work/out"
	awk '$1 == "pass1" { print $2 >> w "/c1" } $1 == "pass2" { print $2 >> w "/c2" }
	     $1 == "pass2mod" { print $2 >> w "/c3"; print "  cbackup pass 2 after the change: " \
		$4 " files transferred" }' w="$work" "$work/out"
	if [ "$1" = 1 ]; then
		d=$(rsync -naiHAX --numeric-ids --delete "$src/" "$work/cdst/" | wc -l)
		echo "  staged copy vs source (rsync -n -HAX itemize): $d differences"
	fi
	retire "$work/cdst" "$1"
}

row() {  # label rsync-file cbackup-file target
	r=$(median "$work/$2")
	c=$(median "$work/$3")
	awk -v l="$1" -v r="$r" -v c="$c" -v t="$4" 'BEGIN {
		ratio = r > 0 ? c / r : 0
		printf "%-28s %9.3fs %9.3fs %7.2fx   <= %.1fx %s\n", l, r, c, ratio, t,
			ratio <= t ? "ok" : "MISSED" }'
}

build_driver
mkdir "$work/trash"
if [ $# -ge 1 ]; then
	echo "copying '$1' ..."
	cp -a "$1" "$src"
else
	gen_tree
fi
write_modify
entries=$(find "$src" | wc -l)
size=$(du -sh "$src" | cut -f1)
apparent=$(du -sh --apparent-size "$src" | cut -f1)
echo "tree: $entries entries, $size allocated ($apparent apparent), $(wc -l <"$work/tochange") files in the 1% change"
for r in $(seq 1 "$N"); do
	echo "round $r/$N ..."
	one_round "$r"
done
echo
echo "medians of $N runs, warm page cache (caches are not dropped: shared machine)"
printf '%-28s %10s %10s %8s   %s\n' "" rsync cbackup ratio target
row "first sync (pass 1)" r1 c1 0.7
row "final, nothing changed" r2 c2 0.2
row "final, 1% of files changed" r3 c3 0.2
