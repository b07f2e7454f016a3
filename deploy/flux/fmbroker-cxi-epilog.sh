#!/bin/sh
# Flux per-node epilog (epilog.d, root): first phase, seconds only; the
# job's resources are not held for a busy NIC.  It does not report:
# housekeeping (fmbroker-cxi-housekeeping.sh) retries and reports.
. "$(dirname "$(readlink -f "$0")")/common.sh"
# this node as Flux names it; client_token_file may say %n for it
FMBROKER_NODE=$(fmb_node)
export FMBROKER_NODE
timeout 30 "$FMBROKER_SBINDIR/fmbroker-cxi" -c "$FMBROKER_CONF" $FMBROKER_CXI_ARGS epilog \
    --job "$(fmb_jobid)" --node "$FMBROKER_NODE" --retry-busy 5 --no-report ||
    fmb_log "job $(fmb_jobid): services still busy after the epilog; housekeeping retries"
exit 0
