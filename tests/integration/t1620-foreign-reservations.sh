#!/bin/bash
# t1620-foreign-reservations.sh: promise 9, a broker never deletes an FM
# reservation it has no record of creating.  Two brokers configured with
# the same cluster_name and separate state share one FM and reconcile
# every second: neither deletes the other's reservations, and each still
# releases its own.
. "$(dirname "$0")/lib.sh"
start_mockfm
reconcile_s=1 write_broker_conf
body='{"uid":1000,"nodes":["n1","n2"]}'
b_call () { # METHOD PATH [BODY]: the second broker
    curl -sf --max-time 20 --unix-socket "$T/b.sock" -X "$1" ${3+--data-binary "$3"} "http://fmbroker$2"
}
start_b () {
    "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" --set broker.state_dir="$T/stateB" \
        --set api.socket="$T/b.sock" 2>>"$T/b.err" &
    b_pid=$!
    wait_for 100 0.05 b_call GET /v1/health >/dev/null
}
stop_b () { [ -n "${b_pid:-}" ] && kill "$b_pid" 2>/dev/null && wait "$b_pid" 2>/dev/null; b_pid=; }
on_exit stop_b
count_events () { jq "[.events[] | select(.type == \"foreign_reservation\")] | length"; }

expect_ok 'two brokers, one cluster_name, separate state, one FM' '
    start_broker && start_b &&
    rm_call GET /v1/status | jq -e ".cluster == \"c1\"" &&
    b_call GET /v1/status | jq -e ".cluster == \"c1\""
'
expect_ok 'each reserves for its own jobs' '
    for j in a1 a2 a3; do rm_call PUT /v1/jobs/$j "$body" | jq -e ".hwcoll.state == \"reserved\"" || return 1; done &&
    for j in b1 b2 b3; do b_call PUT /v1/jobs/$j "$body" | jq -e ".hwcoll.state == \"reserved\"" || return 1; done
'
expect_ok 'several reconciliation passes later, nobody lost a reservation' '
    r0=$(rm_call GET /metrics | awk "/^fmbroker_reconcile_runs_total/ {print \$2}") &&
    wait_for 100 0.1 sh -c "test \$(curl -sf --unix-socket $T/api.sock http://fmbroker/metrics | awk \"/^fmbroker_reconcile_runs_total/ {print \\\$2}\") -ge $((r0 + 3))" &&
    rm_call POST /v1/reconcile >/dev/null && b_call POST /v1/reconcile >/dev/null && sleep 1 &&
    for j in a1 a2 a3 b1 b2 b3; do mockfm_has_job c1-$j || { echo "c1-$j deleted"; return 1; }; done &&
    for j in a1 a2 a3; do rm_call GET /v1/jobs/$j | jq -e ".state == \"active\"" || return 1; done &&
    for j in b1 b2 b3; do b_call GET /v1/jobs/$j | jq -e ".state == \"active\"" || return 1; done &&
    ! grep -q "DELETE /fabric/collectives/jobs/" "$T/fm.log"
'
expect_ok 'each reported the other'"'"'s reservations as foreign, once each' '
    rm_call GET "/v1/events?after=0" >ea.json && test "$(count_events <ea.json)" = 3 &&
    jq -e "[.events[] | select(.type == \"foreign_reservation\") | .detail.fm_job_id] | sort == [\"c1-b1\",\"c1-b2\",\"c1-b3\"]" ea.json &&
    b_call GET "/v1/events?after=0" >eb.json && test "$(count_events <eb.json)" = 3 &&
    jq -e "[.events[] | select(.type == \"foreign_reservation\") | .detail.fm_job_id] | sort == [\"c1-a1\",\"c1-a2\",\"c1-a3\"]" eb.json &&
    rm_call GET /metrics | grep -qx "fmbroker_foreign_reservations 3"
'
expect_ok 'each still releases its own, and the other'"'"'s stay' '
    rm_call DELETE /v1/jobs/a3 >/dev/null && b_call DELETE /v1/jobs/b3 >/dev/null &&
    wait_for 100 0.1 mockfm_lacks_job c1-a3 && wait_for 100 0.1 mockfm_lacks_job c1-b3 &&
    sleep 2 &&
    for j in a1 a2 b1 b2; do mockfm_has_job c1-$j || { echo "c1-$j deleted"; return 1; }; done &&
    wait_for 100 0.1 sh -c "curl -sf --unix-socket $T/api.sock http://x/metrics | grep -qx \"fmbroker_foreign_reservations 2\""
'
done_testing
