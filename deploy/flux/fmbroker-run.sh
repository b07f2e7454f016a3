#!/bin/sh
# Flux job-manager prolog (system instance): RUN the job at fmbrokerd with
# its real node list and cores per node, from R.  Never fails the job
# itself: without a RUN, its per-node prologs find no job at the broker,
# and FMBROKER_POLICY decides there (fail_closed, the default: the job
# does not start).
. "$(dirname "$0")/common.sh"
id=$(fmb_jobid)
R=$(flux job info "$FLUX_JOB_ID" R 2>/dev/null)
nodes=$(printf '%s' "$R" | flux R decode --nodelist 2>/dev/null)
nnodes=$(printf '%s' "$R" | flux R decode --count=node 2>/dev/null)
cores=$(printf '%s' "$R" | flux R decode --count=core 2>/dev/null)
if [ -z "$nodes" ]; then
    fmb_log "job $id: cannot read its node list (R), so no RUN: its node prologs find no job at the broker (FMBROKER_POLICY=$FMBROKER_POLICY decides)"
    exit 0
fi
ncores=
[ "${nnodes:-0}" -gt 0 ] 2>/dev/null && [ "${cores:-0}" -gt 0 ] 2>/dev/null &&
    ncores=$((cores / nnodes))
out=$(timeout $((FMBROKER_HOOK_TIMEOUT + 1)) "$FMBROKER_BINDIR/fmbroker" -c "$FMBROKER_CONF" \
    --timeout "$FMBROKER_HOOK_TIMEOUT" run-job "$id" --uid "$FLUX_JOB_USERID" --nodes "$nodes" \
    ${ncores:+--ncores "$ncores"} --quiet 2>&1) ||
    fmb_log "job $id: run-job failed (exit $?: $(echo "$out" | tail -n 1)); its node prologs find no job at the broker (FMBROKER_POLICY=$FMBROKER_POLICY decides)"
exit 0
