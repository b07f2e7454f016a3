#!/bin/bash
# t1080-tcp-tls.sh: the optional TCP listener: TLS, and static bearer
# tokens from a 0600 file decide the role; a job's session token still
# works for that job's steps.
. "$(dirname "$0")/lib.sh"
sh "$FMB_SRC/tests/integration/make-certs.sh" "$T/certs" >/dev/null
rm_tok=rm-token-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \n")
admin_tok=admin-token-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \n")
agent_tok=agent-token-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \n")
printf "# role token\nrm %s\nadmin %s\nagent %s\n" "$rm_tok" "$admin_tok" "$agent_tok" >"$T/tokens"
chmod 600 "$T/tokens"
shared_agent_token=1 # this file tests the shared agent token (an opt-in)
start_mockfm
tcall () { # TOKEN METHOD PATH [BODY]: "STATUS BODY" over TLS
    out=$(curl -s --cacert "$T/certs/ca.pem" ${1:+-H "Authorization: Bearer $1"} -X "$2" \
        ${4:+--data-binary "$4"} -w '\n%{http_code}' "https://127.0.0.1:$tcp_port$3")
    echo "${out##*$'\n'} ${out%$'\n'*}"
}

expect_ok 'the broker listens on TLS with the tokens file' '
    for try in 1 2 3 4 5; do
        tcp_port=$(free_ports 1) || return 1
        write_broker_conf "[api]" "tcp = 127.0.0.1:$tcp_port" "tls_cert = $T/certs/server.pem" \
            "tls_key = $T/certs/server.key" "tokens_file = $T/tokens"
        start_broker && break
    done &&
    test "$(tcall "" GET /v1/health | cut -d" " -f1)" = 200 &&
    test "$(tcall "" GET /v1/status | cut -d" " -f1)" = 401
'
expect_ok 'without a valid token, RUN is 401' '
    test "$(tcall "" PUT /v1/jobs/1 "{\"uid\":1,\"node_count\":2}" | cut -d" " -f1)" = 401 &&
    test "$(tcall "guess" PUT /v1/jobs/1 "{\"uid\":1,\"node_count\":2}" | cut -d" " -f1)" = 401 &&
    test "$(tcall "${rm_tok}x" GET /v1/jobs | cut -d" " -f1)" = 401
'
expect_ok 'the rm token runs jobs; only the admin token forces' '
    tcall "$rm_tok" PUT /v1/jobs/1 "{\"uid\":1,\"nodes\":[\"a\",\"b\"]}" >r &&
    test "$(cut -d" " -f1 r)" = 201 &&
    cut -d" " -f2- r | jq -r .hwcoll.session_token >jobtok &&
    test "$(tcall "$rm_tok" POST /v1/reconcile | cut -d" " -f1)" = 403 &&
    test "$(tcall "$admin_tok" POST /v1/reconcile | cut -d" " -f1)" = 202
'
expect_ok 'the job'"'"'s session token cleans its steps over TCP too' '
    test "$(tcall "$(cat jobtok)" DELETE "/v1/jobs/1/steps/0?wait=5" | cut -d" " -f1)" = 200 &&
    test "$(tcall "$(cat jobtok)" DELETE /v1/jobs/1 | cut -d" " -f1)" = 403
'
# A compute node: no broker socket, only [api] broker_url and a token.
node_conf () { # TOKEN_FILE
    printf "[api]\nsocket = %s\nbroker_url = https://127.0.0.1:%s\nclient_token_file = %s\nclient_ca_file = %s\n" \
        "$T/no-such.sock" "$tcp_port" "$1" "$T/certs/ca.pem" >"$T/node.conf"
}
node_agent () { # NODE ARGS...
    n=$1
    shift
    MOCKCXI_STATE="$T/$n.cxi.json" MOCKCXI_DEVICES=2 "$FMB_BIN/fmbroker-cxi" -c "$T/node.conf" \
        --libcxi "$FMB_BIN/../mockcxi/new/libcxi.so.1" --state-dir "$T/$n.rec" --node "$n" "$@"
}
expect_ok 'an agent token reads jobs, reports nodes and cleans steps, and nothing more' '
    test "$(tcall "$agent_tok" GET /v1/jobs/1 | cut -d" " -f1)" = 200 &&
    test "$(tcall "$agent_tok" GET "/v1/jobs?state=active" | cut -d" " -f1)" = 200 &&
    test "$(tcall "$agent_tok" PUT /v1/jobs/9 "{\"uid\":1,\"node_count\":2}" | cut -d" " -f1)" = 403 &&
    test "$(tcall "$agent_tok" DELETE /v1/jobs/1 | cut -d" " -f1)" = 403 &&
    test "$(tcall "$agent_tok" DELETE /v1/jobs/1/steps/7 | cut -d" " -f1)" = 202 &&
    test "$(tcall "$agent_tok" GET /v1/events | cut -d" " -f1)" = 403
