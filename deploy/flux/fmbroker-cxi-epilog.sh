#!/bin/sh
# Flux per-node epilog (epilog.d, root): first phase, seconds only; the
# job's resources are not held for a busy NIC.  fmbroker-cxi hands the
# job's end to the node service (which reports what it destroyed); a
# service still in use is left unreported, to housekeeping
# (fmbroker-cxi-housekeeping.sh), which retries and reports.
#
# On the launch path (flux run waits for the job's clean event, which
# follows the epilogs): no helper process.  fmbroker-cxi reads Flux's f58
# job id itself; the node is FMBROKER_NODE (/etc/default/fmbroker) where
# set, else the node service's own name.
. "$(dirname "$(readlink -f "$0")")/common.sh"
case $FLUX_JOB_ID in
ƒ*) id=$FLUX_JOB_ID ;;
*) id=$(fmb_jobid) ;; # FLUX_F58_FORCE_ASCII: flux job id reads it
esac
timeout 30 "$FMBROKER_SBINDIR/fmbroker-cxi" -c "$FMBROKER_CONF" $FMBROKER_CXI_ARGS epilog \
    --job "$id" ${FMBROKER_NODE:+--node "$FMBROKER_NODE"} --retry-busy 5 --no-report ||
    fmb_log "job $id: services still busy after the epilog; housekeeping retries"
exit 0
