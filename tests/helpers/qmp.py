#!/usr/bin/env python3
"""e2e helper: a minimal QMP client, one connection per call.

    qmp.py SOCKET status            print query-status's "status" (running, paused, ...)
    qmp.py SOCKET COMMAND [JSON]    run COMMAND with arguments JSON, print its "return"

Connects, reads the greeting, negotiates with qmp_capabilities, runs one
command and disconnects: QEMU's QMP socket serves one client at a time, so
holding it open would block cbackup. Events in between are skipped. Exit
status: 0 ok, 1 QMP error reply, 2 usage, 3 cannot connect, 4 timeout or
protocol error.
"""
import json
import socket
import sys

TIMEOUT = 5.0


class Conn:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(TIMEOUT)
        self.sock.connect(path)
        self.buf = b""

    def message(self):
        while b"\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("QMP connection closed")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def reply(self):
        """the next message that is not an event"""
        while True:
            msg = self.message()
            if "event" not in msg:
                return msg

    def execute(self, cmd, args=None):
        req = {"execute": cmd}
        if args:
            req["arguments"] = args
        self.sock.sendall(json.dumps(req).encode() + b"\n")
        return self.reply()


def main(argv):
    if len(argv) < 3 or len(argv) > 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path, cmd = argv[1], argv[2]
    args = json.loads(argv[3]) if len(argv) == 4 else None
    try:
        conn = Conn(path)
    except OSError as e:
        print(f"qmp.py: cannot connect to '{path}': {e}", file=sys.stderr)
        return 3
    try:
        greeting = conn.reply()
        if "QMP" not in greeting:
            raise ValueError(f"no QMP greeting: {greeting}")
        conn.execute("qmp_capabilities")
        res = conn.execute("query-status" if cmd == "status" else cmd, args)
    except socket.timeout:
        print(f"qmp.py: '{path}': no answer within {TIMEOUT} s "
              "(is another client connected?)", file=sys.stderr)
        return 4
    except (OSError, EOFError, ValueError) as e:
        print(f"qmp.py: '{path}': {e}", file=sys.stderr)
        return 4
    finally:
        conn.sock.close()
    if "error" in res:
        print(f"qmp.py: {cmd}: {res['error']}", file=sys.stderr)
        return 1
    if cmd == "status":
        print(res["return"]["status"])
    else:
        print(json.dumps(res["return"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
