#!/bin/bash
# t1100-soak.sh: random job traffic, random FM faults and broker restarts
# for SOAK_SECONDS (30 in the suite; SOAK_SECONDS=300 for the documented
# long run).  Then: nothing leaked at the FM, no VNI shared, and over a
# final phase without restarts the broker's memory and open files did not
# grow.  Every loop is bounded in time and stops by itself.
. "$(dirname "$0")/lib.sh"
SOAK_SECONDS=${SOAK_SECONDS:-30}
reserve_ms=500 timeout_ms=1000
start_mockfm --latency 5
# Under ASan, resident memory says little (quarantine, allocator caches,
# shadow): there the last step's LeakSanitizer check stands in for it.
asan=false
ldd "$FMB_BIN/fmbrokerd" | grep -q libasan && asan=true
# A small FM connection pool: its filling up is growth we expect.
write_broker_conf "[fabric_manager]" "max_connections = 4"
start_broker
faults=(500 503 409 429 garbage wrong_types truncate drop delay=700)
paths=("GET /fabric/collectives/jobs/c1-*" "POST /fabric/collectives/jobs" "PATCH /fabric/collectives/jobs/*"
       "DELETE /fabric/collectives/jobs/*" "GET /fabric/collectives/jobs/")
active=" "
next=1
rss () { awk '/^VmRSS/ {print $2}' "/proc/$broker_pid/status"; }
nfds () { ls "/proc/$broker_pid/fd" | wc -l; }
pick () { # a random active job
    local a=($active)
    [ ${#a[@]} -gt 0 ] && echo "${a[RANDOM % ${#a[@]}]}"
}
traffic () { # one random action; repeated RM calls are harmless (idempotent)
    case $((RANDOM % 10)) in
    0|1|2|3)
        rm_call PUT /v1/jobs/$next "{\"uid\":$((RANDOM % 5 + 1000)),\"node_count\":$((RANDOM % 4 + 1)),\"hwcoll\":\"on\"}" >/dev/null &&
            active="$active$next "
        next=$((next + 1)) ;;
    4|5|6)
        j=$(pick) && rm_call DELETE /v1/jobs/$j >/dev/null && active=${active/ $j / } ;;
    7)
        j=$(pick) && rm_call DELETE "/v1/jobs/$j/steps/$RANDOM" >/dev/null ;;
    8)
        mockfm_ctl POST /_mock/faults "${paths[RANDOM % ${#paths[@]}]} ${faults[RANDOM % ${#faults[@]}]} p0.5 x$((RANDOM % 3 + 1))" ;;
    9)
        rm_call POST /v1/reconcile >/dev/null ;;
    esac
    return 0
}
# all_jobs QUERY: every page of GET /v1/jobs?QUERY, one job per line.
# (A long soak has more than the 1000 active jobs one page can hold.)
all_jobs () {
    local after= page
    while :; do
        page=$(rm_call GET "/v1/jobs?$1&limit=1000${after:+&after=$after}") || return 1
        echo "$page" | jq -c '.jobs[]'
        after=$(echo "$page" | jq -r '.next_after // empty')
        [ -n "$after" ] || return 0
    done
}
consistent () {
    want=$(all_jobs state=active |
        jq -r 'select(.hwcoll.state == "reserved") | .hwcoll.fm_job_id' | sort | tr '\n' ' ')
    got=$(mockfm_jobs | sort | tr '\n' ' ')
    [ "$want" = "$got" ] && [ "$(rm_call GET /v1/status | jq .outbox.depth)" = 0 ]
}
show_state () { # what a failed step needs explained
    consistent
    echo "broker holds reserved: $want"
    echo "FM holds:              $got"
    rm_call GET /v1/status | jq -c '{outbox, fabric_manager}'
    tail -n 20 "$T/broker.err"
}
step_fail_hook=show_state

expect_ok "traffic, faults and kill -9 for $((SOAK_SECONDS * 6 / 10)) s" '
    end=$((SECONDS + SOAK_SECONDS * 6 / 10)) restarts=0
    while [ $SECONDS -lt $end ]; do
        for i in 1 2 3 4 5 6 7 8 9 10; do traffic; done
        if [ $((RANDOM % 8)) = 0 ]; then kill_broker; start_broker || return 1; restarts=$((restarts + 1)); fi
    done
    echo "restarts: $restarts, jobs: $((next - 1))"
    test $((next - 1)) -gt 20
'
expect_ok "traffic and faults without restarts for $((SOAK_SECONDS * 4 / 10)) s: no growth" '
    for i in $(seq 200); do traffic; done
    rss0=$(rss) fds0=$(nfds) end=$((SECONDS + SOAK_SECONDS * 4 / 10))
    while [ $SECONDS -lt $end ]; do traffic; done
    mockfm_ctl DELETE /_mock/faults && wait_for 300 0.1 consistent &&
    rss1=$(rss) fds1=$(nfds) &&
    echo "rss ${rss0}->${rss1} kB, fds ${fds0}->${fds1}" &&
    { $asan || test "$rss1" -le $((rss0 + rss0 / 5 + 2048)); } && test "$fds1" -le $((fds0 + 4 + 2))
'
expect_ok 'at the end: the FM holds exactly the live reservations; no VNI is shared' '
    wait_for 300 0.1 consistent &&
    all_jobs state=active | jq -s -e "[.[] | .vnis[]] | length == (unique | length)" &&
    "$FMB_BIN/fmbroker" --socket "$T/api.sock" --json vni list | jq -e "[.vnis[].vni] | length == (unique | length)"
'
expect_ok 'the broker stops cleanly (under ASan: LeakSanitizer finds no leak)' '
    kill -TERM "$broker_pid" && wait "$broker_pid"; rc=$?; broker_pid=; test $rc = 0
'
done_testing
