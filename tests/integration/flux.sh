# flux.sh: a real multi-user Flux system instance for the tests, as a site
# runs one: flux-core and flux-security built from ../shared/thirdparty
# (scripts/build-flux.sh, cached outside the repository), owner `flux`,
# the IMP setuid root and configured, job signing by munge (a private
# munged), two ranks standing for nodes n1 and n2 on this host, jobs by
# an unprivileged user (nobody), fmbroker's jobtap and shell plugins
# loaded as deploy/flux/README says.  Sourced after lib.sh.
#
# Stand-ins, where one host cannot be a cluster: the two ranks share the
# host, so each node's job records (state-dir with %n) and NICs (the
# libcxi double's state) are per node name; the IMP's prolog, epilog and
# housekeeping scripts run prolog.d/epilog.d/housekeeping.d directly (a
# site's flux-run-prolog does so through a systemd unit; no systemd here).
#
# Sets FP (the flux prefix), FLUX_URI_ROOT (the instance's URI) and the
# functions flux_as_user, flux_as_owner, flux_start, flux_stop.

thirdparty FP build-flux.sh flux-core
# One test at a time uses the prefix (its IMP configuration and the
# plugins installed in it are machine-wide): wait for another's end.
exec 9>"$FP/.fmbroker-test.lock"
flock -w 1200 9 || bail_out "$FP is in use by another test for 20 minutes"
FLUX_JOBTAP=$FMB_BIN/../lib/flux/job-manager/plugins/fmbroker.so
FLUX_SHELLPLUGIN=$FMB_BIN/../lib/flux/shell/plugins/fmbroker.so
if [ ! -f "$FLUX_JOBTAP" ] || [ ! -f "$FLUX_SHELLPLUGIN" ]; then
    msg="the Flux plugins were not built (cmake found no flux-core.pc; configure again after scripts/build-flux.sh)"
    if [ "${CI:-}" = true ]; then echo "not ok 1 - $msg"; echo "1..1"; exit 1; fi
    echo "ok 1 # SKIP $msg"; echo "1..1"; exit 0
fi
for cmd in munged mungekey jq setpriv; do
    command -v $cmd >/dev/null || bail_out "$cmd is missing (scripts/install-deps.sh)"
done

# The instance owner, as on a Flux site; made here only if missing.
if ! getent passwd flux >/dev/null; then
    useradd --system --no-create-home --shell /usr/sbin/nologin flux ||
        bail_out "cannot add the user flux"
    flux_user_made=1
fi
flux_user_gone () { [ -n "${flux_user_made:-}" ] && userdel flux 2>/dev/null; return 0; }
on_exit flux_user_gone

chmod 755 "$T"
FD=$T/flux
mkdir -p "$FD/conf" "$FD/run" "$FD/munge" "$FD/etc/prolog.d" "$FD/etc/epilog.d" \
    "$FD/etc/housekeeping.d"
chown flux "$FD/run"

# munge: a private munged, its own key and socket.
chown munge "$FD/munge" && chmod 711 "$FD/munge" # the socket is reached by every user
runuser -u munge -- mungekey --create --keyfile="$FD/munge/key" >/dev/null 2>&1 ||
    bail_out "mungekey failed"
runuser -u munge -- munged --socket="$FD/munge/sock" --key-file="$FD/munge/key" \
    --pid-file="$FD/munge/pid" --log-file="$FD/munge/log" --seed-file="$FD/munge/seed" ||
    bail_out "munged did not start"
munge_gone () { [ -s "$FD/munge/pid" ] && kill "$(cat "$FD/munge/pid")" 2>/dev/null; return 0; }
on_exit munge_gone

# The IMP's configuration: compiled into the setuid IMP, so it lives in
# the cache's prefix; ours is one file each, removed at exit.
IMP_CONF=$FP/etc/flux/imp/conf.d/fmbroker-test.toml
# (files are read in name order and a later [sign] replaces an earlier
# one whole: ours comes after flux-security's own sign.toml)
SIGN_CONF=$FP/etc/flux/security/conf.d/zz-fmbroker-test.toml
mkdir -p "$(dirname "$IMP_CONF")" "$(dirname "$SIGN_CONF")"
for phase in prolog epilog housekeeping; do
    cat >"$FD/etc/run-$phase" <<RUN
