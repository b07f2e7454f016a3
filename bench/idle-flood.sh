#!/bin/bash
# bench/idle-flood.sh [BUILD_DIR]: what idle TCP connections cost the
# callers that matter (issue 51).  A broker with TLS and node tokens;
# the time for a node's report (PUT /v1/jobs/J/nodes/n1 on a kept TLS
# connection, as the node service sends it) and for the RM's RUN on the
# Unix socket (a new job each, a new connection each, as a prolog does),
# with no idle connections, then while bench/idleconns.py holds idle
# connections from 256 loopback addresses: strangers' that never send a
# ClientHello (BENCH_UNAUTH, 8,000: one descriptor each at the broker),
# and nodes' kept, authenticated ones (BENCH_AUTHED, 5,000: three
# descriptors each, the sandbox's 20,000-descriptor limit holds no
# 8,000 of them).  Prints a table: median and p95 of BENCH_SAMPLES (50)
# of each.  Loopback only, ports chosen at run time; bounded in count
# and time.  Needs python3.
set -u
build=$(cd "${1:-$(dirname "$0")/../build}" && pwd)
export FMB_BIN=$build/bin FMB_SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$FMB_SRC/tests/integration/lib.sh"
S=${BENCH_SAMPLES:-50} U=${BENCH_UNAUTH:-8000} A=${BENCH_AUTHED:-5000} ADDRS=256
py=python3 && [ -x /usr/bin/python3 ] && py=/usr/bin/python3
tls_and_node_tokens >/dev/null && start_mockfm || exit 1
# room for the idle ones: the caps sized to hold them (a site's defaults
# hold 8 unauthenticated per address), and a handshake deadline longer
# than the run
nodes=$(seq -f "n%g" 0 $((ADDRS - 1)) | tr "\n" " ")
# shellcheck disable=SC2086
start_broker_for_nodes $nodes -- "request_timeout_ms = 600000" "max_connections_per_user = 64" \
    "tcp_max_unauthenticated_per_address = 64" "tcp_max_unauthenticated = 16000" >/dev/null || exit 1
bpid=$broker_pid
rm_call PUT /v1/jobs/1 '{"uid":1000,"nodes":["n1","n2"]}' >/dev/null || exit 1
n1tok=$(cat "$T/n1.token")
# pcts FILE: "median p95" of the milliseconds in FILE
pcts () { sort -n "$1" | awk '{ v[NR] = $1 } END { printf "%.2f %.2f", v[int((NR + 1) / 2)], v[int(NR * 0.95 + 0.5)] }'; }
# measure NAME: S node reports on one kept connection (its first, with
# the handshake, not counted) and S RUNs on the socket
run_no=0
measure () {
    urls=() && for i in $(seq 0 "$S"); do urls+=(-o /dev/null -X PUT --data-binary '{"cxi":"created"}' "https://127.0.0.1:$tcp_port/v1/jobs/1/nodes/n1"); done
    curl -s --max-time 120 --cacert "$T/certs/ca.pem" -H "Authorization: Bearer $n1tok" -w "%{time_total}\n" "${urls[@]}" |
        tail -n +2 | awk '{ printf "%.3f\n", $1 * 1000 }' >"$T/report.ms"
    : >"$T/run.ms"
    for i in $(seq 1 "$S"); do
        run_no=$((run_no + 1))
        curl -s -o /dev/null --max-time 20 --unix-socket "$T/api.sock" -X PUT \
            --data-binary '{"uid":1000,"nodes":["n3","n4"]}' -w "%{time_total}\n" \
            "http://fmbroker/v1/jobs/run$run_no" | awk '{ printf "%.3f\n", $1 * 1000 }' >>"$T/run.ms"
    done
    printf "| %-52s | %5s | %-17s | %-17s |\n" "$1" "$2" "$(pcts "$T/report.ms" | sed 's/ / \/ /')" "$(pcts "$T/run.ms" | sed 's/ / \/ /')"
}
# hold MODE COUNT: idleconns.py in the background until "open N"
hold () {
    "$py" "$FMB_SRC/bench/idleconns.py" "$1" "$tcp_port" "$2" "$ADDRS" 600 "$T/certs/ca.pem" "$T" >"$T/idle.out" 2>&1 &
    ipid=$!
    for _ in $(seq 1 3000); do grep -q "^open" "$T/idle.out" && break; sleep 0.1; done
    sleep 1
    held=$(($(ls "/proc/$bpid/fd" | wc -l)))
}
release () { kill "$ipid" 2>/dev/null; wait "$ipid" 2>/dev/null; sleep 2; }
echo "fmbrokerd $bpid; $S samples each; milliseconds, median / p95"
printf "| %-52s | %5s | %-17s | %-17s |\n" "idle connections (256 addresses)" "fds" "node report" "RM's RUN (socket)"
printf "|%s|%s|%s|%s|\n" "$(printf -- '-%.0s' $(seq 54))" "-------" "-------------------" "-------------------"
measure "none (warm-up, not counted)" "$(ls "/proc/$bpid/fd" | wc -l)" >/dev/null
measure "none" "$(ls "/proc/$bpid/fd" | wc -l)"
base=$(ls "/proc/$bpid/fd" | wc -l)
hold unauth "$U" # (one descriptor each, in its handshake)
measure "$((held - base)) strangers' held (of $U), no ClientHello" "$held"
release
measure "none (after)" "$(ls "/proc/$bpid/fd" | wc -l)"
hold authed "$A" # (three descriptors each: its socket, the TLS front's pair)
measure "$(((held - base) / 3)) nodes' kept, authenticated (of $A)" "$held"
release
echo "(fds: the broker's open descriptors while held; strangers past its tcp_max_connections,"
echo " $(grep -o "TCP takes at most [0-9]*" "$T/broker.err" | head -1 | grep -o "[0-9]*$") from the file limit, are closed at accept; host: $(nproc) CPUs)"
