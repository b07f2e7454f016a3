#!/bin/bash
# traffic.sh DIR FMB_BIN PHASE: the clients of the test cluster, run in
# the clients' namespace while DIR/traffic.go exists.  The RM runs jobs
# PHASE-1, PHASE-2, ... with fmbroker run-job (TLS to the floating
# address, the rm token), and ends each but every fourth with end-job
# after the next one ran; compute nodes n1 and n2 make and destroy the
# jobs' CXI services with fmbroker-cxi (their own node tokens, the libcxi
# double), which reports each to the broker.  Every call is tried again
# until it is answered (a failover is a gap of seconds to tens of
# seconds; RUN, CLEANUP and the agent's calls are idempotent), for at most
# 120 s.  Each step is logged to DIR/clients/answers as
#   MS ask OP JOB [NODE]   before the first try
#   MS OP JOB ...          once answered (RUN: the VNIs given)
#   MS GAVEUP OP JOB ...   never answered
set -u
d=$1 bin=$2 phase=$3
log=$d/clients/answers
now () { date +%s%3N; }
# try OP JOB COMMAND...: run COMMAND until it succeeds; its output in $out
try () {
    local op=$1 job=$2 start
    shift 2
    start=$(now)
    while :; do
        out=$("$@" 2>&1) && return 0
        if [ $(($(now) - start)) -gt 120000 ]; then
            echo "$(now) GAVEUP $op $job $(echo "$out" | tail -n 1)" >>"$log"
            return 1
        fi
        sleep 0.1
    done
}
rm_cli () { "$bin/fmbroker" -c "$d/clients/rm.conf" --timeout 2 "$@"; }
agent () { # NODE ARGS...
    local n=$1
    shift
    SLURMD_NODENAME=$n MOCKCXI_STATE="$d/clients/$n.cxi.json" MOCKCXI_DEVICES=1 "$bin/fmbroker-cxi" \
        -c "$d/clients/node.conf" --libcxi "$bin/../mockcxi/new/libcxi.so.1" \
        --state-dir "$d/clients/$n.rec" --node "$n" "$@"
}
end_job () { # JOB: the RM's CLEANUP, then the nodes' epilogs
    echo "$(now) ask CLEANUP $1" >>"$log"
    try CLEANUP "$1" rm_cli end-job "$1" && echo "$(now) CLEANUP $1" >>"$log"
    for n in n1 n2; do
        echo "$(now) ask EPILOG $1 $n" >>"$log"
        try EPILOG "$1" agent "$n" epilog --job "$1" && echo "$(now) EPILOG $1 $n" >>"$log"
    done
}
i=0 prev=
while [ -e "$d/traffic.go" ]; do
    i=$((i + 1))
    j=$phase-$i
    echo "$(now) ask RUN $j" >>"$log"
    if try RUN "$j" rm_cli --json run-job "$j" --uid 1000 --nodes 'n[1-2]'; then
        echo "$(now) RUN $j $(echo "$out" | jq -c .vnis)" >>"$log"
        for n in n1 n2; do
            echo "$(now) ask PROLOG $j $n" >>"$log"
            try PROLOG "$j" agent "$n" prolog --job "$j" && echo "$(now) PROLOG $j $n" >>"$log"
        done
    fi
    # every fourth job stays active (a long job across the failovers)
    if [ -n "$prev" ] && [ $(((i - 1) % 4)) != 0 ]; then end_job "$prev"; fi
    prev=$j
done
[ -n "$prev" ] && [ $((i % 4)) != 0 ] && end_job "$prev"
exit 0
