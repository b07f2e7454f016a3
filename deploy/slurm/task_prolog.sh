#!/bin/sh
# TaskProlog (each task, as the user): print the job's environment as
# "export NAME=value" lines, which Slurm adds to the task's environment.
. "$(dirname "$0")/common.sh"
timeout "$FMBROKER_HOOK_TIMEOUT" "$FMBROKER_SBINDIR/fmbroker-cxi" -c "$FMBROKER_CONF" $FMBROKER_CXI_ARGS env \
    --job "$SLURM_JOB_ID" --format slurm 2>/dev/null
# The launcher's part: the step id, unique within the job.
[ -n "${SLURM_STEP_ID:-}" ] && echo "export FI_CXI_COLL_JOB_STEP_ID=$SLURM_STEP_ID"
exit 0
