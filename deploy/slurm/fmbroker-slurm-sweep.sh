#!/bin/sh
# fmbroker-slurm-sweep [--dry-run]: end at fmbrokerd the jobs Slurm no
# longer runs, whose CLEANUP (EpilogSlurmctld's) never arrived, and those
# it never ran, whatever their id.
# Run on the controller as an [api] rm user (root or SlurmUser) by
# fmbroker-slurm-sweep.timer; needs jq and Slurm's squeue.  The sweep
# itself, its safety rules and exit status: ../sweeplib.sh.  Slurm's side:
# every job slurmctld has (squeue -a -t all) stays listed until MinJobAge
# after it ends; one that is not listed, or is listed as finished, has
# ended.  Pending, requeued, held, completing and REVOKED jobs are
# Slurm's still, and so is any state this script does not know.  Each
# job is asked about once more (its own line of squeue -j: a requeued
# job's next run may have found the record since the listing).
. "$(dirname "$0")/common.sh"
rm_name=Slurm
# Every job slurmctld has, every state (%A: each array task's and each
# heterogeneous component's own id, as SLURM_JOB_ID gives it to the hooks).
rm_list () {
    squeue -a -h -t all -o '%A %T' >"$1" 2>"$1.err" ||
        { echo "squeue failed: $(tail -n 1 "$1.err")" >&2; return 1; }
}
# Finished states; any other (PENDING, RUNNING, COMPLETING, SUSPENDED,
# REQUEUED, REQUEUE_HOLD, SPECIAL_EXIT, REVOKED: a federated job running
# on a sibling cluster, ...) is Slurm's still.
rm_finished='COMPLETED|CANCELLED|FAILED|TIMEOUT|NODE_FAIL|PREEMPTED|BOOT_FAIL|DEADLINE|OUT_OF_MEMORY'
rm_unknown="unknown to slurmctld (ended over MinJobAge ago, or never ran)"
# (a requeued job's next run may have found the record since the listing)
# Slurm's job ids are numbers (SLURM_JOB_ID, %A): any other id at the
# broker was never Slurm's (a node's credential made it), and squeue is
# not asked about it.
rm_state () {
    case $1 in '' | *[!0-9]*) return 0 ;; esac
    fmb_slurm_state "$1"
}
. "$(dirname "$0")/../sweeplib.sh"
fmb_sweep "$@"