'
expect_ok 'on a node without the socket, the agent works through broker_url' '
    printf "%s\n" "$agent_tok" >"$T/agent.token" && chmod 600 "$T/agent.token" &&
    node_conf "$T/agent.token" &&
    tcall "$rm_tok" PUT /v1/jobs/20 "{\"uid\":1000,\"nodes\":[\"a\",\"b\"]}" >r20 &&
    test "$(cut -d" " -f1 r20)" = 201 &&
    node_agent a prolog --job 20 && node_agent b prolog --job 20 &&
    jq -e "[.devices[].services[] | select(.id >= 2)] | length == 2" "$T/a.cxi.json" &&
    node_agent a env --job 20 --format json >env.json &&
    jq -e ".SLINGSHOT_VNIS != null and (.FI_CXI_COLL_MCAST_TOKEN | length >= 32)" env.json &&
    v=$(cut -d" " -f2- r20 | jq -r ".vnis[0]") &&
    tcall "$rm_tok" DELETE /v1/jobs/20 >/dev/null &&
    node_agent a epilog --job 20 &&
    tcall "$rm_tok" GET /v1/vnis | cut -d" " -f2- | jq -e --argjson v "$v" "any(.vnis[]; .vni == \$v and .state == \"quarantined\")" &&
    node_agent b epilog --job 20 &&
    tcall "$rm_tok" GET /v1/vnis | cut -d" " -f2- | jq -e --argjson v "$v" "all(.vnis[]; .vni != \$v)"
'
# Slurm's launch setup: every node's prolog makes the job's RUN
# with the agent token (no PrologSlurmctld), where [api] agent_run allows.
run_req='{"uid":1000,"user":"u1","nodes":"a,b","ncores":2}'
expect_ok 'prolog --run: refused without [api] agent_run, saying so on its last line' '
    { node_agent a prolog --job 31 --run "$run_req" 2>err; test $? = 1; } &&
    tail -n 1 err | grep -q "^fmbroker-cxi: error: job 31: the broker did not RUN the job: .* 403 .*agent_run = true" &&
    test "$(tcall "$rm_tok" GET /v1/jobs/31 | cut -d" " -f1)" = 404
'
expect_ok '... with it, both nodes RUN the same job and get its services; CLEANUP as usual' '
    stop_broker && write_broker_conf "[api]" "tcp = 127.0.0.1:$tcp_port" "tls_cert = $T/certs/server.pem" \
        "tls_key = $T/certs/server.key" "tokens_file = $T/tokens" "agent_run = true" && start_broker &&
    node_agent a prolog --job 31 --run "$run_req" && node_agent b prolog --job 31 --run "$run_req" &&
    tcall "$rm_tok" GET /v1/jobs/31 | cut -d" " -f2- >j31 &&
    jq -e ".uid == 1000 and .user == \"u1\" and .nodes == [\"a\",\"b\"] and .state == \"active\"" j31 &&
    for n in a b; do
        jq -e "[.devices[].services[] | select(.id >= 2 and .member0.id == 1000)] | length == 2" "$T/$n.cxi.json" || return 1
    done &&
    tcall "$rm_tok" DELETE /v1/jobs/31 >/dev/null && node_agent a epilog --job 31 && node_agent b epilog --job 31 &&
    stop_broker && write_broker_conf "[api]" "tcp = 127.0.0.1:$tcp_port" "tls_cert = $T/certs/server.pem" \
        "tls_key = $T/certs/server.key" "tokens_file = $T/tokens" && start_broker
'
expect_ok 'the CLI on a node uses broker_url too' '
    "$FMB_BIN/fmbroker" -c "$T/node.conf" --json job show 20 | jq -e ".id == \"20\"" &&
    { "$FMB_BIN/fmbroker" -c "$T/node.conf" run-job 21 --uid 1 --node-count 2 2>err; test $? = 1; } &&
    grep -q "403" err
