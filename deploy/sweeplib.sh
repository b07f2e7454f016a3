# sweeplib.sh: the sweep that ends at fmbrokerd the jobs a resource
# manager no longer runs, whose CLEANUP never arrived (no broker for
# longer than the hook's retries, an RM controller stopped before it ran
# the hook, hooks misconfigured for a while), and the jobs it never ran
# (a node's credential, with [api] agent_run, can make a job naming its
# node); such a job keeps its VNIs and FM reservation for good.  Sourced
# by fmbroker-slurm-sweep.sh and fmbroker-flux-sweep.sh after their
# common.sh (fmb_log, and hooklib.sh's fmb_end_job, the same CLEANUP call
# the hooks make), which define:
#   rm_name       the RM's name in messages (Slurm, Flux)
#   rm_list FILE  every job the RM has that may still run, "ID STATE" a
#                 line; non-zero (its reason on stderr) when it cannot say
#   rm_finished   an ERE of the states in that list that are over
#   rm_unknown    why a job missing from that list is over
#   rm_state ID   the job's own state now (nothing: the RM has no such
#                 job); non-zero when the RM cannot say
#
# The broker's active and lost jobs are read first, then the RM's: a job
# the RM ran was listed by it while it may still run, so one missing
# from the list, or listed as over, has ended or never was the RM's.
# Such a job, whatever its id, older at the broker than
# FMBROKER_SWEEP_MIN_AGE_S (600), is ended with `fmbroker end-job` after
# rm_state agrees once more (ids matching FMBROKER_SWEEP_KEEP, an ERE,
# are left alone: another RM's on a broker it shares).  The jobs to end
# go in pages of FMBROKER_SWEEP_MAX (100): after each page both lists
# are read again, and the next page is what they still say, until none
# is left.  A count never stops the sweep: a node's credential could
# make more fake jobs than any such threshold, and the per-job re-check
# is what keeps a running job safe.  Exit status: 0 done (or nothing to
# do); 1 an end-job failed; 2 no list from the broker or the RM, or a
# caller that is not rm at the broker (then nothing is ended).

sweep_usage () {
    echo "usage: $0 [--dry-run]"
    echo "End at fmbrokerd the jobs $rm_name no longer runs or never ran (their CLEANUP"
    echo "never arrived): active or lost there, older than FMBROKER_SWEEP_MIN_AGE_S (600),"
    echo "and not running in $rm_name; FMBROKER_SWEEP_MAX (100) at a time, until none is"
    echo "left.  --dry-run: only say which.  Exit 0 done, 1 an end-job failed, 2 no"
    echo "list from the broker or from $rm_name (nothing ended)."
}
# (--timeout bounds each call to the broker; a listing is a call a page)
sweep_fmb () { "$FMBROKER_BINDIR/fmbroker" -c "$FMBROKER_CONF" --timeout "$FMBROKER_HOOK_TIMEOUT" "$@"; }
sweep_say () { # also on stdout, for whoever ran it by hand
    echo "$*"
    fmb_log "sweep: $*"
}

