#!/bin/bash
# t1650-slurm-sweep.sh: fmbroker-slurm-sweep ends at the broker the jobs
# Slurm no longer runs (their CLEANUP never arrived), and nothing else:
# not a job Slurm still has in any state but a finished one, not a young
# job, not a job requeued since the listing; a job whose id is no Slurm
# id was never Slurm's and is ended (issue 51), however many, in pages of
# FMBROKER_SWEEP_MAX; with no list from Slurm or the broker it ends
# nothing.  Slurm
# is a stub squeue here (t4010 runs the sweep against a real Slurm).
. "$(dirname "$0")/lib.sh"
start_mockfm
start_broker
sweep="$FMB_SRC/deploy/slurm/fmbroker-slurm-sweep.sh"
# squeue: the listing from $T/squeue.list; -j ID from $T/squeue.j.ID when
# there ("FAIL why": fails saying why), else from $T/squeue.now when it
# names ID (a state changed since the listing), else from the listing;
# fails as an unreachable slurmctld does while $T/squeue.down exists.
mkdir -p "$T/stub" && cat >"$T/stub/squeue" <<EOF
#!/bin/sh
echo "\$*" >>"$T/squeue.calls"
if [ -e "$T/squeue.down" ]; then
    echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2; exit 1
fi
job=
while [ \$# -gt 0 ]; do [ "\$1" = -j ] && job=\$2; shift; done
if [ -z "\$job" ]; then cat "$T/squeue.list"; exit 0; fi
if [ -e "$T/squeue.j.\$job" ]; then
    read -r first rest <"$T/squeue.j.\$job"
    [ "\$first" = FAIL ] && { echo "\$rest" >&2; exit 1; }
    cat "$T/squeue.j.\$job"; exit 0
fi
line=\$(grep "^\$job " "$T/squeue.now" 2>/dev/null || grep "^\$job " "$T/squeue.list")
[ -n "\$line" ] || { echo "slurm_load_jobs error: Invalid job id specified" >&2; exit 1; }
echo "\$line"
EOF
chmod 755 "$T/stub/squeue"
# run_sweep ARGS: as the timer runs it (root, an rm user), Slurm stubbed;
# its words on stdout, and on stderr too (a failed step shows them), with
# room for a loaded machine (FMBROKER_HOOK_TIMEOUT).
run_sweep () {
    env PATH="$T/stub:$PATH" FMBROKER_CONF="$T/broker.conf" FMBROKER_BINDIR="$FMB_BIN" \
        FMBROKER_HOOK_TIMEOUT=20 FMBROKER_HOOK_LOG="$T/hooks.log" \
        FMBROKER_SWEEP_MIN_AGE_S="${min_age:-0}" "$sweep" "$@" >"$T/sweep.out" 2>&1
    rc=$?
    sed "s/^/sweep (exit $rc): /" "$T/sweep.out" >&2
    cat "$T/sweep.out"
    return $rc
}
state_of () { job_field "$1" .state; }
# Each job's state at the broker, "ID STATE" sorted: what a sweep changed.
states () { rm_call GET "/v1/jobs?limit=1000" | jq -r '.jobs[] | "\(.id) \(.state)"' | sort; }
run_job () { rm_call PUT "/v1/jobs/$1" "{\"uid\":1000,\"nodes\":[\"a\",\"b\"]}" >/dev/null; }
lost () { job_field "$1" .state | grep -qx lost; }

expect_ok 'jobs at the broker, and what Slurm says of each' '
    for j in 101 102 103 104 105 106 107 108 109 110 flux-f2x; do run_job "$j" || return 1; done &&
    curl -sf -X DELETE "$fm_url/fabric/collectives/jobs/c1-107" >/dev/null &&
    rm_call POST /v1/reconcile >/dev/null && wait_for 100 0.1 lost 107 &&
    printf "%s\n" "102 COMPLETED" "103 RUNNING" "104 PENDING" "105 COMPLETING" "106 TIMEOUT" \
        "108 SPECIAL_EXIT" "109 SOME_NEW_STATE" "110 CANCELLED" "999 RUNNING" >"$T/squeue.list" &&
    printf "%s\n" "110 PENDING" >"$T/squeue.now" && states >before &&
    test "$(grep -c " active$" before)" = 10 && grep -qx "107 lost" before
'
expect_ok 'jobs younger than FMBROKER_SWEEP_MIN_AGE_S are left alone' '
    min_age=3600 run_sweep >out && test ! -s out && states >now && diff before now
'
expect_ok 'with slurmctld unreachable nothing is ended, exit 2, and the log says why' '
    touch "$T/squeue.down" && { run_sweep >out; test $? = 2; } && rm -f "$T/squeue.down" &&
    grep -q "squeue failed: slurm_load_jobs error: Unable to contact slurm controller" out &&
    grep -q "fmbroker-slurm: sweep: squeue failed" "$T/hooks.log" && states >now && diff before now
'
# (uid 1001 owns none of the jobs: uid 1000 would see its own)
expect_ok 'a caller the broker does not take as rm (uid 1001) ends nothing, exit 2, with the broker'"'"'s reason' '
    skip_root=$(id -u) && if [ "$skip_root" != 0 ] || ! command -v setpriv >/dev/null; then echo "skipped: needs root"; return 0; fi &&
    chmod 755 "$T" && chmod 644 "$T/broker.conf" &&
    { as_user 1001 env PATH="$T/stub:$PATH" FMBROKER_CONF="$T/broker.conf" FMBROKER_BINDIR="$FMB_BIN" \
        FMBROKER_SWEEP_MIN_AGE_S=0 "$sweep" >out 2>&1; test $? = 2; } &&
    grep -q "cannot read the broker.s events, so not an \[api\] rm user there: .*403" out &&
    states >now && diff before now
'
expect_ok '--dry-run says which jobs it would end, and why, and ends none' '
    run_sweep --dry-run >out && states >now && diff before now &&
    grep -qx "would end job 101: unknown to slurmctld (ended over MinJobAge ago, or never ran)" out &&
    grep -qx "would end job 102: ended in Slurm (COMPLETED)" out &&
    grep -qx "would end job 106: ended in Slurm (TIMEOUT)" out &&
    grep -qx "would end job 107: unknown to slurmctld (ended over MinJobAge ago, or never ran)" out &&
    grep -qx "would end job flux-f2x: unknown to slurmctld (ended over MinJobAge ago, or never ran)" out &&
    grep -qx "job 110: PENDING in Slurm now; left to its own CLEANUP" out &&
    test "$(grep -c "^would end" out)" = 5
'
expect_ok 'the sweep ends exactly the jobs Slurm has not got or has as finished, and logs each' '
    : >"$T/hooks.log" && run_sweep >out && states >now &&
    for j in 101 102 106 107 flux-f2x; do grep -q "^$j \(releasing\|released\)$" now || { echo "$j not ended"; return 1; }; done &&
    for j in 103 104 105 108 109 110; do grep -qx "$j active" now || { echo "$j touched"; return 1; }; done &&
    grep -q "sweep: job 102: ended in Slurm (COMPLETED), and its CLEANUP never reached the broker: ended now" "$T/hooks.log" &&
    grep -q "sweep: 5 job(s) ended" "$T/hooks.log" &&
    wait_for 100 0.1 mockfm_lacks_job c1-101 && mockfm_has_job c1-103
'
expect_ok 'run again, it finds nothing to end' '
    states >before && run_sweep >out && states >now && diff before now &&
    test "$(cat out)" = "job 110: PENDING in Slurm now; left to its own CLEANUP"
'
# An end-job that fails (the broker went away between the listing and
# the call) is said and counted: exit 1, the others still ended.
expect_ok 'an end-job that fails: exit 1, its reason logged, the other jobs still ended' '
    mkdir -p "$T/bin" && cat >"$T/bin/fmbroker" <<EOF &&
#!/bin/sh
case " \$* " in *" end-job 103 "*) echo "fmbroker: 503 the broker is shutting down" >&2; exit 1 ;; esac
exec "$FMB_BIN/fmbroker" "\$@"
EOF
    chmod 755 "$T/bin/fmbroker" &&
    printf "%s\n" "103 FAILED" "104 NODE_FAIL" >"$T/squeue.list" &&
    { env PATH="$T/stub:$PATH" FMBROKER_CONF="$T/broker.conf" FMBROKER_BINDIR="$T/bin" \
        FMBROKER_SWEEP_MIN_AGE_S=0 "$sweep" >out; test $? = 1; } &&
    grep -q "job 103: ended in Slurm (FAILED); end-job failed: fmbroker: 503 the broker is shutting down" out &&
    test "$(state_of 103)" = active && test "$(state_of 104)" != active
