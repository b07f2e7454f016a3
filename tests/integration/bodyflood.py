#!/usr/bin/env python3
"""bodyflood.py: large bodies without a credential (tests only).

bodyflood.py PORT CAFILE CONNECTIONS BYTES SECONDS

CONNECTIONS TLS connections to 127.0.0.1:PORT at once, from 127.0.1.1,
127.0.1.2, ... (8 from each: the per-address cap on connections that
have not shown a credential), each a PUT /v1/jobs/flood-N with a body of
BYTES and no Authorization header: the headers, then up to 5 s for an
answer, then the body as fast as the broker reads it.  Bounded: every
connection ends within SECONDS.  Prints each answer's status and when it
came, one a line ("000": none, the connection closed).
"""
import socket
import ssl
import sys
import threading

port, cafile, n, size, secs = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
ctx = ssl.create_default_context(cafile=cafile)
ctx.check_hostname = False
results = [None] * n
start = threading.Barrier(n)


def one(i):
    status = "000"
    try:
        raw = socket.socket()
        raw.settimeout(secs)
        raw.bind(("127.0.1.%d" % (i // 8 + 1), 0))
        raw.connect(("127.0.0.1", port))
        s = ctx.wrap_socket(raw)
        start.wait(timeout=secs)
        s.sendall(("PUT /v1/jobs/flood-%d HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\n\r\n" % (i, size)).encode())
        # the answer is due from the headers alone: waited for (up to 5 s)
        # before any of the body goes
        s.settimeout(5)
        try:
            head = s.recv(4096).decode(errors="replace")
            if head.startswith("HTTP/1.1 "):
                status = head[9:12] + " before the body"
        except (socket.timeout, ssl.SSLError, OSError):
            pass
        s.settimeout(secs)
        chunk = b"x" * 65536
        left = size
        try:
            while left > 0:
                s.sendall(chunk[:min(left, len(chunk))])
                left -= min(left, len(chunk))
        except OSError:
            pass  # answered and closed before the body: what is wanted
        if status == "000":
            head = s.recv(4096).decode(errors="replace")
            if head.startswith("HTTP/1.1 "):
                status = head[9:12] + " after the body"
    except (OSError, threading.BrokenBarrierError, ssl.SSLError):
        pass
    results[i] = status


threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join(secs + 5)
for r in results:
    print(r or "000")
