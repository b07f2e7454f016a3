#!/bin/sh
# PrologSlurmctld: RUN the job at fmbrokerd (VNIs, multicast reservation).
# Never fails the job: a broker that is down or slow costs the job its
# hardware collectives, nothing else.
. "$(dirname "$0")/common.sh"
timeout $((FMBROKER_HOOK_TIMEOUT + 1)) "$FMBROKER_BINDIR/fmbroker" -c "$FMBROKER_CONF" \
    --timeout "$FMBROKER_HOOK_TIMEOUT" run-job "$SLURM_JOB_ID" --uid "$SLURM_JOB_UID" \
    --user "$SLURM_JOB_USER" --nodes "$SLURM_JOB_NODELIST" --ncores "$(fmb_ncores)" --quiet ||
    fmb_log "job $SLURM_JOB_ID: run-job failed (exit $?); it runs without hardware collectives"
exit 0
