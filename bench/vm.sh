#!/bin/bash
# Benchmark (not a test): the pause of a VM backup, the staging path
# (vm-method stage: pass 1 while the VM runs, pass 2 paused) against QEMU's
# copy-before-write snapshot (vm-method auto), with a real QEMU (TCG, no
# guest OS, -m 64). The pause is QEMU's: its STOP and RESUME events, seen
# by a monitor of the benchmark's own. Before each backup the guest writes
# PCT % of the disk (1 MiB blocks at random offsets, through its device's
# BlockBackend, from the pre-stop hook: the staging path must re-read what
# changed while it is paused; the snapshot does not care).
#
#   bench/vm.sh                 the pause table
#   MODE=rate bench/vm.sh       the guest's write rate during a backup
#   MODE=incr bench/vm.sh       an incremental's bytes read against the dirty bytes
#
# MODE=rate: a guest writer (4 KiB at random offsets through drive0, one
# after the other) runs with no backup, during cbackup's copy-before-write
# backup with --bwlimit 24414 (25 MB/s: the fleecing image takes the old
# blocks locally, the slow read follows), and during a plain QEMU
# blockdev-backup sync=full to a target throttled to 25 MB/s (a
# throttle-group; no fleecing: a guest write to a block not copied yet waits
# for its copy to the slow target). Reported: writes/s and p99 latency.
# MODE=incr: keep-staging 1, a full run, then the guest writes PCT % of the
# disk (1 MiB blocks) and a second run reads only the dirty extents; its
# "read N bytes of M dirty" against the bytes written (target <= 1.2x).
#
# Environment:
#   SIZES="256 1024"   disk sizes in MiB (raw, fully allocated)
#   PCTS="0 1 10"      percent of the disk changed before the pause
#   METHODS="stage auto"  the pause table's columns (auto = copy-before-write)
#   N=1                repetitions (medians)
#   RATE_SECS=10       MODE=rate: the writer's run with no backup
#   BENCH_TMP=/var/tmp scratch (images, staging, archives; removed at exit)
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
SIZES=${SIZES:-256 1024}
PCTS=${PCTS:-0 1 10}
METHODS=${METHODS:-stage auto}
MODE=${MODE:-pause}
RATE_SECS=${RATE_SECS:-10}
N=${N:-1}
work=$(mktemp -d "${BENCH_TMP:-/var/tmp}/cbackup-benchvm.XXXXXX")
qpid=
wpid=
rpid=
cleanup() {
	[ -n "$rpid" ] && kill "$rpid" 2>/dev/null
	[ -n "$wpid" ] && kill "$wpid" 2>/dev/null
	[ -n "$qpid" ] && kill "$qpid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
make -s cbackup
# our own locks: never wait for (or block) a real backup job on this host
export CBACKUP_LOCK_DIR=$work/locks
mkdir -m 700 "$CBACKUP_LOCK_DIR"

cat >"$work/hook.sh" <<HOOK
#!/bin/sh
[ "\$1" = pre-stop ] || exit 0
exec python3 "$PWD/bench/vmpause.py" write "$work/hook.qmp" drive0 "\$BENCH_SIZE" "\$BENCH_PCT" "\$BENCH_SEED"
HOOK
chmod +x "$work/hook.sh"

start_vm() {
	rm -f "$work"/*.qmp "$work/vm.pid"
	qemu-system-x86_64 -name benchvm -nodefaults -display none -machine pc,accel=tcg -m 64 -S \
		-drive file="$work/disk.raw",format=raw,if=none,id=drive0 \
		-device virtio-blk-pci,drive=drive0,id=vd0 \
		-qmp "unix:$work/cb.qmp,server=on,wait=off" -qmp "unix:$work/ev.qmp,server=on,wait=off" \
		-qmp "unix:$work/hook.qmp,server=on,wait=off" -daemonize -pidfile "$work/vm.pid"
	qpid=$(cat "$work/vm.pid")
	python3 tests/helpers/qmp.py "$work/hook.qmp" cont >/dev/null
	python3 bench/vmpause.py watch "$work/ev.qmp" "$work/events" &
	wpid=$!
}

stop_vm() {
	python3 tests/helpers/qmp.py "$work/hook.qmp" quit >/dev/null 2>&1 || :
	wait "$wpid" 2>/dev/null || :
	qpid= wpid=
}

# pause_ms: RESUME - STOP of the last pair in events, in ms
pause_ms() { awk '$1 == "STOP" { s = $2 } $1 == "RESUME" { r = $2 } END { printf "%.1f\n", (r - s) * 1000 }' "$work/events"; }

# one METHOD SIZE PCT SEED: a backup; prints the pause (ms) and the wall time (s)
one() {
	rm -rf "$work/tmp" "$work/dump"
	: >"$work/events"
	mkdir "$work/tmp" "$work/dump"
	local t0 t1
	t0=$(now)
	BENCH_SIZE=$2 BENCH_PCT=$3 BENCH_SEED=$4 ./cbackup backup --type vm --id 900 \
		--disk "$work/disk.raw" --qmp "$work/cb.qmp" --vm-method "$1" --compress zstd \
		--tmpdir "$work/tmp" --dumpdir "$work/dump" --script "$work/hook.sh" \
		--max-freeze 600 >"$work/cb.log" 2>&1 || { cat "$work/cb.log"; exit 1; }
	t1=$(now)
	echo "$(pause_ms) $(elapsed "$t0" "$t1")"
}

# make_disk SIZE: a fully written raw image
make_disk() {
	rm -f "$work/disk.raw"
	qemu-img create -q -f raw "$work/disk.raw" "${1}M"
	local off=0
	while [ "$off" -lt "$1" ]; do   # qemu-io takes at most 2 GiB a request
		qemu-io -f raw -c "write -P 0x5a ${off}M $(( $1 - off < 1024 ? $1 - off : 1024 ))M" \
			"$work/disk.raw" >/dev/null
		off=$((off + 1024))
	done
}

# rate_start SIZE / rate_stop VAR: the guest writer; rate_stop sets VAR to
# "writes/s p99-ms" (not in a $(...): the writer is this shell's child)
rate_start() {
	python3 bench/vmpause.py rate "$work/hook.qmp" drive0 "$1" "$work/rate" &
	rpid=$!
}
rate_stop() {
	kill "$rpid"
	wait "$rpid" || :
	rpid=
	printf -v "$1" "%s" "$(awk '{ printf "%.0f %.1f\n", $1 / $2, $3 }' "$work/rate")"
	rm -f "$work/rate"
}

# plain blockdev-backup to a 25 MB/s target, no fleecing; prints seconds
plain_backup() {
	local q="python3 tests/helpers/qmp.py $work/cb.qmp" t0 t1
	rm -f "$work/target.raw"
	qemu-img create -q -f raw "$work/target.raw" "${1}M"
	$q object-add '{"qom-type": "throttle-group", "id": "bt", "limits": {"bps-write": 25000000}}' >/dev/null
	$q blockdev-add "{\"driver\": \"throttle\", \"node-name\": \"bt0\", \"throttle-group\": \"bt\",
		\"file\": {\"driver\": \"raw\", \"file\": {\"driver\": \"file\", \"filename\": \"$work/target.raw\"}}}" >/dev/null
	t0=$(now)
	$q blockdev-backup '{"job-id": "bj", "device": "drive0", "target": "bt0", "sync": "full"}' >/dev/null
	while $q query-jobs | grep -q '"id": "bj"'; do sleep 0.5; done
	t1=$(now)
	$q blockdev-del '{"node-name": "bt0"}' >/dev/null
	$q object-del '{"id": "bt"}' >/dev/null
	elapsed "$t0" "$t1"
}

mode_rate() {
	local size base cbw plain t0 t1
	printf "| image | writes/s (p99 ms), no backup | during cbackup copy-before-write, fleecing, 25 MB/s read | during plain blockdev-backup to a 25 MB/s target | backup wall time, cbw / plain |\n"
	printf "|---|---|---|---|---|\n"
	for size in $SIZES; do
		make_disk "$size"
		start_vm
		sleep 1
		rate_start "$size"; sleep "$RATE_SECS"; rate_stop base
		rm -rf "$work/tmp" "$work/dump"; mkdir "$work/tmp" "$work/dump"
		rate_start "$size"
		t0=$(now)
		./cbackup backup --type vm --id 900 --disk "$work/disk.raw" --qmp "$work/cb.qmp" \
			--compress zstd --bwlimit 24414 --tmpdir "$work/tmp" --dumpdir "$work/dump" \
			>"$work/cb.log" 2>&1 || { cat "$work/cb.log"; exit 1; }
		t1=$(now)
		rate_stop cbw
		rate_start "$size"
		plain_t=$(plain_backup "$size")
		rate_stop plain
		set -- $base $cbw $plain
		printf "| %s MiB raw, full | %s (%s) | %s (%s) | %s (%s) | %s s / %s s |\n" "$size" \
			"$1" "$2" "$3" "$4" "$5" "$6" "$(elapsed "$t0" "$t1")" "$plain_t"
		stop_vm
	done
}

mode_incr() {
	local size pct line
	printf "| image | changed | bytes written by the guest | bytes read by the incremental | ratio |\n"
	printf "|---|---|---|---|---|\n"
	for size in $SIZES; do
		make_disk "$size"
		start_vm
		sleep 1
		for pct in $PCTS; do
			rm -rf "$work/tmp" "$work/dump"; mkdir "$work/tmp" "$work/dump"
			./cbackup backup --type vm --id 900 --disk "$work/disk.raw" --qmp "$work/cb.qmp" \
				--compress zstd --keep-staging 1 --tmpdir "$work/tmp" --dumpdir "$work/dump" \
				>"$work/cb.log" 2>&1 || { cat "$work/cb.log"; exit 1; }
			python3 bench/vmpause.py write "$work/hook.qmp" drive0 "$size" "$pct" 7
			./cbackup backup --type vm --id 900 --disk "$work/disk.raw" --qmp "$work/cb.qmp" \
				--compress zstd --keep-staging 1 --tmpdir "$work/tmp" --dumpdir "$work/dump" \
				>"$work/cb.log" 2>&1 || { cat "$work/cb.log"; exit 1; }
			line=$(sed -n 's/.*: read \([0-9]*\) bytes of \([0-9]*\) dirty.*/\1/p' "$work/cb.log")
			local dirt=$(( $(awk -v s="$size" -v p="$pct" 'BEGIN { printf "%d", s * p / 100 }') * 1048576 ))
			printf "| %s MiB raw, full | %s %% | %s | %s | %s |\n" "$size" "$pct" "$dirt" "${line:-?}" \
				"$(awk -v a="${line:-0}" -v b="$dirt" 'BEGIN { if (b) printf "%.2f", a / b; else print "-" }')"
		done
		stop_vm
	done
}

mode_pause() {
	local cols="" sep="" m
	for m in $METHODS; do cols="$cols | pause, ${m/auto/copy-before-write}"; sep="$sep|---"; done
	printf "| image | changed%s | backup wall time, %s |\n" "$cols" "$METHODS"
	printf "|---|---%s|---|\n" "$sep"
	for size in $SIZES; do
		make_disk "$size"
		start_vm
		sleep 1
		for pct in $PCTS; do
			local row="" wall=""
			for m in $METHODS; do
				: >"$work/p.$m"; : >"$work/w.$m"
				for i in $(seq "$N"); do
					set -- $(one "$m" "$size" "$pct" "$i$pct")
					echo "$1" >>"$work/p.$m"
					echo "$2" >>"$work/w.$m"
				done
				row="$row | $(median "$work/p.$m") ms"
				wall="$wall${wall:+ / }$(median "$work/w.$m") s"
			done
			printf "| %s MiB raw, full | %s %%%s | %s |\n" "$size" "$pct" "$row" "$wall"
		done
		stop_vm
	done
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
mode_$MODE
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
