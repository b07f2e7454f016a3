#!/usr/bin/env python3
"""slowbroker.py SOCKET LOG HOLD_JOB RELEASE_FILE: a stand-in for
fmbrokerd's node-report call (PUT /v1/jobs/J/nodes/N) on a Unix socket,
for what the real broker cannot be made to do: answer one job's report
late and another's at once.  Every PUT of a node report is answered 200,
at once, except for job HOLD_JOB's, whose answer waits until
RELEASE_FILE exists (at most 20 s).  Anything else is answered 404.
LOG gets "ready" once it listens, "recv METHOD PATH" as a request
arrives and "answer PATH" just before its answer is written (so that a
client that has its answer finds the line)."""
import http.server
import os
import re
import socketserver
import sys
import threading
import time

sock_path, log_path, hold_job, release_file = sys.argv[1:5]
log_lock = threading.Lock()


def log(line):
    with log_lock, open(log_path, "a") as f:
        f.write(line + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def do_PUT(self):
        log("recv PUT " + self.path)
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        m = re.fullmatch(r"/v1/jobs/([^/]+)/nodes/([^/]+)", self.path)
        if not m:
            self.answer(404, '{"error":"not found"}')
            return
        if m.group(1) == hold_job:
            end = time.monotonic() + 20
            while not os.path.exists(release_file) and time.monotonic() < end:
                time.sleep(0.02)
        log("answer " + self.path)
        self.answer(200, '{"job":"%s","node":"%s"}' % (m.group(1), m.group(2)))

    def do_GET(self):
        log("recv GET " + self.path)
        self.answer(404, '{"error":"not found"}')

    do_POST = do_GET
    do_DELETE = do_GET


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        conn, _ = self.socket.accept()
        return conn, ("local", 0)


if os.path.exists(sock_path):
    os.unlink(sock_path)
with Server(sock_path, Handler) as server:
    log("ready")  # listening: a connect from now on is served
    server.serve_forever()
