#!/bin/bash
# t1610-state-lock.sh: one broker per state directory (promise 9).  A
# second broker on a state directory in use exits at once naming the
# holder, without touching the database, and the first keeps serving;
# the lock dies with its holder, so a standby can take over after a
# SIGKILL.
. "$(dirname "$0")/lib.sh"
fmbrokerd="$FMB_BIN/fmbrokerd"
start_mockfm
write_broker_conf

expect_ok 'the broker holds the lock and names itself in it' '
    start_broker &&
    test "$(file_mode state/fmbrokerd.lock)" = 600 &&
    grep -q "^host=$(hostname) pid=$broker_pid " state/fmbrokerd.lock &&
    rm_call GET /v1/status | jq -e --argjson p "$broker_pid" \
        ".state_lock.pid == \$p and .state_lock.host == \"$(hostname)\" and (.state_lock.file | endswith(\"/state/fmbrokerd.lock\"))"
'
expect_ok 'fmbroker status shows the holder' '
    "$FMB_BIN/fmbroker" --socket "$T/api.sock" status >st &&
    grep -q "state lock: .*fmbrokerd.lock held by host $(hostname), pid $broker_pid" st
'
expect_ok '--check-config says who holds the state directory' '
    "$fmbrokerd" -c broker.conf --check-config --user root >cc &&
    grep -q "state directory $T/state: locked by a running broker (host $(hostname), pid $broker_pid)" cc
'
expect_ok 'a second broker on the locked state exits at once naming the holder' '
    rm_call PUT /v1/jobs/1 "{\"uid\":5,\"nodes\":[\"a\",\"b\"]}" >/dev/null &&
    { timeout 10 "$fmbrokerd" -c broker.conf --set api.socket="$T/second.sock" 2>err2; test $? -eq 1; } &&
    cat err2 &&
    grep -q "state directory $T/state is locked by another broker (host $(hostname), pid $broker_pid)" err2 &&
    test ! -e second.sock
'
expect_ok 'the first broker keeps serving, its state untouched' '
    kill -0 "$broker_pid" &&
    rm_call GET /v1/jobs/1 | jq -e ".state == \"active\" and .hwcoll.state == \"reserved\"" &&
    rm_call PUT /v1/jobs/2 "{\"uid\":5,\"nodes\":[\"a\",\"b\"]}" | jq -e ".hwcoll.state == \"reserved\"" &&
    mockfm_has_job c1-1 && mockfm_has_job c1-2
'
expect_ok 'the lock dies with its holder: after SIGKILL a new broker starts at once' '
    kill_broker &&
    "$fmbrokerd" -c broker.conf --check-config --user root >cc &&
    grep -q "state directory $T/state: not locked (last holder: host $(hostname), pid" cc &&
    start_broker &&
    rm_call GET /v1/jobs/2 | jq -e ".state == \"active\"" &&
    grep -q "^host=$(hostname) pid=$broker_pid " state/fmbrokerd.lock
'
done_testing
