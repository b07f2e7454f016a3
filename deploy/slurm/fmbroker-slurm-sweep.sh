#!/bin/sh
# fmbroker-slurm-sweep [--dry-run]: end at fmbrokerd the jobs Slurm no
# longer runs.  EpilogSlurmctld's CLEANUP is the one call that ends a job
# at the broker.  When it never gets there (no broker for longer than its
# retries, a slurmctld stopped before it ran the hook, hooks misconfigured
# for a while), the job keeps its VNIs and FM reservation for good.  Run
# on the controller as an [api] rm user (root or SlurmUser) by
# fmbroker-slurm-sweep.timer; needs jq and Slurm's squeue.
#
# The broker's active and lost jobs are read first, then every job
# slurmctld has (squeue -a -t all).  A job the broker has was known to
# slurmctld before that (its RUN came from PrologSlurmctld), and stays
# listed until MinJobAge after it ends: so a job that squeue does not
# list, or lists as finished, has ended.  Each such job whose id is a
# Slurm job id (a number) and that is older at the broker than
# FMBROKER_SWEEP_MIN_AGE_S (default 600) is ended with `fmbroker end-job`,
# after asking squeue about it once more (a requeued job's next run may
# have found the record meanwhile; when squeue cannot say, the job waits
# for the next sweep).  A job Slurm lists in any other state (pending,
# requeued or held ones too, and REVOKED: a federated job running on a
# sibling cluster) is left alone, and so is any state this script does
# not know.  More than FMBROKER_SWEEP_MAX (100) jobs to end at once looks
# like a wrong list from squeue (another cluster's, or one that hides
# jobs): none is ended without --force.
#
# Exit status: 0 nothing was left to end, or all of it was ended; 1 some
# end-job failed; 2 the broker's or Slurm's list could not be read, or
# more than FMBROKER_SWEEP_MAX jobs to end (then nothing is ended).
. "$(dirname "$0")/common.sh"
min_age=${FMBROKER_SWEEP_MIN_AGE_S:-600}
max=${FMBROKER_SWEEP_MAX:-100}
dry_run= force=
case "${1:-}" in
    "") ;;
    --dry-run) dry_run=1 ;;
    --force) force=1 ;;
    -h | --help)
        echo "usage: $0 [--dry-run | --force]"
        echo "End at fmbrokerd the jobs Slurm no longer runs (their CLEANUP never arrived):"
        echo "active or lost there, older than FMBROKER_SWEEP_MIN_AGE_S (600), and not in"
        echo "squeue, or finished there.  --dry-run: only say which.  --force: even more"
        echo "than FMBROKER_SWEEP_MAX (100) at once.  Exit 0 done, 1 an end-job failed,"
        echo "2 no list from the broker or from Slurm, or too many (nothing ended)."
        exit 0 ;;
    *) echo "usage: $0 [--dry-run | --force]" >&2; exit 2 ;;
esac
case "$min_age$max" in
    '' | *[!0-9]*) echo "FMBROKER_SWEEP_MIN_AGE_S=$min_age, FMBROKER_SWEEP_MAX=$max: numbers" >&2; exit 2 ;;
esac
# (--timeout bounds each call to the broker; a listing is a call a page)
fmb () { "$FMBROKER_BINDIR/fmbroker" -c "$FMBROKER_CONF" --timeout "$FMBROKER_HOOK_TIMEOUT" "$@"; }
say () { # also on stdout, for whoever ran it by hand
    echo "$*"
    fmb_log "sweep: $*"
}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
# Only an rm or admin caller sees every job (any other sees its own and
# may end none): first read what only they may read.
if ! last=$(fmb --json status 2>"$tmp/err" | jq -re '.events.last_seq') ||
    ! fmb --json events --after "$last" >/dev/null 2>"$tmp/err"; then
    say "cannot read the broker's events, so not an [api] rm user there: $(tail -n 1 "$tmp/err"); nothing ended"
    exit 2
fi
# The broker's jobs that hold something until a CLEANUP: "ID CREATED_MS".
for state in active lost; do
    if ! fmb --json jobs --state "$state" --limit 100000 >"$tmp/$state.json" 2>"$tmp/err"; then
        say "cannot list the broker's $state jobs: $(tail -n 1 "$tmp/err"); nothing ended"
        exit 2
    fi
    jq -e '.next_after' "$tmp/$state.json" >/dev/null &&
        say "over 100000 $state jobs at the broker: only the first 100000 looked at"
    jq -r '.jobs[] | "\(.id) \(.created_ms)"' "$tmp/$state.json" >>"$tmp/broker" || exit 2
done
[ -s "$tmp/broker" ] || exit 0
# Then Slurm's, every state: "ID STATE" (%A: each array task's and each
# heterogeneous component's own id, as SLURM_JOB_ID gives it to the hooks).
if ! squeue -a -h -t all -o '%A %T' >"$tmp/slurm" 2>"$tmp/err"; then
    say "squeue failed: $(tail -n 1 "$tmp/err"); nothing ended"
    exit 2
fi
# Finished states; any other (PENDING, RUNNING, COMPLETING, SUSPENDED,
# REQUEUED, REQUEUE_HOLD, SPECIAL_EXIT, ...) is Slurm's still.
finished='COMPLETED|CANCELLED|FAILED|TIMEOUT|NODE_FAIL|PREEMPTED|BOOT_FAIL|DEADLINE|OUT_OF_MEMORY'
now_ms=$(($(date +%s) * 1000))
# "ID WHY" for each job to end.
awk -v now="$now_ms" -v min="$((min_age * 1000))" -v fin="^($finished)\$" '
    FILENAME == ARGV[1] { slurm[$1] = $2; next }
    $1 !~ /^[0-9]+$/ || now - $2 < min { next }
    !($1 in slurm) { print $1, "unknown to slurmctld (ended over MinJobAge ago, or never ran)"; next }
    slurm[$1] ~ fin { print $1, "ended in Slurm (" slurm[$1] ")" }
' "$tmp/slurm" "$tmp/broker" >"$tmp/ended"
n=$(wc -l <"$tmp/ended")
if [ "$n" -gt "$max" ] && [ -z "$force$dry_run" ]; then
    say "$n jobs to end, more than FMBROKER_SWEEP_MAX=$max: a wrong list from squeue (another cluster's, or one that hides jobs) looks like this; none ended: check with --dry-run, then run with --force"
    exit 2
fi
failed=0 ended=0
while read -r job why; do
    # The job's state now: it may have been requeued since the listing.
    if ! now_state=$(fmb_slurm_state "$job"); then
        say "job $job: squeue cannot say what the job is now; left for the next sweep"
        continue
    fi
    if [ -n "$now_state" ] && ! echo "$now_state" | grep -Eqx "$finished"; then
        say "job $job: $now_state in Slurm now; left to its own CLEANUP"
        continue
    fi
    if [ -n "$dry_run" ]; then
        echo "would end job $job: $why"
        continue
    fi
    if out=$(fmb end-job "$job" 2>&1 >/dev/null); then
        ended=$((ended + 1))
        say "job $job: $why, and its CLEANUP never reached the broker: ended now (its VNIs and FM reservation are released)"
    else
        failed=$((failed + 1))
        say "job $job: $why; end-job failed: $(echo "$out" | tail -n 1)"
    fi
done <"$tmp/ended"
[ "$ended" -gt 0 ] && say "$ended job(s) ended"
[ "$failed" = 0 ] || exit 1
exit 0
