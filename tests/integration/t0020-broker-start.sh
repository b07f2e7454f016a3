#!/bin/bash
# t0020-broker-start.sh: fmbrokerd initialises its state, can be started
# again, and refuses bad configuration and foreign state with a message
# that names the culprit, changing nothing.
. "$(dirname "$0")/lib.sh"
fmbrokerd="$FMB_BIN/fmbrokerd"
write_broker_conf
sets="--set api.socket=$T/api.sock"

expect_ok 'first start creates a private state dir, database and key' '
    start_broker &&
    test "$(file_mode state)" = 700 &&
    test "$(file_mode state/fmbroker.db)" = 600 &&
    test "$(file_mode state/token.key)" = 600 &&
    test "$(file_mode api.sock)" = 666 &&
    rm_call GET /v1/status | jq -e ".jobs.active == 0 and .fabric_manager.state == \"disabled\"" &&
    grep -q "VNI-only mode" broker.err
'
expect_ok 'a second broker on the same socket is refused' '
    "$fmbrokerd" -c broker.conf --set broker.state_dir="$T/state2" 2>err2; test $? -eq 1 &&
    grep -q "another broker is listening" err2
'
expect_ok 'a restart opens the same state' '
    rm_call PUT /v1/jobs/1 "{\"uid\":5,\"node_count\":1}" >/dev/null &&
    sha256sum state/token.key >key.sum &&
    stop_broker && start_broker &&
    rm_call GET /v1/jobs/1 | jq -e ".uid == 5" &&
    sha256sum -c key.sum
'
expect_ok 'a stale socket file left by a crash is replaced' '
    kill_broker && test -S api.sock && start_broker
'
expect_ok 'RUN answers 201 with the job as stored: a GET shows the same' '
    rm_call PUT /v1/jobs/2 "{\"uid\":5,\"nodes\":[\"n2\",\"n1\"],\"vni_count\":2}" >run2.json &&
    jq -e "(.vnis | length) == 2 and .created_ms > 0 and .nodes == [\"n2\",\"n1\"]" run2.json &&
    rm_call GET /v1/jobs/2 | jq -e --slurpfile r run2.json "del(.node_reports) == \$r[0]"
'
expect_ok 'a bad value stops start-up naming file, line and key' '
    printf "[broker]\nstate_dir = $T/state\n[vni]\npool = 9-3\n" >bad.conf &&
    { "$fmbrokerd" -c bad.conf 2>err; test $? -eq 2; } &&
    grep -q "bad.conf:4: \[vni\] pool = 9-3: MIN is above MAX" err
'
expect_ok 'a missing config file named with -c is an error' '
    { "$fmbrokerd" -c "$T/nope.conf" 2>err; test $? -eq 2; } &&
    grep -q "nope.conf: No such file or directory" err
'
expect_ok 'a foreign database is refused and left as it was' '
    mkdir other && sqlite3 other/fmbroker.db "CREATE TABLE t (x); INSERT INTO t VALUES (1);" &&
    sha256sum other/fmbroker.db >db.sum &&
    { timeout 10 "$fmbrokerd" -c /dev/null $sets --set broker.state_dir="$T/other" 2>err; test $? -eq 1; } &&
    grep -q "not an fmbroker database" err &&
    sha256sum -c db.sum
'
expect_ok 'a token key others can read is refused' '
    stop_broker && chmod 644 state/token.key &&
    { timeout 10 "$fmbrokerd" -c broker.conf 2>err; test $? -eq 1; } &&
    grep -q "token.key: mode 0644 lets group or others read it" err &&
    chmod 600 state/token.key
'
expect_ok 'FM credentials others can read stop start-up' '
    mkdir -p auth && echo s >auth/client-secret && echo id >auth/client-id &&
    echo http://127.0.0.1:1/token >auth/endpoint && chmod 644 auth/client-secret &&
    { timeout 10 "$fmbrokerd" -c broker.conf --set fabric_manager.url=http://127.0.0.1:1 \
        --set fabric_manager.auth=oauth --set fabric_manager.auth_dir="$T/auth" \
        --set fabric_manager.allow_plain_http=true \
        --set hwcoll.addrs_per_job=4 2>err; test $? -eq 2; } &&
    grep -q "client-secret: mode 0644 lets group or others read it" err
'
expect_ok '--version and --help answer' '
    "$fmbrokerd" --version | grep -q "^fmbrokerd [0-9]" &&
    "$fmbrokerd" --help | grep -q -- "--dump-config"
'
expect_fail 'an unknown option is refused' '
    "$fmbrokerd" --bogus
'
done_testing
