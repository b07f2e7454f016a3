# lib.sh: helpers for fmbroker's integration tests; prints TAP.
#
# Each script sources this, gets a private temporary directory $T (removed
# at exit), and writes steps as
#     expect_ok 'title' 'shell commands'
#     expect_fail 'title' 'shell commands that must fail'
# then ends with done_testing.  FMB_BIN (built programs) and FMB_SRC (the
# source tree) come from ctest.
set -u
: "${FMB_BIN:?FMB_BIN must point at the built bin directory}"
: "${FMB_SRC:?FMB_SRC must point at the source tree}"
T=$(mktemp -d "${TMPDIR:-/tmp}/fmbit.XXXXXX")
cd "$T" || exit 1
trap 'cleanup_all' EXIT
test_count=0
test_failed=0
cleanup_hooks=

cleanup_all () {
    for h in $cleanup_hooks; do $h; done
    cd / || return
    # FMB_KEEP_TMP=1 keeps the run's directory (logs, state) to look at
    if [ -n "${FMB_KEEP_TMP:-}" ]; then echo "# kept $T" >&2; else rm -rf "$T"; fi
}

on_exit () {
    cleanup_hooks="$cleanup_hooks $1"
}

# A step runs inside a function, so that "return 1" in it fails the step
# (rather than returning from run_step unreported).
step_body () { eval "$1"; }

run_step () {
    # $1: ok|fail, $2: title, $3: commands
    test_count=$((test_count + 1))
    out="$T/.step$test_count.out"
    # In this shell (as sharness does), so that a step may start or stop
    # the programs that later steps and the cleanup hooks know about.
    set +u # an unset variable fails the step, not the whole script
    { step_body "$3"; } >"$out" 2>&1
    rc=$?
    set -u
    if { [ "$1" = ok ] && [ $rc -eq 0 ]; } || { [ "$1" = fail ] && [ $rc -ne 0 ]; }; then
        echo "ok $test_count - $2"
        return 0
    fi
    echo "not ok $test_count - $2"
    sed 's/^/#   /' "$out"
    # A script may set step_fail_hook to a function that prints what
    # explains a failure (daemon logs), since $T is gone afterwards.
    [ -n "${step_fail_hook:-}" ] && $step_fail_hook 2>&1 | sed 's/^/#   /'
    test_failed=$((test_failed + 1))
    return 1
}

expect_ok () { run_step ok "$1" "$2"; }
expect_fail () { run_step fail "$1" "$2"; }

# wait_for TRIES DELAY COMMAND...: retry COMMAND until it succeeds.
wait_for () {
    tries=$1 delay=$2
    shift 2
    while [ "$tries" -gt 0 ]; do
        "$@" && return 0
        tries=$((tries - 1))
        sleep "$delay"
    done
    return 1
}

file_mode () { stat -c %a "$1"; }

# free_ports N: the first of N consecutive TCP ports free on 127.0.0.1,
# for daemons that cannot take port 0.  Chosen below the kernel's
# ephemeral range, where no outgoing connection of a parallel test can
# take them, and checked by binding each.
free_ports () {
    python3 - "$1" <<'PY'
import random, socket, sys
n = int(sys.argv[1])
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(200):
    first = random.randrange(10000, lo - n)
    socks = []
    try:
        for p in range(first, first + n):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    print(first)
    sys.exit(0)
sys.exit(1)
PY
}

# bail_out REASON: stop the script now (TAP "Bail out!"), for a failure
# that makes every later step meaningless and slow.
bail_out () {
    echo "Bail out! $*"
    exit 1
}

done_testing () {
    echo "1..$test_count"
    echo "$((test_count - test_failed)) passed, $test_failed failed"
    [ "$test_failed" -eq 0 ]
}

# jq 1.6 exits 0 under -e when its input is empty, so "rm_call ... | jq -e
# COND" passed when the call itself failed (curl -f prints nothing).
# Here no output at all from jq -e is a failure (4, as jq 1.7 does): with
# any input, jq -e prints something or exits non-zero by itself.
jq () {
    local arg want_e=false
    for arg in "$@"; do
        case $arg in
        --*) ;;
        -*e*) want_e=true ;;
        esac
    done
    if ! $want_e; then
        command jq "$@"
        return
    fi
    local out rc
    out=$(command jq "$@")
    rc=$?
    if [ $rc = 0 ] && [ -z "$out" ]; then
        echo "jq -e: no input" >&2
        return 4
    fi
    [ -z "$out" ] || printf '%s\n' "$out"
    return $rc
}

# ---- mockfm and fmbrokerd ------------------------------------------------

