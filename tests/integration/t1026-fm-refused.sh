#!/bin/bash
# t1026-fm-refused.sh: an FM that answers but refuses fmbroker's
# credentials (401 even with a fresh token) is not "up": `fmbroker
# status` says down and why, the log says so once (then counts), never
# "session up" or fm_reconnected until the FM accepts a call again.
# (issue 52)
. "$(dirname "$0")/lib.sh"
status () { "$FMB_BIN/fmbroker" -c "$T/broker.conf" status >status.out 2>&1; }
refusals () { rm_call GET /v1/health | jq -r '.reasons[]?' | sed -n 's/.*(\([0-9]*\) calls refused.*/\1/p'; }

# Every call on the collectives API answered 401, as an FM does when the
# client secret was rotated on its side only.
printf '* /fabric/collectives/jobs* 401\n' >faults
start_mockfm --faults "$T/faults" || bail_out "mockfm did not start"
write_broker_conf
start_broker || bail_out "broker did not start"

expect_ok 'status: the fabric manager is down, not up, naming the credentials; exit 1' '
    wait_for 50 0.1 eval "status; test \$? = 1" && cat status.out &&
    grep -q "^fabric manager: down" status.out &&
    ! grep -q "^fabric manager: up" status.out &&
    grep -q "^degraded: fabric manager down: refuses fmbroker.s credentials (\[fabric_manager\] auth): FM answered 401" status.out
'
expect_ok '/v1/status says down with the reason as last_error' '
    rm_call GET /v1/status >s.json &&
    jq -e ".fabric_manager.state == \"down\" and (.fabric_manager.last_error | test(\"refuses fmbroker.s credentials\"))" s.json
'
expect_ok 'a RUN meanwhile answers at once: hardware collectives unavailable' '
    rm_call PUT /v1/jobs/1 "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\"]}" >run.json &&
    jq -e ".hwcoll.state == \"unavailable\"" run.json
'
expect_ok 'repeated refusals are logged once and counted, with no "session up" among them' '
    wait_for 100 0.1 eval "test \"\$(refusals)\" -ge 3" &&
    test "$(grep -c "refuses fmbroker.s credentials" broker.err)" = 1 &&
    ! grep -q "reconcile: FM answered 401" broker.err &&
    ! grep -q "session up" broker.err &&
    ! rm_call GET "/v1/events?after=0" | jq -e ".events[] | select(.type == \"fm_reconnected\")"
'
expect_ok 'once the FM accepts the calls: up, one line with the count, fm_reconnected' '
    mockfm_ctl DELETE /_mock/faults &&
    wait_for 400 0.1 eval "status; test \$? = 0" && grep -q "^fabric manager: up" status.out &&
    grep -q "accepts fmbroker.s credentials again ([0-9]* calls refused over [0-9]* s)" broker.err &&
    test "$(grep -c "session up" broker.err)" = 1 &&
    rm_call GET "/v1/events?after=0" | jq -e "[.events[] | select(.type == \"fm_reconnected\")] | length == 1"
'
stop_broker
done_testing
