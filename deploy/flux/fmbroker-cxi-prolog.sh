#!/bin/sh
# Flux per-node prolog (prolog.d, root): the job's CXI services on this
# node and the job's record for its tasks.  When they cannot be set up
# (the broker unreachable for the job's facts, no RUN, no NIC service),
# FMBROKER_POLICY decides, as the Slurm plugin's policy= does: fail_closed
# (the default) exits 1 with the reason as the last line, a prolog
# failure that Flux turns into a fatal job exception, as its own
# cray-slingshot prolog does; fail_open lets the job run on the shared
# default service, and says so in the log.
. "$(dirname "$0")/common.sh"
out=$(timeout 60 "$FMBROKER_SBINDIR/fmbroker-cxi" -c "$FMBROKER_CONF" $FMBROKER_CXI_ARGS prolog \
    --job "$(fmb_jobid)" --node "$(fmb_node)" 2>&1)
rc=$?
[ -n "$out" ] && printf '%s\n' "$out" >&2
[ $rc = 0 ] && exit 0
why=$(printf '%s\n' "$out" | tail -n 1)
[ $rc = 124 ] && why="fmbroker-cxi prolog did not finish in 60 s"
if [ "$FMBROKER_POLICY" = fail_open ]; then
    fmb_log "job $(fmb_jobid): no VNI isolation on $(fmb_node), running without it (FMBROKER_POLICY=fail_open): $why"
    exit 0
fi
fmb_log "job $(fmb_jobid): no VNI isolation on $(fmb_node): $why; the job does not start (FMBROKER_POLICY=fail_closed)"
exit 1
