#!/bin/sh
# Benchmark (not a test) of cbackup's compression stage: the archive stage
# (bench/compress_bench.c: cb_archive_write -> codec -> file sink with
# SHA-256) against cat and tar piped into gzip, pigz, lzop and zstd, on
#   (a) a compressed qcow2 (`qemu-img convert -c` of an image of real files),
#   (b) a plain qcow2 of an ext4 image holding a Linux tree (/usr),
#   (c) a text-heavy tree (/usr/include, perl and python libraries).
# Page cache warm, RUNS runs each (default 3), medians. SCALE = size of the
# images in MiB (default 1024). WORK = scratch directory (kept with KEEP=1).
# DURABLE=1 (default): every row is timed until its output is on disk, as a
# backup is (the peers end with `sync FILE`, an fsync; cbackup uses the
# storage sink of a backup: .tmp, streaming fdatasync, fsync, rename).
# DURABLE=0: timed until the last write(2), the bytes perhaps still in the
# page cache.
# cbackup rows include the SHA-256 of the archive (its .sha256), as a backup
# to storage does; on the inputs in NOSUM_CASES (default a) they are also run
# without it (as --stdout), and `openssl sha256` of the archive is timed: the
# floor the checksum sets on this CPU.
#
#   sh bench/compress.sh            SCALE=256 RUNS=3 sh bench/compress.sh
#   CASES="a c" sh bench/compress.sh   (only some inputs)
set -eu
SCALE=${SCALE:-1024}
RUNS=${RUNS:-3}
WORK=${WORK:-/tmp/cb-bench-compress}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$WORK/compress_bench
NCPU=$(nproc)
DURABLE=${DURABLE:-1}
if [ "$DURABLE" = 1 ]; then SYNC=" && sync"; SINK=durable; else SYNC=; SINK=; fi

mkdir -p "$WORK"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT

