#!/bin/bash
# t1080-tcp-tls.sh: the optional TCP listener: TLS, and static bearer
# tokens from a 0600 file decide the role; a job's session token still
# works for that job's steps.
. "$(dirname "$0")/lib.sh"
sh "$FMB_SRC/tests/integration/make-certs.sh" "$T/certs" >/dev/null
rm_tok=rm-token-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \n")
admin_tok=admin-token-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \n")
printf "# role token\nrm %s\nadmin %s\n" "$rm_tok" "$admin_tok" >"$T/tokens"
chmod 600 "$T/tokens"
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
    test "$(tcall "" GET /v1/status | cut -d" " -f1)" = 200
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
expect_ok 'plain HTTP on the TLS port gets nowhere' '
    ! curl -sf --max-time 5 "http://127.0.0.1:$tcp_port/v1/status"
'
expect_ok 'a tokens file others can read stops start-up' '
    stop_broker && chmod 644 "$T/tokens" &&
    { timeout 10 "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" 2>err; test $? -eq 1; } &&
    grep -q "tokens_file.*lets group or others read it" err
'
expect_ok 'tokens never reach the log' '
    ! grep -F -e "$rm_tok" -e "$admin_tok" -e "$(cat jobtok)" "$T/broker.err"
'
done_testing
