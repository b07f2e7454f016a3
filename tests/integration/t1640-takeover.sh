#!/bin/bash
# t1640-takeover.sh: a broker killed with SIGKILL during traffic, and a
# standby started on the same state directory (what Pacemaker does after
# moving the volume): it serves at once (the time is printed; the 1 s
# target is measured in bench/), every job answered active keeps its
# reservation at the FM, every CLEANUP answered before the kill completes,
# nothing leaks, and nothing is reported foreign.
. "$(dirname "$0")/lib.sh"
start_mockfm
reconcile_s=2 write_broker_conf
body='{"uid":1000,"nodes":["n1","n2"]}'
# traffic: RUN jobs t1..t60, and CLEANUP every third one after its RUN;
# each answer is logged as "METHOD JOB STATUS"
traffic () {
    for i in $(seq 1 60); do
        s=$(curl -s -o /dev/null -w "%{http_code}" --max-time 5 --unix-socket "$T/api.sock" \
            -X PUT --data-binary "$body" "http://fmbroker/v1/jobs/t$i")
        echo "PUT t$i $s" >>"$T/answers"
        if [ $((i % 3)) = 0 ]; then
            s=$(curl -s -o /dev/null -w "%{http_code}" --max-time 5 --unix-socket "$T/api.sock" \
                -X DELETE "http://fmbroker/v1/jobs/t$((i - 1))")
            echo "DELETE t$((i - 1)) $s" >>"$T/answers"
        fi
    done
}
fm_ids () { mockfm_jobs | grep "^c1-" | sort; }
active_reserved () { # the standby's active jobs holding a reservation, as FM ids
    rm_call GET "/v1/jobs?state=active&limit=1000" |
        jq -r '.jobs[] | select(.hwcoll.state == "reserved") | "c1-" + .id' | sort
}
outbox_empty () { rm_call GET /v1/status | jq -e ".outbox.depth == 0" >/dev/null; }
fm_matches_active () { test "$(fm_ids)" = "$(active_reserved)"; }

expect_ok 'the active broker serves, with released and active jobs' '
    start_broker &&
    for i in 1 2 3 4; do rm_call PUT /v1/jobs/a$i "$body" | jq -e ".hwcoll.state == \"reserved\"" || return 1; done &&
    rm_call DELETE /v1/jobs/a1 >/dev/null && wait_for 100 0.1 mockfm_lacks_job c1-a1
'
expect_ok 'SIGKILL in the middle of RUNs and CLEANUPs' '
    : >"$T/answers" && traffic & tpid=$!
    wait_for 200 0.02 sh -c "test \$(grep -c . $T/answers) -ge 25" &&
    old_pid=$broker_pid && kill -9 "$broker_pid" && wait "$broker_pid" 2>/dev/null; broker_pid=
    wait "$tpid"
    grep -c " 20[12]$" "$T/answers" && ! kill -0 "$old_pid" 2>/dev/null
'
expect_ok 'a standby started on the same state serves RUN at once' '
    t0=$(date +%s%N)
    "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" 2>>"$T/broker.err" &
    broker_pid=$!
    wait_for 400 0.01 sh -c "curl -sf --max-time 5 --unix-socket $T/api.sock -X PUT --data-binary '"'"'$body'"'"' http://fmbroker/v1/jobs/after >/dev/null" &&
    t1=$(date +%s%N) && echo "from start to a RUN answered: $(((t1 - t0) / 1000000)) ms" &&
    test $(((t1 - t0) / 1000000)) -lt 10000 &&
    rm_call GET /v1/status | jq -e --argjson p "$broker_pid" ".state_lock.pid == \$p"
'
expect_ok 'every job answered active before the kill keeps its reservation' '
    n=0 &&
    for j in $(awk "\$1 == \"PUT\" && \$3 == 201 {print \$2}" "$T/answers") a2 a3 a4; do
        grep -q "^DELETE $j " "$T/answers" && continue
        rm_call GET /v1/jobs/$j | jq -e ".state == \"active\" and .hwcoll.state == \"reserved\"" >/dev/null &&
            mockfm_has_job c1-$j || { echo "job $j lost its reservation"; return 1; }
        n=$((n + 1))
    done && echo "$n active jobs intact" && test "$n" -ge 3
'
expect_ok 'every CLEANUP answered before the kill completes at the FM' '
    for j in $(awk "\$1 == \"DELETE\" && \$3 == 202 {print \$2}" "$T/answers"); do
        wait_for 100 0.1 mockfm_lacks_job c1-$j || { echo "c1-$j not released"; return 1; }
        wait_for 50 0.1 sh -c "curl -sf --unix-socket $T/api.sock http://fmbroker/v1/jobs/$j | jq -e \".state == \\\"released\\\"\" >/dev/null" || return 1
    done
'
expect_ok 'nothing leaked: the FM holds exactly the active jobs'"'"' reservations' '
    rm_call POST /v1/reconcile >/dev/null &&
    wait_for 100 0.1 outbox_empty && wait_for 50 0.2 fm_matches_active ;
    diff <(fm_ids) <(active_reserved) &&
    ! rm_call GET "/v1/events?after=0" | jq -e "any(.events[]; .type == \"foreign_reservation\")"
'
done_testing
