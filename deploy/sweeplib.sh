# sweeplib.sh: the sweep that ends at fmbrokerd the jobs a resource
# manager no longer runs, whose CLEANUP never arrived (no broker for
# longer than the hook's retries, an RM controller stopped before it ran
# the hook, hooks misconfigured for a while); such a job keeps its VNIs
# and FM reservation for good.  Sourced by fmbroker-slurm-sweep.sh and
# fmbroker-flux-sweep.sh after their common.sh (fmb_log, and hooklib.sh's
# fmb_end_job, the same CLEANUP call the hooks make), which define:
#   rm_name       the RM's name in messages (Slurm, Flux)
#   rm_list FILE  every job the RM has that may still run, "ID STATE" a
#                 line; non-zero (its reason on stderr) when it cannot say
#   rm_finished   an ERE of the states in that list that are over
#   rm_unknown    why a job missing from that list is over
#   rm_state ID   the job's own state now (nothing: the RM has no such
#                 job); non-zero when the RM cannot say
#
# The broker's active and lost jobs are read first, then the RM's: a job
# the broker has was known to the RM before (its RUN came from the RM's
# prolog) and is listed while it may still run, so one missing from the
# list, or listed as over, has ended.  Such a job with a numeric id,
# older at the broker than FMBROKER_SWEEP_MIN_AGE_S (600), is ended with
# `fmbroker end-job` after rm_state agrees once more.  More than
# FMBROKER_SWEEP_MAX (100) to end at once looks like a wrong list: none is
# ended without --force.  Exit status: 0 done (or nothing to do); 1 an
# end-job failed; 2 no list from the broker or the RM, a caller that is
# not rm at the broker, or too many (then nothing is ended).

sweep_usage () {
    echo "usage: $0 [--dry-run | --force]"
    echo "End at fmbrokerd the jobs $rm_name no longer runs (their CLEANUP never arrived):"
    echo "active or lost there, older than FMBROKER_SWEEP_MIN_AGE_S (600), and not"
    echo "running in $rm_name.  --dry-run: only say which.  --force: even more than"
    echo "FMBROKER_SWEEP_MAX (100) at once.  Exit 0 done, 1 an end-job failed, 2 no"
    echo "list from the broker or from $rm_name, or too many (nothing ended)."
}
# (--timeout bounds each call to the broker; a listing is a call a page)
sweep_fmb () { "$FMBROKER_BINDIR/fmbroker" -c "$FMBROKER_CONF" --timeout "$FMBROKER_HOOK_TIMEOUT" "$@"; }
sweep_say () { # also on stdout, for whoever ran it by hand
    echo "$*"
    fmb_log "sweep: $*"
}

# The broker's jobs that hold something until a CLEANUP, "ID CREATED_MS"
# lines in $sweep_tmp/broker; exit 2 when it cannot read them all.
sweep_broker_jobs () {
    # Only an rm or admin caller sees every job (any other sees its own
    # and may end none): first read what only they may read.
    if ! _last=$(sweep_fmb --json status 2>"$sweep_tmp/err" | jq -re '.events.last_seq') ||
        ! sweep_fmb --json events --after "$_last" >/dev/null 2>"$sweep_tmp/err"; then
        sweep_say "cannot read the broker's events, so not an [api] rm user there: $(tail -n 1 "$sweep_tmp/err"); nothing ended"
        exit 2
    fi
    for _state in active lost; do
        if ! sweep_fmb --json jobs --state "$_state" --limit 100000 >"$sweep_tmp/$_state.json" 2>"$sweep_tmp/err"; then
            sweep_say "cannot list the broker's $_state jobs: $(tail -n 1 "$sweep_tmp/err"); nothing ended"
            exit 2
        fi
        jq -e '.next_after' "$sweep_tmp/$_state.json" >/dev/null &&
            sweep_say "over 100000 $_state jobs at the broker: only the first 100000 looked at"
        jq -r '.jobs[] | "\(.id) \(.created_ms)"' "$sweep_tmp/$_state.json" >>"$sweep_tmp/broker" || exit 2
    done
}

