#!/bin/bash
# t1160-hostile-input.sh: strings from callers, nodes and the FM cannot
# forge log lines, and an FM session token that would inject shell code
# is never stored or handed out: the reservation is `unavailable` with the
# reason, and released at the FM.
. "$(dirname "$0")/lib.sh"
skip_unless_root
chmod 755 "$T"
start_mockfm
write_broker_conf
start_broker
step_fail_hook () { tail -5 "$T/broker.err"; }
body='{"uid":1000,"nodes":["n1","n2"]}'
# no record may start a line of its own with a forged priority
no_forged_lines () { ! grep -n "^<[0-7]>fmbrokerd: CRIT forged" "$T/broker.err"; }

expect_ok 'the RM runs job A' '
    rm_call PUT /v1/jobs/A "$body" >A.json && jq -e ".hwcoll.state == \"reserved\"" A.json
'
tokA=$(jq -r .hwcoll.session_token A.json)
expect_ok 'step ids with control characters are refused with 400' '
    for step in "0%0A%3C2%3Efmbrokerd%3A%20CRIT%20forged" "0%0D" "x%C2%85y" "x%7F"; do
        out=$(as_user 1000 curl -s --unix-socket "$T/api.sock" -X DELETE \
            -H "Authorization: Bearer $tokA" -w "\n%{http_code}" "http://fmbroker/v1/jobs/A/steps/$step") &&
        echo "$step: $out" && test "${out##*$'"'"'\n'"'"'}" = 400 || return 1
    done &&
    ! grep -q "PATCH" "$T/fm.log" && no_forged_lines
'
expect_ok 'a node report'"'"'s detail is logged escaped, on one line' '
    rm_call PUT /v1/jobs/A/nodes/n1 "{\"cxi\":\"failed\",\"detail\":\"oops\\n<2>fmbrokerd: CRIT forged by a node\"}" &&
    grep -F "oops\x0a<2>fmbrokerd: CRIT forged by a node" "$T/broker.err" && no_forged_lines
'
expect_ok 'the FM'"'"'s error detail is logged escaped, on one line' '
    mockfm_ctl POST /_mock/faults "POST /fabric/collectives/jobs hostile_detail x1" &&
    rm_call PUT /v1/jobs/F "$body" | jq -e ".hwcoll.state == \"unavailable\"" &&
    grep -F "\x0a<2>fmbrokerd: CRIT forged by the FM" "$T/broker.err" && no_forged_lines
'
expect_ok 'an FM token that injects shell code makes the reservation unavailable, with the reason' '
    mockfm_ctl POST /_mock/faults "POST /fabric/collectives/jobs hostile_token x1" &&
    rm_call PUT /v1/jobs/M "$body" >M.json && cat M.json &&
    jq -e ".hwcoll.state == \"unavailable\" and (.hwcoll.reason | test(\"unsafe sessionToken\")) and
        (.hwcoll.session_token == null)" M.json &&
    ! grep -q LD_PRELOAD M.json && ! grep -q LD_PRELOAD "$T/broker.err" &&
    rm_call GET /v1/jobs/M | jq -e ".hwcoll.session_token == null"
'
expect_ok 'and the reservation the FM made for it is released' '
    wait_for 100 0.1 mockfm_lacks_job c1-M && mockfm_has_job c1-A
'
expect_ok 'bad percent-encoding or control characters in a query value answer 400' '
    for q in "state=%00" "state=%zz" "state=%0a" "state=%" "limit=1%"; do
        r=$(api_call GET "/v1/jobs?$q") && echo "$q: $r" &&
        test "${r%% *}" = 400 && echo "${r#* }" | jq -e ".status == 400" || return 1
    done &&
    test "$(api_call DELETE "/v1/jobs/A?force=maybe" | cut -d" " -f1)" = 400 &&
    test "$(job_field A .state)" = active
'
expect_ok 'oversized headers and targets answer 431 and 414 as problem documents' '
    big=$(head -c 20000 /dev/zero | tr "\\0" a) &&
    curl -s -i --unix-socket "$T/api.sock" -H "X-Big: $big" http://fmbroker/v1/health >h431 &&
    head -1 h431 | grep -q " 431 " && grep -qi "^content-type: application/problem+json" h431 &&
    tail -1 h431 | jq -e ".status == 431" &&
    curl -s -i --unix-socket "$T/api.sock" "http://fmbroker/v1/jobs?after=$big" >h414 &&
    head -1 h414 | grep -q " 414 " && grep -qi "^content-type: application/problem+json" h414 &&
    tail -1 h414 | jq -e ".status == 414"
'
expect_ok 'a released job'"'"'s token opens nothing any more' '
    rm_call DELETE /v1/jobs/A >/dev/null &&
    wait_for 100 0.1 sh -c "test \"\$(curl -sf --unix-socket $T/api.sock http://x/v1/jobs/A | jq -r .state)\" = released" &&
    out=$(as_user 1001 curl -s --unix-socket "$T/api.sock" -X DELETE -H "Authorization: Bearer $tokA" \
        -w "\n%{http_code}" http://fmbroker/v1/jobs/A/steps/late) && echo "$out" &&
    test "${out##*$'"'"'\n'"'"'}" = 403 &&
    out=$(as_user 1001 curl -s --unix-socket "$T/api.sock" -H "Authorization: Bearer $tokA" \
        -w "\n%{http_code}" http://fmbroker/v1/jobs/A) && echo "$out" &&
    test "${out##*$'"'"'\n'"'"'}" = 404
'
done_testing
