#!/bin/bash
# t2040-agent-clean.sh: fmbroker-cxi clean decides from every job the
# broker has not released: with more than 1,000 of them (more than one
# page), with lost and releasing jobs, it keeps all their services and
# removes a released job's leftovers; when it cannot get the whole set
# (broker down, listing refused, a bad answer) it destroys nothing.
. "$(dirname "$0")/lib.sh"
export MOCKCXI_SYSTEM_SVC=1 MOCKCXI_DEVICES=2
start_mockfm
start_broker
svc_of_uid () { # NODE UID: does every NIC of NODE still have a service of UID?
    for d in 0 1; do cxi_services "$1" $d | jq -se --argjson u "$2" "any(.[]; .member0.id == \$u)" >/dev/null || return 1; done
}
no_svc_of_uid () {
    for d in 0 1; do cxi_services "$1" $d | jq -se --argjson u "$2" "any(.[]; .member0.id == \$u) | not" >/dev/null || return 1; done
}
# put_jobs PREFIX COUNT: COUNT jobs PREFIX0000... over the socket, a few
# connections at once (the broker commits them in groups), bounded.
put_jobs () {
    timeout 120 python3 - "$T/api.sock" "$1" "$2" <<'PY'
import http.client, socket, sys, threading
sock, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
class Unix(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(sock)
errors = []
def work(k):
    c = Unix("fmbroker", timeout=30)
    for i in range(k, count, 4):
        c.request("PUT", "/v1/jobs/%s%04d" % (prefix, i),
                  body='{"uid":%d,"node_count":1,"hwcoll":"off"}' % (10000 + i))
        r = c.getresponse(); r.read()
        if r.status != 201: errors.append(r.status)
threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
[t.start() for t in threads]; [t.join() for t in threads]
sys.exit(1 if errors else 0)
PY
}

expect_ok 'over 1,000 unreleased jobs, live ones on both pages, a lost and a releasing job' '
    put_jobs a 1001 &&
    test "$(rm_call GET "/v1/jobs?state=active&limit=1000" | jq ".jobs | length")" = 1000 &&
    agent n1 prolog --job a0000 &&
    rm_call PUT /v1/jobs/b-live "{\"uid\":2000,\"node_count\":1,\"hwcoll\":\"off\"}" >/dev/null &&
    agent n1 prolog --job b-live &&
    rm_call PUT /v1/jobs/lost1 "{\"uid\":2001,\"nodes\":[\"n1\",\"n2\"]}" >/dev/null &&
    agent n1 prolog --job lost1 &&
    mockfm_ctl POST /_mock/restart && rm_call POST /v1/reconcile >/dev/null &&
    wait_for 100 0.1 sh -c "curl -sf --unix-socket $T/api.sock http://fmbroker/v1/jobs/lost1 | jq -e \".state == \\\"lost\\\"\"" &&
    rm_call PUT /v1/jobs/relg "{\"uid\":2002,\"nodes\":[\"n1\",\"n2\"]}" | jq -e ".hwcoll.state == \"reserved\"" &&
    agent n1 prolog --job relg &&
    mockfm_ctl POST /_mock/faults "DELETE /fabric/collectives/jobs/c1-relg 500" &&
    rm_call DELETE /v1/jobs/relg >/dev/null && sleep 0.5 &&
    test "$(job_field relg .state)" = releasing &&
    rm_call PUT /v1/jobs/rel1 "{\"uid\":2003,\"node_count\":1,\"hwcoll\":\"off\"}" >/dev/null &&
    agent n1 prolog --job rel1 && rm_call DELETE /v1/jobs/rel1 >/dev/null &&
    test "$(job_field rel1 .state)" = released
'
expect_ok 'clean --dry-run lists only the released job'"'"'s leftovers' '
    agent n1 clean --dry-run >out 2>err && cat out err &&
    test "$(grep -c "would destroy" out)" = 2 && test "$(grep -c "uid=2003" out)" = 2 &&
    grep -q "1004 job(s) not released" err &&
    svc_of_uid n1 2003
'
expect_ok 'clean keeps every unreleased job'"'"'s services and removes the released job'"'"'s' '
    agent n1 clean &&
    no_svc_of_uid n1 2003 &&
    for u in 10000 2000 2001 2002; do svc_of_uid n1 $u || return 1; done
'
expect_ok 'clean --all also takes a service outside the pool, and keeps the live ones' '
    agent n1 prolog --job other --uid 3000 --vnis 77 --no-report &&
    agent n1 clean --dry-run >out && ! grep -q "uid=3000" out &&
    agent n1 clean --all --dry-run >out && grep -q "uid=3000, vnis=77" out &&
    agent n1 clean --all && no_svc_of_uid n1 3000 &&
    for u in 10000 2000 2001 2002; do svc_of_uid n1 $u || return 1; done &&
    cxi_services n1 0 | jq -se "any(.[]; .id == 1) and any(.[]; .id == 2)"
'
expect_ok 'with the broker down, clean and clean --all destroy nothing and say why' '
    agent n1 prolog --job stale --uid 3001 --vnis 2001 --no-report &&
    stop_broker &&
    for a in "" --all; do
        { agent n1 clean $a 2>err; test $? = 1; } &&
        grep -q "cannot get every job the broker has not released (.*); not touching any service" err ||
            return 1
    done &&
    svc_of_uid n1 3001 && start_broker
'
# A broker that answers, but not with a whole job set.
fake_broker () { # ANSWER-KIND: serve every GET on $T/fake.sock
    rm -f "$T/fake.sock"
    timeout 60 python3 - "$T/fake.sock" "$1" <<'PY' &
import http.server, json, os, socketserver, sys
path, kind = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if kind == "refuse":
            self.send_response(403); body = b'{"status":403,"detail":"not for you"}'
        elif kind == "loop":  # next_after never moves: a listing without end
            self.send_response(200)
            body = json.dumps({"jobs": [], "next_after": "a"}).encode()
        else:
            self.send_response(200); body = b'{"jobs":[{"id":"x","uid":"zero","vnis":[1]}]}'
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
class S(socketserver.UnixStreamServer):
    def get_request(self):
        r, _ = super().get_request(); return r, ("local", 0)
S(path, H).serve_forever()
PY
    fake_pid=$!
    wait_for 50 0.1 test -S "$T/fake.sock"
}
stop_fake () { [ -n "${fake_pid:-}" ] && kill "$fake_pid" 2>/dev/null; wait "$fake_pid" 2>/dev/null; fake_pid=; }
on_exit stop_fake
for kind in refuse loop bad; do
expect_ok "a listing that is $kind: clean destroys nothing and says why" '
    fake_broker $kind &&
    { MOCKCXI_STATE="$T/n1.cxi.json" "$FMB_BIN/fmbroker-cxi" -c /dev/null \
        --libcxi "$FMB_BIN/../mockcxi/new/libcxi.so.1" --socket "$T/fake.sock" \
        --state-dir "$T/n1.rec" --node n1 clean 2>err; rc=$?; } ; stop_fake; cat err; test $rc = 1 &&
    grep -q "not touching any service" err && svc_of_uid n1 3001
'
done
done_testing
