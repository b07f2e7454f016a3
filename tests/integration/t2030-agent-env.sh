#!/bin/bash
# t2030-agent-env.sh: a job's environment on a compute node as it runs in
# production: the agent reaches the broker over TLS with a root-only
# agent token; the root prolog writes the job's record; the job's user
# (unprivileged) prints its variables from it, without the broker or the
# token; nobody else can; a job without a service on the node gets no
# SLINGSHOT_* variable; no value can inject a line or a variable.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "ok 1 # SKIP needs root (setpriv)"; echo "1..1"; exit 0; }
export MOCKCXI_SYSTEM_SVC=1
chmod 755 "$T"
tls_and_agent_token || bail_out "no certificates or token"
start_mockfm
for try in 1 2 3 4 5; do
    tcp_port=$(free_ports 1) || bail_out "no free port"
    write_broker_conf "[api]" "tcp = 127.0.0.1:$tcp_port" "tls_cert = $T/certs/server.pem" \
        "tls_key = $T/certs/server.key" "tokens_file = $T/tokens"
    start_broker && break
done
printf "[api]\nsocket = %s\nbroker_url = https://127.0.0.1:%s\nclient_token_file = %s\nclient_ca_file = %s\n" \
    "$T/no-such.sock" "$tcp_port" "$T/agent.token" "$T/certs/ca.pem" >"$T/node.conf"
chmod 644 "$T/node.conf"
node_agent () { # NODE ARGS...: fmbroker-cxi as on a compute node (no --socket)
    n=$1
    shift
    MOCKCXI_STATE="$T/$n.cxi.json" MOCKCXI_DEVICES=2 "$FMB_BIN/fmbroker-cxi" -c "$T/node.conf" \
        --libcxi "$FMB_BIN/../mockcxi/new/libcxi.so.1" --state-dir "$T/$n.rec" --node "$n" "$@"
}
# The variables a shell gets from a file of env lines, one NAME=value per line.
vars_of () { env -i bash -c ". $1 && env -0" | tr "\0" "\n" | grep -v "^\(PWD\|SHLVL\|_\)="; }

expect_ok 'the root prolog, over TLS with the agent token, writes the job'"'"'s record' '
    rm_call PUT /v1/jobs/42 "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\"]}" >run.json &&
    node_agent n1 prolog --job 42 &&
    test "$(stat -c "%u %a" "$T/n1.rec/42.env")" = "1000 400" &&
    test "$(stat -c "%u %a" "$T/n1.rec")" = "0 755" &&
    test "$(stat -c "%u %a" "$T/n1.rec/42.json")" = "0 600"
