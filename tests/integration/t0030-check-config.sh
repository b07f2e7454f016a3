#!/bin/bash
# t0030-check-config.sh: --check-config runs the checks start runs, so a
# configuration it passes starts and one it refuses does not start, with
# the same message; --set overrides apply before validation, whatever
# their order.
. "$(dirname "$0")/lib.sh"
fmbrokerd="$FMB_BIN/fmbrokerd"
write_broker_conf
sh "$FMB_SRC/tests/integration/make-certs.sh" "$T/certs" >/dev/null 2>&1 ||
    bail_out "cannot make test certificates"
chmod 600 certs/server.key
printf 'rm %s\n' 0123456789abcdef0123 >tokens && chmod 600 tokens
mkdir -p auth && echo id >auth/client-id && echo http://127.0.0.1:1/t >auth/endpoint &&
    echo secret >auth/client-secret && chmod 600 auth/client-secret
tls="--set api.tls_cert=$T/certs/server.pem --set api.tls_key=$T/certs/server.key --set api.tokens_file=$T/tokens"
fm="--set fabric_manager.url=http://127.0.0.1:1 --set fabric_manager.auth=oauth --set fabric_manager.allow_plain_http=true"

# agree 'PATTERN' ARGS...: --check-config and start both exit 2 naming
# PATTERN, and start created nothing.
agree () {
    pattern=$1
    shift
    { "$fmbrokerd" -c broker.conf --check-config --user root "$@" >out 2>check.err; test $? -eq 2; } &&
        grep -q -- "$pattern" check.err &&
        { timeout 10 "$fmbrokerd" -c broker.conf "$@" 2>start.err; test $? -eq 2; } &&
        grep -q -- "$pattern" start.err && test ! -e state && test ! -e api.sock
}

expect_ok 'a host name as [api] tcp is refused by both' '
    agree "\[api\] tcp = broker.example:8443: HOST must be a numeric" \
        --set api.tcp=broker.example:8443 $tls
'
expect_ok 'credentials over plain http are refused by both unless allowed' '
    agree "\[fabric_manager\] url: http://127.0.0.1:1 is plain http: auth = oauth would send credentials" \
        --set fabric_manager.url=http://127.0.0.1:1 --set fabric_manager.auth=oauth \
        --set fabric_manager.auth_dir=$T/auth &&
    agree "\[fabric_manager\] url: http://127.0.0.1:1 is plain http: auth = basic" \
        --set fabric_manager.url=http://127.0.0.1:1 --set fabric_manager.auth=basic &&
    "$fmbrokerd" -c broker.conf --check-config --user root $fm --set fabric_manager.auth_dir=$T/auth
'
expect_ok 'a missing auth_dir is refused by both' '
    agree "\[fabric_manager\] auth_dir $T/nope: No such file or directory" \
        $fm --set fabric_manager.auth_dir=$T/nope
'
expect_ok 'a missing credential file is refused by both' '
    mv auth/client-id auth/id.saved &&
    agree "auth/client-id: No such file or directory" $fm --set fabric_manager.auth_dir=$T/auth;
    rc=$?; mv auth/id.saved auth/client-id; return $rc
'
expect_ok 'a credential others can read is refused by both' '
    chmod 644 auth/client-secret &&
    agree "client-secret: mode 0644 lets group or others read it" \
        $fm --set fabric_manager.auth_dir=$T/auth;
    rc=$?; chmod 600 auth/client-secret; return $rc
'
expect_ok 'a missing CA file is refused by both' '
    agree "\[fabric_manager\] ca_file.*nope.pem: No such file" \
        $fm --set fabric_manager.auth_dir=$T/auth --set fabric_manager.ca_file=$T/nope.pem
'
expect_ok 'a missing TLS certificate is refused by both' '
    agree "\[api\] tls_cert.*nope.pem: No such file" \
        --set api.tcp=127.0.0.1:0 $tls --set api.tls_cert=$T/nope.pem
'
expect_ok 'a TLS key others can read is refused by both' '
    chmod 644 certs/server.key &&
    agree "server.key: mode 0644 lets group or others read it" --set api.tcp=127.0.0.1:0 $tls;
    rc=$?; chmod 600 certs/server.key; return $rc
'
expect_ok 'a missing tokens file is refused by both' '
    agree "\[api\] tokens_file.*nope: No such file" \
        --set api.tcp=127.0.0.1:0 $tls --set api.tokens_file=$T/nope
