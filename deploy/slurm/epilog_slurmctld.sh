#!/bin/sh
# EpilogSlurmctld: CLEANUP the job at fmbrokerd (answers at once; the
# release itself is retried by the broker).  A CLEANUP that does not get
# there leaves the job active at the broker, holding its FM reservation
# and VNIs, for good: when no broker answers (a failover takes tens of
# seconds) or one answers 429/5xx, a detached copy of this hook tries
# again with back-off for FMBROKER_CLEANUP_RETRY_S (default 600), and
# only then logs the job as left to clean by hand.
. "$(dirname "$0")/common.sh"
FMBROKER_CLEANUP_RETRY_S=${FMBROKER_CLEANUP_RETRY_S:-600}
end_job () {
    timeout $((FMBROKER_HOOK_TIMEOUT + 1)) "$FMBROKER_BINDIR/fmbroker" -c "$FMBROKER_CONF" \
        --timeout "$FMBROKER_HOOK_TIMEOUT" end-job "$SLURM_JOB_ID" 2>&1 >/dev/null
}
if [ "${1:-}" = --retry ]; then
    delay=2 waited=0
    while [ "$waited" -lt "$FMBROKER_CLEANUP_RETRY_S" ]; do
        sleep "$delay"
        waited=$((waited + delay))
        out=$(end_job)
        rc=$?
        if [ $rc = 0 ]; then
            fmb_log "job $SLURM_JOB_ID: end-job done after ${waited} s of retries"
            exit 0
        fi
        fmb_transient $rc "$out" || break
        delay=$((delay * 2))
        [ $delay -gt 60 ] && delay=60
    done
    fmb_log "job $SLURM_JOB_ID: end-job still failing after ${waited} s ($(echo "$out" | tail -n 1)); it keeps its VNIs and FM reservation: run 'fmbroker end-job $SLURM_JOB_ID' once a broker answers"
    exit 1
fi
out=$(end_job)
rc=$?
[ $rc = 0 ] && exit 0
if fmb_transient $rc "$out"; then
    fmb_log "job $SLURM_JOB_ID: end-job failed: $(echo "$out" | tail -n 1); retrying for up to $FMBROKER_CLEANUP_RETRY_S s"
    setsid "$0" --retry </dev/null >/dev/null 2>&1 &
else
    fmb_log "job $SLURM_JOB_ID: end-job failed: $(echo "$out" | tail -n 1)"
fi
exit 0
