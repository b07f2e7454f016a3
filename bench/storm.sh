#!/bin/bash
# bench/storm.sh [--rsa] [--form array|hostlist] [--modes cold,warm] [N...]
#
# Issue 49's storm benchmark: for each mode (cold, then warm) and each
# node count N (default 1000 3000 10000), a fresh mock FM and a fresh
# fmbrokerd (TLS on 127.0.0.1, a port chosen now, agent_run on, the
# shipped limits), then bench/storm.c's fmb-storm: N emulated nodes, each
# with its own 127.x.y.z address and node token, RUN one job over TLS and
# report its end, while an RM RUNs and CLEANs UP small jobs on the
# socket.  Prints each run's summary, then a Markdown table per mode with
# the machine's load average and CPU steal beside it.
#
# fmb-storm's node emulation runs at nice 10 (STORM_NICE): on a real
# machine the nodes' TLS work runs on the nodes, not on the broker's host;
# here the generator shares the broker's cores, so it yields to the broker.
# The RM's calls on the socket (and the other timed ones) have threads of
# their own at the normal priority.
#
#   --rsa            RSA-2048 certificates (default: ECDSA P-256)
#   --form F         the RUN's node list: array (what the node service
#                    sends today) or hostlist ("nid[00001-01000]", which
#                    a broker without hostlist support refuses with 400)
#   --modes M        cold, warm or cold,warm (default)
# Environment:
#   BUILD            the build directory (default: build), relative to the
#                    current directory or the source tree
#   STORM_ARGS       more fmb-storm options, e.g. "--retries 3 --timeout-ms 5000"
#   STORM_DEADLINE_S fmb-storm's --deadline-s (default: 120, or N/40 above 4800 nodes)
#   STORM_NICE       fmb-storm's --nice, how much lower the node emulation's
#                    priority is than the broker's (default: 10; 0: the same)
#   STORM_KEEP=1     keep the temporary directory (logs, configurations)
# Needs root (the RM's calls on the socket are root's) and curl, openssl,
# python3.  Stops what it started, also on failure and Ctrl-C.
set -u
src=$(cd "$(dirname "$0")/.." && pwd)
rsa=false
form=array
modes="cold warm"
counts=()
while [ $# -gt 0 ]; do
    case $1 in
    --rsa) rsa=true ;;
    --form) form=${2:?--form array|hostlist} && shift ;;
    --form=*) form=${1#--form=} ;;
    --modes) modes=${2:?--modes cold,warm} && shift ;;
    --modes=*) modes=${1#--modes=} ;;
    -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' && exit 0 ;;
    [0-9]*) counts+=("$1") ;;
    *) echo "storm.sh: unknown argument '$1' (--help)" >&2 && exit 2 ;;
    esac
    shift
done
modes=${modes//,/ }
[ ${#counts[@]} -gt 0 ] || counts=(1000 3000 10000)
case $form in array | hostlist) ;; *) echo "storm.sh: --form array|hostlist" >&2 && exit 2 ;; esac
for m in $modes; do
    case $m in cold | warm) ;; *) echo "storm.sh: --modes: cold, warm" >&2 && exit 2 ;; esac
done
nice=${STORM_NICE:-10}
case $nice in [0-9] | 1[0-9]) ;; *) echo "storm.sh: STORM_NICE: 0 to 19" >&2 && exit 2 ;; esac
b=${BUILD:-build}
if [ -d "$b/bin" ]; then build=$(cd "$b" && pwd)
elif [ -d "$src/$b/bin" ]; then build=$(cd "$src/$b" && pwd)
else echo "storm.sh: no build directory '$b' (set BUILD)" >&2 && exit 2
fi
bin=$build/bin
for p in fmbrokerd mockfm fmb-storm; do
    [ -x "$bin/$p" ] || { echo "storm.sh: $bin/$p is missing: cmake --build $build" >&2; exit 2; }