build() {
	make -C "$ROOT" --no-print-directory all >/dev/null
	objs=$(ls "$ROOT"/build/rel/*/*.o | grep -v '/main\.o$')
	# shellcheck disable=SC2086
	cc -O2 -std=gnu11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -I"$ROOT/include" \
		-o "$BIN" "$ROOT/bench/compress_bench.c" $objs \
		$(make -s --no-print-directory -C "$ROOT" print-libflags)
}

# Real files, up to $1 MiB, as one stream (binaries, libraries, docs).
real_bytes() {
	tar -cf - /usr/lib/x86_64-linux-gnu /usr/bin /usr/share 2>/dev/null | head -c "$(($1 * 1024 * 1024))"
}

make_inputs() {
	if [ ! -f "$WORK/a/c.qcow2" ]; then
		mkdir -p "$WORK/a"
		real_bytes "$SCALE" > "$WORK/a.raw"
		qemu-img convert -c -O qcow2 "$WORK/a.raw" "$WORK/a/c.qcow2"
		rm -f "$WORK/a.raw"
	fi
	if [ ! -f "$WORK/b/p.qcow2" ]; then
		mkdir -p "$WORK/b" "$WORK/b.tree"
		tar -cf - -C / usr/lib/x86_64-linux-gnu usr/bin usr/share usr/include 2>/dev/null |
			head -c "$((SCALE * 1024 * 1024 * 8 / 10))" | tar -xf - -C "$WORK/b.tree" 2>/dev/null || true
		mkfs.ext4 -q -F -d "$WORK/b.tree" "$WORK/b.raw" "$((SCALE + SCALE / 4))M"
		qemu-img convert -O qcow2 "$WORK/b.raw" "$WORK/b/p.qcow2"
		rm -rf "$WORK/b.raw" "$WORK/b.tree"
	fi
	if [ ! -d "$WORK/c" ]; then
		mkdir -p "$WORK/c"
		cp -a /usr/include /usr/share/perl /usr/lib/python3 "$WORK/c/" 2>/dev/null || true
	fi
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# time one command (sh -c), RUNS times; prints "median_seconds out_bytes"
measure() {
	out=$1; shift
	i=0
	while [ $i -lt "$RUNS" ]; do
		# a new file each run, as a backup writes: truncating the last
		# run's output would add its page-cache teardown to every row
		rm -f "$out"
		sync   # the last run's dirty pages are flushed now, not during this one
		s=$(date +%s.%N)
		sh -c "$*${SYNC:+$SYNC '$out'}"
		e=$(date +%s.%N)
		echo "$e - $s" | bc
		i=$((i + 1))
	done | median | tr '\n' ' '
	stat -c %s "$out"
}

row() {  # input tool secs bytes in_bytes cat_secs
	awk -v n="$1" -v t="$2" -v s="$3" -v b="$4" -v i="$5" -v c="$6" 'BEGIN {
		printf "%-3s %-38s %8.2f s %6.2fx cat %12d B %6.3f of input\n", n, t, s, s / c, b, b / i }'
}

bench_input() {
	name=$1 dir=$2
	in_bytes=$(du -sb --apparent-size "$dir" | cut -f1)
	tar -cf - -C "$dir" . > /dev/null   # warm the page cache
	o=$WORK/out
	if [ -f "$dir"/*.qcow2 ] 2>/dev/null; then
		set -- $(measure "$o" "cat '$dir'/*.qcow2 > '$o'"); catsec=$1
		row "$name" "cat" "$1" "$2" "$in_bytes" "$catsec"
	else
		set -- $(measure "$o" "tar -cf - -C '$dir' . > '$o'"); catsec=$1
		row "$name" "tar (as cat)" "$1" "$2" "$in_bytes" "$catsec"
	fi
	for t in "gzip -6:gzip -6" "pigz -6 -p $NCPU:pigz -6 -p $NCPU" "lzop -1:lzop -1" \
		 "zstd -3 -T0:zstd -q -3 -T0"; do
		label=${t%%:*} cmd=${t#*:}
		set -- $(measure "$o" "tar -cf - -C '$dir' . | $cmd > '$o'")
		row "$name" "tar | $label" "$1" "$2" "$in_bytes" "$catsec"
	done
	cbackup_rows "$SINK" "" "zstd auto 0:zstd -3 T0" "lzo auto 0:lzo (all cores)" "gzip auto 0:gzip (pigz=0)" \
		"gzip auto $NCPU:gzip (pigz=$NCPU threads)" "zstd always 0:zstd policy=always"
	case " ${NOSUM_CASES-a} " in *" $name "*) ;; *) return 0 ;; esac
	mv "$o" "$o.keep"   # measure removes its output before each run
	# a durable row left the archive out of the page cache: read it back
	# in, so that this row times the hashing and not the disk
	cat "$o.keep" > /dev/null
	set -- $(measure "$o" "openssl sha256 '$o.keep' > '$o'")
	row "$name" "openssl sha256 of archive" "$1" "$(stat -c %s "$o.keep")" "$in_bytes" "$catsec"
	rm -f "$o.keep"
	cbackup_rows "${SINK:+$SINK,}nosum" ", no sum" "none auto 0:none" "zstd auto 0:zstd -3 T0" "lzo auto 0:lzo (all cores)" \
		"gzip auto 0:gzip (pigz=0)" "gzip auto $NCPU:gzip (pigz=$NCPU threads)"
}

# cbackup_rows EXTRA_ARG LABEL_SUFFIX "ARGS:LABEL"...  (uses name, dir, o, in_bytes, catsec)
cbackup_rows() {
	extra=$1 suffix=$2
	shift 2
	for c in "$@"; do
		args=${c%%:*} label=${c#*:}
		# durable: the driver fsyncs as a backup does, no sync(1) after it
		set -- $(SYNC=; measure "$o" "'$BIN' $args '$dir' '$o' $extra > /dev/null 2>&1")
		row "$name" "cbackup $label$suffix" "$1" "$2" "$in_bytes" "$catsec"
	done
}

build
make_inputs
echo "compress bench: SCALE=${SCALE}MiB RUNS=$RUNS cores=$NCPU DURABLE=$DURABLE (medians; sizes in bytes)"
for case in ${CASES:-a b c}; do
	bench_input "$case" "$WORK/$case"
done
