#!/bin/sh
# fmbroker-flux-sweep [--dry-run]: end at fmbrokerd the jobs
# Flux no longer runs, whose CLEANUP (the job-manager epilog's) never
# arrived.  Run on the system instance's leader as its owner (the flux
# user, an [api] rm user) by fmbroker-flux-sweep.timer; needs jq and flux.
# The sweep itself, its safety rules and exit status: ../sweeplib.sh.
# Flux's side: its active jobs (pending: DEPEND, PRIORITY, SCHED;
# running: RUN, CLEANUP, which holds the epilog) are listed while they
# may run; a job that is not listed has ended (INACTIVE, or purged
# since).  Flux never reuses a job id and never runs an inactive job
# again, so nothing is asked twice.
. "$(dirname "$(readlink -f "$0")")/common.sh"
rm_name=Flux
# flux jobs lists at most -c jobs: a list that long may have been cut,
# and a job cut from it would look ended.
fmb_flux_max=1000000
rm_list () {
    flux jobs -n --user=all --filter=pending,running -c "$fmb_flux_max" -o '{id.dec} {state}' \
        >"$1" 2>"$1.err" || { echo "flux jobs failed: $(tail -n 1 "$1.err")" >&2; return 1; }
    [ "$(wc -l <"$1")" -lt "$fmb_flux_max" ] ||
        { echo "flux jobs listed $fmb_flux_max jobs: perhaps not all" >&2; return 1; }
}
rm_finished=INACTIVE
rm_unknown="not active in Flux (inactive, or purged since)"
rm_state () { :; }
. "$(dirname "$(readlink -f "$0")")/../sweeplib.sh"
fmb_sweep "$@"
