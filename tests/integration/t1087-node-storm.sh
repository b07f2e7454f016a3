#!/bin/bash
# t1087-node-storm.sh: issue 49, what a full-machine job's nodes meet,
# each step as a node does it over TLS with its own token.  A node's RUN
# names the job's nodes as Slurm gives them (a hostlist, a few bytes for
# 10,000 nodes) and gets its own view back, not the list of every node;
# the job's other nodes send the same bytes and get the same job; a node
# outside it is refused on that path too.  A node's authenticated
# connection stays open while idle (the resident node service's: no
# handshake at the next launch), one without a credential does not; a
# node that reconnects resumes its TLS session, and a client
# certificate still names its node on a resumed session.  An idle kept
# connection is parked (its TLS socket only: one descriptor, not three)
# and its next request is served as the node's, by token or by
# certificate.  A peer that never reads its answers is cut once nothing
# moves, and costs no CPU meanwhile; one that reads slowly is not cut.
# The storm
# itself (1,000-10,000 nodes) is bench/storm.sh's: no timing here.
. "$(dirname "$0")/lib.sh"
skip_unless_root
tls_and_node_tokens || bail_out "no certificates"
start_mockfm
start_broker_for_nodes n1 n2 n3 n4 -- "agent_run = true" "request_timeout_ms = 1000" ||
    bail_out "no broker"
probe () { python3 "$FMB_SRC/tests/integration/tlsprobe.py" "$tcp_port" "$T/certs/ca.pem" "$@"; }
# ncall NODE METHOD PATH [BODY]: "STATUS BODY" over TLS with NODE's token
ncall () {
    local tok out
    tok=$(cat "$T/$1.token")
    out=$(curl -s --cacert "$T/certs/ca.pem" -H "Authorization: Bearer $tok" -X "$2" \
        ${4:+--data-binary "$4"} -w '\n%{http_code}' "https://127.0.0.1:$tcp_port$3")
    echo "${out##*$'\n'} ${out%$'\n'*}"
}
run_body='{"uid":1001,"nodes":"n[1-3]","hwcoll":"auto"}'

expect_ok 'a node RUNs the job by its hostlist: the job has every node, the node sees its own view' '
    ncall n1 PUT /v1/jobs/700 "$run_body" >r && test "$(cut -d" " -f1 r)" = 201 &&
    cut -d" " -f2- r | jq -e "(has(\"nodes\") | not) and .node_count == 3 and (.vnis | length) == 1" &&
    test "$(job_field 700 ".nodes | join(\",\")")" = n1,n2,n3 &&
    test "$(job_field 700 "[.node_reports[].node] | join(\",\")")" = n1,n2,n3
'
expect_ok 'the other nodes send the same bytes: the same job, each its own view' '
    vnis=$(job_field 700 ".vnis | join(\",\")") &&
    for n in n2 n3; do
        ncall $n PUT /v1/jobs/700 "$run_body" >r && test "$(cut -d" " -f1 r)" = 200 &&
        cut -d" " -f2- r | jq -e "(has(\"nodes\") | not) and (.vnis | join(\",\")) == \"$vnis\"" >/dev/null &&
        cut -d" " -f2- r | jq -e ".hwcoll.session_token | length > 16" >/dev/null || return 1
    done
'
expect_ok 'a node outside the job sending those bytes is refused, and logged' '
    test "$(ncall n4 PUT /v1/jobs/700 "$run_body" | cut -d" " -f1)" = 403 &&
    grep -q "refused node n4 (127.0.0.1): job 700: may RUN only a job whose node list names it" "$T/broker.err"
'
expect_ok 'a different request for the same job is still a conflict' '
    test "$(ncall n1 PUT /v1/jobs/700 "{\"uid\":1001,\"nodes\":\"n[1-4]\",\"hwcoll\":\"auto\"}" | cut -d" " -f1)" = 409 &&
    test "$(ncall n1 PUT /v1/jobs/700 "{\"uid\":1002,\"nodes\":\"n[1-3]\",\"hwcoll\":\"auto\"}" | cut -d" " -f1)" = 409
