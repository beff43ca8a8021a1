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
#   bench/vm.sh
#
# Environment:
#   SIZES="256 1024"   disk sizes in MiB (raw, fully allocated)
#   PCTS="0 1 10"      percent of the disk changed before the pause
#   N=1                repetitions (medians)
#   BENCH_TMP=/var/tmp scratch (images, staging, archives; removed at exit)
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
SIZES=${SIZES:-256 1024}
PCTS=${PCTS:-0 1 10}
N=${N:-1}
work=$(mktemp -d "${BENCH_TMP:-/var/tmp}/cbackup-benchvm.XXXXXX")
qpid=
wpid=
cleanup() {
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

printf "| image | changed | pause, stage path | pause, copy-before-write | backup wall time, stage / cbw |\n"
printf "|---|---|---|---|---|\n"
for size in $SIZES; do
	rm -f "$work/disk.raw"
	qemu-img create -q -f raw "$work/disk.raw" "${size}M"
	qemu-io -f raw -c "write -P 0x5a 0 ${size}M" "$work/disk.raw" >/dev/null
	start_vm
	sleep 1
	for pct in $PCTS; do
		: >"$work/p.stage"; : >"$work/p.cbw"; : >"$work/w.stage"; : >"$work/w.cbw"
		for i in $(seq "$N"); do
			for m in stage auto; do
				set -- $(one "$m" "$size" "$pct" "$i$pct")
				f=${m/auto/cbw}
				echo "$1" >>"$work/p.$f"
				echo "$2" >>"$work/w.$f"
			done
		done
		printf "| %s MiB raw, full | %s %% | %s ms | %s ms | %s s / %s s |\n" "$size" "$pct" \
			"$(median "$work/p.stage")" "$(median "$work/p.cbw")" \
			"$(median "$work/w.stage")" "$(median "$work/w.cbw")"
	done
	stop_vm
done
