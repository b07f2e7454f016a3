#!/bin/sh
# fmbroker-env.sh: the task environment of a Flux job, as NAME=value
# lines, for the job shell plugin (fmbroker.lua), run as the job's user.
# System instance: the job's record on this node (fmbroker-cxi env: no
# broker call; why there is none goes to the job's stderr under
# FMBROKER_POLICY=fail_open, where such a job runs without isolation;
# under fail_closed it runs so only on a node without Slingshot NICs).
# Sub-instance: what the instance inherited from its enclosing job (no
# broker call).  Both: FI_CXI_COLL_JOB_STEP_ID, the
# job's id path.
. "$(dirname "$0")/common.sh"
if [ "$(fmb_level)" = 0 ]; then
    record () {
        timeout "$FMBROKER_HOOK_TIMEOUT" "$FMBROKER_SBINDIR/fmbroker-cxi" -c "$FMBROKER_CONF" \
            $FMBROKER_CXI_ARGS env --job "$(fmb_jobid)" --format slurm
    }
    if [ "$FMBROKER_POLICY" = fail_open ]; then record; else record 2>/dev/null; fi |
        sed -n 's/^export //p'
else
    fmb_inherited
fi
echo "FI_CXI_COLL_JOB_STEP_ID=$(fmb_job_path)"
