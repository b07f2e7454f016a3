#!/bin/bash
# t0040-reload.sh: SIGHUP reloads the configuration: a changed role takes
# effect without a restart, a configuration that does not load keeps the
# running one (and says why), and keys that need a restart say so.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "1..0 # SKIP needs root for setpriv"; exit 0; }
user=65534
run_as_user () {
    as_user $user curl -s -o /dev/null -w "%{http_code}" --unix-socket "$T/api.sock" \
        -X PUT --data-binary "{\"uid\":$user,\"node_count\":1}" "http://fmbroker/v1/jobs/$1"
}
reload () {
    n=$(grep -c "reload:" broker.err)
    kill -HUP "$broker_pid" &&
        wait_for 100 0.05 eval "test \$(grep -c \"reload:\" broker.err) -gt $n"
}
status () { "$FMB_BIN/fmbroker" -c "$T/${1:-broker.conf}" status >status.out 2>&1; }
chmod 755 "$T" # the unprivileged user reaches the socket
write_broker_conf
start_broker || bail_out "broker did not start"

expect_ok 'before: an unprivileged user may not RUN' '
    test "$(run_as_user 1)" = 403
'
expect_ok 'a role added to the file and reloaded takes effect without restart' '
    pid=$broker_pid &&
    sed -i "s/^rm_users = root$/rm_users = root,$user/" broker.conf &&
    reload && grep -q "reload: configuration .*broker.conf applied" broker.err &&
    test "$(run_as_user 2)" = 201 && test "$broker_pid" = "$pid" && kill -0 "$pid"
'
expect_ok 'a configuration that does not load keeps the running one, saying why' '
    cp broker.conf good.conf &&
    sed -i "s/^pool = .*/pool = 9-3/" broker.conf &&
    reload &&
    grep -q "reload: .*broker.conf:[0-9]*: \[vni\] pool = 9-3: MIN is above MAX; keeping the running configuration" broker.err &&
    test "$(run_as_user 3)" = 201 && rm_call GET /v1/health >/dev/null
'
# A restart would fail on that file: until a good reload, status says so
# (asked with the good copy: the CLI refuses that value too).
expect_ok '... and status is degraded (exit 1), naming the failed reload and why' '
    { status good.conf; test $? = 1; } && cat status.out &&
    grep -q "^degraded: configuration reload failed: .*broker.conf:[0-9]*: \[vni\] pool = 9-3: MIN is above MAX; the broker runs the configuration it had, and a restart would fail" status.out
'
# The hooks and the CLI read the same file: a typo only the broker
# judges must not stop them while the broker runs on.
expect_ok '... and the CLI and the hooks, reading that file, still work' '
    cp good.conf broker.conf && sed -i "/^\[vni\]/a mni_nodes = 5" broker.conf && reload &&
    grep -q "reload: .*\[vni\] mni_nodes: unknown key; keeping the running configuration" broker.err &&
    "$FMB_BIN/fmbroker" -c "$T/broker.conf" run-job cli1 --uid 1000 --nodes n1 --quiet &&
    "$FMB_BIN/fmbroker" -c "$T/broker.conf" --json job show cli1 | jq -e ".state == \"active\"" &&
    ! "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" --check-config --user root 2>/dev/null
'
expect_ok 'a config whose files do not check keeps the running one too' '
    cp good.conf broker.conf &&
    printf "tcp = 127.0.0.1:1\ntls_cert = $T/nope.pem\ntls_key = $T/nope.key\ntokens_file = $T/nope\n" >extra &&
    sed -i "/^\[api\]/r extra" broker.conf &&
    reload && grep -q "reload: \[api\] tokens_file.*keeping the running configuration" broker.err &&
    test "$(run_as_user 4)" = 201 &&
    { status; test $? = 1; } && grep -q "^degraded: configuration reload failed: \[api\] tokens_file" status.out
'
expect_ok 'a role removed is gone after reload' '
    cp good.conf broker.conf && sed -i "s/^rm_users = .*/rm_users = root/" broker.conf &&
    reload && test "$(run_as_user 5)" = 403
'
expect_ok 'a good reload ends the degraded status' '
    status && ! grep -q "reload failed" status.out
'
expect_ok 'a key that needs a restart is named, the old value stays' '
    sed -i "s|^socket = .*|socket = $T/other.sock|" broker.conf &&
    reload &&
    grep -q "reload: \[api\] socket changed; it takes effect at the next restart" broker.err &&
    rm_call GET /v1/health >/dev/null && test ! -e other.sock
'
expect_ok 'a changed [vni] pool (both ends) is named once' '
    cp good.conf broker.conf && sed -i "s/^rm_users = .*/rm_users = root/" broker.conf &&
    sed -i "s/^pool = .*/pool = 2000-2999/" broker.conf &&
    before=$(grep -c "reload: \[vni\] pool changed" broker.err; true) && reload &&
    test "$(grep -c "reload: \[vni\] pool changed; it takes effect at the next restart" broker.err)" = $((before + 1))
'
expect_ok 'the log level changes live' '
    cp good.conf broker.conf && sed -i "s/^rm_users = .*/rm_users = root/" broker.conf &&
    sed -i "/^\[broker\]/a log_level = debug" broker.conf &&
    reload && grep -q "reload: configuration" broker.err
'
expect_ok 'at debug, answers on the socket do not log libmicrohttpd noise each time' '
    for i in 1 2 3 4 5; do rm_call GET /v1/health >/dev/null || return 1; done &&
    test "$(grep -c "Client may experience some delay" broker.err)" -le 1
'
expect_ok 'logs outside journald are plain lines, without <N> prefixes' '
    grep -q "^fmbrokerd: notice: reload: configuration" broker.err &&
    grep -q "^fmbrokerd: error: reload: " broker.err &&
    ! grep -q "^<[0-7]>" broker.err
'
stop_broker
# The tokens file is read again at reload: an old-style "agent" line
# added to it (refused without [api] shared_agent_token) keeps the
# running tokens, and status says so until the file is put right.
expect_ok 'an agent line added to the tokens file: reload refused, status degraded naming it' '
    tls_and_node_tokens && start_broker_for_nodes && cp tokens tokens.good &&
    echo "agent shared-secret-for-all" >>tokens && reload &&
    { status; test $? = 1; } && cat status.out &&
    grep -q "^degraded: configuration reload failed: .*tokens.*agent" status.out
'
expect_ok '... and with the line gone, a reload makes it ok again' '
    cp tokens.good tokens && reload && status
'
stop_broker
done_testing