'
expect_ok 'the same job RUN by the RM with the list expanded is the same request' '
    test "$(api_call PUT /v1/jobs/700 "{\"uid\":1001,\"nodes\":[\"n1\",\"n2\",\"n3\"],\"hwcoll\":\"auto\"}" | cut -d" " -f1)" = 200
'
expect_ok 'a hostlist that is not one is refused with why' '
    ncall n1 PUT /v1/jobs/701 "{\"uid\":1001,\"nodes\":\"n[3-1]\"}" >r && test "$(cut -d" " -f1 r)" = 400 &&
    cut -d" " -f2- r | jq -r .detail | grep -q "^nodes: "
'
expect_ok 'a node'"'"'s authenticated connection stays open while idle, past request_timeout_ms' '
    test "$(probe idle "$(cat "$T/n1.token")" 2.5)" = kept
'
expect_ok 'a connection that showed no credential is closed when idle' '
    test "$(probe idle - 2.5)" = closed
'
expect_ok 'a node that reconnects resumes its TLS session (no certificate signature), and is still itself' '
    test "$(probe resume "$(cat "$T/n1.token")")" = "resumed 200 200"
'
broker_ticks () { awk '{print $14 + $15}' "/proc/$broker_pid/stat"; }
held_from_probe () { ss -tnH state established "( sport = :$tcp_port )" | wc -l; }
none_held () { test "$(held_from_probe)" = 0; } # (for wait_for: counted at each try)
# quiet_while_held: the probe's connection is open, and the broker used
# at most 2 ticks of CPU over 0.3 s.  The broker first answers the
# pipelined backlog the socket buffers hold (a second or more under
# ASan), so "quiet" is waited for; a broker that spins on the stalled
# peer is never quiet while the connection is held, and it is cut
# request_timeout_ms after nothing moves: 3 s for this step (a
# restart), so a loaded host's slow tries still find the quiet in it.
quiet_while_held () {
    local a b
    test "$(held_from_probe)" = 1 && a=$(broker_ticks) && sleep 0.3 && b=$(broker_ticks) &&
        test "$(held_from_probe)" = 1 && quiet_ticks=$((b - a)) && test "$quiet_ticks" -le 2
}
# request_timeout_ms = MS, the broker restarted
request_timeout () { sed -i "s/^request_timeout_ms = .*/request_timeout_ms = $1/" "$T/broker.conf" && stop_broker && start_broker; }
stall_checks () {
    probe stall 30 >"$T/stall.out" & p=$! &&
    wait_for 150 0.1 grep -q "^sent" "$T/stall.out" && t0=$(broker_ticks) &&
    { wait_for 60 0 quiet_while_held; quiet=$?; } &&
    echo "broker: $(($(broker_ticks) - t0)) ticks answering the backlog;" \
        "last 0.3 s while held: ${quiet_ticks:-?} ticks; $(cat "$T/stall.out")" &&
    test "$quiet" = 0 &&
    wait_for 150 0.1 none_held && { kill "$p"; wait "$p"; true; }
}
expect_ok 'a peer that sends and never reads is cut once nothing moves for request_timeout_ms, and costs no CPU meanwhile' '
    request_timeout 3000 || return 1
    stall_checks
    rc=$?
    request_timeout 1000 && return $rc
'
expect_ok 'a peer that reads its answers slowly but steadily is not cut: bytes move' '
    probe slowread 3 >r && cat r && grep -q "^open: [1-9][0-9]* answers read" r
