#!/bin/bash
# t1200-reserve-fails-at-once.sh: a RUN whose reservation fails before any
# FM call leaves (the FM token lapsed and the OAuth credentials cannot be
# read, so the POST fails as it is started, after the intent's commit)
# gets its answer at once, says why, and the broker goes on serving.
. "$(dirname "$0")/lib.sh"
reserve_ms=1000 timeout_ms=2000
mkdir -p "$T/auth" && echo slurm >"$T/auth/client-id" && echo s3cret >"$T/auth/client-secret" &&
    chmod 600 "$T/auth/client-secret"
start_mockfm --auth oauth --auth-dir "$T/auth" --token-lifetime 1
echo "$fm_url/oauth/token" >"$T/auth/endpoint"
write_broker_conf
sed -i "s|^auth = none$|auth = oauth\nauth_dir = $T/auth\nallow_plain_http = true|" "$T/broker.conf"
start_broker
body='{"uid":1000,"nodes":["n1","n2"]}'

expect_ok 'with readable credentials, RUN reserves' '
    rm_call PUT /v1/jobs/1 "$body" | jq -e ".hwcoll.state == \"reserved\""
'
expect_ok 'the token lapsed and client-id unreadable: RUN is answered in time, unavailable, naming the file' '
    mv "$T/auth/client-id" "$T/auth/client-id.away" && sleep 1.5 &&
    rm_call_timed PUT /v1/jobs/2 "$body" >t && read code ms <t &&
    test "$code" = 201 && test "$ms" -lt $((reserve_ms + 1000)) &&
    job_field 2 .hwcoll.state | grep -qx unavailable &&
    job_field 2 .hwcoll.reason | grep -q "client-id"
'
expect_ok 'the broker goes on serving; with the file back, RUN reserves again' '
    rm_call GET /v1/health | jq -e ".status" >/dev/null &&
    mv "$T/auth/client-id.away" "$T/auth/client-id" &&
    rm_call POST /v1/reconcile >/dev/null &&
    wait_for 100 0.1 sh -c "curl -sf --unix-socket $T/api.sock http://fmbroker/v1/status | jq -e \".fabric_manager.state == \\\"up\\\"\" >/dev/null" &&
    rm_call PUT /v1/jobs/3 "$body" | jq -e ".hwcoll.state == \"reserved\""
'
done_testing
