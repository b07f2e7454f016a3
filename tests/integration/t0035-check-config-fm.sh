#!/bin/bash
# t0035-check-config-fm.sh: fmbrokerd --check-config --fm makes the FM
# session and one call on the collectives API (the jobs listing), as the
# service user, and names what is wrong: the URL's path (404), its port
# (nothing listening), the credentials (401, or the token endpoint
# refuses them), the CA (the certificate does not verify).  (issue 52)
. "$(dirname "$0")/lib.sh"
skip_unless_root
fmbrokerd="$FMB_BIN/fmbrokerd"
svc=65534 # the service user: it owns the credentials, as under the unit
chmod 755 "$T"
mkdir -p fmauth auth run state && chown $svc run state
echo fmbroker >fmauth/client-id && echo right-secret >fmauth/client-secret && chmod 600 fmauth/*
start_mockfm --auth oauth --auth-dir "$T/fmauth" || bail_out "mockfm did not start"
# conf URL [LINES...]: b.conf for the service user, its credentials in auth/
conf () {
    url=$1 && shift &&
    printf "[broker]\nstate_dir = %s\n[api]\nsocket = %s\n[fabric_manager]\nurl = %s\nauth = oauth\nauth_dir = %s\nallow_plain_http = true\n[hwcoll]\naddrs_per_job = 4\n" \
        "$T/state" "$T/run/api.sock" "$url" "$T/auth" >b.conf &&
    { [ $# = 0 ] || printf "[fabric_manager]\n%s\n" "$@" >>b.conf; } && chmod 644 b.conf
}
creds () { # creds SECRET [ENDPOINT]: the service user's own files
    echo fmbroker >auth/client-id && echo "$1" >auth/client-secret &&
    echo "${2:-$fm_url/oauth/token}" >auth/endpoint &&
    chmod 600 auth/* && chown $svc auth/*
}
check () { "$fmbrokerd" -c b.conf --check-config --fm --user nobody >out 2>err; }
fails () { check; rc=$?; cat out err; test $rc = 2; }

expect_ok 'a right configuration: the session is made and the listing answered, as the service user' '
    creds right-secret && conf "$fm_url" && check && cat out &&
    grep -q "fabric manager $fm_url: session made (auth = oauth), GET /fabric/collectives/jobs/ answered" out &&
    grep -q "checked as user nobody (uid $svc)" out &&
    grep -q "^POST /oauth/token 200" fm.log && grep -q "^GET /fabric/collectives/jobs/ 200" fm.log
'
expect_ok 'without --fm the check does not call the FM' '
    : >fm.log && "$fmbrokerd" -c b.conf --check-config --user nobody >out && test ! -s fm.log
'
expect_ok 'a wrong path in the URL: exit 2, naming the path' '
    conf "$fm_url/apis/fm" && fails &&
    grep -q "\[fabric_manager\] url = $fm_url/apis/fm: the URL.s path is wrong: FM answered 404" err
'
expect_ok 'a wrong port: exit 2, naming the port' '
    port=$(free_ports 1) && conf "http://127.0.0.1:$port" && fails &&
    grep -q "\[fabric_manager\] url = http://127.0.0.1:$port: nothing accepts connections there: is the port in the URL right" err
'
expect_ok 'a wrong client secret: exit 2, naming the credentials' '
    creds wrong-secret && conf "$fm_url" && fails &&
    grep -q "\[fabric_manager\] auth = oauth: the token endpoint refuses fmbroker.s credentials: the client-id and client-secret in $T/auth (token endpoint answered 401)" err
'
expect_ok 'credentials the FM API refuses (401 with a fresh token): exit 2, naming them' '
    creds right-secret && conf "$fm_url" &&
    mockfm_ctl POST /_mock/faults "GET /fabric/collectives/jobs* 401" && fails &&
    mockfm_ctl DELETE /_mock/faults &&
    grep -q "\[fabric_manager\] auth = oauth: the FM refuses fmbroker.s credentials (auth_dir $T/auth): FM answered 401" err
'
stop_mockfm
sh "$FMB_SRC/tests/integration/make-certs.sh" "$T/certs" >/dev/null 2>&1 || bail_out "no certificates"
chmod 644 certs/*.pem
start_mockfm --auth oauth --auth-dir "$T/fmauth" --tls-cert "$T/certs/server.pem" \
    --tls-key "$T/certs/server.key" || bail_out "mockfm (TLS) did not start"
https_url="https://127.0.0.1:$fm_port"
expect_ok 'an FM certificate the CA does not verify: exit 2, naming ca_file' '
    creds right-secret "$https_url/oauth/token" &&
    conf "$https_url" "ca_file = $T/certs/other-ca.pem" && fails &&
    grep -q "the FM.s TLS certificate does not verify: set \[fabric_manager\] ca_file to the CA that signed it" err
'
expect_ok '... and with the right CA: OK' '
    conf "$https_url" "ca_file = $T/certs/ca.pem" && check && cat out err &&
    grep -q "fabric manager $https_url: session made" out
'
expect_ok '--fm alone (without --check-config) is a usage error' '
    { "$fmbrokerd" -c b.conf --fm >out 2>err; test $? = 2; } && grep -q "fm goes with --check-config" err
'
done_testing