# start_mockfm [ARGS...]: a mock FM on a free loopback port, keeping its
# state in $T/fm.state so that a restart (stop_mockfm; start_mockfm) is an
# outage, not amnesia.  Sets fm_url, fm_pid.
start_mockfm () {
    rm -f "$T/fm.port"
    # fm_state_file= (empty) runs it without one: no disk write per change
    "$FMB_BIN/mockfm" --listen "127.0.0.1:${fm_port:-0}" --port-file "$T/fm.port" \
        --request-log "$T/fm.log" ${fm_state_file-"--state-file=$T/fm.state"} "$@" 2>>"$T/fm.err" &
    fm_pid=$!
    wait_for 100 0.05 test -s "$T/fm.port" || { echo "mockfm did not start"; return 1; }
    fm_port=$(cat "$T/fm.port")
    fm_url="http://127.0.0.1:$fm_port"
}
# stop_pid PID: SIGTERM, then its exit waited for.  One a step left
# stopped (kill -STOP) is continued first.  Never after the SIGTERM: a
# SIGCONT discards pending stop signals, and so the SIGSTOP with which
# the exiting process's LeakSanitizer (ASan builds) attaches to each of
# its threads, which then waits for that thread forever.
stop_pid () { kill -CONT "$1" 2>/dev/null; kill "$1" 2>/dev/null && wait "$1" 2>/dev/null; }
stop_mockfm () {
    [ -n "${fm_pid:-}" ] && stop_pid "$fm_pid"
    fm_pid=
}
on_exit stop_mockfm

# mockfm_ctl METHOD PATH [BODY]
mockfm_ctl () {
    curl -sf -X "$1" ${3+--data-binary "$3"} "$fm_url$2" >/dev/null
}
# fm_holds N: at least N FM calls received and not yet answered (a delay
# fault holding them): a test starts what must come second after this
fm_holds () { curl -sf "$fm_url/_mock/state" | jq -e ".in_flight >= $1" >/dev/null; }
mockfm_jobs () { curl -sf "$fm_url/_mock/state" | jq -r '.jobs | keys[]'; }
mockfm_has_job () { curl -sf "$fm_url/_mock/state" | jq -e --arg j "$1" '.jobs | has($j)' >/dev/null; }
mockfm_lacks_job () { ! mockfm_has_job "$1"; }
# ms_now: the wall clock in ms
ms_now () { date +%s%3N; }
# mockfm_count PREFIX: how many of the FM's jobs' IDs start with PREFIX
mockfm_count () { curl -sf "$fm_url/_mock/count?prefix=$1" | jq -e .jobs; }

