#!/usr/bin/python3
"""check.py ANSWERS URL CA RM_TOKEN FM_URL: what the clients were answered
(traffic.sh's log) against the surviving broker's state and the mock FM.
Run in the clients' namespace, after the traffic stopped.  Prints what it
checked and every problem; exits 1 if there is one.

  - every RUN and CLEANUP asked was answered (the clients' failover got
    through), and every node's prolog and epilog;
  - every answered RUN is in the state with the VNIs it was given, active
    unless its CLEANUP was answered (then releasing or released);
  - every epilog's report reached the state (node reports 'destroyed');
  - no VNI was given to two jobs (the answers), and no two unreleased
    jobs in the state hold one;
  - once the outbox is empty, the FM holds exactly the reservations of
    the jobs the state has active with one (none of a released job, none
    that no job has: nothing leaked, nothing foreign).
"""
import json, ssl, sys, time, urllib.request

answers, url, ca, token, fm_url = sys.argv[1:6]
ctx = ssl.create_default_context(cafile=ca)
problems = []


def get(path, base=url, auth=True):
    req = urllib.request.Request(base + path)
    if auth:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=10, context=ctx if base == url else None) as r:
        return json.load(r)


asked, answered, run_vnis = {}, {}, {}
for line in open(answers):
    f = line.split()
    if len(f) < 3:
        continue
    if f[1] == "ask":
        asked[tuple(f[2:])] = int(f[0])
    elif f[1] == "GAVEUP":
        problems.append("never answered: " + " ".join(f[2:]))
    else:
        key = tuple(f[1:3]) if f[1] in ("RUN", "CLEANUP") else tuple(f[1:4])
        answered[key] = int(f[0])
        if f[1] == "RUN":
            run_vnis[f[2]] = json.loads(f[3])
for k in asked:
    if k not in answered:
        problems.append("asked, not answered: " + " ".join(k))
cleaned = {k[1] for k in answered if k[0] == "CLEANUP"}
epilogs = [(k[1], k[2]) for k in answered if k[0] == "EPILOG"]

def all_jobs():
    jobs, after = {}, None
    while True:
        page = get("/v1/jobs?limit=1000" + ("&after=" + after if after else ""))
        for j in page["jobs"]:
            jobs[j["id"]] = j
        after = page.get("next_after")
        if not after:
            return jobs


jobs = all_jobs()

for job, vnis in run_vnis.items():
    j = jobs.get(job)
    if j is None:
        problems.append("RUN %s was answered, the state has no such job" % job)
        continue
    if j["state"] != "released" and j.get("vnis") != vnis: # a released job's are free again
        problems.append("RUN %s was given VNIs %s, the state says %s" % (job, vnis, j.get("vnis")))
    want = ("releasing", "released") if job in cleaned else ("active",)
    if j["state"] not in want:
        problems.append("job %s is %s, not %s" % (job, j["state"], " or ".join(want)))
for job in cleaned:
    if job not in run_vnis:
        problems.append("CLEANUP %s answered for a job whose RUN was not" % job)
for job, node in epilogs:
    reps = {r["node"]: r["cxi"] for r in get("/v1/jobs/" + job).get("node_reports", [])}
    if reps.get(node) != "destroyed":
        problems.append("job %s: node %s's epilog report is %s at the broker" % (job, node, reps.get(node)))

# VNIs: never one for two jobs
holder = {}
for job, vnis in run_vnis.items():
    for v in vnis:
        if v in holder and holder[v] != job:
            problems.append("VNI %d given to %s and %s" % (v, holder[v], job))
        holder[v] = job
held = {}
for j in jobs.values():
    if j["state"] != "released":
        for v in j.get("vnis") or []:
            if v in held:
                problems.append("VNI %d held by %s and %s in the state" % (v, held[v], j["id"]))
            held[v] = j["id"]


# the FM: once the outbox is empty, exactly the active jobs' reservations
def fm_ids():
    return set(get("/_mock/state", base=fm_url, auth=False)["jobs"].keys())


def active_ids():
    return {j["hwcoll"]["fm_job_id"] for j in jobs.values()
            if j["state"] == "active" and (j.get("hwcoll") or {}).get("state") == "reserved"}


deadline = time.time() + 30
while True:
    depth = get("/v1/status").get("outbox", {}).get("depth")
    fm = fm_ids()
    if depth == 0 and fm == active_ids():
        break
    if time.time() > deadline:
        leaked = sorted(fm - active_ids())
        missing = sorted(active_ids() - fm)
        problems.append("the FM does not hold exactly the active jobs' reservations (outbox %s): "
                        "held for no active job %s, active jobs without one %s" % (depth, leaked[:10], missing[:10]))
        break
    time.sleep(0.5)
    jobs = all_jobs()

states = {}
for j in jobs.values():
    states[j["state"]] = states.get(j["state"], 0) + 1
print("%d RUNs, %d CLEANUPs, %d node epilogs answered; %d jobs in the state %s; %d FM reservations"
      % (len(run_vnis), len(cleaned), len(epilogs), len(jobs), json.dumps(states, sort_keys=True), len(fm_ids())))
for p in problems[:40]:
    print("PROBLEM: " + p)
sys.exit(1 if problems else 0)
