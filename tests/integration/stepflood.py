#!/usr/bin/env python3
"""stepflood.py: a token holder cleaning many distinct steps (tests only).

stepflood.py SOCKET JOB TOKEN COUNT SECONDS

Sends up to COUNT DELETE /v1/jobs/JOB/steps/sN with the job's token as
bearer, one after another on one keep-alive connection, for at most
SECONDS.  Prints a JSON object: answers per status, the largest
Retry-After seen, the requests sent, and the first 429's problem document.
"""
import http.client
import json
import socket
import sys
import time

path, job, token, count, seconds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])


class UnixConnection(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(path)


conn = UnixConnection("fmbroker")
statuses = {}
retry_after = 0
problem = None  # the first 429's body
sent = 0
end = time.monotonic() + seconds
while sent < count and time.monotonic() < end:
    try:
        conn.request("DELETE", "/v1/jobs/%s/steps/s%d" % (job, sent),
                     headers={"Authorization": "Bearer " + token})
        r = conn.getresponse()
        body = r.read()
    except (OSError, http.client.HTTPException):
        conn.close()
        conn = UnixConnection("fmbroker")
        continue
    sent += 1
    statuses[str(r.status)] = statuses.get(str(r.status), 0) + 1
    ra = r.getheader("Retry-After")
    if ra:
        retry_after = max(retry_after, int(ra))
    if r.status == 429 and problem is None:
        problem = {"content_type": r.getheader("Content-Type"), "body": json.loads(body)}
print(json.dumps({"statuses": statuses, "retry_after": retry_after, "sent": sent,
                  "problem": problem}))
