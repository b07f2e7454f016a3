#!/bin/bash
# demo.sh [STATE_DIR]: run fmbrokerd on its embedded default: the mock
# fabric manager on loopback (a free port), SQLite state and the API
# socket in STATE_DIR (default ./state).  Ctrl-C, or SIGTERM to this
# script's pid, stops both.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${FMB_BIN:-$top/build/bin}
state=$(mkdir -p "${1:-$PWD/state}" && cd "${1:-$PWD/state}" && pwd)
rm -f "$state/mockfm.port"
"$bin/mockfm" --listen 127.0.0.1:0 --port-file "$state/mockfm.port" \
    --state-file "$state/mockfm.state" --request-log "$state/mockfm.log" 2>>"$state/mockfm.err" &
mock=$!
broker=
# The broker runs in the background and this shell waits for it, so
# that a signal to this pid (not only Ctrl-C to the terminal's group)
# reaches the trap, which stops both and waits for the broker to end.
stop () {
    [ -n "$broker" ] && kill -TERM "$broker" 2>/dev/null && wait "$broker" 2>/dev/null
    kill -TERM "$mock" 2>/dev/null
    wait "$mock" 2>/dev/null
    return 0
}
trap 'stop; exit 0' INT TERM
trap 'kill $mock 2>/dev/null' EXIT
for _ in $(seq 100); do [ -s "$state/mockfm.port" ] && break; sleep 0.05; done
port=$(cat "$state/mockfm.port")
cat >"$state/demo.conf" <<CONF
# written by scripts/demo.sh: fmbrokerd against the mock FM on loopback
[broker]
cluster_name = demo
state_dir = $state
[api]
socket = $state/fmbroker.sock
[fabric_manager]
url = http://127.0.0.1:$port
auth = none
[hwcoll]
addrs_per_job = 8
min_nodes = 2
CONF
sock="$state/fmbroker.sock"
# A job id of this run's own: the state (and so an earlier run's job,
# released, its VNIs perhaps still quarantined) survives a re-run, and a
# RUN of a released job id is that job's next run (a requeue, doc/api.md):
# refused (409) while the earlier run's VNIs wait in quarantine for a node
# report that a reader who stopped half-way never sent.
job=demo-$(date +%Y%m%d-%H%M%S)-$$
cat <<HELP
fmbroker demo: mock FM on http://127.0.0.1:$port, state in $state
Try, in another shell, in this order:
  curl -s --unix-socket $sock -X PUT -d '{"uid":1000,"nodes":["n1","n2"]}' http://fmbroker/v1/jobs/$job
  curl -s --unix-socket $sock -X DELETE http://fmbroker/v1/jobs/$job
  curl -s --unix-socket $sock -X PUT -d '{"cxi":"destroyed"}' http://fmbroker/v1/jobs/$job/nodes/n1
  curl -s --unix-socket $sock -X PUT -d '{"cxi":"destroyed"}' http://fmbroker/v1/jobs/$job/nodes/n2
  curl -s --unix-socket $sock http://fmbroker/v1/vnis
  curl -s --unix-socket $sock http://fmbroker/v1/status
(the two node reports are what each node's fmbroker-cxi epilog sends: the
job's VNI leaves quarantine once both nodes said their services are gone)
Or with the CLI (status, jobs, job show JOB, vni list, events, metrics):
  $bin/fmbroker -c $state/demo.conf status
Ctrl-C, or kill $$ (SIGTERM), stops the broker and the mock FM.
HELP
"$bin/fmbrokerd" -c "$state/demo.conf" &
broker=$!
wait "$broker"
