#!/usr/bin/env python3
"""tcpflood.py: a hostile network caller for the broker's TCP port (tests only).

tcpflood.py PORT ADDRESSES PER_ADDRESS SECONDS

From 127.0.0.2 .. 127.0.0.(ADDRESSES+1), keeps up to PER_ADDRESS
connections per address open to 127.0.0.1:PORT for SECONDS seconds,
sending the first bytes of a TLS ClientHello and nothing more (the
security review's flood: no token needed to connect).  A connection the
server closes is opened again (at most 64 per 10 ms).  Bounded in count
and time.  Prints "opened N closed_by_server M max_open K" at the end.
"""
import resource
import selectors
import socket
import sys
import time

port, naddr, per, seconds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, naddr * per + 64), hard))
HELLO = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"  # a ClientHello's start

opened = closed = max_open = 0
conns = {}  # socket -> source address
count = {}  # source address -> open connections
sel = selectors.DefaultSelector()


def open_one(src):
    global opened
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
    except (BlockingIOError, InterruptedError):
        pass
    except OSError:
        s.close()
        return False
    conns[s] = src
    count[src] = count.get(src, 0) + 1
    sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
    opened += 1
    return True


def drop(s):
    src = conns.pop(s)
    count[src] -= 1
    sel.unregister(s)
    s.close()


sources = ["127.0.0.%d" % (i + 2) for i in range(naddr)]
end = time.monotonic() + seconds
sent = set()
while time.monotonic() < end:
    budget = 64
    for src in sources:
        while count.get(src, 0) < per and budget > 0:
            budget -= 1
            if not open_one(src):
                break
    max_open = max(max_open, len(conns))
    for key, ev in sel.select(timeout=0.01):
        s = key.fileobj
        if ev & selectors.EVENT_WRITE and s not in sent:
            try:
                s.send(HELLO)
                sent.add(s)
                sel.modify(s, selectors.EVENT_READ)
            except OSError:
                sent.discard(s)
                drop(s)
                closed += 1
            continue
        if ev & selectors.EVENT_READ:
            try:
                data = s.recv(4096)
            except OSError:
                data = b""
            if not data:
                sent.discard(s)
                drop(s)
                closed += 1
for s in list(conns):
    s.close()
print("opened %d closed_by_server %d max_open %d" % (opened, closed, max_open))
