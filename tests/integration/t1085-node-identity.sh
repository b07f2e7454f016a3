#!/bin/bash
# t1085-node-identity.sh: issue 35.  An attacker holds one compute node's
# credentials (n1's token, copied to another uid) and calls the broker
# over TLS, as the security review did: every action beyond n1 itself is
# refused (403, logged with the caller), what n1 may do still works, and
# a job RUN with only node_count keeps its VNIs for [vni] quarantine_s.
# Node keys rotate and nodes are revoked; one shared agent token is an
# explicit opt-in.
. "$(dirname "$0")/lib.sh"
skip_unless_root
tls_and_node_tokens || bail_out "no certificates"
start_mockfm
for try in 1 2 3 4 5; do
    tcp_port=$(free_ports 1) || break
    quarantine_s=4 write_broker_conf "[api]" "tcp = 127.0.0.1:$tcp_port" \
        "tls_cert = $T/certs/server.pem" "tls_key = $T/certs/server.key" \
        "tokens_file = $T/tokens" "agent_run = true"
    start_broker && break
done
node_tokens n1 n2 n3 victim01 || bail_out "no node tokens"
# The attacker: uid 1000 with a copy of n1's token, on the network (lib.sh).
attacker_with_n1_token || bail_out "no attacker"
refusals () { grep -c "api: refused node n1 (127.0.0.1)" "$T/broker.err" || :; }

expect_ok 'the rm runs job 100 on n2 and job 101 on n1 and n2' '
    rm_call PUT /v1/jobs/100 "{\"uid\":1001,\"nodes\":[\"n2\"]}" >/dev/null &&
    rm_call PUT /v1/jobs/101 "{\"uid\":1001,\"nodes\":[\"n1\",\"n2\"]}" >/dev/null &&
    job_field 100 .hwcoll.session_token | grep -q . && job_field 101 .hwcoll.state | grep -qx reserved
'
expect_ok 'with [api] agent_run, n1 may RUN only a job whose node list names n1' '
    test "$(status_of 1000 @stolen PUT /v1/jobs/500 "{\"uid\":1001,\"nodes\":[\"n2\"]}")" = 403 &&
    test "$(status_of 1000 @stolen PUT /v1/jobs/501 "{\"uid\":1001,\"node_count\":1}")" = 403 &&
    test "$(rm_call GET /v1/jobs/500 >/dev/null 2>&1; echo $?)" != 0 &&
    grep -q "api: refused node n1 (127.0.0.1): job 500: may RUN only a job whose node list names it" "$T/broker.err" &&
    status_of 1000 @stolen PUT /v1/jobs/502 "{\"uid\":1001,\"nodes\":[\"n1\",\"n2\"]}" | grep -qx "20[01]"
