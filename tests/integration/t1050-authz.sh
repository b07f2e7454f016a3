#!/bin/bash
# t1050-authz.sh: promise 6, no one gets in where they don't belong.
# Callers are real uids on the Unix socket (SO_PEERCRED), so this needs
# root to act as others (setpriv); elsewhere it is skipped.
. "$(dirname "$0")/lib.sh"
skip_unless_root
chmod 755 "$T"
start_mockfm
write_broker_conf
sed -i 's/^rm_users = root$/rm_users = root,1002/' "$T/broker.conf"
start_broker
body='{"uid":1000,"nodes":["n1","n2"]}'
# ucall UID METHOD PATH [BODY] [TOKEN]: "STATUS BODY" as that uid
ucall () {
    u=$1 m=$2 p=$3 b=${4:-} tok=${5:-}
    out=$(as_user "$u" curl -s --unix-socket "$T/api.sock" -X "$m" \
        ${b:+--data-binary "$b"} ${tok:+-H "Authorization: Bearer $tok"} \
        -w '\n%{http_code}' "http://fmbroker$p")
    echo "${out##*$'\n'} ${out%$'\n'*}"
}
status_of () { cut -d" " -f1; }

expect_ok 'the RM creates jobs for users 1000 and 1001' '
    rm_call PUT /v1/jobs/A "$body" >A.json &&
    rm_call PUT /v1/jobs/B "{\"uid\":1001,\"nodes\":[\"n3\",\"n4\"]}" >B.json &&
    jq -e ".hwcoll.state == \"reserved\"" A.json B.json
'
tokA=$(jq -r .hwcoll.session_token A.json)
tokB=$(jq -r .hwcoll.session_token B.json)
expect_ok 'a plain user cannot RUN, CLEANUP, report nodes or reconcile' '
    test "$(ucall 1000 PUT /v1/jobs/C "$body" | status_of)" = 403 &&
    test "$(ucall 1000 DELETE /v1/jobs/A | status_of)" = 403 &&
    test "$(ucall 1000 PUT /v1/jobs/A/nodes/n1 "{\"cxi\":\"destroyed\"}" | status_of)" = 403 &&
    test "$(ucall 1000 POST /v1/reconcile | status_of)" = 403 &&
    test "$(ucall 1000 GET /v1/events | status_of)" = 403 &&
    test "$(ucall 1000 GET /v1/vnis | status_of)" = 403 &&
    rm_call GET /v1/jobs/A | jq -e ".state == \"active\"" && mockfm_has_job c1-A
'
expect_ok 'a plain user lists only their own jobs' '
    ucall 1000 GET /v1/jobs >l && test "$(status_of <l)" = 200 &&
    cut -d" " -f2- l | jq -e "[.jobs[].id] == [\"A\"]" &&
    test "$(ucall 1000 GET "/v1/jobs?user=1001" | status_of)" = 403 &&
    ucall 1000 GET /v1/jobs/B >b && ucall 1000 GET /v1/jobs/NOPE >n &&
    test "$(status_of <b)" = 404 &&
    test "$(cut -d" " -f2- b | jq -r .detail | sed s/B/X/)" = "$(cut -d" " -f2- n | jq -r .detail | sed s/NOPE/X/)"
'
# A plain user's listing by state goes by the user's own index (for
# released jobs, nearly all the store): still theirs only, page by page.
released () { rm_call GET "/v1/jobs/$1" | jq -e '.state == "released"' >/dev/null; }
ids_are () { cut -d" " -f2- | jq -e --argjson w "$1" '[.jobs[].id] == $w' >/dev/null; }
expect_ok 'a plain user lists their own jobs of one state, released ones too' '
    rm_call PUT /v1/jobs/R1 "$body" >/dev/null &&
    rm_call PUT /v1/jobs/R2 "$body" >/dev/null &&
    rm_call PUT /v1/jobs/R3 "{\"uid\":1001,\"nodes\":[\"n3\",\"n4\"]}" >/dev/null &&
    rm_call DELETE /v1/jobs/R1 >/dev/null && rm_call DELETE /v1/jobs/R2 >/dev/null &&
    rm_call DELETE /v1/jobs/R3 >/dev/null &&
    wait_for 100 0.1 released R1 && wait_for 100 0.1 released R2 &&
    wait_for 100 0.1 released R3 &&
    ucall 1000 GET "/v1/jobs?state=released&limit=1" >p1 && ids_are "[\"R1\"]" <p1 &&
    cut -d" " -f2- p1 | jq -e ".next_after == \"R1\"" >/dev/null &&
    ucall 1000 GET "/v1/jobs?state=released&limit=1&after=R1" | ids_are "[\"R2\"]" &&
    ucall 1000 GET "/v1/jobs?state=released&after=R2" | ids_are "[]" &&
    ucall 1001 GET "/v1/jobs?state=released" | ids_are "[\"R3\"]" &&
    ucall 1000 GET "/v1/jobs?state=active" | ids_are "[\"A\"]"
'
expect_ok 'tokens reach only the owner, the RM and admins' '
    ucall 1000 GET /v1/jobs/A | cut -d" " -f2- | jq -e --arg t "$tokA" ".hwcoll.session_token == \$t" &&
    ucall 1001 GET /v1/jobs/A >x && ! grep -q "$tokA" x &&
    ucall 1001 GET /v1/jobs >x && ! grep -q "$tokA" x &&
    ucall 1001 GET /v1/status >x && ! grep -q "$tokA" x && ! grep -q "$tokB" x &&
    ucall 1001 GET /metrics >x && ! grep -q "$tokA" x
'
expect_ok 'the job'"'"'s token lets anyone clean that job'"'"'s steps, and only those' '
    test "$(ucall 1001 DELETE "/v1/jobs/A/steps/0?wait=5" "" "$tokA" | status_of)" = 200 &&
    test "$(ucall 1001 DELETE "/v1/jobs/B/steps/0" "" "$tokA" | status_of)" = 403 &&
    test "$(ucall 1000 DELETE "/v1/jobs/A/steps/0" | status_of)" = 403 &&
    test "$(ucall 1000 DELETE "/v1/jobs/A/steps/0" "" "not-the-token" | status_of)" = 403 &&
    test "$(ucall 1000 DELETE "/v1/jobs/A" "" "$tokA" | status_of)" = 403
'
expect_ok 'a token of job A shows job A, not job B' '
    ucall 1002 GET /v1/jobs/A "" "$tokA" >/dev/null &&
    test "$(ucall 1005 GET /v1/jobs/A "" "$tokA" | status_of)" = 200 &&
    test "$(ucall 1005 GET /v1/jobs/B "" "$tokA" | status_of)" = 404
'
expect_ok 'an rm user that is not an admin cannot force a release' '
    test "$(ucall 1002 DELETE "/v1/jobs/B?force=1" | status_of)" = 403 &&
    test "$(ucall 1002 DELETE /v1/jobs/B | status_of)" = 202
'
expect_ok 'anyone may read status and health' '
    test "$(ucall 1005 GET /v1/status | status_of)" = 200 &&
    test "$(ucall 1005 GET /v1/health | status_of)" = 200
'
expect_ok 'no token appears in any log line' '
    ! grep -F -e "$tokA" -e "$tokB" "$T/broker.err"
'
done_testing
