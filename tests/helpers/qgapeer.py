#!/usr/bin/env python3
"""e2e helper: the host end of a QEMU guest agent, for VMs with no guest OS.

    qgapeer.py SOCKET LOG QMP_SOCKET [fail-freeze]

The VMs of the e2e tests run no operating system, so no qemu-ga can answer
on their virtio-serial channel; this peer listens on SOCKET and speaks the
agent's protocol as qemu-ga does (qga/qapi-schema.json): a leading 0xFF
byte resets the parser, guest-sync-delimited answers 0xFF then
{"return": ID}, guest-sync {"return": ID}, guest-fsfreeze-freeze and -thaw
the number of file systems (1), guest-fsfreeze-status "frozen"/"thawed";
anything else gets a CommandNotFound error. Each command is logged to LOG
as "COMMAND STATUS FILTERS": the VM's run state and the number of
copy-before-write nodes, both asked from QEMU (QMP_SOCKET, the test's monitor)
at the moment the command came, so the log shows where in cbackup's
stop/insert/cont sequence each agent call fell. fail-freeze answers the
freeze with an error, as an agent whose guest cannot freeze does.
"""
import json
import socket
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import qmp  # noqa: E402


def vm_state(path):
    try:
        conn = qmp.Conn(path)
        conn.reply()
        conn.execute("qmp_capabilities")
        status = conn.execute("query-status")["return"]["status"]
        nodes = conn.execute("query-named-block-nodes", {"flat": True})["return"]
        conn.sock.close()
    except (OSError, EOFError, ValueError, KeyError) as e:
        return f"qmp-error({e})", "?"
    return status, str(sum(1 for n in nodes if n.get("drv") == "copy-before-write"))


def serve(conn, log, qmp_path, mode, state):
    buf = b""
    while True:
        data = conn.recv(4096)
        if not data:
            return
        buf += data
        buf = buf.split(b"\xff")[-1]          # 0xFF: the client reset the parser
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if not line.strip():
                continue
            msg = json.loads(line)
            cmd = msg.get("execute", "")
            status, filters = vm_state(qmp_path)
            with open(log, "a") as f:
                f.write(f"{cmd} {status} {filters}\n")
            args = msg.get("arguments", {})
            if cmd == "guest-sync-delimited":
                conn.sendall(b"\xff" + json.dumps({"return": args["id"]}).encode() + b"\n")
                continue
            if cmd == "guest-sync":
                reply = {"return": args["id"]}
            elif cmd == "guest-fsfreeze-freeze" and mode == "fail-freeze":
                reply = {"error": {"class": "GenericError",
                                   "desc": "failed to freeze /: Operation not supported"}}
            elif cmd == "guest-fsfreeze-freeze":
                state["frozen"] = True
                reply = {"return": 1}
            elif cmd == "guest-fsfreeze-thaw":
                reply = {"return": 1 if state["frozen"] else 0}
                state["frozen"] = False
            elif cmd == "guest-fsfreeze-status":
                reply = {"return": "frozen" if state["frozen"] else "thawed"}
            else:
                reply = {"error": {"class": "CommandNotFound",
                                   "desc": f"The command {cmd} has not been found"}}
            conn.sendall(json.dumps(reply).encode() + b"\n")


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path, log, qmp_path = argv[1:4]
    mode = argv[4] if len(argv) == 5 else ""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    state = {"frozen": False}
    while True:                                # one client at a time, as the channel
        conn, _ = srv.accept()
        try:
            serve(conn, log, qmp_path, mode, state)
        except (OSError, ValueError, KeyError):
            pass
        conn.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
