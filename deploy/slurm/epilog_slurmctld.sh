#!/bin/sh
# EpilogSlurmctld: CLEANUP the job at fmbrokerd (answers at once; the
# release itself is retried by the broker).
. "$(dirname "$0")/common.sh"
if ! out=$(timeout $((FMBROKER_HOOK_TIMEOUT + 1)) "$FMBROKER_BINDIR/fmbroker" -c "$FMBROKER_CONF" \
    --timeout "$FMBROKER_HOOK_TIMEOUT" end-job "$SLURM_JOB_ID" 2>&1 >/dev/null); then
    fmb_log "job $SLURM_JOB_ID: end-job failed: $(echo "$out" | tail -n 1)"
fi
exit 0
