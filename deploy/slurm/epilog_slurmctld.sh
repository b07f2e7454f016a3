#!/bin/sh
# EpilogSlurmctld: CLEANUP the job at fmbrokerd (answers at once; the
# release itself is retried by the broker).
. "$(dirname "$0")/common.sh"
timeout $((FMBROKER_HOOK_TIMEOUT + 1)) "$FMBROKER_BINDIR/fmbroker" -c "$FMBROKER_CONF" \
    --timeout "$FMBROKER_HOOK_TIMEOUT" end-job "$SLURM_JOB_ID" >/dev/null 2>&1 ||
    fmb_log "job $SLURM_JOB_ID: end-job failed (exit $?)"
exit 0
