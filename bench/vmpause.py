#!/usr/bin/env python3
"""bench helper for bench/vm.sh (not a test).

    vmpause.py watch SOCKET OUT     hold the monitor, append "STOP t" and
                                    "RESUME t" lines (QEMU's event timestamps)
                                    to OUT until the monitor goes away or SIGTERM
    vmpause.py write SOCKET DRIVE SIZE_MIB PCT SEED
                                    the guest writes PCT % of the disk in 1 MiB
                                    blocks at random offsets through the
                                    device's BlockBackend (HMP qemu-io)
    vmpause.py rate SOCKET DRIVE SIZE_MIB OUT
                                    the guest writes 4 KiB at random offsets,
                                    one after the other, until SIGTERM; then
                                    "WRITES SECONDS P99_MS" to OUT
"""
import time
import json
import random
import signal
import socket
import sys


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    f = s.makefile("rwb")
    json.loads(f.readline())
    f.write(b'{"execute":"qmp_capabilities"}\n')
    f.flush()
    while "return" not in json.loads(f.readline()):
        pass
    return s, f


def watch(path, out):
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    _, f = connect(path)
    with open(out, "a", buffering=1) as o:
        for line in f:
            m = json.loads(line)
            ev = m.get("event")
            if ev in ("STOP", "RESUME"):
                ts = m["timestamp"]
                o.write(f"{ev} {ts['seconds'] + ts['microseconds'] / 1e6:.6f}\n")


def write(path, drive, size_mib, pct, seed):
    _, f = connect(path)
    rnd = random.Random(seed)
    n = int(size_mib * pct / 100)
    for off in rnd.sample(range(size_mib), n):
        cmd = f'qemu-io {drive} "write -P {rnd.randrange(1, 255)} {off}M 1M"'
        f.write(json.dumps({"execute": "human-monitor-command",
                            "arguments": {"command-line": cmd}}).encode() + b"\n")
        f.flush()
        while True:
            m = json.loads(f.readline())
            if "return" in m or "error" in m:
                break
    return 0


def rate(path, drive, size_mib, out):
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
    _, f = connect(path)
    rnd = random.Random(1)
    lat = []
    t0 = time.monotonic()
    while not stop:
        off = rnd.randrange(size_mib * 256) * 4096
        cmd = f'qemu-io {drive} "write -P 0x77 {off} 4k"'
        t = time.monotonic()
        f.write(json.dumps({"execute": "human-monitor-command",
                            "arguments": {"command-line": cmd}}).encode() + b"\n")
        f.flush()
        while True:
            m = json.loads(f.readline())
            if "return" in m or "error" in m:
                break
        lat.append(time.monotonic() - t)
    secs = time.monotonic() - t0
    lat.sort()
    p99 = lat[int(len(lat) * 0.99)] * 1000 if lat else 0
    with open(out, "w") as o:
        o.write(f"{len(lat)} {secs:.3f} {p99:.1f}\n")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "rate":
        sys.exit(rate(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]))
    if sys.argv[1] == "watch":
        watch(sys.argv[2], sys.argv[3])
    else:
        sys.exit(write(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])))
