#!/bin/bash
# t1140-damaged-token.sh: a job whose stored session token no longer
# decrypts (a damaged row, a restored database with another key) still
# lists, releases and recovers; only its token counts as absent, with an
# error event and a log line that name the job.
. "$(dirname "$0")/lib.sh"
start_mockfm
write_broker_conf
start_broker
step_fail_hook () { tail -5 "$T/broker.err"; }
body='{"uid":1000,"nodes":["n1","n2"]}'

expect_ok 'two jobs hold FM reservations' '
    rm_call PUT /v1/jobs/D1 "$body" >D1.json && rm_call PUT /v1/jobs/D2 "$body" >D2.json &&
    jq -e ".hwcoll.state == \"reserved\"" D1.json D2.json &&
    mockfm_has_job c1-D1 && mockfm_has_job c1-D2
'
tok1=$(jq -r .hwcoll.session_token D1.json)
expect_ok 'D1'"'"'s token row is damaged while the broker is stopped' '
    stop_broker &&
    sqlite3 "$T/state/fmbroker.db" "UPDATE jobs SET token = X'"'"'00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff'"'"' WHERE id = '"'"'D1'"'"'" &&
    start_broker
'
expect_ok 'listing answers 200 with both jobs; D1 shows no token' '
    rm_call GET /v1/jobs >l.json && jq -e "[.jobs[].id] == [\"D1\",\"D2\"]" l.json &&
    rm_call GET /v1/jobs/D1 >d1.json && jq -e ".state == \"active\" and (.hwcoll.session_token == null)" d1.json &&
    job_field D2 .hwcoll.session_token | grep -q .
'
expect_ok 'the broker says which token is damaged, naming the job, never the token' '
    grep "job D1: its stored session token does not decrypt" "$T/broker.err" &&
    ! grep -F "$tok1" "$T/broker.err" &&
    wait_for 40 0.1 sh -c "curl -sf --unix-socket $T/api.sock http://x/v1/events | jq -e \".events | map(select(.type == \\\"token_damaged\\\" and .job == \\\"D1\\\")) | length == 1\""
'
expect_ok 'CLEANUP of D1 answers 202 and its FM reservation is released' '
    test "$(api_call DELETE /v1/jobs/D1 | cut -d" " -f1)" = 202 &&
    wait_for 100 0.1 mockfm_lacks_job c1-D1 &&
    wait_for 100 0.1 sh -c "test \"\$(curl -sf --unix-socket $T/api.sock http://x/v1/jobs/D1 | jq -r .state)\" = released"
'
expect_ok 'the other job is untouched and new RUNs work' '
    test "$(job_field D2 .state)" = active && mockfm_has_job c1-D2 &&
    rm_call PUT /v1/jobs/D3 "$body" | jq -e ".hwcoll.state == \"reserved\""
'
expect_ok 'the damage is logged once, not at every listing' '
    rm_call GET /v1/jobs >/dev/null && rm_call GET /v1/jobs >/dev/null &&
    test "$(grep -c "job D1: its stored session token" "$T/broker.err")" = 1
'
done_testing
