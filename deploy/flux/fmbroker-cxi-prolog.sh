#!/bin/sh
# Flux per-node prolog (prolog.d, root): the job's CXI services on this
# node and the job's record for its tasks.
. "$(dirname "$0")/common.sh"
timeout 60 "$FMBROKER_SBINDIR/fmbroker-cxi" -c "$FMBROKER_CONF" $FMBROKER_CXI_ARGS prolog \
    --job "$(fmb_jobid)" --node "$(fmb_node)" ||
    fmb_log "job $(fmb_jobid): fmbroker-cxi prolog failed (exit $?)"
exit 0
