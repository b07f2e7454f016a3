#!/bin/bash
# bench/request-cpu.sh [BUILD_DIR] [OTHER_FMBROKERD]: the broker's CPU
# for one node request at a quiet moment, which is what each node's RUN
# and report cost it between storms: GET /v1/jobs/J with the node's own
# token over one kept TLS connection (curl, keep-alive, one request after
# the other), against a live broker (TLS on 127.0.0.1, a port chosen
# now) and the mock FM.  The broker's own CPU from /proc/PID/schedstat
# (curl's is not counted), and the wall time per request.
# BENCH_REQUESTS (1000) per round, BENCH_ROUNDS (3) rounds; with
# OTHER_FMBROKERD (another build's fmbrokerd, e.g. the last release) both
# are measured alternately in each round, each on a fresh state.  Prints
# a Markdown table with the load average and CPU steal beside it.
# Needs root, curl.
. "$(dirname "$0")/benchlib.sh"
other=${2:-}
N=${BENCH_REQUESTS:-1000}
R=${BENCH_ROUNDS:-3}
sh "$FMB_SRC/tests/integration/make-certs.sh" "$T/certs" >/dev/null || exit 1
printf "rm rm-%s\n" "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$T/tokens"
chmod 600 "$T/tokens"
fm_state_file=
start_mockfm || exit 1
urls=()
for _i in $(seq "$N"); do urls+=("/v1/jobs/77"); done
# measure FMBROKERD: one row
measure () {
    local bin=$1 c0 c1 t0 t1 s0 s1 codes
    rm -rf "$T/state"
    FMB_BIN=$(dirname "$bin") start_broker_for_nodes n1 >/dev/null || return 1
    rm_call PUT /v1/jobs/77 '{"uid":1000,"nodes":["n1","n2"]}' >/dev/null || return 1
    local base="https://127.0.0.1:$tcp_port"
    s0=$(cpu_line) c0=$(awk '{print $1}' "/proc/$broker_pid/schedstat") t0=$EPOCHREALTIME
    codes=$(curl -s --cacert "$T/certs/ca.pem" -H "Authorization: Bearer $(cat "$T/n1.token")" \
        -w '\nanswer=%{http_code}\n' "${urls[@]/#/$base}" | grep -c '^answer=200$')
    t1=$EPOCHREALTIME c1=$(awk '{print $1}' "/proc/$broker_pid/schedstat") s1=$(cpu_line)
    stop_broker
    [ "$codes" = "$N" ] || { echo "$bin: $codes of $N answers were 200" >&2; return 1; }
    awk -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v n="$N" -v b="$bin" -v r="$2" \
        -v steal="$(steal_between "$s0" "$s1")" 'BEGIN {
            printf "| %s | %s | %.0f | %.0f | %s |\n", r, b, (c1 - c0) / n / 1000,
                (t1 - t0) * 1e6 / n, steal }'
}
bench_title "the broker's CPU per node request (GET /v1/jobs/J, a node's token, one kept TLS connection)" \
    "$N requests per row"
echo
echo "| round | fmbrokerd | broker CPU per request (us) | wall per request (us) | steal % |"
echo "|---|---|---|---|---|"
for r in $(seq "$R"); do
    for b in "$FMB_BIN/fmbrokerd" ${other:+"$other"}; do
        measure "$b" "$r" || exit 1
    done
done
echo
echo "(load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
