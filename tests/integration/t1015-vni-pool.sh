#!/bin/bash
# t1015-vni-pool.sh: the VNI pool runs out.  A RUN that needs a VNI then
# fails closed with a 503 naming the pool; /v1/health and `fmbroker
# status` say degraded and why (held, in quarantine), so that an admin
# learns it from monitoring rather than from failed jobs; and it ends by
# itself once a VNI leaves quarantine.
. "$(dirname "$0")/lib.sh"
fm_url= vni_pool=2000-2003 quarantine_s=2 write_broker_conf
start_broker
chmod 755 "$T" # the socket's directory, for the plain user below
body='{"uid":1000,"node_count":2}'
fmb () { "$FMB_BIN/fmbroker" --socket "$T/api.sock" "$@"; }
health_reason () { rm_call GET /v1/health | jq -r '.reasons // [] | .[]'; }
show () { for f in r s.txt; do [ -f "$f" ] && echo "$f: $(cat "$f")"; done; tail -n 5 "$T/broker.err"; }
step_fail_hook=show

expect_ok 'three jobs of a 4-VNI pool: health ok, one VNI free' '
    for j in a b c; do rm_call PUT /v1/jobs/$j "$body" >/dev/null || return 1; done &&
    rm_call GET /v1/health | jq -e ".status == \"ok\"" &&
    rm_call GET /v1/status | jq -e ".vnis.free == 1 and .vnis.held == 3"
'
expect_ok 'the fourth takes the last: health says degraded, naming the pool' '
    rm_call PUT /v1/jobs/e "$body" | jq -e ".vnis == [2003]" &&
    health_reason >r &&
    grep -qx "VNI pool 2000-2003: 0 free (4 held, 0 in quarantine); RUNs that need VNIs fail" r
'
expect_ok 'a fifth RUN fails closed: a 503 naming the pool, and the log names the job' '
    api_call PUT /v1/jobs/d "$body" >r && read code _ <r && test "$code" = 503 &&
    grep -q "no free VNI in 2000-2003" r &&
    grep -q "job d: no free VNI in 2000-2003" "$T/broker.err" &&
    { ! rm_call GET /v1/jobs/d >/dev/null; }
'
expect_ok 'fmbroker status exits 1 and prints why; --json too' '
    { fmb status >s.txt; test $? = 1; } &&
    grep -q "^vnis: 4 held, 0 quarantined, 0 free (pool 2000-2003)" s.txt &&
    grep -q "^degraded: VNI pool 2000-2003: 0 free" s.txt &&
    { fmb --json status >s.json; test $? = 1; } &&
    jq -e ".degraded[0] | startswith(\"VNI pool 2000-2003\")" s.json
'
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    expect_ok 'a plain user sees the same verdict on the socket' '
        as_user 1000 curl -sf --unix-socket "$T/api.sock" http://fmbroker/v1/health >r &&
        jq -e ".status == \"degraded\" and (.reasons[0] | test(\"0 free\"))" r
    '
fi
expect_ok 'a CLEANUP puts its VNI in quarantine: still none free, and the reason says so' '
    rm_call DELETE /v1/jobs/a >/dev/null &&
    health_reason | grep -qx "VNI pool 2000-2003: 0 free (3 held, 1 in quarantine); RUNs that need VNIs fail"
'
expect_ok 'once the quarantine is over: health ok, status 0, and the RUN gets the VNI' '
    wait_for 100 0.1 eval "rm_call GET /v1/health | jq -e \".status == \\\"ok\\\"\" >/dev/null" &&
    fmb status >s.txt && ! grep -q "^degraded" s.txt &&
    rm_call PUT /v1/jobs/d "$body" | jq -e ".vnis == [2000]"
'
done_testing
