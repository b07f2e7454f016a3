#!/bin/bash
# t1095-libfabric-client.sh: the application side of hardware collectives
# as the real client speaks it.  libfabric 2.6.0's CXI provider, built
# from ../shared/thirdparty (scripts/build-libfabric.sh, cached outside
# the repository), runs its own FM client code (cxip_coll.c's join and
# fi_close on a multicast object, cxip_curl.c's requests, cxip_info.c's
# reading of the environment) against mockfm, with the environment a real
# fmbrokerd handed out for a job.
#
# Stand-ins, where one host has no Slingshot NIC (tests/lfclient says
# more): libcxi is a stub with no NIC (every cxil_* call -ENODEV); the
# endpoint and its domain are zeroed structs holding the job's VNI; the
# members' NIC addresses are given on the command line; the join's steps
# between members (zbcoll, PtlTE and RDMA set-up) do not run, only member
# 0's FM call and the provider's verdict on the FM's answer.
. "$(dirname "$0")/lib.sh"

thirdparty LF build-libfabric.sh libfabric
# The driver: the shim with the provider's own flags (it is cxip_coll.c),
# the rest with the project's.
lfc=$T/lfclient
{
    # shellcheck disable=SC2046
    cc $(cat "$LF/cppflags") -I"$FMB_SRC/tests/lfclient" -c -o "$T/shim.o" \
        "$FMB_SRC/tests/lfclient/lfclient_shim.c" &&
        cc -std=c17 -D_GNU_SOURCE -Wall -Wextra -Wformat=2 -Wshadow -Werror -c -o "$T/main.o" \
            "$FMB_SRC/tests/lfclient/lfclient.c" &&
        # shellcheck disable=SC2046
        cc -o "$lfc" "$T/main.o" "$T/shim.o" $(cat "$LF/libs")
} >"$T/lfclient-build.log" 2>&1 || bail_out "building tests/lfclient: $(grep -m5 error "$T/lfclient-build.log")"

start_mockfm
start_broker # addrs_per_job 4 (the FM's mcastLimit), min_nodes 2
step_fail_hook=lfc_diag
lfc_diag () { tail -5 "$T/lfc.out"; tail -8 "$T/fm.log"; }

# Five members, member 0 first.  0:00:07 lacks bit 9 (0x200): a hwRoot
# whose top group is not 0 decodes as 0x207 there, a NIC no member has.
members="0:00:07 1:A2:B3 0:00:08 0:00:09 0:0A:00"
# task STEP [NAME=VALUE...] ARGS...: the driver as a task of the job: only
# the job's variables from the RUN answer, FI_CXI_COLL_JOB_STEP_ID=STEP
# unless STEP is "-", then the NAME=VALUE given (they override); its
# lines go to stdout and to $T/lfc.out.
task () {
    step=$1
    shift
    mapfile -t jobenv < <(jq -r '.env | to_entries[] | "\(.key)=\(.value)"' "$T/run.json")
    [ "$step" = - ] || jobenv+=("FI_CXI_COLL_JOB_STEP_ID=$step")
    while [[ "${1-}" == *=* ]]; do jobenv+=("$1") && shift; done
    echo "== task step $step: lfclient $*" >>"$T/lfc.out"
    env -i PATH="$PATH" "${jobenv[@]}" "$lfc" "$@" >"$T/task.out" 2>&1
    rc=$?
    cat "$T/task.out" >>"$T/lfc.out" && cat "$T/task.out" && return $rc
}
trees () { # [STEP]: the job's trees at the FM (of STEP), as JSON lines
    curl -sf "$fm_url/_mock/state" |
        jq -c --arg s "${1-}" '.trees[] | select(.jobID == "c1-42" and ($s == "" or .jobStepID == $s))'
}
ntrees () { trees "$@" | wc -l; }

expect_ok 'RUN of a 5-node job: the broker hands out the FM URL and the session token' '
    rm_call PUT /v1/jobs/42 "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\",\"n3\",\"n4\",\"n5\"]}" >"$T/run.json" &&
    jq -e ".hwcoll.state == \"reserved\" and .hwcoll.mcast_limit == 4" "$T/run.json"
