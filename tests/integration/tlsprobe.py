#!/usr/bin/env python3
"""tlsprobe.py: what a node's resident service does with its broker
connection, step by step, for the tests (Python's ssl, OpenSSL).

  tlsprobe.py PORT CA idle TOKEN SECONDS
      one TLS connection: a GET /v1/health (with TOKEN, or none if "-"),
      then SECONDS idle, then a second request on the same connection.
      Prints "kept" when the second was answered, "closed" when the
      broker had closed the connection.
  tlsprobe.py PORT CA resume TOKEN [CERT KEY]
      two connections one after the other, the second offering the
      first's TLS session (a ticket); each makes GET /v1/jobs?limit=1 with
      TOKEN (or none).  Prints "resumed STATUS1 STATUS2" or
      "full STATUS1 STATUS2".
  tlsprobe.py PORT CA park GO N TOKEN [CERT KEY]
      N TLS connections, each makes GET /v1/jobs?limit=1 with TOKEN (or
      none); prints "idle N" and waits (60 s at most) for file GO to
      exist, whole (rename it into place), meanwhile the broker parks
      them; then on each connection again GET /v1/jobs?limit=1, and on
      the first a PUT of GO's line: "PATH BODY".  Prints "again OK/N put STATUS BODY" (OK: answered 200).
  tlsprobe.py PORT CA stall SECONDS
      pipelined requests sent and no answer read, until the connection
      takes no more; then SECONDS holding it open.
  tlsprobe.py PORT CA slowread SECONDS
      the same backlog, then its answers read slowly: 64 KiB every
      0.25 s for SECONDS.  Prints "open: N answers read" or "cut after
      T s: N answers read".
"""
import os
import socket
import ssl
import sys
import time


def context(ca, cert=None, key=None):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = False  # the test certificate names 127.0.0.1
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def request(sock, token, path, method="GET", body=None):
    status, _ = exchange(sock, token, path, method, body)
    return status


def exchange(sock, token, path, method="GET", body=None):
    auth = "Authorization: Bearer %s\r\n" % token if token != "-" else ""
    extra = ""
    if body is not None:
        extra = "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
    sock.sendall(("%s %s HTTP/1.1\r\nHost: fmbroker\r\n%s%s\r\n%s" % (
        method, path, auth, extra, body or "")).encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None, None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            return None, None
        body += chunk
    return int(head.split(b" ")[1]), body.decode(errors="replace")


def connect(port, ctx, session=None):
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1", session=session)


def idle(port, ca, token, seconds):
    s = connect(port, context(ca))
    if request(s, token, "/v1/health") != 200:
        return "no-answer"
    time.sleep(seconds)
    try:
        status = request(s, token, "/v1/health")
    except OSError:
        status = None
    return "kept" if status == 200 else "closed"


def resume(port, ca, token, cert=None, key=None):
    ctx = context(ca, cert, key)
    s = connect(port, ctx)
    first = request(s, token, "/v1/jobs?limit=1")
    session = s.session  # the ticket came with the answer (TLS 1.3)
    s.close()
    s = connect(port, ctx, session)
    second = request(s, token, "/v1/jobs?limit=1")
    how = "resumed" if s.session_reused else "full"
    s.close()
    return "%s %s %s" % (how, first, second)


def park(port, ca, go, n, token, cert=None, key=None):
    """N connections kept idle (the broker parks them), then each used
    again: the node service's connection between two jobs, N times."""
    ctx = context(ca, cert, key)
    socks = []
    for _ in range(n):
        s = connect(port, ctx)
        if request(s, token, "/v1/jobs?limit=1") != 200:
            return "no-answer"
        socks.append(s)
    print("idle %d" % n, flush=True)
    deadline = time.time() + 60
    while not os.path.exists(go) and time.time() < deadline:
        time.sleep(0.05)
    with open(go) as f:
        path, _, body = f.readline().strip().partition(" ")
    ok = sum(1 for s in socks if request(s, token, "/v1/jobs?limit=1") == 200)
    status, answer = exchange(socks[0], token, path, "PUT", body)
    for s in socks:
        s.close()
    return "again %d/%d put %s %s" % (ok, n, status, (answer or "").replace("\n", " "))


def fill(s):
    """Pipelined requests, no answer read, until the connection takes no
    more; returns how many went."""
    s.setblocking(False)
    req = b"GET /v1/health HTTP/1.1\r\nHost: fmbroker\r\n\r\n" * 64
    sent = 0
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            s.send(req)
            sent += 64
        except (ssl.SSLWantWriteError, BlockingIOError):
            time.sleep(0.05)
            try:
                s.send(req)
                sent += 64
            except (ssl.SSLWantWriteError, BlockingIOError):
                break
    return sent


def stall(port, ca, seconds):
    """A peer that sends and never reads: pipelined requests until the
    connection takes no more, then nothing, holding it open."""
    s = connect(port, context(ca))
    print("sent %d" % fill(s), flush=True)
    time.sleep(seconds)
    s.close()


def slowread(port, ca, seconds):
    """A peer that reads its answers slowly but steadily (a big answer
    over a slow link): bytes keep moving, so it is not a stalled one.
    256 KiB/s: the backlog fill() leaves (thousands of answers, about 3 MB)
    outlasts a few seconds, so the connection never goes idle, which the
    broker would close (a peer with no credential)."""
    s = connect(port, context(ca))
    fill(s)
    t0, got = time.time(), b""
    while time.time() - t0 < seconds:
        time.sleep(0.25)
        want = len(got) + 64 * 1024
        while len(got) < want:
            try:
                chunk = s.recv(65536)
            except (ssl.SSLWantReadError, BlockingIOError):
                break
            except OSError:
                chunk = b""
            if not chunk:
                return "cut after %.1f s: %d answers read" % (
                    time.time() - t0, got.count(b"HTTP/1.1 200 "))
            got += chunk
    s.close()
    return "open: %d answers read" % got.count(b"HTTP/1.1 200 ")


def main():
    port, ca, what = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    if what == "idle":
        print(idle(port, ca, sys.argv[4], float(sys.argv[5])))
    elif what == "stall":
        stall(port, ca, float(sys.argv[4]))
    elif what == "slowread":
        print(slowread(port, ca, float(sys.argv[4])))
    elif what == "park":
        print(park(port, ca, sys.argv[4], int(sys.argv[5]), sys.argv[6], *sys.argv[7:9]))
    elif what == "resume":
        print(resume(port, ca, sys.argv[4], *sys.argv[5:7]))
    else:
        sys.exit("usage: see the head of this file")


main()
