#!/bin/bash
# t1060-bad-input.sh: every malformed request gets a 4xx problem document
# naming what is wrong, and changes nothing.
. "$(dirname "$0")/lib.sh"
start_mockfm
start_broker
rm_call PUT /v1/jobs/1 '{"uid":1000,"nodes":["n1","n2"]}' >/dev/null
snapshot () {
    { rm_call GET "/v1/jobs?limit=1000"; rm_call GET /v1/vnis; rm_call GET "/v1/events?after=0";
      rm_call GET /v1/status | jq -c "del(.uptime_s, .fabric_manager.since_ms)"; mockfm_jobs; } >"$1"
}
snapshot before

# expect STATUS METHOD PATH [BODY]: the answer is a problem document with STATUS
expect () {
    want=$1 m=$2 p=$3
    shift 3
    out=$(curl -s --path-as-is --unix-socket "$T/api.sock" -X "$m" ${1+--data-binary "$1"} \
        -D hdr -w '\n%{http_code}' "http://fmbroker$p")
    code=${out##*$'\n'} body=${out%$'\n'*}
    if [ "$code" != "$want" ]; then echo "$m $p: got $code, want $want: $body"; return 1; fi
    grep -qi "^content-type: application/problem+json" hdr || { echo "$m $p: not problem+json"; return 1; }
    echo "$body" | jq -e --argjson s "$want" ".status == \$s and .type == \"about:blank\" and (.title | length > 0) and (.detail | length > 0)" >/dev/null ||
        { echo "$m $p: bad problem document: $body"; return 1; }
}
{ printf '{"uid":1000,"node_count":2,"x":"'; head -c 1200000 /dev/zero | tr "\0" x; printf '"}'; } >big.json

expect_ok 'malformed and mistyped RUN bodies are 400' '
    expect 400 PUT /v1/jobs/9 "{" &&
    expect 400 PUT /v1/jobs/9 "[1,2]" &&
    expect 400 PUT /v1/jobs/9 "" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":\"1000\",\"node_count\":2}" &&
    expect 400 PUT /v1/jobs/9 "{\"node_count\":2}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":-1,\"node_count\":2}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":4294967295,\"node_count\":2}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"node_count\":0}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"node_count\":2.5}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"nodes\":\"n[1-\"}" && expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"nodes\":7}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"nodes\":[]}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"nodes\":[\"a b\"]}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"nodes\":[\"n1\",\"n1\"]}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"nodes\":[\"n1\"],\"node_count\":3}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"node_count\":2,\"hwcoll\":\"maybe\"}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"node_count\":2,\"vni_count\":5}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"node_count\":2,\"tcs\":\"FAST\"}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"node_count\":2,\"tcs\":10}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"node_count\":2,\"tcs\":\"0x10\"}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"node_count\":2,\"tcs\":\"DEDICATED_ACCESS\"}" &&
    jq -e ".detail == \"tcs: this cluster allows only LOW_LATENCY,BULK_DATA,BEST_EFFORT ([cxi] allowed_tcs)\"" \
        <<<"$body" >/dev/null &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"node_count\":2,\"colour\":\"blue\"}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"uid\":1001,\"node_count\":2}" &&
    expect 400 PUT /v1/jobs/9 "{\"uid\":1000,\"node_count\":2,\"user\":\"ro ot\"}"
'
expect_ok 'an oversized body is 413' '
    expect 413 PUT /v1/jobs/9 @big.json
'
expect_ok 'bad job ids are 400, however they are encoded' '
    expect 400 PUT /v1/jobs/$(printf "a%.0s" $(seq 129)) "{\"uid\":1,\"node_count\":1}" &&
    expect 400 GET /v1/jobs/.. &&
    expect 400 GET /v1/jobs/%2E%2E &&
    expect 400 GET /v1/jobs/a%2Fb &&
    expect 400 GET /v1/jobs/a%00b &&
    expect 400 GET /v1/jobs/a%20b &&
    expect 400 GET /v1/jobs/a%zzb &&
    expect 400 GET /v1/jobs/%
'
expect_ok 'bad step ids are 400: invalid UTF-8, too long, NUL' '
    expect 400 DELETE /v1/jobs/1/steps/%C3%28 &&
    expect 400 DELETE /v1/jobs/1/steps/%ED%A0%80 &&
    expect 400 DELETE /v1/jobs/1/steps/%C0%AF &&
    expect 400 DELETE /v1/jobs/1/steps/$(printf "s%.0s" $(seq 257)) &&
    expect 400 DELETE /v1/jobs/1/steps/a%00
'
expect_ok 'bad node reports are 400' '
    expect 400 PUT /v1/jobs/1/nodes/n1 "{\"cxi\":\"gone\"}" &&
    expect 400 PUT /v1/jobs/1/nodes/n1 "{\"cxi\":\"destroyed\",\"extra\":1}" &&
    expect 400 PUT /v1/jobs/1/nodes/-n1 "{\"cxi\":\"destroyed\"}" &&
    expect 404 PUT /v1/jobs/nosuch/nodes/n1 "{\"cxi\":\"destroyed\"}"
'
expect_ok 'bad query arguments are 400' '
    expect 400 DELETE "/v1/jobs/1/steps/0?wait=abc" &&
    expect 400 DELETE "/v1/jobs/1/steps/0?wait=999" &&
    expect 400 GET "/v1/events?after=-1" &&
    expect 400 GET "/v1/events?wait=x" &&
    expect 400 GET "/v1/jobs?limit=0" &&
    expect 400 GET "/v1/jobs?state=bogus" &&
    expect 400 GET "/v1/jobs?user=no-such-user-here" &&
    expect 400 GET "/v1/jobs?since=yesterday" &&
    # numbers are decimal digits only: no sign, no space, not empty
    expect 400 GET "/v1/jobs?limit=%2B5" &&
    expect 400 GET "/v1/events?after=" &&
    expect 400 GET "/v1/events?limit=%205" &&
    expect 400 DELETE "/v1/jobs/1/steps/0?wait=-0"
'
expect_ok 'unknown methods are 405 with Allow, unknown paths 404' '
    expect 405 PATCH /v1/jobs/1 "{}" && grep -qi "^allow: PUT, DELETE, GET" hdr &&
    expect 405 POST /v1/jobs "{}" &&
    expect 405 DELETE /v1/status &&
    expect 404 GET /v1/nothing &&
    expect 404 GET /v2/jobs &&
    expect 404 GET /v1/jobs/1/steps
'
expect_ok 'a body where none is expected is 400; unknown jobs are 404' '
    expect 400 GET /v1/status "{}" &&
    expect 404 GET /v1/jobs/nosuch &&
    expect 404 DELETE /v1/jobs/nosuch
'
expect_ok 'after all that, nothing changed' '
    snapshot after && diff -u before after
'
expect_ok 'and the broker still serves' '
    rm_call PUT /v1/jobs/2 "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\"]}" | jq -e ".hwcoll.state == \"reserved\""
'
done_testing
