#!/usr/bin/env python3
"""flood.py: a hostile local caller for the broker's Unix socket (tests only).

flood.py SOCKET CONNECTIONS SECONDS INTERVAL

Keeps up to CONNECTIONS connections open for SECONDS seconds; each sends
the start of a request and then one header byte every INTERVAL seconds,
never finishing it (the "slow loris" of the security review).  A
connection the server closes is opened again (at most 64 per 10 ms).
Bounded in count and time.  Prints "opened N closed_by_server M" at the end.
"""
import resource
import selectors
import socket
import sys
import time

path, nconn, seconds, interval = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, nconn + 64), hard))

opened = closed = 0
conns = {}  # socket -> next trickle time
sel = selectors.DefaultSelector()


def open_one():
    global opened
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(False)
    try:
        s.connect(path)
    except (BlockingIOError, InterruptedError):
        pass  # queued in the backlog
    except OSError:
        s.close()
        return
    try:
        s.send(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")
    except OSError:
        pass
    opened += 1
    conns[s] = time.monotonic() + interval
    sel.register(s, selectors.EVENT_READ)


end = time.monotonic() + seconds
while time.monotonic() < end:
    time.sleep(0.01)  # at most 64 connects per 10 ms: a flood, not a busy loop
    while len(conns) < nconn and time.monotonic() < end:
        open_one()
        if len(conns) % 64 == 0:
            break  # let the server run now and then
    for key, _ in sel.select(timeout=0.05):
        s = key.fileobj
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if not data:  # the server gave up on us
            sel.unregister(s)
            del conns[s]
            s.close()
            closed += 1
    now = time.monotonic()
    for s, t in list(conns.items()):
        if now >= t:
            try:
                s.send(b"X")
            except OSError:
                pass
            conns[s] = now + interval
print("opened %d closed_by_server %d" % (opened, closed))
