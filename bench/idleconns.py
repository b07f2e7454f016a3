#!/usr/bin/env python3
"""idleconns.py: hold idle connections to the broker's TCP port (bench only).

idleconns.py MODE PORT COUNT ADDRESSES SECONDS [CAFILE TOKENDIR]

Opens COUNT connections to 127.0.0.1:PORT from ADDRESSES loopback
addresses (127.0.2.1, 127.0.2.2, ... in turn) and holds them, idle, for
SECONDS, then closes them all.  MODE "unauth": a TCP connection that
sends nothing (a stranger's, still in its TLS handshake at the broker).
MODE "authed": a TLS connection that makes one request with its node's
token (TOKENDIR/nA.token for address A's node), then stays open, as a
node service's kept connection does.  Prints "open N" once all are
opened (then the caller measures), "closed_by_server M" at the end.
Bounded in count and time.
"""
import resource
import select
import socket
import ssl
import sys
import time

mode, port, count, naddr, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, count + 256), hard))
ctx = None
if mode == "authed":
    ctx = ssl.create_default_context(cafile=sys.argv[6])
    ctx.check_hostname = False
    tokdir = sys.argv[7]
    tokens = [open("%s/n%d.token" % (tokdir, a)).read().strip() for a in range(naddr)]

end = time.monotonic() + secs
conns = []
for i in range(count):
    if time.monotonic() > end:
        break
    a = i % naddr
    s = socket.socket()
    s.settimeout(10)
    try:
        s.bind(("127.0.2.%d" % (a + 1), 0))
        s.connect(("127.0.0.1", port))
        if ctx:
            s = ctx.wrap_socket(s)
            s.sendall(("GET /v1/jobs?limit=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
                       % tokens[a]).encode())
            got = b""
            while b"\r\n\r\n" not in got:
                b = s.recv(65536)
                if not b:
                    raise OSError("closed")
                got += b
            head, body = got.split(b"\r\n\r\n", 1)
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            while len(body) < length:  # the rest of the answer, then idle
                b = s.recv(65536)
                if not b:
                    raise OSError("closed")
                body += b
        conns.append(s)
    except (OSError, ssl.SSLError):
        s.close()
print("open %d" % len(conns), flush=True)
closed = 0
while time.monotonic() < end and conns:
    r, _, _ = select.select(conns[:1000], [], [], min(1.0, max(0.0, end - time.monotonic())))
    for s in r:
        try:
            if not s.recv(1):
                raise OSError
        except (OSError, ssl.SSLError):
            conns.remove(s)
            s.close()
            closed += 1
for s in conns:
    s.close()
print("closed_by_server %d" % closed, flush=True)
