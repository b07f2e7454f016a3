#!/bin/sh
# Flux housekeeping (housekeeping.d, root, after the job is inactive):
# retry the job's leftover CXI services for FMBROKER_HOUSEKEEPING_S
# seconds (default 300), report to the broker, and exit 1, which makes
# Flux drain the node, only when they are still there.
. "$(dirname "$(readlink -f "$0")")/common.sh"
# The same job id and node name as the epilog's (fmbroker-cxi-epilog.sh):
# the f58 id as Flux gives it, and FMBROKER_NODE where set, else the node
# service's own name.
case $FLUX_JOB_ID in
ƒ*) id=$FLUX_JOB_ID ;;
*) id=$(fmb_jobid) ;;
esac
timeout $((FMBROKER_HOUSEKEEPING_S + 60)) "$FMBROKER_SBINDIR/fmbroker-cxi" -c "$FMBROKER_CONF" \
    $FMBROKER_CXI_ARGS housekeeping --job "$id" ${FMBROKER_NODE:+--node "$FMBROKER_NODE"} \
    --retry-busy "$FMBROKER_HOUSEKEEPING_S"
rc=$?
if [ $rc = 1 ]; then
    fmb_log "job $id: CXI services left behind; draining this node"
    exit 1
fi
[ $rc = 0 ] || fmb_log "job $id: fmbroker-cxi housekeeping exit $rc, ignoring"
exit 0
