#!/bin/bash
# t1025-fm-liveness.sh: the FM is checked for what the broker needs, not
# only for a TCP answer.  An FM url whose path is wrong (every call 404)
# and an FM that dies while the broker is idle both make `fmbroker
# status` degraded, with the reason and exit 1, within 5 s.
. "$(dirname "$0")/lib.sh"
status () { "$FMB_BIN/fmbroker" -c "$T/broker.conf" status >status.out 2>&1; }
degraded () { status; rc=$?; test "$rc" = 1 && grep -q "^degraded: " status.out; }

expect_ok 'an FM url with the wrong path: status degraded, exit 1, within 5 s' '
    start_mockfm && fm_url="$fm_url/apis/fm/wrong" write_broker_conf && start_broker &&
    wait_for 50 0.1 degraded && cat status.out &&
    grep -q "fabric manager: down" status.out &&
    grep -q "404.*no collectives API at \[fabric_manager\] url $fm_url/apis/fm/wrong" status.out
'
expect_ok '... and a RUN there does not wait for it: unavailable, naming it' '
    rm_call PUT /v1/jobs/1 "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\"]}" >run.json &&
    jq -e ".hwcoll.state == \"unavailable\"" run.json &&
    jq -r .hwcoll.reason run.json | grep -q "no collectives API"
'
expect_ok '... and it stays down while it keeps answering 404 (no flapping)' '
    sleep 3 && degraded && grep -q "fabric manager: down" status.out &&
    ! grep -q "session up" <(sed -n "/wrong/,\$p" "$T/broker.err")
'
stop_broker; stop_mockfm
expect_ok 'with the right url the same broker is up: status exit 0' '
    rm -f "$T/broker.conf" && start_mockfm && write_broker_conf && start_broker &&
    wait_for 50 0.1 status && grep -q "fabric manager: up" status.out
'
expect_ok 'idle, the broker checks the FM without a job: one small GET, not a listing' '
    sleep 5 && grep -q "^GET /fabric/collectives/jobs/fmbroker-liveness 404" "$T/fm.log" &&
    test "$(grep -c "^GET /fabric/collectives/jobs/ " "$T/fm.log")" -le 2
'
expect_ok 'an FM killed while the broker is idle: degraded, exit 1, within 5 s' '
    kill -9 "$fm_pid" && wait "$fm_pid" 2>/dev/null; fm_pid= &&
    wait_for 50 0.1 degraded && cat status.out && grep -q "fabric manager: down" status.out
'
expect_ok 'the FM back on its port: up again without a hand' '
    start_mockfm && wait_for 150 0.1 status && grep -q "fabric manager: up" status.out
'
done_testing