'
broker_fds () { ls "/proc/$broker_pid/fd" | wc -l; }
gauge () { rm_call GET /metrics | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'; }
parked_is () { test "$(gauge "fmbroker_tcp_connections{state=\"parked\"}")" = "$1"; }
# park_start N TOKEN [CERT KEY]: N connections made idle by tlsprobe
# (park), the broker's descriptors counted before; park_go "PATH BODY":
# each used again, the first for that PUT too; prints the probe's line
park_start () {
    rm -f "$T/park.go" "$T/park.out" &&
    { wait_for 50 0.1 none_held || { echo "still held: $(held_from_probe)"; false; }; } &&
    fds0=$(broker_fds) &&
    { probe park "$T/park.go" "$@" >"$T/park.out" 2>&1 & park_pid=$!; } &&
    { wait_for 100 0.1 grep -q "^idle" "$T/park.out" ||
        { echo "probe: $(cat "$T/park.out")"; kill "$park_pid"; false; }; }
}
park_go () { # (not in a pipeline: the probe is this shell's child)
    # renamed into place: the probe waits for the file to exist, and
    # could read it between its creation and its line (an empty PUT)
    echo "$1" >"$T/park.go.new" && mv "$T/park.go.new" "$T/park.go" &&
        wait "$park_pid" && tail -1 "$T/park.out" ||
        { echo "probe: $(cat "$T/park.out")" >&2; false; }
}
# parked N: the broker's gauge says N parked within 5 s (else says what)
parked () {
    wait_for 50 0.1 parked_is "$1" ||
        { echo "parked: $(gauge "fmbroker_tcp_connections{state=\"parked\"}"), not $1"; false; }
}
expect_ok 'idle kept connections are parked: about one broker descriptor each, not three' '
    park_start 24 "$(cat "$T/n1.token")" && parked 24 &&
    fds=$(broker_fds) && echo "broker fds: $fds0 before, $fds with 24 parked" &&
    test "$fds" -ge $((fds0 + 24)) && test "$fds" -le $((fds0 + 24 + 4))
'
expect_ok 'a parked connection serves its next requests as its node (token), with no new handshake' '
    hs0=$(gauge "fmbroker_tls_handshakes_total{resumed=\"false\"}") &&
    park_go "/v1/jobs/700 $run_body" >r && cat r &&
    grep -q "^again 24/24 put 200 " r && sed "s/^again [^ ]* put 200 //" r |
        jq -e "(has(\"nodes\") | not) and .node_count == 3" &&
    test "$(gauge "fmbroker_tls_handshakes_total{resumed=\"false\"}")" = "$hs0" &&
    test "$(gauge fmbroker_tcp_parks_total)" -ge 24
'
expect_ok 'a parked node outside the job is still refused as itself' '
    park_start 1 "$(cat "$T/n4.token")" && parked 1 &&
    park_go "/v1/jobs/700 $run_body" >r && grep -q "^again 1/1 put 403 " r
'
node_cert () { # NAME EKU: $T/certs/NAME.pem and .key, signed by the test CA
    (cd "$T/certs" && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$1" \
        -keyout "$1.key" -out "$1.csr" 2>/dev/null &&
        printf "extendedKeyUsage=%s\n" "$2" >"$1.ext" &&
        openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
            -extfile "$1.ext" -out "$1.pem" 2>/dev/null && chmod 600 "$1.key")
}
expect_ok 'with client certificates required: a resumed session still names its node' '
    node_cert n1 clientAuth && node_cert n2 serverAuth &&
    stop_broker &&
    printf "[api]\ntls_client_ca = %s\ntls_client_cert = required\n" "$T/certs/ca.pem" >>"$T/broker.conf" &&
    start_broker &&
    test "$(probe resume - "$T/certs/n1.pem" "$T/certs/n1.key")" = "resumed 200 200"
'
expect_ok 'a parked connection keeps its client certificate: with no token, still its node' '
    park_start 3 - "$T/certs/n1.pem" "$T/certs/n1.key" && parked 3 &&
    park_go "/v1/jobs/700 $run_body" >r && cat r && grep -q "^again 3/3 put 200 " r
'
expect_ok 'a certificate not meant for TLS clients (serverAuth only) names no node' '
    probe resume - "$T/certs/n2.pem" "$T/certs/n2.key" | grep -q " 401 401$" &&
    grep -q "extended key usage does not allow TLS client authentication (clientAuth)" "$T/broker.err"
'
expect_ok 'no token reaches the log' '
    ! grep -F -e "$(cat "$T/n1.token")" -e "$(cat "$T/n4.token")" "$T/broker.err"
'
done_testing