'
# squeue -j lists a heterogeneous job's components (or an array's tasks)
# under one id: only the job's own line counts.  A re-check squeue cannot
# answer leaves the job for the next sweep.  REVOKED is a federated job
# running on a sibling cluster.
expect_ok 'the re-check reads the job'"'"'s own line, a failed re-check or a REVOKED job ends nothing' '
    for j in 120 121 122 123 124; do run_job "$j" || return 1; done &&
    printf "%s\n" "103 RUNNING" "110 RUNNING" "120 COMPLETED" "121 COMPLETED" "122 RUNNING" "123 REVOKED" \
        "124 TIMEOUT" >"$T/squeue.list" &&
    echo "FAIL slurm_load_jobs error: Socket timed out on send/recv operation" >"$T/squeue.j.120" &&
    printf "%s\n" "122 RUNNING" "121 COMPLETED" >"$T/squeue.j.121" &&
    run_sweep >out && states >now &&
    grep -qx "job 120: Slurm cannot say what the job is now; left for the next sweep" out &&
    grep -qx "120 active" now && grep -q "^121 \(releasing\|released\)$" now &&
    grep -qx "122 active" now && grep -qx "123 active" now && grep -q "^124 \(releasing\|released\)$" now
'
# Jobs Slurm never ran (a node's credential made them, numeric ids or
# not) are ended however many there are: FMBROKER_SWEEP_MAX is a page,
# not a stop (issue 51: over 100 fakes used to end nothing at all).  A
# job Slurm runs is never ended; FMBROKER_SWEEP_KEEP leaves ids alone.
expect_ok 'more jobs to end than FMBROKER_SWEEP_MAX: every one ended, page by page, none Slurm runs' '
    rm -f "$T/squeue.j.120" &&
    for j in 900 901 902 903 904 fake-1 fake-2 fake-3 keep-1; do run_job "$j" || return 1; done &&
    printf "%s\n" "103 RUNNING" "110 RUNNING" "122 RUNNING" "123 REVOKED" >"$T/squeue.list" &&
    : >"$T/squeue.now" && : >"$T/squeue.calls" &&
    FMBROKER_SWEEP_MAX=2 FMBROKER_SWEEP_KEEP="keep-.*" run_sweep >out && states >now &&
    for j in 120 900 901 902 903 904 fake-1 fake-2 fake-3; do grep -q "^$j \(releasing\|released\)$" now || { echo "$j not ended"; return 1; }; done &&
    for j in 103 110 122 123 keep-1; do grep -qx "$j active" now || { echo "$j touched"; return 1; }; done &&
    test "$(grep -c "^job .*: ended now" out)" = 9 && grep -qx "9 job(s) ended" out &&
    test "$(grep -c -- "-j fake" "$T/squeue.calls")" = 0
'
done_testing