'
# What a prolog asks for: the job as its node needs it, not the list of
# every node and every node's report (760 KB, 21 ms of the broker's loop
# per prolog for a 10,000-node job).  As the agent over TLS, as the job's
# user; another user learns nothing.
agent_get () {
    curl -sf --max-time 20 --cacert "$T/certs/ca.pem" -H "Authorization: Bearer $agent_tok" \
        "https://127.0.0.1:$tcp_port$1"
}
expect_ok 'a node'"'"'s view of the job: its facts and its own report, not every node'"'"'s' '
    agent_get /v1/jobs/42/nodes/n1 >n1view.json &&
    jq -e --slurpfile r run.json "(has(\"nodes\") | not) and .uid == 1000 and
        .vnis == \$r[0].vnis and .env == \$r[0].env and
        (.node_reports | length == 1 and .[0].node == \"n1\" and .[0].cxi == \"created\")" n1view.json &&
    agent_get /v1/jobs/42/nodes/n2 | jq -e ".node_reports[0].cxi == \"pending\"" >/dev/null &&
    agent_get /v1/jobs/42/nodes/n9 | jq -e ".node_reports == [] and .uid == 1000" >/dev/null &&
    agent_get /v1/jobs/42 | jq -e "(.nodes | length) == 2 and (.node_reports | length) == 2" >/dev/null &&
    as_user 1000 curl -sf --unix-socket "$T/api.sock" http://fmbroker/v1/jobs/42/nodes/n1 |
        jq -e ".uid == 1000" >/dev/null &&
    test "$(as_user 1001 curl -s -o /dev/null -w "%{http_code}" --unix-socket "$T/api.sock" \
        http://fmbroker/v1/jobs/42/nodes/n1)" = 404
'
# Which of the two the agent asks for, seen by a stand-in broker on a
# Unix socket that logs each request; "old" answers the node view 405, as
# a broker from before it does.
stub_broker () {
    rm -f "$T/stub.sock" "$T/stub.log"
    python3 - "$T/stub.sock" "$T/stub.log" "$1" "$T/run.json" <<'PY' &
import http.server, json, socketserver, sys
sock, log, mode, job = sys.argv[1:5]
class H (http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message (self, *a): pass
    def reply (self, code, body):
        b = json.dumps (body).encode ()
        self.send_response (code)
        self.send_header ("Content-Type", "application/json")
        self.send_header ("Content-Length", str (len (b)))
        self.end_headers ()
        self.wfile.write (b)
    def do_GET (self):
        open (log, "a").write ("GET %s\n" % self.path)
        if "/nodes/" in self.path and mode == "old":
            self.reply (405, {"type": "about:blank", "title": "Method Not Allowed",
                              "status": 405, "detail": "GET is not allowed"})
        else:
            self.reply (200, json.load (open (job)))
    def do_PUT (self):
        self.rfile.read (int (self.headers.get ("Content-Length", 0)))
        open (log, "a").write ("PUT %s\n" % self.path)
        self.reply (200, {"job": "42", "node": "n", "cxi": "created"})
class S (socketserver.UnixStreamServer):
    def get_request (self):
        return super ().get_request ()[0], ("local", 0)
S (sock, H).serve_forever ()
PY
    stub_pid=$!
    wait_for 50 0.1 test -S "$T/stub.sock"
}
stop_stub () { [ -n "${stub_pid:-}" ] && kill "$stub_pid" 2>/dev/null && wait "$stub_pid" 2>/dev/null; stub_pid=; }
on_exit stop_stub
stub_agent () { # NODE ARGS...
    n=$1
    shift
    MOCKCXI_STATE="$T/$n.cxi.json" MOCKCXI_DEVICES=2 "$FMB_BIN/fmbroker-cxi" -c /dev/null \
        --socket "$T/stub.sock" --libcxi "$FMB_BIN/../mockcxi/new/libcxi.so.1" \
        --state-dir "$T/$n.rec" --node "$n" "$@"
}
expect_ok 'the prolog asks for its node'"'"'s view, and for the whole job from a broker without it' '
    stub_broker new && stub_agent n5 prolog --job 42 && stop_stub && cat "$T/stub.log" &&
    grep -qx "GET /v1/jobs/42/nodes/n5" "$T/stub.log" && ! grep -qx "GET /v1/jobs/42" "$T/stub.log" &&
    stub_broker old && stub_agent n6 prolog --job 42 && stop_stub && cat "$T/stub.log" &&
    grep -qx "GET /v1/jobs/42/nodes/n6" "$T/stub.log" && grep -qx "GET /v1/jobs/42" "$T/stub.log" &&
    test -s "$T/n6.rec/42.env"
'
expect_ok 'the job'"'"'s user prints its variables, without the token it cannot read' '
    ! as_user 1000 cat "$T/agent.token" 2>/dev/null &&
    as_user 1000 "$FMB_BIN/fmbroker-cxi" -c "$T/node.conf" --state-dir "$T/n1.rec" env --job 42 >env.sh &&
    vars_of ./env.sh >vars &&
    grep -qx "SLINGSHOT_VNIS=$(jq -r ".vnis[0]" run.json)" vars &&
    grep -qx "SLINGSHOT_DEVICES=cxi0,cxi1" vars && grep -qx "SLINGSHOT_SVC_IDS=3,3" vars &&
    grep -qx "SLINGSHOT_TCS=0xa" vars && grep -qx "FI_CXI_COLL_JOB_ID=c1-42" vars &&
    grep -qx "FI_CXI_COLL_MCAST_TOKEN=$(jq -r .hwcoll.session_token run.json)" vars &&
    ! grep -q FI_CXI_COLL_JOB_STEP_ID vars &&
    as_user 1000 "$FMB_BIN/fmbroker-cxi" -c "$T/node.conf" --state-dir "$T/n1.rec" env --job 42 \
        --format slurm >env.slurm &&
    test "$(wc -l <env.slurm)" = "$(wc -l <env.sh)" && grep -qx "export SLINGSHOT_SVC_IDS=3,3" env.slurm
'
expect_ok 'a job'"'"'s own traffic classes (RUN tcs) reach its view, its CXI service and its tasks' '
    rm_call PUT /v1/jobs/47 "{\"uid\":1000,\"nodes\":[\"n1\"],\"tcs\":\"BULK_DATA\"}" >run47.json &&
    jq -e ".tcs == \"0x4\" and .env.SLINGSHOT_TCS == \"0x4\"" run47.json >/dev/null &&
    job_field 42 .tcs | grep -qx 0xa &&
    node_agent n1 prolog --job 47 &&
    cxi_services n1 0 | jq -se "[.[] | select(.tcs_bits == 4 and .member0.id == 1000)] |
        length == 1" >/dev/null &&
    as_user 1000 "$FMB_BIN/fmbroker-cxi" -c "$T/node.conf" --state-dir "$T/n1.rec" env --job 47 >env47.sh &&
    vars_of ./env47.sh | grep -qx "SLINGSHOT_TCS=0x4" &&
    "$FMB_BIN/fmbroker" -s "$T/api.sock" job show 47 | grep -q "TCs 0x4"
'
expect_ok 'env needs no broker: it works with the broker stopped' '
    stop_broker &&
    as_user 1000 "$FMB_BIN/fmbroker-cxi" -c "$T/node.conf" --state-dir "$T/n1.rec" env --job 42 >env2.sh &&
    cmp env.sh env2.sh && start_broker
'
expect_ok 'another user gets nothing and a clear message' '
    { as_user 1001 "$FMB_BIN/fmbroker-cxi" -c "$T/node.conf" --state-dir "$T/n1.rec" env --job 42 \
        >out 2>err; test $? = 1; } && test ! -s out &&
    grep -q "42.env: permission denied (only the job.s user and root may read it)" err
'
# The node is not drained for it (the prolog's failure is the job's): its
# report is logged, not turned into node_drain_requested.
expect_ok 'a job whose prolog failed here: no SLINGSHOT_* variable, exit 1, the reason, no drain' '
    rm_call PUT /v1/jobs/43 "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\"]}" >/dev/null &&
    cxi_set n1 ".fail.cxil_alloc_svc = {errno: 28, count: 100, skip: 1}" &&
    { node_agent n1 prolog --job 43 2>err; test $? = 1; } &&
    wait_for 50 0.1 grep -q "job 43: node n1 failed to set up its CXI services: cxi1: not enough NIC resources" "$T/broker.err" &&
    ! rm_call GET "/v1/events?after=0" | jq -e "any(.events[]; .type == \"node_drain_requested\" and .job == \"43\")" &&
    { as_user 1000 "$FMB_BIN/fmbroker-cxi" -c "$T/node.conf" --state-dir "$T/n1.rec" env --job 43 \
        >out 2>err; test $? = 1; } && test ! -s out &&
    grep -q "job 43 has no CXI service on this node: cxi1: not enough NIC resources" err &&
    cxi_set n1 "del(.fail)"
'
expect_ok 'a job with no VNIs: no SLINGSHOT_* variable, exit 1, the reason' '
    rm_call PUT /v1/jobs/45 "{\"uid\":1000,\"nodes\":[\"n1\"],\"vni_count\":0}" >/dev/null &&
    node_agent n1 prolog --job 45 &&
    { as_user 1000 "$FMB_BIN/fmbroker-cxi" -c "$T/node.conf" --state-dir "$T/n1.rec" env --job 45 \
        >out 2>err; test $? = 1; } && test ! -s out && grep -q "the job has no VNIs" err
'
# A record as the format allows, with hostile values (root writes it here
# the way the prolog does).
plant () { # JOB VALUE-JSON
    printf "{\"version\":1,\"job\":\"%s\",\"uid\":1000,\"services\":1,\"env\":{\"SLINGSHOT_DEVICES\":\"cxi0\",\"SLINGSHOT_SVC_IDS\":\"3\",\"FI_CXI_X\":%s}}" \
        "$1" "$2" >"$T/n1.rec/$1.env" && chown 1000 "$T/n1.rec/$1.env" && chmod 400 "$T/n1.rec/$1.env"
}
expect_ok 'a value with quotes, ; and $( ) is one value, in every format' '
    plant 44 "\"a'"'"'b; touch $T/pwned; \$(touch $T/pwned2) \`id\`\"" &&
    as_user 1000 "$FMB_BIN/fmbroker-cxi" --state-dir "$T/n1.rec" env --job 44 >env.sh &&
    vars_of ./env.sh >vars && test ! -e "$T/pwned" && test ! -e "$T/pwned2" &&
    test "$(grep -c . vars)" = 3 &&
    grep -qxF "FI_CXI_X=a'"'"'b; touch $T/pwned; \$(touch $T/pwned2) \`id\`" vars &&
    as_user 1000 "$FMB_BIN/fmbroker-cxi" --state-dir "$T/n1.rec" env --job 44 --format slurm >env.slurm &&
    test "$(wc -l <env.slurm)" = 3 &&
    grep -qxF "export FI_CXI_X=a'"'"'b; touch $T/pwned; \$(touch $T/pwned2) \`id\`" env.slurm
'
expect_ok 'a value with a newline is refused whole: nothing printed, exit 1' '
    plant 46 "\"x\\nexport EVIL=1\"" &&
    for f in shell slurm json; do
        { as_user 1000 "$FMB_BIN/fmbroker-cxi" --state-dir "$T/n1.rec" env --job 46 --format $f \
            >out 2>err; test $? = 1; } && test ! -s out &&
        grep -q "46.env: FI_CXI_X: the value holds a control character" err || return 1
    done
'
expect_ok 'epilog removes the record' '
    node_agent n1 epilog --job 42 && test ! -e "$T/n1.rec/42.env" &&
    { as_user 1000 "$FMB_BIN/fmbroker-cxi" --state-dir "$T/n1.rec" env --job 42 2>err; test $? = 1; } &&
    grep -q "no record of the job on this node" err
'
# After CLEANUP the job's VNI waits for the nodes that have not reported
# their services destroyed (found through schema 7's index, whatever the
# job's size): here n2, whose prolog never ran.  Another user cannot end
# the wait; n2's epilog, over TLS with the agent token, does.
vni_state () { rm_call GET /v1/vnis | jq -c --argjson v "$vni" "[.vnis[] | select(.vni == \$v) | [.state, .waiting_for]]"; }
expect_ok 'after CLEANUP the VNI waits for n2 alone; another uid cannot report for it; n2'"'"'s epilog frees it' '
    vni=$(jq ".vnis[0]" run.json) &&
    rm_call DELETE /v1/jobs/42 >/dev/null &&
    test "$(vni_state)" = "[[\"quarantined\",[\"n2\"]]]" &&
    test "$(as_user 1001 curl -s -o /dev/null -w "%{http_code}" --unix-socket "$T/api.sock" \
        -X PUT --data "{\"cxi\":\"destroyed\"}" http://fmbroker/v1/jobs/42/nodes/n2)" = 403 &&
    test "$(vni_state)" = "[[\"quarantined\",[\"n2\"]]]" &&
    node_agent n2 epilog --job 42 &&
    test "$(vni_state)" = "[]"
'
# Slurm requeues a job under the same id after a node failed: the first
# run's VNI stays quarantined for the dead node n2, so the next run's RUN
# is refused (409, naming why), and n1's prolog for it finds only the
# ended run at the broker: it must not give the new run that VNI (a
# quarantined one, still maybe in use on n2).  Once n2 is back and
# reports, the next RUN and prolog go through.
svc_with_vni () { cxi_services n1 "$2" | jq -se --argjson v "$1" "any(.[]; .vnis == [\$v])" >/dev/null; }
expect_ok 'a job requeued while a node of its first run is down: RUN 409, the prolog refuses the ended run' '
    rm_call PUT /v1/jobs/147 "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\"]}" >run147.json &&
    vni=$(jq ".vnis[0]" run147.json) &&
    node_agent n1 prolog --job 147 && node_agent n2 prolog --job 147 &&
    rm_call DELETE /v1/jobs/147 >/dev/null && node_agent n1 epilog --job 147 &&
    ! svc_with_vni "$vni" 0 && test "$(vni_state)" = "[[\"quarantined\",[\"n2\"]]]" &&
    api_call PUT /v1/jobs/147 "{\"uid\":1000,\"nodes\":[\"n1\",\"n3\"]}" >r147 && cat r147 &&
    read code _ <r147 && test "$code" = 409 && grep -q "VNIs of its previous run are still quarantined" r147 &&
    { node_agent n1 prolog --job 147 2>err; test $? = 1; } && cat err &&
    grep -q "the broker has job 147 as an ended run" err &&
    ! svc_with_vni "$vni" 0 && ! svc_with_vni "$vni" 1 &&
    { as_user 1000 "$FMB_BIN/fmbroker-cxi" -c "$T/node.conf" --state-dir "$T/n1.rec" env --job 147 \
        >out 2>err; test $? = 1; } && test ! -s out && grep -q "as an ended run" err
'
expect_ok 'the node is back and reports: the requeued run starts' '
    node_agent n2 epilog --job 147 && test "$(vni_state)" = "[]" &&
    rm_call PUT /v1/jobs/147 "{\"uid\":1000,\"nodes\":[\"n1\",\"n3\"]}" | jq -e ".state == \"active\"" &&
    node_agent n1 prolog --job 147 &&
    as_user 1000 "$FMB_BIN/fmbroker-cxi" -c "$T/node.conf" --state-dir "$T/n1.rec" env --job 147 >env147.sh &&
    grep -q "^export SLINGSHOT_VNIS=" env147.sh
'
# A configuration push leaves the node's agent token readable by all
# (mode 0644): the agent will not send it.  The epilog still destroys the
# job's services (nothing it does on the node needs the broker) and keeps
# its report until the token is fixed; a prolog fails the job, saying why.
expect_ok 'a token file that is not private: the epilog still destroys and keeps its report' '
    rm_call PUT /v1/jobs/148 "{\"uid\":1000,\"nodes\":[\"n1\"]}" >run148.json &&
    vni=$(jq ".vnis[0]" run148.json) && node_agent n1 prolog --job 148 && svc_with_vni "$vni" 0 &&
    rm_call DELETE /v1/jobs/148 >/dev/null && chmod 644 "$T/agent.token" &&
    node_agent n1 epilog --job 148 2>err; rc=$?; cat err; chmod 600 "$T/agent.token"; test $rc = 0 &&
    ! svc_with_vni "$vni" 0 && ! svc_with_vni "$vni" 1 &&
    grep -q "reporting .destroyed. to the broker failed: \[api\] client_token_file: .*agent.token" err &&
    test "$(vni_state)" = "[[\"quarantined\",[\"n1\"]]]" &&
    node_agent n1 report --pending && test "$(vni_state)" = "[]"
'
# ... and that job's epilog, with no record on the node and no broker to
# ask, knows nothing was made there: exit 0, no drain (before, a bad
# token drained every node that ran a job).
expect_ok 'a token file that is not private: the prolog fails the job and says why; its epilog drains nothing' '
    rm_call PUT /v1/jobs/149 "{\"uid\":1000,\"nodes\":[\"n1\"]}" >/dev/null &&
    chmod 644 "$T/agent.token" && { node_agent n1 prolog --job 149 2>err; rc=$?; } &&
    { node_agent n1 epilog --job 149 2>eerr; erc=$?; }; chmod 600 "$T/agent.token" &&
    cat err eerr && test $rc = 1 && grep -q "client_token_file: .*agent.token" err &&
    test $erc = 0 && grep -q "no record of the job on this node: nothing to destroy" eerr &&
    rm_call DELETE /v1/jobs/149 >/dev/null
'
done_testing