done
for c in curl openssl python3; do
    command -v $c >/dev/null || { echo "storm.sh: needs $c" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || echo "storm.sh: warning: not root: the RM's calls on the socket need an [api] rm_users user" >&2

# ---- what this script starts, and its clean-up ---------------------------
T=$(mktemp -d "${TMPDIR:-/tmp}/fmb-storm.XXXXXX") || exit 1
broker_pid='' fm_pid='' storm_pid=''
stop_pid () { # PID: TERM, up to 10 s, then KILL
    [ -n "$1" ] || return 0
    kill "$1" 2>/dev/null || return 0
    for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    return 0
}
cleanup () {
    trap - EXIT INT TERM
    stop_pid "$storm_pid"
    stop_pid "$broker_pid"
    stop_pid "$fm_pid"
    if [ -n "${STORM_KEEP:-}" ]; then echo "# kept $T" >&2; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'echo "storm.sh: interrupted" >&2; exit 130' INT
trap 'echo "storm.sh: terminated" >&2; exit 143' TERM

# ---- the machine ---------------------------------------------------------
# as the unit runs the broker (LimitNOFILE=131072): a kept TCP connection
# takes the broker 1 descriptor while parked, 3 while it has a request
# (at most 4,096 of those at once): 10,000 nodes about 10,000-18,200
[ "$(ulimit -Hn)" -lt 65536 ] && ulimit -Hn 65536 2>/dev/null
ulimit -n "$(ulimit -Hn)" 2>/dev/null
nofile=$(ulimit -n)
somaxconn=$(cat /proc/sys/net/core/somaxconn 2>/dev/null || echo "?")
synbacklog=$(cat /proc/sys/net/ipv4/tcp_max_syn_backlog 2>/dev/null || echo "?")
cpu_line () { awk '$1 == "cpu" { t = 0; for (i = 2; i <= 9; i++) t += $i; print t, $9 }' /proc/stat; }
steal_between () { # "TOTAL STEAL" "TOTAL STEAL"
    awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " ");
        d = y[1] - x[1]; printf "%.1f", (d > 0 ? 100 * (y[2] - x[2]) / d : 0) }'
}
loadavg () { cut -d' ' -f1-3 /proc/loadavg; }
echo "# fmbroker storm benchmark (issue 49), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), kernel $(uname -r)"
echo "# code: $(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo '?') ($build)"
echo "# ulimit -n $nofile (the broker and fmb-storm inherit it); net.core.somaxconn $somaxconn (caps every listen backlog); net.ipv4.tcp_max_syn_backlog $synbacklog"
if [ "$nice" -gt 0 ]; then
    echo "# fmb-storm's node emulation at nice $nice (STORM_NICE; 0: the broker's priority): on a real machine the nodes' TLS work runs on the nodes, not on the broker's host; here the generator shares the broker's $(nproc) cores, so it yields to the broker. The RM's calls on the socket run on a thread of their own at the broker's priority."
else
    echo "# fmb-storm's node emulation at the broker's priority (STORM_NICE=0): it competes with the broker for this host's $(nproc) cores, which real nodes do not. The RM's calls on the socket run on a thread of their own."
fi

# ---- certificates --------------------------------------------------------
if $rsa; then
    key=(-newkey rsa:2048) certkind="RSA-2048"
else
    key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1) certkind="ECDSA P-256"