'
expect_ok 'a user who may not read the client token still cleans their steps' '
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
        chmod 755 "$T" && chmod 644 "$T/node.conf" && install -m 755 "$FMB_BIN/fmbroker" "$T/fmbroker" &&
        as_user 1000 env FI_CXI_COLL_MCAST_TOKEN="$(cat jobtok)" \
            "$T/fmbroker" -c "$T/node.conf" step-clean 1 7 | grep -q "step 7: cleaned" &&
        # 3: a configuration problem (no token this user may read), no retry
        { as_user 1000 "$T/fmbroker" -c "$T/node.conf" job show 1 2>err; test $? = 3; } &&
        grep -q "client_token_file.*this user may not read it" err
    else
        echo "skipped: needs root and setpriv"
    fi
'
# (A token others can read is never sent: each call that needs it fails,
# saying why; what needs no broker -- list, an epilog's destroying -- runs.)
expect_ok 'a client token file others can read, or a broker_url without one, is refused' '
    chmod 644 "$T/agent.token" &&
    { node_agent a clean --dry-run 2>err; rc=$?; chmod 600 "$T/agent.token"; test $rc = 1; } &&
    grep -q "client_token_file.*lets group or others read it" err && grep -q "not touching any service" err &&
    # status, a monitoring check: a configuration error is UNKNOWN (3)
    printf "[api]\nbroker_url = https://127.0.0.1:1\n" >"$T/bad.conf" &&
    { "$FMB_BIN/fmbroker" -c "$T/bad.conf" status 2>err; test $? = 3; } &&
    grep -q "broker_url.*needs client_token_file" err &&
    printf "[api]\nbroker_url = http://127.0.0.1:1\nclient_token_file = %s\n" "$T/agent.token" >"$T/bad.conf" &&
    { "$FMB_BIN/fmbroker" -c "$T/bad.conf" status 2>err; test $? = 3; } &&
    grep -q "broker_url.*not an https URL" err
'
expect_ok 'a broker whose certificate the node does not trust is not talked to' '
    sh "$FMB_SRC/tests/integration/make-certs.sh" "$T/other-ca" >/dev/null &&
    sed -i "s|^client_ca_file = .*|client_ca_file = $T/other-ca/ca.pem|" "$T/node.conf" &&
    { node_agent a clean --dry-run 2>err; test $? = 1; } && grep -qi "certificate\\|SSL" err && grep -q "not touching any service" err
'
# A certificate renewed in place (same paths): the listener keeps what
# it loaded at start, so a reload must say a restart is needed, not log
# "applied" and go on serving the old one until it expires.
expect_ok 'a TLS certificate renewed in place: reload says it takes effect at the next restart' '
    sh "$FMB_SRC/tests/integration/make-certs.sh" "$T/renewed" >/dev/null &&
    n=$(grep -c "reload:" "$T/broker.err" || :) && kill -HUP "$broker_pid" &&
    wait_for 100 0.05 eval "test \$(grep -c \"reload:\" \"$T/broker.err\") -gt $n" &&
    ! grep -q "tls_cert .* changed on disk" "$T/broker.err" &&
    cp "$T/renewed/server.pem" "$T/certs/server.pem" && kill -HUP "$broker_pid" &&
    wait_for 100 0.05 grep -q "reload: \[api\] tls_cert $T/certs/server.pem changed on disk (renewed?); the broker serves the one it started with until the next restart" "$T/broker.err" &&
    ! grep -q "tls_key .* changed on disk" "$T/broker.err" &&
    test "$(tcall "" GET /v1/health | cut -d" " -f1)" = 200
'
expect_ok 'plain HTTP on the TLS port gets nowhere' '
    ! curl -sf --max-time 5 "http://127.0.0.1:$tcp_port/v1/status"
'
expect_ok 'a tokens file others can read stops start-up as a configuration error (2)' '
    stop_broker && chmod 644 "$T/tokens" &&
    { timeout 10 "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" 2>err; test $? -eq 2; } &&
    grep -q "tokens_file.*lets group or others read it" err
'
expect_ok 'tokens never reach the log' '
    ! grep -F -e "$rm_tok" -e "$admin_tok" -e "$agent_tok" -e "$(cat jobtok)" "$T/broker.err"
'
done_testing