'
# Issue 52: VNIs 1 and 10 are the NICs' default service's; a job given
# one fails at the node (cxil_alloc_svc: EEXIST), so the pool is refused.
expect_ok 'a pool holding VNI 1 or 10 is refused by both, naming the key and why' '
    agree "\[vni\] pool: 1-10 holds VNI 1, which belongs to the NICs. default CXI service (VNIs 1 and 10)" \
        --set vni.pool=1-10 &&
    agree "\[vni\] pool: 5-2000 holds VNI 10, which belongs to the NICs. default CXI service" \
        --set vni.pool=5-2000
'
expect_ok 'a pool holding a VNI of [vni] reserved is refused by both; outside it, OK' '
    agree "\[vni\] pool: 1024-65535 holds VNI 4000, which \[vni\] reserved (4000-4010) keeps for the site" \
        --set vni.reserved=4000-4010 &&
    "$fmbrokerd" -c broker.conf --check-config --user root --set vni.pool=11-3999 \
        --set vni.reserved=4000-4010 >out && grep -q "configuration OK" out
'
expect_ok '--set before the keys it needs is fine: validation sees them all' '
    "$fmbrokerd" -c broker.conf --check-config --user root --set api.tcp=127.0.0.1:0 $tls >out &&
    grep -q "configuration OK" out
'
expect_ok 'what --check-config passes starts' '
    port=$(free_ports 1) &&
    "$fmbrokerd" -c broker.conf --check-config --user root --set api.tcp=127.0.0.1:$port $tls \
        $fm --set fabric_manager.auth_dir=$T/auth >out &&
    { "$fmbrokerd" -c broker.conf --set api.tcp=127.0.0.1:$port $tls \
        $fm --set fabric_manager.auth_dir=$T/auth 2>>broker.err & broker_pid=$!; } &&
    wait_for 100 0.05 rm_call GET /v1/health >/dev/null &&
    curl -sf --cacert certs/ca.pem https://127.0.0.1:$port/v1/health >/dev/null &&
    stop_broker
'
expect_ok 'two of --check-config, --dump-config, --check-db, --recount are refused, not half done' '
    { "$fmbrokerd" -c broker.conf --check-config --user root --dump-config >out 2>err; test $? = 2; } &&
    grep -q "go one at a time" err && test ! -s out &&
    { "$fmbrokerd" -c broker.conf --check-db --check-config --user root >out 2>err; test $? = 2; } && grep -q "go one at a time" err
'
# --user names whom --check-config checks as; alone it would change
# nothing while the admin believed the check had run as that user.
expect_ok '--user without --check-config is refused (exit 2); --help and --version exit 0' '
    { "$fmbrokerd" -c broker.conf --user root --dump-config >out 2>err; test $? = 2; } &&
    grep -q "user goes with --check-config" err && test ! -s out &&
    "$fmbrokerd" --help | grep -q -- "--check-config" && "$fmbrokerd" --version | grep -q "^fmbrokerd "
'
# A broker the unit starts as a user who cannot use the state directory
# exits at once and is restarted for ever: --check-config says so first.
expect_ok 'a state directory this user cannot use fails --check-config (exit 2), naming it' '
    if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then echo "skipped: needs root"; return 0; fi
    chmod 755 "$T" && chmod 644 broker.conf && mkdir -p state && chmod 755 state &&
    touch state/fmbrokerd.lock && chmod 600 state/fmbrokerd.lock &&
    { as_user 65534 "$fmbrokerd" -c broker.conf --check-config >out 2>err; test $? = 2; } &&
    grep -q "broker.conf:[0-9]*: \[broker\] state_dir = $T/state: user .*(uid 65534) cannot read, write and enter it: Permission denied" err &&
    chmod 777 state && { as_user 65534 "$fmbrokerd" -c broker.conf --check-config >out 2>err; test $? = 2; } &&
    grep -q "state_dir = $T/state: user .*(uid 65534) cannot read and write $T/state/fmbrokerd.lock: Permission denied" err &&
    chmod 755 state &&
    "$fmbrokerd" -c broker.conf --check-config --user root >out && grep -q "not locked" out && rm -rf state
