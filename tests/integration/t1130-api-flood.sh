#!/bin/bash
# t1130-api-flood.sh: promise 7, no local user can starve the RM.  An
# unprivileged uid floods the Unix socket with connections that trickle a
# header byte every 2 s and never finish; meanwhile the RM's RUNs answer
# within reserve_timeout_ms and health within a second.  Bounded: 1100
# connections for 14 s.
. "$(dirname "$0")/lib.sh"
skip_unless_root
chmod 755 "$T"
flood="$FMB_SRC/tests/integration/flood.py"
start_mockfm
write_broker_conf
sed -i 's/^\[api\]$/[api]\nrequest_timeout_ms = 3000/' "$T/broker.conf"
start_broker
step_fail_hook () { tail -5 "$T/broker.err"; cat "$T/flood.out" 2>/dev/null; }
reserve_ms=2000
body='{"uid":1000,"nodes":["n1","n2"]}'

# ucurl UID PATH: "STATUS BODY" as that uid
ucurl () {
    _o=$(as_user "$1" curl -s --max-time 5 --unix-socket "$T/api.sock" -w '\n%{http_code}' "http://fmbroker$2")
    echo "${_o##*$'\n'} ${_o%$'\n'*}"
}
expect_ok 'a trickled request is cut at request_timeout_ms, however slow its bytes' '
    as_user 1000 /usr/bin/python3 "$flood" "$T/api.sock" 1 5 0.5 >one.out &&
    cat one.out && grep -q "closed_by_server [1-9]" one.out
'
as_user 1000 /usr/bin/python3 "$flood" "$T/api.sock" 1100 14 2 >"$T/flood.out" 2>&1 &
flood_pid=$!
stop_flood () { [ -n "${flood_pid:-}" ] && kill "$flood_pid" 2>/dev/null; wait "$flood_pid" 2>/dev/null; flood_pid=; }
on_exit stop_flood
sleep 3 # the flood has taken what it can

expect_ok 'during the flood, health answers within 1000 ms, even for another plain user' '
    r=$(rm_call_timed GET /v1/health) && echo "health: $r" &&
    test "${r% *}" = 200 && test "${r#* }" -lt 1000 &&
    out=$(ucurl 1001 /v1/health) && echo "uid 1001: $out" && test "${out%% *}" = 200
'
expect_ok 'during the flood, RM RUNs answer within reserve_timeout_ms' '
    for i in 1 2 3 4 5; do
        r=$(rm_call_timed PUT /v1/jobs/F$i "$body") && echo "RUN F$i: $r" &&
        test "${r% *}" = 201 && test "${r#* }" -lt $reserve_ms || return 1
        sleep 0.5
    done
'
expect_ok 'the flooding uid is held to max_connections_per_user and told so' '
    # its slots free now and then (each is cut at request_timeout_ms and
    # opened again): a few tries meet a full share
    for i in $(seq 20); do
        out=$(ucurl 1000 /v1/health) && echo "$out"
        test "${out%% *}" = 503 && break
        sleep 0.1
    done &&
    test "${out%% *}" = 503 && echo "${out#* }" | jq -e ".status == 503" &&
    grep "refusing connections from uid 1000" "$T/broker.err"
'
expect_ok 'the flood ends within its bound and the broker serves it normally again' '
    wait "$flood_pid"; flood_pid=; cat "$T/flood.out" &&
    wait_for 40 0.25 as_user 1000 curl -sf --max-time 2 --unix-socket "$T/api.sock" http://fmbroker/v1/health &&
    rm_call DELETE /v1/jobs/F1 >/dev/null
'
done_testing
