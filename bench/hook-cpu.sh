#!/bin/bash
# bench/hook-cpu.sh [BUILD_DIR] [OTHER_FMBROKER]: the CPU that one
# EpilogSlurmctld CLEANUP call costs the controller host: `fmbroker
# end-job` (the hook's one program; its sh and its sourced settings are
# the same whatever the CLI) against a live broker on its Unix socket,
# for a job it does not have (404: the same client work, and no state
# changed, so every run is alike).  perf stat's task-clock (the process's
# own CPU, the dynamic loader's included), BENCH_CALLS (200) calls per
# round, BENCH_ROUNDS (3) rounds; with OTHER_FMBROKER (another build's
# fmbroker, e.g. an older release) both are measured alternately in each
# round.  Also `fmbroker --help`, the start alone, no broker call.
. "$(dirname "$0")/benchlib.sh"
other=${2:-}
N=${BENCH_CALLS:-200}
R=${BENCH_ROUNDS:-3}
command -v perf >/dev/null || { echo "needs perf(1)" >&2; exit 1; }
fm_state_file=
start_mockfm || exit 1
start_broker || exit 1
# cpu_ms CMD...: the mean task-clock of one run of CMD, in ms
cpu_ms () {
    perf stat -r "$N" -x, -e task-clock "$@" >/dev/null 2>"$T/perf.out" </dev/null
    awk -F, '/task-clock/ { printf "%.2f", $1 }' "$T/perf.out"
}
bench_title "fmbroker CLI: CPU per call"
echo
echo "| round | binary | --help ms | end-job (404) ms | shared objects loaded |"
echo "|---|---|---|---|---|"
for r in $(seq "$R"); do
    for b in "$FMB_BIN/fmbroker" ${other:+"$other"}; do
        "$b" -c "$T/broker.conf" --timeout 5 end-job 999999 2>&1 | grep -q ": 404 " ||
            { echo "$b: end-job did not get the broker's 404" >&2; exit 1; }
        help=$(cpu_ms "$b" --help)
        end=$(cpu_ms "$b" -c "$T/broker.conf" --timeout 5 end-job 999999)
        libs=$(ldd "$b" | grep -c "=>")
        echo "| $r | $b | $help | $end | $libs |"
    done
done
echo
echo "(load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
