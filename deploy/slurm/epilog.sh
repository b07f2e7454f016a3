#!/bin/sh
# Node epilog (each node, root), run by the fmbroker SPANK plugin's job
# epilog (plugstack.conf epilog=...), which puts what this prints into
# slurmd's log: destroy the job's CXI services.  Exit 1, which makes Slurm
# drain the node, when services could not be destroyed, or the agent did
# not finish in time (they may be left behind).
. "$(dirname "$0")/common.sh"
timeout 120 "$FMBROKER_SBINDIR/fmbroker-cxi" -c "$FMBROKER_CONF" $FMBROKER_CXI_ARGS epilog --job "$SLURM_JOB_ID" \
    --retry-busy 30 --node "${SLURMD_NODENAME:-$(hostname -s)}" 2>&1
rc=$?
case $rc in
0) ;;
1)
    echo "job $SLURM_JOB_ID: CXI services left behind; draining this node"
    exit 1
    ;;
124)
    echo "job $SLURM_JOB_ID: fmbroker-cxi epilog did not finish in 120 s; its CXI services may be left behind; draining this node"
    exit 1
    ;;
*)
    # It could not start (exit 2: its configuration, above).  The job's
    # VNIs stay quarantined until this node reports, so nothing is shared;
    # draining every node for a bad configuration would stop the cluster.
    echo "job $SLURM_JOB_ID: fmbroker-cxi epilog could not run (exit $rc, see above): its CXI services may be left behind, and its VNIs stay quarantined until this node reports; fix it, then run: fmbroker-cxi housekeeping --job $SLURM_JOB_ID"
    ;;
esac
exit 0
