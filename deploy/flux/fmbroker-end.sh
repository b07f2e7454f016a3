#!/bin/sh
# Flux job-manager epilog, at every instance level (the job's CLEANUP).
# System instance: CLEANUP at fmbrokerd (the whole reservation, its trees
# with it); when no broker answers (a failover) or one answers 429/5xx, a
# detached copy tries again with back-off for FMBROKER_CLEANUP_RETRY_S
# (600 s): a CLEANUP that never arrives leaves the job's VNIs and FM
# reservation held (Flux never reuses a job id, so nothing to check
# first).  Sub-instance: delete the job's multicast trees through the
# broker's step route, with the session token inherited from the
# enclosing job (the step id is the job's id path).  Bounded, never fatal.
. "$(dirname "$0")/common.sh"
if [ "${1:-}" = --retry ]; then # the detached copy
    fmb_cleanup_retry "$2"
    exit
fi
if [ "$(fmb_level)" = 0 ]; then
    fmb_cleanup "$(fmb_jobid)"
    exit 0
fi
step=$(fmb_job_path)
# Only our variables, read as data (never sourced).
vars=$(fmb_inherited | LC_ALL=C grep -E '^FI_CXI_COLL_(JOB_ID|MCAST_TOKEN)=')
jobid=$(printf '%s\n' "$vars" | sed -n 's/^FI_CXI_COLL_JOB_ID=//p')
token=$(printf '%s\n' "$vars" | sed -n 's/^FI_CXI_COLL_MCAST_TOKEN=//p')
[ -n "$jobid" ] && [ -n "$token" ] || exit 0 # no reservation above us: no trees
out=$(FI_CXI_COLL_JOB_ID=$jobid FI_CXI_COLL_MCAST_TOKEN=$token FI_CXI_COLL_JOB_STEP_ID=$step \
    timeout $((FMBROKER_HOOK_TIMEOUT + 1)) "$FMBROKER_BINDIR/fmbroker" -c "$FMBROKER_CONF" \
    --timeout "$FMBROKER_HOOK_TIMEOUT" step-clean 2>&1 >/dev/null) ||
    fmb_log "job step $step: step-clean failed (exit $?: $(echo "$out" | tail -n 1)); its trees go with the enclosing job"
exit 0
