#!/usr/bin/env python3
"""e2e helper: a QMP monitor that reports an older QEMU.

    fakeqmp.py SOCKET VERSION LOG

Listens on SOCKET (one client at a time, as QEMU does), greets as QEMU
VERSION (e.g. 6.2.0), answers qmp_capabilities, query-version,
query-status, stop, cont and quit, and refuses everything else as QEMU
refuses an unknown command. Every command received is appended to LOG, one
name a line, so that a test can tell which path cbackup took. Stands in for
a QEMU older than the one installed (Debian 12 ships only 7.2); the VM's
state is just running/paused.
"""
import json
import os
import socket
import sys


def main(argv):
    path, version, log = argv[1], argv[2], argv[3]
    qemu = dict(zip(("major", "minor", "micro"), map(int, version.split("."))))
    running = True
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(8)
    while True:
        conn, _ = srv.accept()
        f = conn.makefile("rwb")

        def send(msg):
            f.write(json.dumps(msg).encode() + b"\r\n")
            f.flush()

        send({"QMP": {"version": {"qemu": qemu, "package": "fake"}, "capabilities": []}})
        for line in f:
            try:
                msg = json.loads(line)
            except ValueError:
                break
            cmd = msg.get("execute", "")
            with open(log, "a") as lf:
                lf.write(cmd + "\n")
            ret = {}
            if cmd == "query-version":
                ret = {"qemu": qemu, "package": "fake"}
            elif cmd == "query-status":
                ret = {"running": running, "singlestep": False,
                       "status": "running" if running else "paused"}
            elif cmd == "stop":
                running = False
            elif cmd == "cont":
                running = True
            elif cmd == "quit":
                send({"return": {}})
                os.unlink(path)
                return 0
            elif cmd != "qmp_capabilities":
                ret = None
            reply = {"return": ret} if ret is not None else \
                {"error": {"class": "CommandNotFound", "desc": f"The command {cmd} has not been found"}}
            if "id" in msg:
                reply["id"] = msg["id"]
            send(reply)
        conn.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
