#!/bin/bash
# A night's memory (issue 38): a container's backup to a directory does
# not load what it does not use (libcurl and libnbd, with the thirty
# libraries they bring, are opened by S3 storages and VM disks only), and
# the zstd stage holds no buffer beyond its pool's: threads + 1 inputs
# (the segment being gathered is the input of the job that compresses it)
# and threads outputs (the job being filled needs none). The backups are
# held (fault shim, SIGSTOP) at the rename of their finished archive,
# where /proc shows what the process mapped and its peak resident memory.
. "$(dirname "$0")/lib.sh"

SRC=$SCRATCH/src
D=$SCRATCH/dump

test_expect_success 'setup' '
	make_small_tree "$SRC" mem-ct
	mkdir -p "$SCRATCH/tmp" "$D"
'

# held_backup ID ARGS...: a backup of $SRC stopped at the rename of its
# archive into $D: its pid in $pid; cont_backup lets it finish
held_backup() {
	local id=$1
	shift
	rm -f "$FAULT_LOG"
	with_fault_bg "rename:SIGSTOP:.tar.zst.tmp" \
		"$CBACKUP" backup --root "$SRC" --id "$id" --tmpdir "$SCRATCH/tmp" --dumpdir "$D" \
		--compress zstd --freeze-cmd true --thaw-cmd true "$@" >"$CB_OUT" 2>"$CB_ERR"
	pid=$FAULT_PID
	cleanup_pid "$pid"
	wait_for 60 grep -q "^State:.*stopped" /proc/$pid/status || { kill -KILL "$pid"; false; }
}

cont_backup() {
	local rc=0
	kill -CONT "$pid"
	wait "$pid" || rc=$?
	cat "$CB_ERR"
	[ "$rc" = 0 ]
}

test_expect_success ROOT 'a backup to a directory maps neither libcurl nor libnbd' '
	held_backup 921
	cp /proc/$pid/maps "$SCRATCH/maps"
	cont_backup
	test_has "$SCRATCH/maps" "libarchive"
	test_lacks "$SCRATCH/maps" "libcurl|libnbd|libgnutls|libkrb5|libldap"
'

# Peak resident memory against the pool's buffers: segments of one unit
# (a file far larger than a unit is cut at every unit of its data), a
# little compressible (two bytes in eight zeros: compressed, its output
# nearly as large), so that every buffer of the pool fills. In: threads
# + 1 units; out: threads units; 48 MiB for all the rest (the libraries,
# the sink's buffers, the compression contexts, the catalog). A segment
# buffer beside the pool, or an output buffer for every job, is one unit
# or more over.
test_expect_success ROOT 'zstd: peak RSS within the pool of threads + 1 inputs and threads outputs' '
	if nm -D "$CBACKUP" 2>/dev/null | grep -q __asan_init; then
		echo "# a sanitized binary: its allocator keeps freed memory, nothing to bound"
		return 0
	fi
	python3 - "$SRC/srv/big.bin" <<-\EOF
	import random, sys
	rnd = random.Random(292)
	with open(sys.argv[1], "wb") as f:
	    for _ in range(160):
	        b = bytearray(rnd.randbytes(1 << 20))
	        b[6::8] = bytes(1 << 17)
	        b[7::8] = bytes(1 << 17)
	        f.write(b)
	EOF
	unit=16 threads=2
	held_backup 922 --zstd "$threads" --unit-size "$unit"
	peak=$(awk "/^VmHWM:/ { print int(\$2 / 1024) }" /proc/$pid/status)
	cont_backup
	bound=$(((threads + 1) * unit + threads * unit + 48))
	echo "peak RSS $peak MiB, bound $bound MiB"
	test "$peak" -le "$bound"
	rm "$SRC/srv/big.bin"
'

test_done
