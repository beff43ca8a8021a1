#!/bin/bash
# cbackup probe: every stage measured (tmpdir write/read, each codec, the
# checksum, the storage write), a summary naming the slowest stage, nothing
# left behind; a missing or read-only storage and a signal are clean errors.
. "$(dirname "$0")/lib.sh"

T=$SCRATCH/tmp
D=$SCRATCH/dump

probe_files_left() { find "$T" "$D" -name '.cbackup-probe-*' | grep . && return 0; return 1; }
# no_probe_files: nothing of a probe left in the tmpdir or the dumpdir
no_probe_files() { probe_files_left || return 0; echo "the probe left files behind"; return 1; }

test_expect_success 'setup' '
	mkdir -p "$T" "$D"
	cat >"$SCRATCH/c.conf" <<-CONF
	tmpdir = $T
	[storage nas]
	path = $D
	CONF
'

test_expect_success 'probe reports every stage and the slowest, and leaves nothing' '
	cbackup_run 0 probe --dumpdir "$D" --tmpdir "$T" --compress zstd --pigz 2
	cat "$CB_OUT" "$CB_ERR" >all
	cat all
	grep -E "^INFO: probe: staging \(tmpdir\) .$T.: write [0-9.]+[KMG]iB/s \([0-9.]+[KMG]iB, fsync included\), read [0-9.]+[KMG]iB/s$" all
	grep -E "^INFO: probe: compress zstd \(all cores\) \[configured\]: text [0-9.]+[KMG]iB/s to [0-9]+%, incompressible [0-9.]+[KMG]iB/s \(stored\)$" all
	grep -E "^INFO: probe: compress lzo \(all cores\): text " all
	grep -E "^INFO: probe: compress gzip \(pigz 2 threads\): text " all
	grep -E "^INFO: probe: checksum sha256 .*: [0-9.]+[KMG]iB/s$" all
	grep -E "^INFO: probe: storage \(dumpdir\) .$D.: write [0-9.]+[KMG]iB/s" all
	grep -E "^INFO: probe: compress=zstd, compressible data: archive stage about [0-9.]+[KMG]iB/s - slowest: (staging read|compress|checksum|storage write)$" all
	grep -E "^INFO: probe: compress=zstd, incompressible data: archive stage about " all
	test_lacks all "ERROR|WARN"
	no_probe_files
'

test_expect_success 'the text sample compresses (zstd below 60%, above 1%)' '
	pct=$(sed -n "s/^INFO: probe: compress zstd .*text [^ ]* to \([0-9]*\)%.*/\1/p" all)
	test "$pct" -lt 60
	test "$pct" -gt 1
'

test_expect_success '--storage NAME probes that storage path' '
	cbackup_run 0 probe --config "$SCRATCH/c.conf" --storage nas --compress lzo
	grep -F "storage (dumpdir) '\''$D'\'': write" "$CB_ERR" "$CB_OUT"
	grep -F "compress lzo (all cores) [configured]" "$CB_ERR" "$CB_OUT"
	no_probe_files
'

test_expect_success 'an unknown storage is a configuration error (exit 2)' '
	cbackup_run 2 probe --config "$SCRATCH/c.conf" --storage nowhere
'

test_expect_success 'a missing dump directory: exit 1, the ERROR names the stage and the path' '
	cbackup_run 1 probe --dumpdir "$SCRATCH/nope" --tmpdir "$T"
	grep -F "ERROR: probe failed - storage (dumpdir): cannot create '\''$SCRATCH/nope/.cbackup-probe-" "$CB_ERR"
	no_probe_files
'

test_expect_success ROOT 'a read-only dump directory: exit 1, the ERROR says so' '
	mkdir -p "$SCRATCH/ro"
	mount --bind "$D" "$SCRATCH/ro"
	cleanup_mount "$SCRATCH/ro"
	mount -o remount,bind,ro "$SCRATCH/ro"
	cbackup_run 1 probe --dumpdir "$SCRATCH/ro" --tmpdir "$T"
	grep -F "storage (dumpdir): cannot create" "$CB_ERR"
	grep -F "Read-only file system" "$CB_ERR"
	no_probe_files
'

test_expect_success 'SIGTERM while the tmpdir is written: exit 143, nothing left behind' '
	"$CBACKUP" probe --dumpdir "$D" --tmpdir "$T" >out 2>err &
	pid=$!
	cleanup_pid $pid
	wait_for 10 probe_files_left
	kill -TERM $pid
	rc=0; wait $pid || rc=$?
	cat err
	test "$rc" = 143
	grep -F "ERROR: probe failed - " err | grep -F "interrupted by signal TERM"
	no_probe_files
'

test_done
