#!/bin/bash
# t1070-openapi.sh: the broker and api/openapi.yaml agree: every route is
# documented (and nothing else), and real responses of every route, good
# and bad, validate against the document (python3-jsonschema, 2020-12).
. "$(dirname "$0")/lib.sh"
start_mockfm
start_broker
rec () { # TEMPLATE METHOD URL [BODY] [TOKEN]
    tpl=$1 m=$2 u=$3 b=${4:-} tok=${5:-}
    curl -s --path-as-is --unix-socket "$T/api.sock" -X "$m" ${b:+--data-binary "$b"} \
        ${tok:+-H "Authorization: Bearer $tok"} -o body -D hdr -w '%{http_code}' "http://fmbroker$u" >code
    jq -nc --arg m "$m" --arg t "$tpl" --argjson s "$(cat code)" \
        --arg c "$(grep -i '^content-type:' hdr | cut -d' ' -f2- | tr -d '\r')" --rawfile b body \
        '{method: $m, template: $t, status: $s, content_type: $c, body: $b}' >>responses.jsonl
}
J=/v1/jobs/{job}
S=/v1/jobs/{job}/steps/{step}
N=/v1/jobs/{job}/nodes/{node}

expect_ok 'every route answers, successes and failures alike' '
    rec $J PUT /v1/jobs/1 "{\"uid\":1000,\"user\":\"alice\",\"nodes\":[\"n1\",\"n2\"],\"ncores\":8}" &&
    rec $J PUT /v1/jobs/1 "{\"uid\":1000,\"user\":\"alice\",\"nodes\":[\"n1\",\"n2\"],\"ncores\":8}" &&
    rec $J PUT /v1/jobs/1 "{\"uid\":1001,\"node_count\":2}" &&
    rec $J PUT /v1/jobs/2 "{\"uid\":1000,\"node_count\":1,\"vni_count\":0,\"tcs\":\"BULK_DATA\"}" &&
    rec $J PUT /v1/jobs/3 "{bad" &&
    rec $J PUT /v1/jobs/%2E%2E "{}" &&
    rec $J GET /v1/jobs/1 &&
    rec $J GET /v1/jobs/404 &&
    rec /v1/jobs GET "/v1/jobs?limit=1" &&
    rec /v1/jobs GET "/v1/jobs?state=active&since=0" &&
    rec /v1/jobs GET "/v1/jobs?state=bad" &&
    rec $S DELETE "/v1/jobs/1/steps/0?wait=5" &&
    rec $S DELETE "/v1/jobs/1/steps/1" &&
    rec $S DELETE "/v1/jobs/2/steps/0" &&
    rec $S DELETE "/v1/jobs/1/steps/%FF" &&
    rec $S DELETE "/v1/jobs/1/steps/0" "" "wrong-token" &&
    rec $N PUT /v1/jobs/1/nodes/n1 "{\"cxi\":\"created\"}" &&
    rec $N PUT /v1/jobs/1/nodes/n1 "{\"cxi\":\"nope\"}" &&
    rec $N GET /v1/jobs/1/nodes/n1 &&
    rec $N GET /v1/jobs/404/nodes/n1 &&
    rec /v1/vnis GET /v1/vnis &&
    rec $J DELETE /v1/jobs/1 &&
    rec $J DELETE /v1/jobs/2 &&
    rec $J DELETE "/v1/jobs/1?force=1" &&
    rec $J DELETE /v1/jobs/404 &&
    rec /v1/events GET "/v1/events?after=0" &&
    rec /v1/events GET "/v1/events?after=0&limit=1&wait=1" &&
    rec /v1/events GET "/v1/events?after=x" &&
    rec /v1/reconcile POST /v1/reconcile &&
    rec /v1/status GET /v1/status &&
    rec /v1/health GET /v1/health &&
    rec /metrics GET /metrics &&
    test "$(wc -l <responses.jsonl)" -ge 30
'
expect_ok 'the responses, the route table and the document agree' '
    /usr/bin/python3 "$FMB_SRC/tests/integration/openapi_check.py" "$FMB_SRC/api/openapi.yaml" \
        "$FMB_SRC/src/broker/routes.c" responses.jsonl
'
expect_ok 'the check can fail: an undocumented field is caught' '
    jq -c "if .template == \"/v1/status\" then .body = (.body | fromjson | .extra = 1 | tojson) else . end" \
        responses.jsonl >tampered.jsonl &&
    ! /usr/bin/python3 "$FMB_SRC/tests/integration/openapi_check.py" "$FMB_SRC/api/openapi.yaml" \
        "$FMB_SRC/src/broker/routes.c" tampered.jsonl >out &&
    grep -q "Additional properties are not allowed" out
'
done_testing