'
# Issue 37: the check runs as the service runs.  Root may read what the
# service user cannot; a directory that does not exist is fine only if
# the service user can create it; every problem in one run; exit 2 as
# at start, so systemd stops restarting (RestartPreventExitStatus=2).
svc_setup () { # a configuration in $T/svc that user 65534 can read
    chmod 755 "$T" && rm -rf svc && mkdir -p svc/auth svc/state svc/run &&
    chown 65534:65534 svc/state svc/run && chmod 700 svc/state &&
    echo id >svc/auth/client-id && echo http://127.0.0.1:1/t >svc/auth/endpoint &&
    echo secret >svc/auth/client-secret && chmod 600 svc/auth/client-secret &&
    cat >svc/b.conf <<CONF
[broker]
state_dir = $T/svc/state
[api]
socket = $T/svc/run/api.sock
[fabric_manager]
url = http://127.0.0.1:1
auth = oauth
auth_dir = $T/svc/auth
allow_plain_http = true
[hwcoll]
addrs_per_job = 4
CONF
    chmod 644 svc/b.conf
}
needs_root='if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then echo "skipped: needs root"; return 0; fi'
expect_ok 'as root, --check-config checks as the service user: a secret only root reads is exit 2, named' '
    eval "$needs_root"; svc_setup &&
    { "$fmbrokerd" -c svc/b.conf --check-config --user nobody >out 2>err; test $? = 2; } && cat err &&
    grep -q "$T/svc/auth/client-secret: Permission denied" err &&
    grep -q "problem found, checking as user nobody (uid 65534)" err &&
    chown 65534 svc/auth/client-secret &&
    "$fmbrokerd" -c svc/b.conf --check-config --user nobody >out 2>err &&
    grep -q "checked as user nobody (uid 65534)" out && grep -q "configuration OK" out
'
expect_ok 'as root with no service user on the host, it says it checked as root' '
    eval "$needs_root"; svc_setup &&
    "$fmbrokerd" -c svc/b.conf --check-config --user no-such-user-37 >out &&
    grep -q "warning: could not check as the service user: no user .no-such-user-37. on this host; checked as root" out
'
expect_ok 'every problem in one run: an unreadable secret, state_dir and socket directory' '
    eval "$needs_root"; svc_setup && chown root svc/state svc/run && chmod 755 svc/state svc/run &&
    { "$fmbrokerd" -c svc/b.conf --check-config --user nobody >out 2>err; test $? = 2; } && cat err &&
    grep -q "client-secret: Permission denied" err &&
    grep -q "b.conf:2: \[broker\] state_dir = $T/svc/state: user nobody (uid 65534) cannot read, write and enter it" err &&
    grep -q "b.conf:4: \[api\] socket = $T/svc/run/api.sock: user nobody (uid 65534) cannot create files in it" err &&
    grep -q "3 problems found" err
'
expect_ok 'a state_dir that cannot be made: exit 2 with file and line, at check and at start' '
    touch afile &&
    agree "command line: \[broker\] state_dir = $T/afile/state: $T/afile/state does not exist, and user root (uid 0) cannot create it: $T/afile: Not a directory" \
        --set broker.state_dir=$T/afile/state
'
expect_ok 'a socket directory that cannot be made: exit 2 naming the key, at check and at start' '
    agree "command line: \[api\] socket = $T/afile/run/api.sock: $T/afile/run does not exist, and user root (uid 0) cannot create it" \
        --set api.socket=$T/afile/run/api.sock
'
expect_ok 'as the service user, start says the same as the check (exit 2, file and line)' '
    eval "$needs_root"; svc_setup && chown 65534 svc/auth/client-secret && chown root svc/run && chmod 755 svc/run &&
    sed -i "s|^state_dir = .*|state_dir = $T/svc/nostate/state|" svc/b.conf && mkdir svc/nostate && chmod 755 svc/nostate &&
    { "$fmbrokerd" -c svc/b.conf --check-config --user nobody >out 2>check.err; test $? = 2; } &&
    { timeout 10 setpriv --reuid=65534 --regid=65534 --clear-groups "$fmbrokerd" -c svc/b.conf 2>start.err; test $? = 2; } &&
    for f in check.err start.err; do
        grep -q "b.conf:2: \[broker\] state_dir = $T/svc/nostate/state: $T/svc/nostate/state does not exist, and user nobody (uid 65534) cannot create it: $T/svc/nostate: Permission denied" $f &&
        grep -q "b.conf:4: \[api\] socket = $T/svc/run/api.sock: user nobody (uid 65534) cannot create files in it: Permission denied" $f || { cat $f; return 1; }
    done
'
# Issue 52: root running the broker once over the service user's state
# leaves root's files there, and the service then fails: start warns,
# and the service's check names the chown that gives the state back.
expect_ok 'as root over the service user'"'"'s state_dir, start warns with the chown line' '
    eval "$needs_root"; chmod 755 "$T" && rm -rf own && mkdir -p own/state own/run && chown 65534 own/run &&
    chown 65534:65534 own/state && chmod 700 own/state &&
    printf "[broker]\nstate_dir = $T/own/state\n[api]\nsocket = $T/own/run/api.sock\n" >own/b.conf &&
    chmod 644 own/b.conf &&
    { "$fmbrokerd" -c own/b.conf 2>own/err & pid=$!; } &&
    wait_for 100 0.05 test -S own/run/api.sock && kill $pid && wait $pid; cat own/err &&
    grep -q "warning: running as root over \[broker\] state_dir $T/own/state, which belongs to user nobody (uid 65534).*chown -R nobody: $T/own/state" own/err
