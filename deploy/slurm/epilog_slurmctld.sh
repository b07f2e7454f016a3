#!/bin/sh
# EpilogSlurmctld: CLEANUP the job at fmbrokerd (answers at once; the
# release itself is retried by the broker).  A CLEANUP that does not get
# there leaves the job active at the broker, holding its FM reservation
# and VNIs, for good: when no broker answers (a failover takes tens of
# seconds) or one answers 429/5xx, a detached copy of this hook tries
# again with back-off for FMBROKER_CLEANUP_RETRY_S (default 600), and
# only then logs the job as left to fmbroker-slurm-sweep.timer (or to
# `fmbroker end-job` by hand).
# (its directory without a dirname process: this runs once per job)
case $0 in */*) . "${0%/*}/common.sh" ;; *) . ./common.sh ;; esac
# Back in Slurm's queue under the same id (requeued)?  Its next run's RUN
# may already have found the record; a CLEANUP arriving now would end
# that run.  Left to the next run's own CLEANUP then.  (When squeue
# cannot say, the CLEANUP goes ahead: the job was just seen ending.)
requeued () {
    case $(fmb_slurm_state "$1") in
    PENDING | CONFIGURING | RUNNING | REQUEUED | REQUEUE_HOLD | REQUEUE_FED | SUSPENDED) ;;
    *) return 1 ;;
    esac
    fmb_log "job $1: requeued before its CLEANUP got through; its next run's CLEANUP ends it"
}
if [ "${1:-}" = --retry ]; then
    fmb_cleanup_later="fmbroker-slurm-sweep.timer, where enabled, or 'fmbroker end-job $2' once a broker answers ends it"
    fmb_cleanup_retry "$2" requeued
    exit
fi
fmb_cleanup "$SLURM_JOB_ID"
exit 0
