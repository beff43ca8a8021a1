#!/usr/bin/env python3
"""e2e helper: a stand-in S3 endpoint on 127.0.0.1 that misbehaves on
purpose, for the client's retries (t0800). It answers every request by a
script of faults, one per request, then 200 (or 404 for a GET of a key not
put): 503 (unavailable), 429 (SlowDown), 500, 'reset' (closes the
connection without an answer), 'slow' (answers after 3 s). It checks no
signature. Usage: s3fake.py PORTFILE FAULT[,FAULT...]; writes its port to
PORTFILE, logs each request to stderr ("METHOD PATH -> STATUS")."""
import http.server
import socketserver
import sys
import time

faults = [f for f in sys.argv[2].split(",") if f] if len(sys.argv) > 2 else []
store = {}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def answer(self, status, body=b""):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)
        sys.stderr.write("%s %s -> %d\n" % (self.command, self.path, status))
        sys.stderr.flush()

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n) if n else b""
        if faults:
            f = faults.pop(0)
            if f == "reset":
                sys.stderr.write("%s %s -> reset\n" % (self.command, self.path))
                sys.stderr.flush()
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if f == "slow":
                time.sleep(3)
            else:
                code = int(f)
                body = b"<Error><Code>%s</Code></Error>" % (b"SlowDown" if code == 429 else b"InternalError")
                self.answer(code, body)
                return
        if self.command == "PUT":
            store[self.path] = data
            self.answer(200)
        elif self.command in ("GET", "HEAD"):
            if self.path in store:
                self.answer(200, store[self.path])
            else:
                self.answer(404, b"<Error><Code>NoSuchKey</Code></Error>")
        else:
            self.answer(204)

    do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = handle_any


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


srv = Server(("127.0.0.1", 0), Handler)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
srv.serve_forever()
