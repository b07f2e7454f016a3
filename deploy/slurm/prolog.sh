#!/bin/sh
# Prolog (each node, root): the job's CXI services on this node's NICs.
# A failure is logged and the job runs without them (no drain).
. "$(dirname "$0")/common.sh"
timeout 60 "$FMBROKER_SBINDIR/fmbroker-cxi" -c "$FMBROKER_CONF" $FMBROKER_CXI_ARGS prolog --job "$SLURM_JOB_ID" \
    --ncores "$(fmb_ncores)" --node "${SLURMD_NODENAME:-$(hostname -s)}" ||
    fmb_log "job $SLURM_JOB_ID: fmbroker-cxi prolog failed (exit $?)"
exit 0