# End one job (ID WHY) unless the RM says otherwise now; counts in
# sweep_ended and sweep_failed.
sweep_end () {
    if ! _now=$(rm_state "$1"); then
        sweep_say "job $1: $rm_name cannot say what the job is now; left for the next sweep"
        return
    fi
    if [ -n "$_now" ] && ! echo "$_now" | grep -Eqx "$rm_finished"; then
        sweep_say "job $1: $_now in $rm_name now; left to its own CLEANUP"
        return
    fi
    if [ -n "$sweep_dry_run" ]; then
        echo "would end job $1: $2"
        return
    fi
    if _out=$(fmb_end_job "$1"); then
        sweep_ended=$((sweep_ended + 1))
        sweep_say "job $1: $2, and its CLEANUP never reached the broker: ended now (its VNIs and FM reservation are released)"
    else
        sweep_failed=$((sweep_failed + 1))
        sweep_say "job $1: $2; end-job failed: $(echo "$_out" | tail -n 1)"
    fi
}

fmb_sweep () {
    _min_age=${FMBROKER_SWEEP_MIN_AGE_S:-600}
    _max=${FMBROKER_SWEEP_MAX:-100}
    sweep_dry_run= _force=
    case "${1:-}" in
        "") ;;
        --dry-run) sweep_dry_run=1 ;;
        --force) _force=1 ;;
        -h | --help) sweep_usage; exit 0 ;;
        *) sweep_usage >&2; exit 2 ;;
    esac
    case "$_min_age$_max" in
        '' | *[!0-9]*)
            echo "FMBROKER_SWEEP_MIN_AGE_S=$_min_age, FMBROKER_SWEEP_MAX=$_max: numbers" >&2
            exit 2 ;;
    esac
    sweep_tmp=$(mktemp -d) || exit 2
    trap 'rm -rf "$sweep_tmp"' EXIT
    sweep_broker_jobs
    [ -s "$sweep_tmp/broker" ] || exit 0
    if ! rm_list "$sweep_tmp/rm" 2>"$sweep_tmp/err"; then
        sweep_say "$(tail -n 1 "$sweep_tmp/err"); nothing ended"
        exit 2
    fi
    # "ID WHY" for each job to end.
    # (now in ms: in whole seconds, a job made in this second would read
    # as made in the future, younger than any age)
    awk -v now="$(date +%s%3N)" -v min="$((_min_age * 1000))" -v fin="^($rm_finished)\$" \
        -v rm="$rm_name" -v unknown="$rm_unknown" '
        FILENAME == ARGV[1] { state[$1] = $2; next }
        $1 !~ /^[0-9]+$/ || now - $2 < min { next }
        !($1 in state) { print $1, unknown; next }
        state[$1] ~ fin { print $1, "ended in " rm " (" state[$1] ")" }
    ' "$sweep_tmp/rm" "$sweep_tmp/broker" >"$sweep_tmp/ended"
    _n=$(wc -l <"$sweep_tmp/ended")
    if [ "$_n" -gt "$_max" ] && [ -z "$_force$sweep_dry_run" ]; then
        sweep_say "$_n jobs to end, more than FMBROKER_SWEEP_MAX=$_max: a wrong list from $rm_name (another cluster's, or one that hides jobs) looks like this; none ended: check with --dry-run, then run with --force"
        exit 2
    fi
    sweep_ended=0 sweep_failed=0
    while read -r _job _why; do
        sweep_end "$_job" "$_why"
    done <"$sweep_tmp/ended"
    [ "$sweep_ended" -gt 0 ] && sweep_say "$sweep_ended job(s) ended"
    [ "$sweep_failed" = 0 ] || exit 1
    exit 0
}
