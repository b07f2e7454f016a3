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
# Then the whole EpilogSlurmctld hook, as slurmctld runs it (Slurm's
# variables alone, its settings from a defaults file): the script
# deploy/slurm/epilog_slurmctld.sh (a shell, fmbroker end-job) against
# fmbroker-slurm-cleanup (one process), each a CLEANUP the broker takes
# (202: the same job's again, which changes nothing after the first),
# perf stat counting every process the hook runs.
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
printf "FMBROKER_CONF=%s\nFMBROKER_BINDIR=%s\nFMBROKER_SHAREDIR=%s\n" "$T/broker.conf" "$FMB_BIN" \
    "$FMB_SRC/deploy" >"$T/default" || exit 1
rm_call PUT /v1/jobs/ectld '{"uid":1000,"nodes":["n1","n2"]}' >/dev/null || exit 1
# ectld HOOK: the hook as slurmctld starts it
ectld () { env -i SLURM_JOB_ID=ectld SLURM_SCRIPT_CONTEXT=epilog_slurmctld FMBROKER_DEFAULTS="$T/default" "$@"; }
echo "| round | EpilogSlurmctld | CPU ms per CLEANUP (202) |"
echo "|---|---|---|"
for r in $(seq "$R"); do
    for h in "$FMB_SRC/deploy/slurm/epilog_slurmctld.sh" "$FMB_BIN/fmbroker-slurm-cleanup"; do
        ectld "$h" && [ "$(job_field ectld .state)" != active ] ||
            { echo "$h: the job is still active after its CLEANUP" >&2; exit 1; }
        echo "| $r | $h | $(cpu_ms env -i SLURM_JOB_ID=ectld SLURM_SCRIPT_CONTEXT=epilog_slurmctld \
            FMBROKER_DEFAULTS="$T/default" "$h") |"
    done
done
echo
echo "(load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))"
