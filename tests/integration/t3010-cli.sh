#!/bin/bash
# t3010-cli.sh: fmbroker, the admin and hook CLI: each subcommand's table
# and JSON output, exit codes, and step-clean run by the job itself.
. "$(dirname "$0")/lib.sh"
start_mockfm
start_broker
fmb () { "$FMB_BIN/fmbroker" --socket "$T/api.sock" "$@"; }

expect_ok 'run-job expands a host list and prints the job env, with its own traffic classes' '
    fmb run-job 42 --uid 1000 --user root --nodes "n[1-2]" --ncores 4 --tcs BULK_DATA >env.sh &&
    grep -q "^export SLINGSHOT_VNIS=[0-9]" env.sh && grep -qx "export SLINGSHOT_TCS=0x4" env.sh &&
    grep -q "^export FI_CXI_COLL_JOB_ID=c1-42$" env.sh &&
    rm_call GET /v1/jobs/42 | jq -e ".nodes == [\"n1\",\"n2\"] and .user == \"root\""
'
expect_ok 'status: a summary for people, the document with --json' '
    fmb status >s.txt && grep -q "^fabric manager: up" s.txt && grep -q "^jobs: 1 active" s.txt &&
    fmb --json status | jq -e ".jobs.active == 1"
'
expect_ok 'jobs: a table, filters, and --json' '
    fmb run-job 43 --uid 1001 --node-count 1 --quiet &&
    fmb jobs >j.txt && head -1 j.txt | grep -q "^JOB  *STATE  *UID" &&
    grep -q "^42  *active  *1000  *root  *2 .* reserved" j.txt && grep -q "^43 .*not_eligible" j.txt &&
    fmb jobs --user 1001 | grep -c "^4[0-9] " | grep -qx 1 &&
    fmb --json jobs --state active | jq -e ".jobs | length == 2"
'
expect_ok 'job show and job release' '
    fmb job show 42 | grep -q "^hwcoll: reserved (FM job c1-42" &&
    fmb job show 42 | grep -qx "  FI_CXI_COLL_MCAST_TOKEN=(hidden; --json shows it)" &&
    fmb --json job show 42 | jq -e ".env.FI_CXI_COLL_MCAST_TOKEN | test(\"^[0-9a-f]{32,}$\")" &&
    fmb job show 42 | grep -q "VNIs .*, TCs 0x4$" &&
    fmb --json job show 42 | jq -e ".id == \"42\"" &&
    fmb job release 43 | grep -q "^job 43: released"
'
expect_ok 'step-clean run by the job itself, unprivileged, with its token' '
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
        # a copy the user can reach, wherever the build tree is (/root)
        chmod 755 "$T" && install -m 755 "$FMB_BIN/fmbroker" "$T/fmbroker" &&
        val () { sed -n "s/^export $1=//p" env.sh; } &&
        as_user 1000 env FI_CXI_COLL_JOB_ID="$(val FI_CXI_COLL_JOB_ID)" FI_CXI_COLL_JOB_STEP_ID=0 \
            FI_CXI_COLL_MCAST_TOKEN="$(val FI_CXI_COLL_MCAST_TOKEN)" \
            "$T/fmbroker" --socket "$T/api.sock" step-clean | grep -q "^job 42 step 0: cleaned" &&
        { as_user 1000 "$T/fmbroker" --socket "$T/api.sock" step-clean 42 0 2>err; test $? = 1; } &&
        grep -q "403" err
    else
        echo "skipped: needs root and setpriv"
    fi
'
expect_ok 'step-clean with explicit arguments as the RM' '
    fmb step-clean 42 "f1/0/1" | grep -q "step f1/0/1: cleaned"
'
expect_ok 'events: a table, --after, --follow --count' '
    fmb end-job 42 &&
    fmb events >e.txt && grep -q " vni_quarantined  *42 " e.txt &&
    first=$(fmb --json events | head -1 | jq .seq) &&
    test "$(fmb --json events --after "$first" | wc -l)" -ge 1 &&
    { sleep 0.3; fmb end-job 43 >/dev/null; fmb run-job 44 --uid 1 --node-count 1 --quiet; fmb end-job 44; } &
    last=$(fmb --json status | jq .events.last_seq) &&
    timeout 20 "$FMB_BIN/fmbroker" --socket "$T/api.sock" --json events --follow --after "$last" --count 1 >f.json &&
    jq -e ".seq > $last" f.json
'
expect_ok 'vni list and reconcile' '
    fmb vni list | head -1 | grep -q "^VNI  *JOB  *STATE" &&
    fmb --json vni list | jq -e ".pool_min == 1024" &&
    fmb reconcile | grep -q "^reconciliation scheduled"
'
expect_ok 'exit codes: 1 refused, 2 usage, 3 unreachable' '
    { fmb job show nosuch 2>err; test $? = 1; } && grep -q "404" err &&
    { fmb bogus 2>/dev/null; test $? = 2; } &&
    { fmb run-job 9 2>/dev/null; test $? = 2; } &&
    { fmb run-job 9 --uid 1 --nodes "n[1-" 2>/dev/null; test $? = 2; } &&
    { "$FMB_BIN/fmbroker" --socket "$T/nowhere.sock" jobs 2>err; test $? = 3; } && grep -q "nowhere.sock" err
'
expect_ok 'every subcommand has --help' '
    for c in jobs job step-clean events run-job; do fmb $c --help | grep -q "^Usage: fmbroker $c" || { echo "$c"; return 1; }; done &&
    fmb --help | grep -q "Exit status"
'
# PrologSlurmctld passes $SLURM_JOB_USER as it is; sites with sssd's
# fully qualified names or winbind have '@' or a backslash in it.
expect_ok 'a user name as directories give it (user@domain, DOMAIN backslash user) is taken' '
    fmb run-job 145 --uid 1002 --user "jdoe@ad.example.com" --node-count 1 --quiet &&
    rm_call GET /v1/jobs/145 | jq -e ".user == \"jdoe@ad.example.com\"" &&
    fmb run-job 146 --uid 1003 --user "EXAMPLE\\jdoe" --node-count 1 --quiet &&
    rm_call GET /v1/jobs/146 | jq -e ".user == \"EXAMPLE\\\\jdoe\"" &&
    { fmb run-job 147 --uid 1003 --user "a b" --node-count 1 --quiet 2>err; test $? != 0; } &&
    grep -q "user: a name of 1-256 characters" err &&
    fmb end-job 145 >/dev/null && fmb end-job 146 >/dev/null
'
done_testing
