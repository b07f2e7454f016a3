#!/bin/bash
# t1150-step-flood.sh: promise 7 for token holders.  A job's token holder
# (an unprivileged uid) sends a burst of distinct step cleanups: beyond the
# job's bucket they get 429 with Retry-After and reach neither the store
# nor the FM, while the RM's RUNs for other jobs keep their pace and the
# RM itself is not limited.  Bounded: 800 requests, 10 s.
. "$(dirname "$0")/lib.sh"
skip_unless_root
chmod 755 "$T"
start_mockfm
write_broker_conf
sed -i 's/^\[api\]$/[api]\nstep_cleanup_rate = 20\nstep_cleanup_burst = 50/' "$T/broker.conf"
start_broker
step_fail_hook () { tail -5 "$T/broker.err"; cat "$T/flood.json" 2>/dev/null; }
reserve_ms=2000
body='{"uid":1000,"nodes":["n1","n2"]}'

expect_ok 'the RM runs job A for uid 1000' '
    rm_call PUT /v1/jobs/A "$body" >A.json && jq -e ".hwcoll.state == \"reserved\"" A.json
'
tokA=$(jq -r .hwcoll.session_token A.json)
as_user 1000 /usr/bin/python3 "$FMB_SRC/tests/integration/stepflood.py" "$T/api.sock" A "$tokA" 800 10 \
    >"$T/flood.json" 2>"$T/flood.err" &
flood_pid=$!
stop_flood () { [ -n "${flood_pid:-}" ] && kill "$flood_pid" 2>/dev/null; wait "$flood_pid" 2>/dev/null; flood_pid=; }
on_exit stop_flood
started=$(date +%s%N)
expect_ok 'during the step flood, RM RUNs of other jobs answer within reserve_timeout_ms' '
    for i in 1 2 3 4 5; do
        r=$(rm_call_timed PUT /v1/jobs/R$i "$body") && echo "RUN R$i: $r" &&
        test "${r% *}" = 201 && test "${r#* }" -lt $reserve_ms || return 1
        sleep 0.2
    done
'
expect_ok 'beyond the job'"'"'s bucket the holder gets 429 with Retry-After' '
    wait "$flood_pid"; flood_pid=; cat "$T/flood.json" &&
    jq -e ".statuses[\"429\"] > 0 and .retry_after >= 1 and (.statuses | keys - [\"202\", \"429\"] == [])" "$T/flood.json"
'
elapsed_ms=$(( ($(date +%s%N) - started) / 1000000 ))
expect_ok 'the FM saw at most burst + rate x elapsed step PATCHes for the job' '
    accepted=$(jq ".statuses[\"202\"] // 0" "$T/flood.json") &&
    bound=$(( 50 + 20 * elapsed_ms / 1000 + 20 )) &&
    wait_for 100 0.1 sh -c "test \$(grep -c \"^PATCH /fabric/collectives/jobs/c1-A \" $T/fm.log) -ge $accepted" &&
    patches=$(grep -c "^PATCH /fabric/collectives/jobs/c1-A " "$T/fm.log") &&
    echo "accepted $accepted, FM PATCHes $patches, bound $bound over $elapsed_ms ms" &&
    test "$patches" -le "$bound"
'
expect_ok 'a 429 is a problem document naming the limit' '
    jq -e ".problem.content_type == \"application/problem+json\" and .problem.body.status == 429 and
        (.problem.body.detail | test(\"step_cleanup_rate\"))" "$T/flood.json"
'
expect_ok 'the RM is not limited' '
    for i in 1 2 3; do
        test "$(api_call DELETE /v1/jobs/A/steps/rm$i | cut -d" " -f1)" = 202 || return 1
    done
'
done_testing
