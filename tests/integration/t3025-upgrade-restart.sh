#!/bin/bash
# t3025-upgrade-restart.sh: on upgrade, the package restarts a running
# broker on the new binary only when `fmbrokerd --check-config` passes;
# a configuration the new binary refuses (an "agent" token line without
# [api] shared_agent_token, a pool holding VNI 1) leaves the running
# broker alone, serving, with a message that names the problem and what
# to do.  Both the Debian postinst and the RPM %post, run as dpkg and rpm
# run them, with stubs for what would touch this host: systemctl and
# deb-systemd-invoke (they log their calls), getent, install,
# systemd-sysusers and systemd-tmpfiles; fmbrokerd is the built one on
# this test's configuration.  They act only where systemd runs
# (/run/systemd/system): each runs in a mount namespace of its own with a
# tmpfs over /run, so that needs root and unshare.
. "$(dirname "$0")/lib.sh"
skip_unless_root
if ! unshare -m --propagation private true 2>/dev/null; then
    echo "ok 1 # SKIP needs unshare -m (a mount namespace) for /run/systemd/system"
    echo "1..1"
    exit 0
fi
# The service user: the unit runs the broker as fmbroker; here a user
# with uid 1000 stands in when there is one (root otherwise).
svc=$(getent passwd 1000 | cut -d: -f1)
svc=${svc:-root}
chmod 755 "$T"

mkdir stub
for c in sh sed cat; do ln -s "$(command -v $c)" stub/$c; done
for c in getent install systemd-sysusers systemd-tmpfiles; do
    printf '#!/bin/sh\nexit 0\n' >stub/$c
done
# systemctl: "is-active" says whether the test's broker runs; every call
# is logged.
cat >stub/systemctl <<STUB
#!/bin/sh
echo "systemctl \$*" >>"$T/calls"
[ "\$1" = is-active ] || exit 0
kill -0 "\$(cat "$T/broker.pid" 2>/dev/null)" 2>/dev/null
STUB
printf '#!/bin/sh\necho "deb-systemd-invoke $*" >>"%s/calls"\n' "$T" >stub/deb-systemd-invoke
printf '#!/bin/sh\necho "fmbrokerd $*" >>"%s/calls"\nexec "%s" -c "%s" "$@" --user %s\n' \
    "$T" "$FMB_BIN/fmbrokerd" "$T/broker.conf" "$svc" >stub/fmbrokerd
chmod 755 stub/*

# maint SCRIPT ARGS...: run a maintainer script as the package manager
# would on a host where systemd runs; its stderr in $T/maint.err.
maint () {
    : >"$T/calls"
    unshare -m --propagation private sh -c \
        'mount -t tmpfs fmbtest /run && mkdir -p /run/systemd/system && exec env PATH="$0" sh "$@"' \
        "$T/stub" "$@" 2>"$T/maint.err"
}
restarted () { grep -qx "deb-systemd-invoke try-restart fmbrokerd.service" calls ||
    grep -qx "systemctl try-restart fmbrokerd.service" calls; }
left_alone () { # WHAT: not restarted, said so, named WHAT, and still serves
    cat maint.err && ! restarted && grep -q "^fmbroker: fmbrokerd NOT restarted on the new version" maint.err &&
        grep -q "^fmbroker:   .*$1" maint.err && grep -q "systemctl restart fmbrokerd" maint.err &&
        grep -q "Upgrading" maint.err && kill -0 "$(cat broker.pid)" && rm_call GET /v1/health >/dev/null
}

tls_and_node_tokens || bail_out "cannot make test certificates"
tcp_port=$(free_ports 1) || bail_out "no free port"
write_broker_conf "[api]" "tcp = 127.0.0.1:$tcp_port" "tls_cert = $T/certs/server.pem" \
    "tls_key = $T/certs/server.key" "tokens_file = $T/tokens"
mkdir -m 700 state && chown -R "$svc:" state certs tokens broker.conf
# The broker as the service user; the socket in $T, which that user owns.
chown "$svc:" "$T"
# (setpriv itself in the background, not as_user: $! is then the broker)
uid=$(id -u "$svc")
setpriv --reuid="$uid" --regid="$uid" --clear-groups "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" \
    2>>"$T/broker.err" &
broker_pid=$!
echo $broker_pid >broker.pid
wait_for 100 0.05 rm_call GET /v1/health >/dev/null || bail_out "fmbrokerd did not start: $(tail -3 broker.err)"
stop_test_broker () { kill "$broker_pid" 2>/dev/null; wait "$broker_pid" 2>/dev/null; }
on_exit stop_test_broker

for pkg in deb rpm; do
    if [ $pkg = deb ]; then script="$FMB_SRC/deploy/debian/postinst" args="configure 0.1"
    else script="$FMB_SRC/deploy/rpm/broker-post.sh" args=2; fi
    expect_ok "$pkg: a configuration the new binary takes: the running broker is restarted" '
        cp tokens tokens.good && cp broker.conf broker.conf.good &&
        maint "$script" $args && cat calls maint.err && restarted &&
        grep -qx "fmbrokerd --check-config" calls && ! grep -q "NOT restarted" maint.err
    '
    expect_ok "$pkg: an agent token line without shared_agent_token: left running, the line named" '
        echo "agent 0123456789abcdef0123456789" >>tokens &&
        maint "$script" $args; left_alone "tokens:2: an .agent. token.*shared_agent_token = true"; rc=$?
        cp tokens.good tokens; return $rc
    '
    expect_ok "$pkg: a pool holding VNI 1: left running, the VNI named" '
        sed -i "s/^pool = .*/pool = 1-2000/" broker.conf &&
        maint "$script" $args; left_alone "pool: 1-2000 holds VNI 1"; rc=$?
        cp broker.conf.good broker.conf; return $rc
    '
done
expect_ok 'a first install, or no broker running: nothing checked, nothing restarted' '
    maint "$FMB_SRC/deploy/debian/postinst" configure "" && ! grep -q "^fmbrokerd \|try-restart" calls &&
    stop_test_broker &&
    maint "$FMB_SRC/deploy/debian/postinst" configure 0.1 && cat calls && ! grep -q "^fmbrokerd \|try-restart" calls &&
    maint "$FMB_SRC/deploy/rpm/broker-post.sh" 2 && ! grep -q "^fmbrokerd \|try-restart" calls
'
done_testing
