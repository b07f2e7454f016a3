#!/usr/bin/python3
"""steps.py HADIR KIND T0 ANSWERED OLD NEW: what a take-over took, step by step.

KIND is kill (fmbrokerd killed on OLD), fence (host OLD hung, fenced by
NEW) or move (crm_resource --move from OLD to NEW); T0 is the failure (or
the move) and ANSWERED the first RUN answered by NEW's broker, both in ms
since the epoch.  Reads the test's event log (the fence agent's and the
broker agent's), each host's pacemaker.log (when each resource operation
was asked for and when it ended) and the survivor's corosync.log (when
the other left the membership).  Prints one JSON object, in ms:
  detection  T0 to the failure seen: the failed monitor (kill), the host
             gone from corosync's membership (fence)
  fencing    from then to the fence agent's "done" (with
             priority-fencing-delay); fence_agent: the agent's own run
  stop       OLD's stops (move; kill: the dead broker's)
  mount, address, broker  the starts of fm-fs, fm-ip, fmbrokerd on NEW
  first_run  the broker ready to the first RUN answered
  other      the rest: the scheduler, the transitions' hops
  total      T0 to the first RUN answered
"""
import json, os, re, sys, time

ha, kind, t0, answered, old, new = sys.argv[1:7]
t0, answered = int(t0), int(answered)
year = time.localtime(t0 / 1000).tm_year


def stamp(text):
    """'Nov 29 07:55:01.469' (local time) -> ms since the epoch"""
    m = re.match(r"(\w{3}) +(\d+) (\d\d):(\d\d):(\d\d)\.(\d+)", text)
    if not m:
        return None
    t = time.strptime("%d %s %s %s:%s:%s" % (year, m[1], m[2], m[3], m[4], m[5]), "%Y %b %d %H:%M:%S")
    return int(time.mktime(t)) * 1000 + int(m[6][:3].ljust(3, "0"))


def lines(path):
    try:
        with open(path, errors="replace") as f:
            return f.readlines()
    except OSError:
        return []


events = []
for line in lines(os.path.join(ha, "events.log")):
    f = line.split(None, 1)
    if len(f) == 2 and f[0].isdigit() and t0 <= int(f[0]) <= answered:
        events.append((int(f[0]), f[1].strip()))


def event(pattern):
    for t, text in events:
        if re.search(pattern, text):
            return t
    return None


def ops(host):
    """(op, rsc) -> [(requested, done)] on HOST after T0"""
    req, out = {}, {}
    for line in lines(os.path.join(ha, "hosts", host, "var_log.up", "pacemaker", "pacemaker.log")):
        m = re.search(r"Requesting local execution of (start|stop) operation for (\S+) on", line)
        n = re.search(r"Result of (start|stop) operation for (\S+) on \S+: ", line)
        if not (m or n):
            continue
        t = stamp(line)
        if t is None or t < t0 or t > answered:
            continue
        if m:
            req[(m[1], m[2])] = t
        elif (n[1], n[2]) in req:
            out.setdefault((n[1], n[2]), []).append((req.pop((n[1], n[2])), t))
    return out


def took(o, op, rsc):
    spans = o.get((op, rsc))
    return spans[0][1] - spans[0][0] if spans else None


res = {"kind": kind, "old": old, "new": new, "total": answered - t0}
new_ops = ops(new)
seen = None
if kind == "kill":
    seen = event(r"^fmbrokerd monitor: not running " + old)
elif kind == "fence":
    for line in lines(os.path.join(ha, "hosts", new, "var_log.up", "corosync", "corosync.log")):
        if "Members left" in line:
            t = stamp(line)
            if t is not None and t >= t0:
                seen = t
                break
res["detection"] = seen - t0 if seen else None
if kind == "fence":
    start, done = event(r"^fence \w+ %s start" % old), event(r"^fence \w+ %s done" % old)
    res["fencing"] = done - seen if done and seen else None
    res["fence_agent"] = done - start if done and start else None
old_ops = ops(old) if kind != "fence" else {}
stops = [s for k, v in old_ops.items() if k[0] == "stop" for s in v]
res["stop"] = max(e for _, e in stops) - min(s for s, _ in stops) if stops else None
res["mount"] = took(new_ops, "start", "fm-fs")
res["address"] = took(new_ops, "start", "fm-ip")
res["broker"] = took(new_ops, "start", "fmbrokerd")
ready = event(r"^fmbrokerd ready " + new)
res["first_run"] = answered - ready if ready else None
known = sum(res.get(k) or 0 for k in ("detection", "fencing", "stop", "mount", "address", "broker", "first_run"))
res["other"] = res["total"] - known
print(json.dumps(res))
