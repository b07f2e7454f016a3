#!/bin/sh
# Flux per-node prolog (root): the job's CXI services on this node.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
timeout 60 fmbroker-cxi prolog --job "$FLUX_JOB_ID" --node "$(hostname -s)" ||
    logger -t fmbroker-flux "job $FLUX_JOB_ID: fmbroker-cxi prolog failed"
exit 0
