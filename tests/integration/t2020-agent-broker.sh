#!/bin/bash
# t2020-agent-broker.sh: fmbrokerd + mockfm + fmbroker-cxi on two
# simulated nodes: a job's VNIs leave quarantine only when both nodes
# destroyed its services; a node that cannot keeps them quarantined and
# asks to be drained; clean removes only what belongs to no active job.
. "$(dirname "$0")/lib.sh"
export MOCKCXI_SYSTEM_SVC=1 MOCKCXI_DEVICES=2
start_mockfm
start_broker
vni_of () { rm_call GET "/v1/jobs/$1" | jq -r ".vnis[0]"; }
quarantined () { rm_call GET /v1/vnis | jq -e --argjson v "$1" "any(.vnis[]; .vni == \$v and .state == \"quarantined\")" >/dev/null; }
in_pool_use () { rm_call GET /v1/vnis | jq -e --argjson v "$1" "any(.vnis[]; .vni == \$v)" >/dev/null; }

expect_ok 'RUN, then prolog on both nodes with facts from the broker' '
    rm_call PUT /v1/jobs/42 "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\"],\"ncores\":8}" >run.json &&
    agent n1 prolog --job 42 && agent n2 prolog --job 42 &&
    v=$(vni_of 42) &&
    for n in n1 n2; do for d in 0 1; do
        cxi_services $n $d | jq -se --argjson v "$v" "any(.[]; .vnis == [\$v] and .member0.id == 1000 and .limits.ptes.res == 48)" || return 1
    done; done
'
expect_ok 'prolog --report-later: the node report arrives after the prolog, from a detached child' '
    rm_call PUT /v1/jobs/48 "{\"uid\":1000,\"nodes\":[\"n1\"]}" >/dev/null &&
    agent n1 prolog --job 48 --report-later &&
    wait_for 100 0.1 sh -c "curl -s --unix-socket $T/api.sock http://x/v1/jobs/48 | jq -e \"any(.node_reports[]; .node == \\\"n1\\\" and .cxi == \\\"created\\\")\"" &&
    test -z "$(ls "$T/n1.rec/reports" 2>/dev/null | grep -v "^\.lock$")" &&
    rm_call DELETE /v1/jobs/48 >/dev/null && agent n1 epilog --job 48
'
expect_ok 'the task environment combines the NICs and the broker'"'"'s FI_CXI_* variables' '
    agent n1 env --job 42 >env.sh && . ./env.sh &&
    test "$SLINGSHOT_VNIS" = "$(vni_of 42)" && test "$SLINGSHOT_DEVICES" = cxi0,cxi1 &&
    test "$SLINGSHOT_SVC_IDS" = 3,3 && test "$SLINGSHOT_TCS" = 0xa &&
    test "$FI_CXI_COLL_JOB_ID" = c1-42 &&
    test "$FI_CXI_COLL_MCAST_TOKEN" = "$(jq -r .hwcoll.session_token run.json)"
'
expect_ok 'CLEANUP quarantines the VNI until both nodes reported' '
    rm_call GET /v1/jobs/42 | jq -e "[.node_reports[] | .node + \"=\" + .cxi] == [\"n1=created\", \"n2=created\"]" &&
    v=$(vni_of 42) && rm_call DELETE /v1/jobs/42 >/dev/null && quarantined $v &&
    agent n1 epilog --job 42 && quarantined $v &&
    rm_call GET /v1/jobs/42 | jq -e "[.node_reports[] | .node + \"=\" + .cxi] == [\"n1=destroyed\", \"n2=created\"]" &&
    agent n2 epilog --job 42 && ! in_pool_use $v
'
expect_ok 'a node that cannot destroy keeps the VNI quarantined and asks for a drain' '
    rm_call PUT /v1/jobs/43 "{\"uid\":1001,\"nodes\":[\"n1\",\"n2\"]}" >/dev/null &&
    agent n1 prolog --job 43 && agent n2 prolog --job 43 && v=$(vni_of 43) &&
    rm_call DELETE /v1/jobs/43 >/dev/null &&
    agent n1 epilog --job 43 &&
    cxi_set n2 "(.devices[1].services[] | select(.vnis == [$v]) | .busy) = 100" &&
    { agent n2 epilog --job 43 --retry-busy 1 2>err; test $? = 1; } &&
    quarantined $v &&
    rm_call GET /v1/jobs/43 | jq -e "any(.node_reports[]; .node == \"n2\" and .cxi == \"failed\" and (.detail | test(\"EBUSY\")))" &&
    "$FMB_BIN/fmbroker" --socket "$T/api.sock" job show 43 | grep -q "^node n2: CXI services failed: .*EBUSY" &&
    rm_call GET "/v1/events?after=0" | jq -e "any(.events[]; .type == \"node_drain_requested\" and .job == \"43\" and .detail.node == \"n2\" and (.detail.detail | test(\"EBUSY\")))"
'
expect_ok 'once the service frees up, epilog again releases the VNI' '
    v=$(vni_of 43) && cxi_set n2 "(.devices[1].services[] | select(.vnis == [$v]) | .busy) = 0" &&
    agent n2 epilog --job 43 && ! in_pool_use $v
'
expect_ok 'clean removes a stale job service and leaves active jobs, system and default alone' '
    rm_call PUT /v1/jobs/44 "{\"uid\":1002,\"nodes\":[\"n1\"]}" >/dev/null && agent n1 prolog --job 44 &&
    agent n1 prolog --job stale --uid 3000 --vnis 2000 --no-report &&
    agent n1 clean --dry-run >out && grep -q "would destroy cxi0: service .*uid=3000, vnis=2000" out &&
    ! grep -q "uid=1002" out &&
    agent n1 clean &&
    for d in 0 1; do
        cxi_services n1 $d | jq -se "(any(.[]; .member0.id == 3000) | not) and any(.[]; .member0.id == 1002) and any(.[]; .id == 1) and any(.[]; .id == 2)" || return 1
    done
'
expect_ok 'clean without the broker touches nothing' '
    stop_broker && agent n1 prolog --job stale2 --uid 3001 --vnis 2001 --no-report &&
    { agent n1 clean 2>err; test $? = 1; } && grep -q "not touching any service" err &&
    cxi_services n1 0 | jq -se "any(.[]; .member0.id == 3001)"
'
done_testing