fi
mkdir -p "$T/certs" || exit 1
(
    cd "$T/certs" &&
    openssl req -x509 "${key[@]}" -nodes -days 2 -subj "/CN=fmb-storm CA" \
        -keyout ca.key -out ca.pem 2>/dev/null &&
    openssl req "${key[@]}" -nodes -subj "/CN=127.0.0.1" -keyout server.key \
        -out server.csr 2>/dev/null &&
    printf "subjectAltName=IP:127.0.0.1,DNS:localhost\n" >server.ext &&
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
        -extfile server.ext -out server.pem 2>/dev/null &&
    chmod 600 ./*.key
) || { echo "storm.sh: could not make the certificates" >&2; exit 1; }
echo "# certificates: $certkind (CA and server; --rsa for RSA-2048)"
# the TCP listener needs a tokens file: one rm token nobody uses (the RM
# calls on the socket as root; the nodes use their node tokens)
printf "rm storm-%s\n" "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$T/tokens" &&
    chmod 600 "$T/tokens"
echo "# nodes' RUN body: nodes as $( [ "$form" = array ] && echo 'a JSON array (what the node service sends today)' || echo 'a hostlist string (refused with 400 by a broker without hostlist support)')"

free_port () {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---- one run: mock FM, broker, fmb-storm ---------------------------------
# run_one N MODE: writes $T/N-MODE/out (fmb-storm's output) and notes.
run_one () {
    local n=$1 mode=$2 R=$T/$1-$2 port notes=''
    mkdir -p "$R" && chmod 700 "$R"
    rm -f "$R/fm.port"
    "$bin/mockfm" --listen 127.0.0.1:0 --port-file "$R/fm.port" 2>>"$R/fm.err" &
    fm_pid=$!
    for _ in $(seq 100); do [ -s "$R/fm.port" ] && break; sleep 0.05; done
    [ -s "$R/fm.port" ] || { echo "storm.sh: mockfm did not start: $(tail -3 "$R/fm.err")" >&2; return 1; }
    # The shipped limits, except where one stops the test itself:
    local extra=() sysnodes=$((n > 64 ? n : 64)) tcp=$((nofile - 1024 - 16 - 64)) tcpmax relays
    # the broker's split (conns.c fit_file_limit): the relays' pairs first
    relays=$((tcp / 8 > 4096 ? 4096 : tcp / 8)) tcpmax=$((tcp - 2 * relays))
    [ "$n" -gt "$tcpmax" ] && notes="$notes WARNING: ulimit -n $nofile leaves the broker $tcpmax TCP connections, fewer than $n nodes;"
    local up=
    for _ in 1 2 3 4 5; do
        port=$(free_port) || return 1
        cat >"$R/broker.conf" <<CONF
[broker]
cluster_name = storm
state_dir = $R/state
[api]
socket = $R/api.sock
rm_users = root
admin_users = root
tcp = 127.0.0.1:$port
tls_cert = $T/certs/server.pem
tls_key = $T/certs/server.key
tokens_file = $T/tokens
tls_client_cert = none
agent_run = true
$(printf '%s\n' "${extra[@]}")
[fabric_manager]
url = http://127.0.0.1:$(cat "$R/fm.port")
auth = none
[hwcoll]
# the job is the whole machine: HPE's formula sizes its reservation
system_nodes = $sysnodes
CONF
        rm -rf "$R/state"
        "$bin/fmbrokerd" -c "$R/broker.conf" 2>>"$R/broker.err" &
        broker_pid=$!
        for _ in $(seq 200); do
            curl -sf --max-time 2 --unix-socket "$R/api.sock" http://fmbroker/v1/health >/dev/null && up=1 && break
            kill -0 "$broker_pid" 2>/dev/null || break
            sleep 0.05
        done
        [ -n "$up" ] && [ -s "$R/state/node.key" ] && break
        up=
        stop_pid "$broker_pid"
        broker_pid=
    done
    [ -n "$up" ] || { echo "storm.sh: fmbrokerd did not start: $(tail -5 "$R/broker.err")" >&2; return 1; }
    echo "$notes" >"$R/notes"
    local deadline=${STORM_DEADLINE_S:-$((n / 40 > 120 ? n / 40 : 120))}
    # shellcheck disable=SC2086
    "$bin/fmb-storm" --url "https://127.0.0.1:$port" --ca "$T/certs/ca.pem" \
        --node-key "$R/state/node.key" --socket "$R/api.sock" --nodes "$n" --mode "$mode" \
        --nodes-form "$form" --broker-pid "$broker_pid" --job "storm-$n-$mode" \
        --deadline-s "$deadline" --nice "$nice" ${STORM_ARGS:-} >"$R/out" 2>&1 &
    storm_pid=$!
    wait "$storm_pid"
    local rc=$?
    storm_pid=
    if ! kill -0 "$broker_pid" 2>/dev/null; then
        wait "$broker_pid" 2>/dev/null
        echo "the broker exited during the run (exit $?); its log's end:" >>"$R/out"
        tail -5 "$R/broker.err" >>"$R/out"
        echo "BROKER-DIED" >>"$R/notes"
        broker_pid=
    fi
    [ $rc = 0 ] || echo "fmb-storm exited with $rc" >>"$R/out"
    stop_pid "$broker_pid"
    broker_pid=
    stop_pid "$fm_pid"
    fm_pid=
    return 0
}

# ---- the tables ------------------------------------------------------------
# kv FILE PHASE KEY: a value of fmb-storm's "STORM phase=PHASE ..." line
kv () {
    awk -v ph="phase=$2" -v k="$3" '$1 == "STORM" && $2 == ph {
        for (i = 3; i <= NF; i++) if (index($i, k "=") == 1) { print substr($i, length(k) + 2); exit } }' "$1"
}
fmt () { awk -v v="$2" "BEGIN { printf \"$1\", v }"; }
failed_text () { # FILE PHASE: "N (kind N, ...)"
    local f=$1 ph=$2 out='' k v
    for k in timeout refused reset closed tls other deadline; do
        v=$(kv "$f" "$ph" "f_$k")
        [ -n "$v" ] && [ "$v" != 0 ] && out="$out${out:+, }$k $v"
    done
    v=$(kv "$f" "$ph" http)
    [ -n "$v" ] && [ "$v" != - ] && out="$out${out:+, }$(echo "$v" | sed 's/\([0-9]*\):\([0-9]*\)/HTTP \1 x\2/g; s/,/, /g')"
    echo "$(kv "$f" "$ph" failed)${out:+ ($out)}"
}
row () { # N MODE
    local f=$T/$1-$2/out
    if [ ! -s "$f" ] || [ -z "$(kv "$f" launch calls)" ]; then
        echo "| $1 | run failed: $(grep -v '^STORM' "$f" 2>/dev/null | tail -1) | | | | | | | | | | | |"
        return
    fi
    local launch end vni cpu hs rss gen fds
    launch="$(kv "$f" launch answered) / $(failed_text "$f" launch)"
    [ "$form" = hostlist ] && [[ $(kv "$f" launch http) == *400:* ]] &&
        launch="$launch: this broker refuses the hostlist form"
    local tl p50 p99 mx
    tl=$(fmt '%.2f s' "$(kv "$f" launch t_last_ok_s)")
    [ "$(kv "$f" launch answered)" = "$(kv "$f" launch calls)" ] || tl="$tl (not all)"
    p50=$(fmt '%.0f' "$(kv "$f" launch p50_ms)") p99=$(fmt '%.0f' "$(kv "$f" launch p99_ms)")
    mx=$(fmt '%.0f' "$(kv "$f" launch max_ms)")
    local rmrun
    rmrun="$(fmt '%.0f' "$(kv "$f" launch rm_p99_ms)") ms ($(kv "$f" launch rm_runs) RUNs$( [ "$(kv "$f" launch rm_failed)" = 0 ] || echo ", $(kv "$f" launch rm_failed) failed"); longest RM call then $(fmt '%.0f' "$(kv "$f" launch rm_longest_ms)") ms; at rest $(fmt '%.1f' "$(kv "$f" baseline rm_p99_ms)"))"
    if [ "$(kv "$f" end skipped)" = 1 ] || [ -z "$(kv "$f" end calls)" ]; then
        end="skipped: $(sed -n 's/^   skipped: //p' "$f" | head -1)"
        end="${end:-skipped}"
        vni="-"
    else
        end="$(kv "$f" end answered) / $(failed_text "$f" end) | $(fmt '%.0f' "$(kv "$f" end p99_ms)") ms (RM RUN p99 then $(fmt '%.0f' "$(kv "$f" end rm_p99_ms)") ms, longest RM call $(fmt '%.0f' "$(kv "$f" end rm_longest_ms)") ms)"
        if [ "$(kv "$f" end released)" = 1 ]; then
            vni="$(fmt '%.2f s' "$(kv "$f" end release_event_s)") (seen $(fmt '%.2f' "$(kv "$f" end release_s)"))"
            [ "$(kv "$f" end release_s)" = "-1.000" ] && vni="free when checked after"
        else
            vni="not within $(fmt '%.0f' "$(kv "$f" end wall_s)") s ($(kv "$f" end waiting_left) nodes waited for)"
        fi
    fi
    [[ $end == *"|"* ]] || end="$end | -"
    cpu="$(fmt '%.2f' "$(kv "$f" launch cpu_per_call_ms)") / $(fmt '%.2f' "$(kv "$f" end cpu_per_call_ms)")"
    [ -n "$(kv "$f" end cpu_per_call_ms)" ] || cpu="$(fmt '%.2f' "$(kv "$f" launch cpu_per_call_ms)") / -"
    if [ "$2" = warm ]; then
        hs="$(fmt '%.2f' "$(kv "$f" warmup cpu_per_handshake_ms)") ($(kv "$f" warmup handshakes) in $(fmt '%.1f' "$(kv "$f" warmup wall_s)") s$( [ "$(kv "$f" warmup failed)" = 0 ] || echo ", $(failed_text "$f" warmup) failed"))"
    else
        hs="in the call"
    fi
    local endph=end
    [ -n "$(kv "$f" end hwm_kib)" ] && [ "$(kv "$f" end hwm_kib)" != 0 ] || endph=launch
    rss="$(fmt '%.0f' "$(awk -v k="$(kv "$f" "$endph" hwm_kib)" 'BEGIN { print k / 1024 }')") / $(fmt '%.0f' "$(awk -v k="$(kv "$f" "$endph" rss_kib)" 'BEGIN { print k / 1024 }')") MiB"
    fds="$(kv "$f" warmup fds) / $(kv "$f" launch fds_peak) / $(kv "$f" "$endph" fds)"
    [ "$2" = warm ] || fds="- / $(kv "$f" launch fds_peak) / $(kv "$f" "$endph" fds)"
    local bsum
    bsum=$(awk -v a="$(kv "$f" warmup broker_cpu_s)" -v b="$(kv "$f" launch broker_cpu_s)" \
        -v c="$(kv "$f" end broker_cpu_s)" 'BEGIN { printf "%.1f", a + b + (c > 0 ? c : 0) }')
    local busy
    busy=$(awk -v a="$(kv "$f" launch gen_busy_pct)" -v b="$(kv "$f" end gen_busy_pct)" -v c="$(kv "$f" warmup gen_busy_pct)" \
        'BEGIN { m = a; if (b > m) m = b; if (c > m) m = c; print m }')
    gen="$(fmt '%.1f' "$(kv "$f" total gen_cpu_s)") s, busiest phase $busy% of a core (broker $bsum s)"
    echo "| $1 | $launch | $tl | $p50 / $p99 / $mx ms | $rmrun | $end | $vni | $cpu | $hs | $rss | $fds | $gen |"
}

# ---- the runs -------------------------------------------------------------
declare -A load0 load1 cpu0 cpu1
for mode in $modes; do
    load0[$mode]=$(loadavg) cpu0[$mode]=$(cpu_line)
    for n in "${counts[@]}"; do
        echo
        echo "## $n nodes, $mode ($certkind, nodes as $form)"
        if ! run_one "$n" "$mode"; then
            echo "storm.sh: the run of $n nodes, $mode, could not start" >&2
            continue
        fi
        [ -s "$T/$n-$mode/notes" ] && [ "$(cat "$T/$n-$mode/notes")" != "" ] &&
            echo "broker configuration beyond the shipped limits:$(sed 's/BROKER-DIED//' "$T/$n-$mode/notes")"
        grep -v '^STORM ' "$T/$n-$mode/out"
    done
    load1[$mode]=$(loadavg) cpu1[$mode]=$(cpu_line)
done

for mode in $modes; do
    echo
    echo "### $mode: $( [ "$mode" = cold ] && echo 'each node connects and does its TLS handshake when its call starts, and closes the connection after its answer' || echo 'every node'"'"'s connection opened and kept beforehand') ($certkind, nodes as $form)"
    echo
    echo "load average before ${load0[$mode]}, after ${load1[$mode]}; CPU steal over these runs $(steal_between "${cpu0[$mode]}" "${cpu1[$mode]}")% (/proc/stat)"
    echo
    echo "| nodes | launch: answered / failed | time to last answer | per node p50 / p99 / max | RM RUN p99 during launch | end: reports answered / failed | end p99 (RM meanwhile) | VNIs out of quarantine after CLEANUP | broker CPU per node call, launch / end (ms) | broker CPU per handshake (ms) | broker peak RSS / after | broker fds: kept idle / most in launch / after | generator CPU |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    for n in "${counts[@]}"; do row "$n" "$mode"; done
done
echo
echo "Broker CPU per node call: the broker's CPU over the phase less the RM's cycles (at their baseline cost), divided by the nodes; cold calls include their TLS handshake."
echo "VNIs out of quarantine: from the CLEANUP's start to the broker's vni_released event for the job (its time_ms), and when the 50 ms poll of GET /v1/events on the socket saw it."
echo "Broker fds: its open descriptors (/proc/PID/fd) when the warm-up ended (every node's connection idle, parked), the most seen during the launch (sampled every 100 ms), and after the run."
echo "Generator CPU: fmb-storm's own (getrusage), with its busiest phase as a share of one core (near 100%: the generator, not the broker, sets the pace)."
