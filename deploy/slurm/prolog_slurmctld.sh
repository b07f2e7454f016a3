#!/bin/sh
# PrologSlurmctld: RUN the job at fmbrokerd (VNIs, multicast reservation),
# with the user's --fmb-hwcoll / --fmb-vnis / --fmb-tcs (the SPANK plugin
# checks them at submission and hands them over as SPANK_FMB_*).  Always
# exits 0: when RUN fails, the reason goes to the log, and the job's steps
# fail on the nodes (no VNIs, no record) under the plugin's
# policy=fail_closed, or run without isolation (fail_open).  A broker
# that does not answer (a failover) is waited for first (below).
case $0 in */*) . "${0%/*}/common.sh" ;; *) . ./common.sh ;; esac
# The user's options go to the CLI as they came: it checks them, the one
# place every client does (src/apiclient/runopts.c), and refuses a bad
# one (exit 3) with a line naming it, which is logged below.
set -- ${SPANK_FMB_HWCOLL:+--hwcoll "$SPANK_FMB_HWCOLL"} \
    ${SPANK_FMB_VNIS:+--vni-count "$SPANK_FMB_VNIS"} ${SPANK_FMB_TCS:+--tcs "$SPANK_FMB_TCS"}
# (no timeout(1) around it: the CLI bounds its own call, and every
# process here is paid by every job's launch; no subshell for the cores)
cpus=${SLURM_JOB_CPUS_PER_NODE:-0}
run_job () { # the user's options
    "$FMBROKER_BINDIR/fmbroker" -c "$FMBROKER_CONF" \
        --timeout "$FMBROKER_HOOK_TIMEOUT" run-job "$SLURM_JOB_ID" --uid "$SLURM_JOB_UID" \
        --user "$SLURM_JOB_USER" --nodes "$SLURM_JOB_NODELIST" --ncores "${cpus%%[!0-9]*}" "$@" --quiet 2>&1
}
# No broker answering (a failover takes tens of seconds) or a 429/5xx:
# the job waits for one, with back-off, for FMBROKER_RUN_RETRY_S (default
# 60) rather than start without its VNIs (its steps would then fail under
# policy=fail_closed).
FMBROKER_RUN_RETRY_S=${FMBROKER_RUN_RETRY_S:-60}
delay=1 waited=0
while :; do
    out=$(run_job "$@") && break
    rc=$?
    if ! fmb_transient $rc "$out" || [ "$waited" -ge "$FMBROKER_RUN_RETRY_S" ]; then
        after=
        [ "$waited" -gt 0 ] && after=" after $waited s of retries"
        fmb_log "job $SLURM_JOB_ID: run-job failed$after: $(echo "$out" | tail -n 1)"
        exit 0
    fi
    sleep "$delay"
    waited=$((waited + delay))
    delay=$((delay * 2))
    [ $delay -gt 10 ] && delay=10
done
[ "$waited" -gt 0 ] && fmb_log "job $SLURM_JOB_ID: run-job done after $waited s of retries"
exit 0