'
expect_ok '... and the service user'"'"'s check then fails (exit 2) naming that chown; after it, OK' '
    eval "$needs_root";
    { as_user 65534 "$fmbrokerd" -c own/b.conf --check-config >out 2>err; test $? = 2; } && cat err &&
    grep -q "cannot read and write $T/own/state/fmbroker.db: Permission denied; it is root.s (was fmbrokerd run as root?): give the state back with chown -R nobody: $T/own/state" err &&
    chown -R nobody: own/state && as_user 65534 "$fmbrokerd" -c own/b.conf --check-config >out &&
    grep -q "configuration OK" out
'
# Issue 52: under the unit, RuntimeDirectory=fmbroker makes /run/fmbroker;
# a check made before the first start must not fail for its absence.
# (A private mount namespace with an empty /run: nothing outside changes.)
expect_ok 'the default socket directory missing: the check says the unit makes it (exit 0)' '
    eval "$needs_root"; command -v unshare >/dev/null || { echo "skipped: no unshare"; return 0; }
    chmod 755 "$T" && rm -rf rt && mkdir -p rt/state && chown 65534 rt/state &&
    printf "[broker]\nstate_dir = $T/rt/state\n" >rt/b.conf && chmod 644 rt/b.conf &&
    unshare -m sh -c "mount -t tmpfs tmpfs /run && exec \"$fmbrokerd\" -c rt/b.conf --check-config --user nobody" >out 2>err;
    rc=$?; cat out err; test $rc = 0 &&
    grep -q "^\[api\] socket: /run/fmbroker does not exist; the unit.s RuntimeDirectory=fmbroker makes it when systemd starts fmbrokerd" out &&
    grep -q "configuration OK" out
'
# Issue 52: a second broker on a socket another one serves exits at start
# (under the unit, a restart every few seconds): the check says so first.
# The running broker checked against its own configuration is fine.
expect_ok 'a socket another broker listens on: the check names it (exit 2); the running one'"'"'s own check is OK' '
    start_broker &&
    cp broker.conf second.conf && sed -i "s|^state_dir = .*|state_dir = $T/second-state|" second.conf &&
    { "$fmbrokerd" -c second.conf --check-config --user root >out 2>err; test $? = 2; } && cat out err &&
    grep -q "\[api\] socket $T/api.sock: another broker is listening there (it does not hold state directory $T/second-state)" err &&
    ! grep -q "configuration OK" out &&
    "$fmbrokerd" -c broker.conf --check-config --user root >out && grep -q "locked by a running broker" out;
    rc=$?; stop_broker; rm -rf state; return $rc
'
expect_ok 'every problem of a file in one run, at check and at start (exit 2)' '
    cp broker.conf many.conf &&
    printf "[vni]\nmni_nodes = 5\nper_job = 9\n[broker]\ncluster_name = a b\n[bogus]\nx = 1\ny = 2\n" >>many.conf &&
    { "$fmbrokerd" -c many.conf --check-config --user root >out 2>check.err; test $? = 2; } &&
    { timeout 10 "$fmbrokerd" -c many.conf 2>start.err; test $? = 2; } &&
    for f in check.err start.err; do
        grep -q "many.conf:[0-9]*: \[vni\] mni_nodes: unknown key" $f &&
        grep -q "many.conf:[0-9]*: \[vni\] per_job = 9: " $f &&
        grep -q "many.conf:[0-9]*: \[broker\] cluster_name: set twice" $f &&
        test "$(grep -c "\[bogus\]: unknown section" $f)" = 1 &&
        grep -q "many.conf: 4 problems" $f || { cat $f; return 1; }
    done
'
expect_ok 'every rule between keys broken, in one run' '
    { "$fmbrokerd" -c broker.conf --check-config --user root --set vni.per_job=4 --set vni.max_per_job=2 \
        --set fabric_manager.reserve_timeout_ms=5000 --set fabric_manager.timeout_ms=1000 >out 2>err; test $? = 2; } &&
    grep -q "\[vni\] per_job: 4 exceeds \[vni\] max_per_job (2)" err &&
    grep -q "\[fabric_manager\] reserve_timeout_ms: 5000 exceeds \[fabric_manager\] timeout_ms (1000)" err &&
    grep -q ": 2 problems" err
'
done_testing