# write_broker_conf [EXTRA INI LINES]: $T/broker.conf for a broker on
# $T/api.sock talking to mockfm (if started), cluster "c1"; hwcoll_min_nodes
# (default 2: every job of the tests gets an FM reservation) as set.
write_broker_conf () {
    cat >"$T/broker.conf" <<CONF
[broker]
cluster_name = c1
state_dir = $T/state
reconcile_interval_s = ${reconcile_s:-30}
[api]
socket = $T/api.sock
rm_users = ${rm_users:-root}
admin_users = root
[fabric_manager]
url = ${fm_url:-}
auth = none
reserve_timeout_ms = ${reserve_ms:-2000}
timeout_ms = ${timeout_ms:-3000}
[hwcoll]
addrs_per_job = 4
min_nodes = ${hwcoll_min_nodes:-2}
[vni]
pool = ${vni_pool:-1024-65535}
quarantine_s = ${quarantine_s:-300}
CONF
    [ $# -gt 0 ] && printf '%s\n' "$@" >>"$T/broker.conf"
    # tls_and_agent_token's one token for all nodes is an explicit opt-in
    [ -n "${shared_agent_token:-}" ] && printf '[api]\nshared_agent_token = true\n' >>"$T/broker.conf"
    return 0
}

# start_broker: fmbrokerd with $T/broker.conf, waits for its socket.
start_broker () {
    [ -f "$T/broker.conf" ] || write_broker_conf
    rm -f "$T/api.sock.ready"
    # broker_prefix: a command that execs it (e.g. prlimit --nofile=256:256)
    ${broker_prefix:-} "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" 2>>"$T/broker.err" &
    broker_pid=$!
    wait_for 100 0.05 rm_call GET /v1/health >/dev/null ||
        { echo "fmbrokerd did not start"; tail "$T/broker.err"; return 1; }
}
# broker_sleeps_when_idle: over 3 s with no requests the broker uses less
# than half a second of CPU (a busy loop uses all 3).  Not a speed target:
# a loop that spins is a bug whatever the machine.
broker_sleeps_when_idle () {
    t0=$(awk '{print $14 + $15}' "/proc/$broker_pid/stat") && sleep 3 &&
    t1=$(awk '{print $14 + $15}' "/proc/$broker_pid/stat") &&
    echo "CPU over 3 s idle: $((t1 - t0)) ticks of 1/$(getconf CLK_TCK) s" &&
    test $((t1 - t0)) -lt $(($(getconf CLK_TCK) / 2))
}
stop_broker () {
    [ -n "${broker_pid:-}" ] && stop_pid "$broker_pid"
    broker_pid=
}
kill_broker () {
    [ -n "${broker_pid:-}" ] && kill -9 "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null
    broker_pid=
}
on_exit stop_broker

# rm_call METHOD PATH [BODY]: as root (rm and admin); body to stdout,
# fails unless the status is 2xx.  api_call prints "STATUS BODY" instead.
rm_call () {
    curl -sf --max-time 20 --unix-socket "$T/api.sock" -X "$1" ${3+--data-binary "$3"} "http://fmbroker$2"
}
api_call () {
    _out=$(curl -s --max-time 20 --unix-socket "$T/api.sock" -X "$1" ${3+--data-binary "$3"} \
        -w '\n%{http_code}' "http://fmbroker$2")
    echo "${_out##*$'\n'} ${_out%$'\n'*}"
}
# tls_and_agent_token: what a broker with compute nodes needs, the old
# way: a throw-away CA and server certificate in $T/certs, one agent
# token for all nodes in $T/tokens (the broker's tokens_file) and alone in
# $T/agent.token (a node's client_token_file), both 0600, and the
# broker's opt-in to it (shared_agent_token, see write_broker_conf).
# Sets agent_tok.
tls_and_agent_token () {
    sh "$FMB_SRC/tests/integration/make-certs.sh" "$T/certs" >/dev/null &&
    agent_tok=agent-token-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \n") &&
    printf "agent %s\n" "$agent_tok" >"$T/tokens" && chmod 600 "$T/tokens" &&
    printf "%s\n" "$agent_tok" >"$T/agent.token" && chmod 600 "$T/agent.token" &&
    shared_agent_token=1
}
# tls_and_node_tokens: the same with each node its own token (how a site
# runs): certificates in $T/certs, an rm token in $T/tokens (sets rm_tok);
# once the broker runs (it makes the node key), node_tokens NAME... writes
# each node's token to $T/NAME.token (0600), for a node configuration with
# client_token_file = $T/%n.token.
tls_and_node_tokens () {
    sh "$FMB_SRC/tests/integration/make-certs.sh" "$T/certs" >/dev/null &&
    rm_tok=rm-token-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d " \n") &&
    printf "rm %s\n" "$rm_tok" >"$T/tokens" && chmod 600 "$T/tokens"
}
node_tokens () {
    for n in "$@"; do
        "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" --node-token "$n" >"$T/$n.token" &&
            chmod 600 "$T/$n.token" || return 1
    done
}
# start_broker_for_nodes NODE... [-- BROKER CONF LINES...]: the broker as
# a site runs it for compute nodes (tls_and_node_tokens first): TCP on a
# free loopback port with TLS (tries five ports), each NODE its own token
# in $T/NODE.token, and $T/node.conf, the nodes' configuration: the
# broker's URL, client_token_file = $T/%n.token (the agent's node name
# picks its own), the CA, the libcxi double, and no socket.  Sets tcp_port.
start_broker_for_nodes () {
    _nodes=
    while [ $# -gt 0 ] && [ "$1" != -- ]; do _nodes="$_nodes $1" && shift; done
    [ $# -gt 0 ] && shift
    _up=
    for _try in 1 2 3 4 5; do
        tcp_port=$(free_ports 1) || return 1
        write_broker_conf "[api]" "tcp = 127.0.0.1:$tcp_port" "tls_cert = $T/certs/server.pem" \
            "tls_key = $T/certs/server.key" "tokens_file = $T/tokens" "$@"
        start_broker && _up=1 && break
    done
    [ -n "$_up" ] || return 1
    # shellcheck disable=SC2086
    node_tokens $_nodes || return 1
    printf "[api]\nsocket = %s\nbroker_url = https://127.0.0.1:%s\nclient_token_file = %s\nclient_ca_file = %s\n[cxi]\nlibcxi = %s\n" \
        "$T/no-such.sock" "$tcp_port" "$T/%n.token" "$T/certs/ca.pem" \
        "$FMB_BIN/../mockcxi/new/libcxi.so.1" >"$T/node.conf" && chmod 644 "$T/node.conf"
}
# skip_unless_root: end the script as skipped where it cannot act as
# other uids (not root, or no setpriv).
skip_unless_root () {
    if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
        echo "ok 1 # SKIP needs root and setpriv to call as other uids"
        echo "1..1"
        exit 0
    fi
}
# as_user UID COMMAND...: run as an unprivileged uid (needs root).
as_user () {
    uid=$1
    shift
    setpriv --reuid="$uid" --regid="$uid" --clear-groups "$@"
}

# rm_call_timed METHOD PATH [BODY]: prints "STATUS MILLISECONDS".
rm_call_timed () {
    curl -s -o /dev/null --max-time 20 --unix-socket "$T/api.sock" -X "$1" ${3+--data-binary "$3"} \
        -w '%{http_code} %{time_total}\n' "http://fmbroker$2" |
        awk '{ printf "%s %d\n", $1, $2 * 1000 }'
}
job_field () { rm_call GET "/v1/jobs/$1" | jq -r "$2"; }

# attacker_with_n1_token: uid 1000 on the network with a copy of node
# n1's token ($T/n1.token, node_tokens first) and the CA: a stolen node
# credential, as the security tests run it.  Then tcall AS TOKEN METHOD
# PATH [BODY]: "STATUS BODY" over TLS to $tcp_port, as uid AS (0: root)
# with the bearer TOKEN ("@stolen": the attacker's copy of n1's; "":
# none); status_of: its status alone.
attacker_with_n1_token () {
    install -d -m 700 -o 1000 "$T/attacker" && install -m 600 -o 1000 "$T/n1.token" "$T/attacker/stolen" &&
        chmod 711 "$T" && cp "$T/certs/ca.pem" "$T/attacker/ca.pem" && chmod 644 "$T/attacker/ca.pem"
}
tcall () {
    local as=$1 tok=$2 out
    shift 2
    if [ "$tok" = @stolen ]; then tok=$(as_user 1000 cat "$T/attacker/stolen"); fi
    local run=()
    [ "$as" != 0 ] && run=(setpriv --reuid="$as" --regid="$as" --clear-groups)
    out=$("${run[@]}" curl -s --max-time 20 --cacert "$T/attacker/ca.pem" ${tok:+-H "Authorization: Bearer $tok"} \
        -X "$1" ${3:+--data-binary "$3"} -w '\n%{http_code}' "https://127.0.0.1:$tcp_port$2")
    echo "${out##*$'\n'} ${out%$'\n'*}"
}
status_of () { tcall "$@" | cut -d" " -f1; }

# thirdparty VAR SCRIPT WHAT: VAR gets the prefix that scripts/SCRIPT
# builds (once per machine) from ../shared/thirdparty.  Where its source
# is absent the test says so and skips (ok # SKIP), or under CI=true
# fails: there the real thing is required.
thirdparty () {
    local _out _rc
    _out=$("$FMB_SRC/scripts/$2" 2>"$T/$2.err")
    _rc=$?
    if [ $_rc = 77 ] && [ "${CI:-}" = true ]; then
        echo "not ok 1 - $3 is needed under CI: $(cat "$T/$2.err")" && echo "1..1" && exit 1
    elif [ $_rc = 77 ]; then
        echo "ok 1 # SKIP no $3: $(cat "$T/$2.err")" && echo "1..1" && exit 0
    elif [ $_rc != 0 ]; then
        bail_out "scripts/$2 failed: $(tail -5 "$T/$2.err")"
    fi
    printf -v "$1" '%s' "$_out"
}

# ---- the node agent over the libcxi double -------------------------------

# agent NODE ARGS...: fmbroker-cxi as node NODE (its own NICs in
# $T/NODE.cxi.json and its own job records), talking to the broker.
agent () {
    node=$1
    shift
    MOCKCXI_STATE="$T/$node.cxi.json" "$FMB_BIN/fmbroker-cxi" -c "${agent_conf:-/dev/null}" \
        --libcxi "${libcxi:-$FMB_BIN/../mockcxi/new/libcxi.so.1}" --socket "$T/api.sock" \
        --state-dir "$T/$node.rec" --node "$node" "$@"
}
# cxi_services NODE DEV: the double's services on device DEV as JSON lines
cxi_services () { jq -c ".devices[$2].services[]" "$T/$1.cxi.json"; }
# cxi_set NODE JQ-EXPR: edit the double's state (fault injection)
cxi_set () { jq "$2" "$T/$1.cxi.json" >"$T/cxi.tmp" && mv "$T/cxi.tmp" "$T/$1.cxi.json"; }
