#!/bin/sh
# Flux housekeeping (housekeeping.d, root, after the job is inactive):
# retry the job's leftover CXI services for FMBROKER_HOUSEKEEPING_S
# seconds (default 300), report to the broker, and exit 1, which makes
# Flux drain the node, only when they are still there.
. "$(dirname "$(readlink -f "$0")")/common.sh"
# this node as Flux names it; client_token_file may say %n for it
FMBROKER_NODE=$(fmb_node)
export FMBROKER_NODE
timeout $((FMBROKER_HOUSEKEEPING_S + 60)) "$FMBROKER_SBINDIR/fmbroker-cxi" -c "$FMBROKER_CONF" \
    $FMBROKER_CXI_ARGS housekeeping --job "$(fmb_jobid)" --node "$FMBROKER_NODE" \
    --retry-busy "$FMBROKER_HOUSEKEEPING_S"
rc=$?
if [ $rc = 1 ]; then
    fmb_log "job $(fmb_jobid): CXI services left behind; draining this node"
    exit 1
fi
[ $rc = 0 ] || fmb_log "job $(fmb_jobid): fmbroker-cxi housekeeping exit $rc, ignoring"
exit 0