'
expect_ok 'libfabric reads that environment as the job'"'"'s (job id, URL, token, VNI)' '
    task 0 --joins 1 --close $members >"$T/out" &&
    grep -x "env job_id=c1-42 step_id=0 url=$(jq -r .env.FI_CXI_COLL_FABRIC_MGR_URL "$T/run.json") token=set collectives=yes vni=$(jq -r ".vnis[0]" "$T/run.json")" "$T/out"
'
expect_ok 'its join makes a tree with the job'"'"'s token, rooted at member 0, and fi_close deletes it' '
    grep -x "join 1 prov_errno=0 (ok) mcast_id=[0-9]* hwroot_idx=0" "$T/out" &&
    id=$(sed -n "s/^join 1 .* mcast_id=\([0-9]*\) .*/\1/p" "$T/out") &&
    grep -x "close mcast_id=$id ret=0" "$T/out" &&
    grep -x "POST /fabric/collectives/multicasts 200" "$T/fm.log" &&
    grep -x "DELETE /fabric/collectives/multicasts/$id 200" "$T/fm.log" &&
    test "$(ntrees)" = 0
'
expect_ok 'trees a task left open (step 1): the broker'"'"'s step cleanup deletes them' '
    task 1 --joins 2 $members >"$T/out" &&
    test "$(grep -c "^join [12] prov_errno=0 (ok)" "$T/out")" = 2 &&
    test "$(ntrees 1)" = 2 &&
    trees 1 | jq -se "map(.hwRoot) | sort == [7, 107187]" &&
    rm_call DELETE "/v1/jobs/42/steps/1?wait=10" | jq -e ".state == \"cleaned\"" &&
    test "$(ntrees)" = 0
'
expect_ok 'a refused token (401): the join fails with 2054 SERVER_ERR, nothing is made' '
    task 2 FI_CXI_COLL_MCAST_TOKEN=not-the-token $members >"$T/out" &&
    grep -x "join 1 prov_errno=2054 (SERVER_ERR) mcast_id=-1 hwroot_idx=-1" "$T/out" &&
    test "$(tail -1 "$T/fm.log")" = "POST /fabric/collectives/multicasts 401" &&
    test "$(ntrees)" = 0
'
expect_ok 'a full job: 4 joins (its mcastLimit), then 507 "01:" and join error 2048' '
    task 3 --joins 5 $members >"$T/out" &&
    test "$(grep -c "^join [1-4] prov_errno=0 (ok)" "$T/out")" = 4 &&
    grep -x "join 5 prov_errno=2048 (MCAST_INUSE) mcast_id=-1 hwroot_idx=-1" "$T/out" &&
    test "$(tail -1 "$T/fm.log")" = "POST /fabric/collectives/multicasts 507 01:" &&
    curl -sf "$fm_url/_mock/state" | jq -e ".pool_used == 4 and .pool > 4" &&
    rm_call DELETE "/v1/jobs/42/steps/3?wait=10" | jq -e ".state == \"cleaned\"" &&
    test "$(ntrees)" = 0
'
expect_ok 'every member a root already (400): join error 2049 HWROOT_INUSE' '
    task 4 --joins 3 0:00:07 1:A2:B3 >"$T/out" &&
    grep -x "join 3 prov_errno=2049 (HWROOT_INUSE) mcast_id=-1 hwroot_idx=-1" "$T/out" &&
    test "$(tail -1 "$T/fm.log")" = "POST /fabric/collectives/multicasts 400" &&
    rm_call DELETE "/v1/jobs/42/steps/4?wait=10" >/dev/null && test "$(ntrees)" = 0
