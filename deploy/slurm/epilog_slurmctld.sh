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
# Back in Slurm's queue under the same id (requeued)?  Its next run's RUN
# may already have found the record; a CLEANUP arriving now would end
# that run.  Left to the next run's own CLEANUP then.
requeued () {
    case $(squeue -h -j "$SLURM_JOB_ID" -o %T 2>/dev/null | head -n 1) in
    PENDING | CONFIGURING | RUNNING | REQUEUED | REQUEUE_HOLD | REQUEUE_FED | SUSPENDED) return 0 ;;
    esac
    return 1
}
if [ "${1:-}" = --retry ]; then
    delay=2 waited=0
    while [ "$waited" -lt "$FMBROKER_CLEANUP_RETRY_S" ]; do
        sleep "$delay"
        waited=$((waited + delay))
        if requeued; then
            fmb_log "job $SLURM_JOB_ID: requeued before its CLEANUP got through; its next run's CLEANUP ends it"
            exit 0
        fi
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