# The broker's jobs that hold something until a CLEANUP, "ID CREATED_MS"
# lines in $sweep_tmp/broker, read page by page to the end; exit 2 when
# it cannot read them all.
sweep_broker_jobs () {
    # Only an rm or admin caller sees every job (any other sees its own
    # and may end none): first read what only they may read.
    if ! _last=$(sweep_fmb --json status 2>"$sweep_tmp/err" | jq -re '.events.last_seq') ||
        ! sweep_fmb --json events --after "$_last" >/dev/null 2>"$sweep_tmp/err"; then
        sweep_say "cannot read the broker's events, so not an [api] rm user there: $(tail -n 1 "$sweep_tmp/err"); nothing ended"
        exit 2
    fi
    : >"$sweep_tmp/broker"
    for _state in active lost; do
        if ! sweep_fmb --json jobs --state "$_state" --limit 100000 >"$sweep_tmp/$_state.json" 2>"$sweep_tmp/err"; then
            sweep_say "cannot list the broker's $_state jobs: $(tail -n 1 "$sweep_tmp/err"); nothing ended"
            exit 2
        fi
        # (over 100,000: the rest come in the next round, once these end)
        jq -e '.next_after' "$sweep_tmp/$_state.json" >/dev/null && sweep_more=1
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

# One round: both lists read, the jobs to end ("ID WHY") in
# $sweep_tmp/ended, sorted; exit 2 when a list cannot be read.
sweep_round () {
    sweep_more=
    sweep_broker_jobs
    : >"$sweep_tmp/ended"
    [ -s "$sweep_tmp/broker" ] || return 0
    if ! rm_list "$sweep_tmp/rm" 2>"$sweep_tmp/err"; then
        sweep_say "$(tail -n 1 "$sweep_tmp/err"); nothing ended"
        exit 2
    fi
    # (now in ms: in whole seconds, a job made in this second would read
    # as made in the future, younger than any age)
    awk -v now="$(date +%s%3N)" -v min="$((_min_age * 1000))" -v fin="^($rm_finished)\$" \
        -v rm="$rm_name" -v unknown="$rm_unknown" -v keep="${FMBROKER_SWEEP_KEEP:-}" '
        FILENAME == ARGV[1] { state[$1] = $2; next }
        now - $2 < min || (keep != "" && $1 ~ ("^(" keep ")$")) { next }
        !($1 in state) { print $1, unknown; next }
        state[$1] ~ fin { print $1, "ended in " rm " (" state[$1] ")" }
    ' "$sweep_tmp/rm" "$sweep_tmp/broker" | sort -u >"$sweep_tmp/ended"
}

fmb_sweep () {
    _min_age=${FMBROKER_SWEEP_MIN_AGE_S:-600}
    _max=${FMBROKER_SWEEP_MAX:-100}
    sweep_dry_run=
    case "${1:-}" in
        "" | --force) ;; # (--force: what every run now does, kept for old timers)
        --dry-run) sweep_dry_run=1 ;;
        -h | --help) sweep_usage; exit 0 ;;
        *) sweep_usage >&2; exit 2 ;;
    esac
    case "$_min_age$_max" in
        '' | *[!0-9]*)
            echo "FMBROKER_SWEEP_MIN_AGE_S=$_min_age, FMBROKER_SWEEP_MAX=$_max: numbers" >&2
            exit 2 ;;
    esac
    [ "$_max" -gt 0 ] || _max=100
    sweep_tmp=$(mktemp -d) || exit 2
    trap 'rm -rf "$sweep_tmp"' EXIT
    sweep_ended=0 sweep_failed=0
    : >"$sweep_tmp/tried"
    while :; do
        sweep_round
        # a job tried in an earlier page (its end-job failed, or rm_state
        # kept it) waits for the next sweep: every round goes forward
        awk 'FILENAME == ARGV[1] { tried[$1]; next } !($1 in tried)' \
            "$sweep_tmp/tried" "$sweep_tmp/ended" >"$sweep_tmp/todo"
        [ -s "$sweep_tmp/todo" ] || break
        if [ -n "$sweep_dry_run" ]; then # ends nothing: one round says all
            while read -r _job _why; do sweep_end "$_job" "$_why"; done <"$sweep_tmp/todo"
            break
        fi
        head -n "$_max" "$sweep_tmp/todo" >"$sweep_tmp/page"
        cut -d" " -f1 "$sweep_tmp/page" >>"$sweep_tmp/tried"
        while read -r _job _why; do
            sweep_end "$_job" "$_why"
        done <"$sweep_tmp/page"
    done
    [ "$sweep_ended" -gt 0 ] && sweep_say "$sweep_ended job(s) ended"
    [ "$sweep_failed" = 0 ] || exit 1
    exit 0
}