'
expect_ok 'a URL that is not http(s): the provider drops it, 2052 CURL_FAILED, nothing sent' '
    n=$(wc -l <"$T/fm.log") && url=$(jq -r .env.FI_CXI_COLL_FABRIC_MGR_URL "$T/run.json") &&
    task 5 FI_CXI_COLL_FABRIC_MGR_URL="${url#http://}" $members >"$T/out" &&
    grep -q "^env .* url=(unset) " "$T/out" &&
    grep -x "join 1 prov_errno=2052 (CURL_FAILED) mcast_id=-1 hwroot_idx=-1" "$T/out" &&
    test "$(wc -l <"$T/fm.log")" = "$n"
'
expect_ok 'a busy FM (409): libfabric resends the POST and the DELETE until they pass' '
    mockfm_ctl POST /_mock/faults "$(printf "%s\n" "POST /fabric/collectives/multicasts 409 x2" \
        "DELETE /fabric/collectives/multicasts/* 409 x1")" &&
    task 7 --joins 1 --close $members >"$T/out"; rc=$?
    mockfm_ctl DELETE /_mock/faults && test $rc = 0 &&
    grep -q "^join 1 prov_errno=0 (ok)" "$T/out" && grep -q "^close mcast_id=[0-9]* ret=0$" "$T/out" &&
    tail -5 "$T/fm.log" | sed "s|multicasts/[0-9]*|multicasts/ID|" >"$T/tail" &&
    printf "%s\n" "POST /fabric/collectives/multicasts 409" "POST /fabric/collectives/multicasts 409" \
        "POST /fabric/collectives/multicasts 200" "DELETE /fabric/collectives/multicasts/ID 409" \
        "DELETE /fabric/collectives/multicasts/ID 200" | diff - "$T/tail" &&
    test "$(ntrees)" = 0
'
# The API's env is per job and has no step id (doc/api.md): a task
# started outside a step manager that sets none sends "(null)"; the job
# (with its token) frees those trees as step "(null)", or CLEANUP does.
expect_ok 'a task with no FI_CXI_COLL_JOB_STEP_ID: its tree is filed under step "(null)"' '
    task - --joins 1 $members >"$T/out" &&
    grep -q "^env job_id=c1-42 step_id=(unset) " "$T/out" &&
    grep -q "^join 1 prov_errno=0 (ok)" "$T/out" &&
    test "$(ntrees "(null)")" = 1
'
expect_ok 'fmbroker step-clean with the job'"'"'s variables frees step "(null)"' '
    mapfile -t jobenv < <(jq -r ".env | to_entries[] | \"\(.key)=\(.value)\"" "$T/run.json") &&
    env -i PATH="$PATH" "${jobenv[@]}" "$FMB_BIN/fmbroker" --socket "$T/api.sock" step-clean 42 "(null)" |
        grep -x "job 42 step (null): cleaned" &&
    test "$(ntrees)" = 0
'
expect_ok 'another, left for the end of the job' '
    task - --joins 1 $members >"$T/out" && test "$(ntrees "(null)")" = 1
'
expect_ok 'CLEANUP deletes the FM reservation, and with it the trees still there' '
    rm_call DELETE /v1/jobs/42 >/dev/null &&
    wait_for 100 0.1 mockfm_lacks_job c1-42 &&
    grep -x "DELETE /fabric/collectives/jobs/c1-42 200" "$T/fm.log" &&
    test "$(ntrees)" = 0
'
expect_ok 'the job'"'"'s token is dead after CLEANUP: a join fails with 2054 (401)' '
    task 6 --joins 1 $members >"$T/out" &&
    grep -q "^join 1 prov_errno=2054 (SERVER_ERR)" "$T/out" &&
    test "$(tail -1 "$T/fm.log")" = "POST /fabric/collectives/multicasts 401"
'
# The figures of this run: what libfabric asked, what mockfm answered
# (tree ids folded), and what the provider made of it.
{
    echo "requests at the FM (count, method, path, status):"
    sed "s|multicasts/[0-9]*|multicasts/ID|" "$T/fm.log" | sort | uniq -c
    echo "the tasks' lines (lfclient):"
    cat "$T/lfc.out"
} | sed 's/^/# /'
done_testing