'
expect_ok 'a false report for another node (n2, job 100) is refused, logged, and changes nothing' '
    n=$(refusals) &&
    test "$(status_of 1000 @stolen PUT /v1/jobs/100/nodes/n2 "{\"cxi\":\"destroyed\"}")" = 403 &&
    test "$(status_of 1000 @stolen PUT /v1/jobs/100/nodes/n1 "{\"cxi\":\"created\"}")" = 403 &&
    test "$(rm_call GET /v1/jobs/100 | jq -r "[.node_reports[] | select(.node == \"n2\")][0].cxi")" = pending &&
    test "$(rm_call GET /v1/jobs/100 | jq "[.node_reports[] | select(.node == \"n1\")] | length")" = 0 &&
    test "$(refusals)" -ge $((n + 2)) &&
    grep -q "refused node n1 (127.0.0.1): job 100: may report only for itself, not for node n2" "$T/broker.err"
'
expect_ok 'n1 reads no session token of a job that does not run on it' '
    tcall 1000 @stolen GET "/v1/jobs?limit=1000" >r && test "$(cut -d" " -f1 r)" = 200 &&
    cut -d" " -f2- r | jq -e "[.jobs[] | select(.id == \"100\")][0] | (.hwcoll.session_token == null and .env.FI_CXI_COLL_MCAST_TOKEN == null)" &&
    test "$(status_of 1000 @stolen GET /v1/jobs/100)" = 403 &&
    test "$(status_of 1000 @stolen GET /v1/jobs/100/nodes/n2)" = 403 &&
    ! grep -F -q "$(job_field 100 .hwcoll.session_token)" r
'
# The whole job's node reports grow with its nodes: a node (or one who
# stole its token) asking for them in a loop would hold the broker's
# loop in proportion; it gets its own node's view instead.
expect_ok 'n1 asking for the whole of job 101 gets its own view: no node list, no other node'"'"'s report' '
    tcall 1000 @stolen GET /v1/jobs/101 >r && test "$(cut -d" " -f1 r)" = 200 &&
    cut -d" " -f2- r | jq -e "(.nodes == null) and ([.node_reports[] | .node] | all(. == \"n1\")) and (.vnis | length > 0)" &&
    rm_call GET /v1/jobs/101 | jq -e ".nodes != null and (.node_reports | type == \"array\")"
'
expect_ok 'n1 deletes no step of a job that does not run on it (no FM call)' '
    before=$(grep -c PATCH "$T/fm.log" || :) &&
    test "$(status_of 1000 @stolen DELETE /v1/jobs/100/steps/0)" = 403 &&
    test "$(grep -c PATCH "$T/fm.log" || :)" = "$before"
'
expect_ok 'n1 asks for no drain of another node' '
    test "$(status_of 1000 @stolen PUT /v1/jobs/101/nodes/victim01 "{\"cxi\":\"failed\"}")" = 403 &&
    ! rm_call GET "/v1/events?after=0" | jq -e ".events[] | select(.type == \"node_drain_requested\")" >/dev/null 2>&1
'
expect_ok 'n1 still does its own work: its job, its token, its steps, its reports' '
    tcall 1000 @stolen GET /v1/jobs/101/nodes/n1 >r && test "$(cut -d" " -f1 r)" = 200 &&
    cut -d" " -f2- r | jq -e ".hwcoll.session_token | length > 16" &&
    tcall 1000 @stolen GET "/v1/jobs?limit=1000" | cut -d" " -f2- |
        jq -e "[.jobs[] | select(.id == \"101\")][0].hwcoll.session_token | length > 16" &&
    test "$(status_of 1000 @stolen DELETE "/v1/jobs/101/steps/0?wait=5")" = 200 &&
    test "$(status_of 1000 @stolen PUT /v1/jobs/101/nodes/n1 "{\"cxi\":\"created\"}")" = 200 &&
    test "$(status_of 0 "$(cat "$T/n2.token")" PUT /v1/jobs/100/nodes/n2 "{\"cxi\":\"created\"}")" = 200
'
expect_ok 'a node that fails to destroy its own services asks for its own drain' '
    rm_call DELETE /v1/jobs/101 >/dev/null &&
    test "$(status_of 1000 @stolen PUT /v1/jobs/101/nodes/n1 "{\"cxi\":\"failed\",\"detail\":\"busy\"}")" = 200 &&
    rm_call GET "/v1/events?after=0" | jq -e "[.events[] | select(.type == \"node_drain_requested\") | .detail.node] == [\"n1\"]"
'
expect_ok 'a node token for another node, or altered, is not a credential (401)' '
    tok=$(cat "$T/n1.token") &&
    test "$(status_of 0 "node:n2:${tok##*:}" GET /v1/jobs/100)" = 401 &&
    case $tok in *0) bad=${tok%?}1 ;; *) bad=${tok%?}0 ;; esac && # altered, whatever its last digit
    test "$(status_of 0 "$bad" GET /v1/jobs/100)" = 401 &&
    test "$(status_of 0 "node:n1" GET /v1/jobs/100)" = 401
'
# The node agent over TLS with its own token; %n picks the node's file.
node_conf () {
    printf "[api]\nsocket = %s\nbroker_url = https://127.0.0.1:%s\nclient_token_file = %s\nclient_ca_file = %s\n" \
        "$T/no-such.sock" "$tcp_port" "$T/%n.token" "$T/certs/ca.pem" >"$T/node.conf"
}
node_agent () { # NODE ARGS...
    n=$1
    shift
    SLURMD_NODENAME=$n MOCKCXI_STATE="$T/$n.cxi.json" MOCKCXI_DEVICES=2 "$FMB_BIN/fmbroker-cxi" \
        -c "$T/node.conf" --libcxi "$FMB_BIN/../mockcxi/new/libcxi.so.1" \
        --state-dir "$T/$n.rec" --node "$n" "$@"
}
expect_ok 'agents with their own tokens run a job end to end; its VNIs leave quarantine' '
    node_conf &&
    rm_call PUT /v1/jobs/20 "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\"]}" >/dev/null &&
    node_agent n1 prolog --job 20 && node_agent n2 prolog --job 20 &&
    node_agent n1 env --job 20 --format json | jq -e ".FI_CXI_COLL_MCAST_TOKEN | length >= 32" &&
    v=$(job_field 20 ".vnis[0]") && rm_call DELETE /v1/jobs/20 >/dev/null &&
    node_agent n1 epilog --job 20 && node_agent n2 epilog --job 20 &&
    rm_call GET /v1/vnis | jq -e --argjson v "$v" "all(.vnis[]; .vni != \$v)"
'
expect_ok 'a job known only by node_count keeps its VNIs for quarantine_s whatever nodes report' '
    rm_call PUT /v1/jobs/200 "{\"uid\":1001,\"node_count\":3}" >/dev/null &&
    v=$(job_field 200 ".vnis[0]") && rm_call DELETE /v1/jobs/200 >/dev/null &&
    for n in n1 n2 n3; do
        test "$(status_of 0 "$(cat "$T/$n.token")" PUT /v1/jobs/200/nodes/$n "{\"cxi\":\"destroyed\"}")" = 200 || return 1
    done &&
    rm_call GET /v1/vnis | jq -e --argjson v "$v" "any(.vnis[]; .vni == \$v and .state == \"quarantined\" and .until_ms > 0)" &&
    wait_for 300 0.1 eval "rm_call GET /v1/vnis | jq -e --argjson v $v \"all(.vnis[]; .vni != \\\$v)\" >/dev/null"
'
expect_ok 'a revoked node is refused (401) and logged; the others are not' '
    sed -i "s/^tokens_file = .*/&\nrevoked_nodes = n3/" "$T/broker.conf" &&
    kill -HUP "$broker_pid" && wait_for 100 0.05 grep -q "reload: configuration" "$T/broker.err" &&
    rm_call PUT /v1/jobs/300 "{\"uid\":1001,\"nodes\":[\"n2\",\"n3\"]}" >/dev/null &&
    test "$(status_of 0 "$(cat "$T/n3.token")" GET /v1/jobs/300)" = 401 &&
    grep -q "refused node n3 (127.0.0.1): revoked (\[api\] revoked_nodes)" "$T/broker.err" &&
    test "$(status_of 0 "$(cat "$T/n2.token")" GET /v1/jobs/300)" = 200
'
expect_ok 'a rotated node key: the old tokens work for the grace period only' '
    cp "$T/n2.token" "$T/n2.old" && "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" --rotate-node-key >out &&
    grep -q "new node key" out && test "$(file_mode "$T/state/node.key.previous")" = 600 &&
    n=$(grep -c "reload: configuration" "$T/broker.err") && kill -HUP "$broker_pid" &&
    wait_for 200 0.05 eval "test \$(grep -c \"reload: configuration\" \"$T/broker.err\") -gt $n" &&
    node_tokens n2 && ! cmp -s "$T/n2.token" "$T/n2.old" &&
    test "$(status_of 0 "$(cat "$T/n2.token")" GET /v1/jobs/300)" = 200 &&
    test "$(status_of 0 "$(cat "$T/n2.old")" GET /v1/jobs/300)" = 200 &&
    grep -q "node n2 (127.0.0.1) uses a token of the previous node key" "$T/broker.err" &&
    sed -i "s/^tokens_file = .*/&\nnode_key_grace_s = 0/" "$T/broker.conf" &&
    n=$(grep -c "reload: configuration" "$T/broker.err") && kill -HUP "$broker_pid" &&
    wait_for 100 0.05 eval "test \$(grep -c \"reload: configuration\" \"$T/broker.err\") -gt $n" &&
    test "$(status_of 0 "$(cat "$T/n2.old")" GET /v1/jobs/300)" = 401 &&
    test "$(status_of 0 "$(cat "$T/n2.token")" GET /v1/jobs/300)" = 200
'
# Client certificates from the site's CA name the node (CN or a DNS name).
node_cert () { # NAME: $T/certs/NAME.pem and .key, signed by the test CA
    (cd "$T/certs" && openssl req -newkey rsa:2048 -nodes -subj "/CN=$1" -keyout "$1.key" -out "$1.csr" 2>/dev/null &&
        printf "extendedKeyUsage=clientAuth\n" >"$1.ext" &&
        openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
            -extfile "$1.ext" -out "$1.pem" 2>/dev/null && chmod 600 "$1.key")
}
ccall () { # CERT TOKEN METHOD PATH: the status, with a client certificate (or none)
    curl -s -o /dev/null -w "%{http_code}" --cacert "$T/certs/ca.pem" \
        ${1:+--cert "$T/certs/$1.pem" --key "$T/certs/$1.key"} ${2:+-H "Authorization: Bearer $2"} \
        -X "$3" "https://127.0.0.1:$tcp_port$4"
}
expect_ok 'tls_client_cert = required: a certificate names the node; no certificate, no credential' '
    node_cert n1 && node_cert n2 &&
    rm_call PUT /v1/jobs/400 "{\"uid\":1001,\"nodes\":[\"n1\"]}" >/dev/null &&
    stop_broker && sed -i "s/^node_key_grace_s = 0$/&\ntls_client_ca = $(echo "$T/certs/ca.pem" | sed "s|/|\\\\/|g")\ntls_client_cert = required/" "$T/broker.conf" &&
    start_broker && node_tokens n1 &&
    test "$(ccall n1 "" GET /v1/jobs/400)" = 200 &&
    test "$(ccall n2 "" GET /v1/jobs/400)" = 403 &&
    test "$(ccall "" "$(cat "$T/n1.token")" GET /v1/jobs/400)" = 401 &&
    test "$(ccall n2 "$(cat "$T/n1.token")" GET /v1/jobs/400)" = 401 &&
    test "$(ccall n1 "$(cat "$T/n1.token")" GET /v1/jobs/400)" = 200 &&
    grep -q "no client certificate (\[api\] tls_client_cert = required)" "$T/broker.err" &&
    grep -q "its node token names another node than its certificate" "$T/broker.err"
'
expect_ok 'one agent token for all nodes needs shared_agent_token = true, warned about' '
    printf "agent shared-agent-token-0123456789\n" >>"$T/tokens" &&
    { "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" --user root --check-config 2>err; test $? = 2; } &&
    grep -q "an .agent. token is one secret every compute node shares" err &&
    "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" --set api.shared_agent_token=true --user root --check-config 2>err &&
    grep -q "shared_agent_token = true: every compute node holds the same token" err
'
expect_ok 'no token reaches the log' '
    ! grep -F -e "$(cat "$T/n1.token")" -e "$(cat "$T/n2.token")" -e "$(cat "$T/n2.old")" -e "$rm_tok" "$T/broker.err" &&
    ! grep -F -e "$(sed -n 1p "$T/state/node.key")" "$T/broker.err"
'
done_testing