#!/bin/sh
# the IMP's [run.$phase]: every script of $phase.d, as flux-run-$phase's unit does
export PATH=$FP/bin:/usr/sbin:/usr/bin:/sbin:/bin
rc=0
for s in $FD/etc/$phase.d/*; do [ -x "\$s" ] && { "\$s" || rc=1; }; done
# housekeeping: what flux-housekeeping@.service does when it fails
[ $phase = housekeeping ] && [ \$rc != 0 ] &&
    flux resource drain "\$(flux getattr rank)" "housekeeping failed"
exit \$rc
RUN
    chmod 755 "$FD/etc/run-$phase"
done
cat >"$IMP_CONF" <<TOML
[exec]
allowed-users = ["flux"]
allowed-shells = ["$FP/libexec/flux/flux-shell"]
[run.prolog]
allowed-users = ["flux"]
allowed-environment = ["FLUX_*"]
path = "$FD/etc/run-prolog"
[run.epilog]
allowed-users = ["flux"]
allowed-environment = ["FLUX_*"]
path = "$FD/etc/run-epilog"
[run.housekeeping]
allowed-users = ["flux"]
allowed-environment = ["FLUX_*"]
path = "$FD/etc/run-housekeeping"
TOML
cat >"$SIGN_CONF" <<TOML
[sign]
default-type = "munge"
allowed-types = ["munge"]
max-ttl = 1209600
[sign.munge]
socket-path = "$FD/munge/sock"
TOML
# fmbroker's plugins and rc1.d script where a site's package puts them:
# Flux's own directories (here the cache's prefix), so every instance,
# sub-instances too, finds them by name.  Removed at exit.
FLUX_JOBTAP_AT=$FP/lib/flux/job-manager/plugins/fmbroker.so
FLUX_SHELL_AT=$FP/lib/flux/shell/plugins/fmbroker.so
FLUX_RC1_AT=$FP/etc/flux/rc1.d/fmbroker
mkdir -p "$(dirname "$FLUX_RC1_AT")" "$(dirname "$FLUX_JOBTAP_AT")" "$(dirname "$FLUX_SHELL_AT")"
install -m 644 "$FLUX_JOBTAP" "$FLUX_JOBTAP_AT" && install -m 644 "$FLUX_SHELLPLUGIN" "$FLUX_SHELL_AT" ||
    bail_out "cannot install the plugins into $FP"
cat >"$FLUX_RC1_AT" <<RC1
#!/bin/sh
# /etc/default/fmbroker of a node, then the script as installed
export FMBROKER_CONF=$T/node.conf FMBROKER_HOOK_LOG=$T/hooks.log
exec $FMB_SRC/deploy/flux/fmbroker-rc1.sh
RC1
chmod 755 "$FLUX_RC1_AT"
imp_conf_gone () { rm -f "$IMP_CONF" "$SIGN_CONF" "$FLUX_JOBTAP_AT" "$FLUX_SHELL_AT" "$FLUX_RC1_AT"; }
on_exit imp_conf_gone

# flux_node_scripts CONF: fmbroker's per-rank scripts in the IMP's
# directories, installed as a site installs them (files naming
# /usr/share/fmbroker/flux, here the source tree), with what
# /etc/default/fmbroker gives them on a node: this node's NICs (the
# double's state) and records by its Flux hostname.
flux_node_scripts () {
    for pair in epilog.d:fmbroker-cxi-epilog.sh housekeeping.d:fmbroker-cxi-housekeeping.sh; do
        cat >"$FD/etc/${pair%%:*}/fmbroker" <<WRAP
#!/bin/sh
[ -e "$T/fmbroker.off" ] && exit 0 # bench/flux-launch.sh: a launch without fmbroker
# this rank's node, as /etc/default/fmbroker's FMBROKER_NODE gives it on
# a real node: the rank's own broker socket, local-0 for n1 (no process)
case \$FLUX_URI in *local-0) node=n1 ;; *local-1) node=n2 ;; *) node=\$(flux getattr hostname) ;; esac
export FMBROKER_NODE=\$node FMBROKER_CONF=$1 FMBROKER_BINDIR=$FMB_BIN FMBROKER_SBINDIR=$FMB_BIN \\
    FMBROKER_HOOK_TIMEOUT=3 FMBROKER_HOUSEKEEPING_S=\${FMBROKER_HOUSEKEEPING_S:-2} \\
    FMBROKER_HOOK_LOG=$T/hooks.log MOCKCXI_STATE=$T/\$node.cxi.json MOCKCXI_DEVICES=2 \\
    MOCKCXI_SYSTEM_SVC=1 FMBROKER_CXI_ARGS="--state-dir $T/rec-\$node"
exec $FMB_SRC/deploy/flux/${pair#*:}
WRAP
        chmod 755 "$FD/etc/${pair%%:*}/fmbroker"
    done
}
# flux_node_services CONF: each node's resident service (fmbroker-cxi
# serve, as fmbroker-cxi.service runs it), which makes a job's setup
# when its job shell asks; its log in $T/serve-NODE.log.
flux_node_services () {
    for n in n1 n2; do
        [ -S "$T/rec-$n/service.sock" ] && kill -0 "$(cat "$T/serve-$n.pid" 2>/dev/null)" 2>/dev/null && continue
        FMBROKER_NODE=$n MOCKCXI_STATE=$T/$n.cxi.json MOCKCXI_DEVICES=2 MOCKCXI_SYSTEM_SVC=1 \
            "$FMB_BIN/fmbroker-cxi" -c "$1" --state-dir "$T/rec-$n" --node $n serve 2>>"$T/serve-$n.log" &
        echo $! >"$T/serve-$n.pid"
        wait_for 100 0.05 test -S "$T/rec-$n/service.sock" || return 1
    done
}
flux_node_services_stop () {
    for n in n1 n2; do
        [ -s "$T/serve-$n.pid" ] && kill "$(cat "$T/serve-$n.pid")" 2>/dev/null &&
            wait_for 100 0.05 sh -c "! kill -0 $(cat "$T/serve-$n.pid") 2>/dev/null"
        rm -f "$T/serve-$n.pid"
    done
    return 0
}
on_exit flux_node_services_stop

# flux_config POLICY [EXTRA TOML]: the instance's configuration.
flux_config () {
    cat >"$FD/conf/instance.toml" <<TOML
[access]
allow-guest-user = true
allow-root-owner = true
[exec]
imp = "$FP/libexec/flux/flux-imp"
[resource]
noverify = true
[[resource.config]]
hosts = "n[1-2]"
cores = "0-1"
[job-manager]
plugins = [
    { load = "perilog.so" },
    { load = "fmbroker.so", conf = { config = "$T/rm.conf", policy = "$1", timeout = 3, cleanup-retry = ${cleanup_retry:-30}, state-dir = "$T/rec-%n" } },
]
[job-manager.prolog]
per-rank = true
[job-manager.epilog]
per-rank = true
[job-manager.housekeeping]
release-after = "0s"
TOML
    shift
    [ $# -gt 0 ] && printf '%s\n' "$@" >>"$FD/conf/instance.toml"
    chmod 644 "$FD/conf/instance.toml"
}

# flux_start: the instance, as flux, waiting until it takes jobs.
flux_start () {
    rm -rf "$FD/run" && mkdir -p "$FD/run" && chown flux "$FD/run"
    setpriv --reuid=flux --regid="$(id -g flux)" --init-groups env HOME="$FD/run" \
        "$FP/bin/flux" start --test-size=2 --test-hosts="n[1-2]" --test-rundir="$FD/run" \
        --config-path="$FD/conf" \
        sleep 100000 >"$FD/start.log" 2>&1 &
    flux_pid=$!
    FLUX_URI_ROOT=local://$FD/run/local-0
    wait_for 200 0.05 test -S "$FD/run/local-0" || { echo "flux start: no socket"; cat "$FD/start.log"; return 1; }
    wait_for 200 0.1 flux_online || { echo "flux start: nodes not online"; cat "$FD/start.log"; return 1; }
}
flux_online () { test "$(flux_as_owner flux resource list -s up -no '{nnodes}' 2>/dev/null)" = 2; }
flux_stop () {
    [ -n "${flux_pid:-}" ] || return 0
    timeout 60 setpriv --reuid=flux --regid="$(id -g flux)" --init-groups \
        env FLUX_URI="$FLUX_URI_ROOT" "$FP/bin/flux" shutdown --quiet >/dev/null 2>&1 ||
        kill "$flux_pid" 2>/dev/null
    wait "$flux_pid" 2>/dev/null
    flux_pid=
}
on_exit flux_stop
flux_as_owner () {
    setpriv --reuid=flux --regid="$(id -g flux)" --init-groups \
        env FLUX_URI="$FLUX_URI_ROOT" PATH="$FP/bin:$PATH" "$@"
}
flux_as_user () { # as nobody, in the user's own directory
    setpriv --reuid=nobody --regid=nogroup --clear-groups \
        env FLUX_URI="$FLUX_URI_ROOT" HOME="$T/home" PATH="$FP/bin:$PATH" "$@"
}
flux_diag () {
    echo "--- flux jobs"; flux_as_owner flux jobs -a -c 4 -o '{id} {state} {result} {exception.note}' 2>&1
    last=$(flux_as_owner flux jobs -a -c 1 -no '{id}' 2>/dev/null)
    [ -n "$last" ] && { echo "--- eventlog $last"; flux_as_owner flux job eventlog "$last" 2>&1 | tail -15; }
    echo "--- flux dmesg"; flux_as_owner flux dmesg 2>&1 | grep -iv "debug" | tail -30
    echo "--- hooks.log"; tail -20 "$T/hooks.log" 2>/dev/null
    echo "--- broker.err"; tail -10 "$T/broker.err" 2>/dev/null
}
