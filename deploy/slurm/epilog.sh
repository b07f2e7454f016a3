#!/bin/sh
# Node epilog (each node, root), run by the fmbroker SPANK plugin's job
# epilog (plugstack.conf epilog=...), which puts what this prints into
# slurmd's log: destroy the job's CXI services.  Exit 1, which makes Slurm
# drain the node, only when services could not be destroyed.
. "$(dirname "$0")/common.sh"
timeout 120 "$FMBROKER_SBINDIR/fmbroker-cxi" -c "$FMBROKER_CONF" $FMBROKER_CXI_ARGS epilog --job "$SLURM_JOB_ID" \
    --retry-busy 30 --node "${SLURMD_NODENAME:-$(hostname -s)}" 2>&1
rc=$?
if [ $rc = 1 ]; then
    echo "job $SLURM_JOB_ID: CXI services left behind; draining this node"
    exit 1
fi
[ $rc = 0 ] || echo "job $SLURM_JOB_ID: fmbroker-cxi epilog exit $rc, ignoring"
exit 0
