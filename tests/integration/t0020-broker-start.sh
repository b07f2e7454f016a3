#!/bin/bash
# t0020-broker-start.sh: fmbrokerd initialises its state, can be started
# again, and refuses bad configuration and foreign state with a message
# that names the culprit, changing nothing.
. "$(dirname "$0")/lib.sh"
fmbrokerd="$FMB_BIN/fmbrokerd"

expect_ok 'first start creates a private state dir, database and key' '
    "$fmbrokerd" -c /dev/null --set broker.state_dir="$T/state" >out 2>err &&
    grep -q "schema [0-9]" out &&
    grep -q "jobs: *0 active" out &&
    test "$(file_mode state)" = 700 &&
    test "$(file_mode state/fmbroker.db)" = 600 &&
    test "$(file_mode state/token.key)" = 600 &&
    grep -q "VNI-only mode" err
'
expect_ok 'a second start opens the same state' '
    sha256sum state/token.key >key.sum &&
    "$fmbrokerd" -c /dev/null --set broker.state_dir="$T/state" >out &&
    grep -q "schema [0-9]" out &&
    sha256sum -c key.sum
'
expect_ok 'a bad value stops start-up naming file, line and key' '
    printf "[broker]\nstate_dir = $T/state\n[vni]\npool = 9-3\n" >bad.conf &&
    ! "$fmbrokerd" -c bad.conf 2>err; test $? -eq 0 &&
    grep -q "bad.conf:4: \[vni\] pool = 9-3: MIN is above MAX" err
'
expect_ok 'bad configuration exits with status 2' '
    "$fmbrokerd" -c bad.conf 2>/dev/null; test $? -eq 2
'
expect_ok 'a missing config file named with -c is an error' '
    "$fmbrokerd" -c "$T/nope.conf" 2>err; test $? -eq 2 &&
    grep -q "nope.conf: No such file or directory" err
'
expect_ok 'a foreign database is refused and left as it was' '
    mkdir other && sqlite3 other/fmbroker.db "CREATE TABLE t (x); INSERT INTO t VALUES (1);" &&
    sha256sum other/fmbroker.db >db.sum &&
    "$fmbrokerd" -c /dev/null --set broker.state_dir="$T/other" 2>err; test $? -eq 1 &&
    grep -q "not an fmbroker database" err &&
    sha256sum -c db.sum
'
expect_ok 'a token key others can read is refused' '
    mkdir loose && "$fmbrokerd" -c /dev/null --set broker.state_dir="$T/loose" >/dev/null &&
    chmod 644 loose/token.key &&
    "$fmbrokerd" -c /dev/null --set broker.state_dir="$T/loose" 2>err; test $? -eq 1 &&
    grep -q "token.key: mode 0644 lets group or others read it" err
'
expect_ok '--version and --help answer' '
    "$fmbrokerd" --version | grep -q "^fmbrokerd [0-9]" &&
    "$fmbrokerd" --help | grep -q -- "--dump-config"
'
expect_fail 'an unknown option is refused' '
    "$fmbrokerd" --bogus
'
done_testing
