#!/bin/bash
# t2060-agent-housekeeping.sh: the epilog's second phase.  The epilog
# tries for seconds and, in Flux, does not report; `fmbroker-cxi
# housekeeping` retries a busy service for its window (default 5 min;
# short here) and exits 1 with a node_drain_requested event only when
# the service is still there; one that frees up in time gives exit 0 and
# releases the VNI.
. "$(dirname "$0")/lib.sh"
export MOCKCXI_SYSTEM_SVC=1 MOCKCXI_DEVICES=2
start_mockfm
start_broker
vni_of () { rm_call GET "/v1/jobs/$1" | jq -r ".vnis[0]"; }
drain_events () { rm_call GET "/v1/events?after=0" | jq "[.events[] | select(.type == \"node_drain_requested\" and .job == \"$1\")] | length"; }
busy () { cxi_set n1 "(.devices[].services[] | select(.vnis == [$1]) | .busy) = $2"; }

expect_ok 'a short epilog leaves a busy service behind without reporting' '
    rm_call PUT /v1/jobs/42 "{\"uid\":1000,\"nodes\":[\"n1\"]}" >/dev/null &&
    agent n1 prolog --job 42 && v=$(vni_of 42) && rm_call DELETE /v1/jobs/42 >/dev/null &&
    busy $v 100 &&
    { agent n1 epilog --job 42 --retry-busy 0 --no-report 2>err; test $? = 1; } &&
    grep -q "EBUSY past the 0 s retry window" err &&
    test "$(drain_events 42)" = 0 &&
    rm_call GET /v1/jobs/42 | jq -e ".waiting_for == [\"n1\"]"
'
expect_ok 'housekeeping: busy past its window gives exit 1 and node_drain_requested' '
    start=$(date +%s) &&
    { agent n1 housekeeping --job 42 --retry-busy 2 2>err; test $? = 1; } &&
    test $(($(date +%s) - start)) -ge 2 &&
    grep -q "EBUSY past the 2 s retry window" err && grep -q "this node should be drained" err &&
    rm_call GET "/v1/events?after=0" | jq -e "any(.events[]; .type == \"node_drain_requested\" and .job == \"42\" and .detail.node == \"n1\" and (.detail.detail | test(\"EBUSY past the 2 s\")))" &&
    cxi_services n1 0 | jq -se --argjson v "$(vni_of 42)" "any(.[]; .vnis == [\$v])"
'
expect_ok 'housekeeping: a service that frees up within the window gives exit 0 and frees the VNI' '
    v=$(vni_of 42) && busy $v 2 &&
    agent n1 housekeeping --job 42 --retry-busy 20 2>err &&
    grep -q "busy, retrying" err &&
    for d in 0 1; do cxi_services n1 $d | jq -se "all(.[]; .id < 3)" || return 1; done &&
    ! rm_call GET /v1/vnis | jq -e --argjson v "$v" "any(.vnis[]; .vni == \$v)" >/dev/null
'
expect_ok 'housekeeping after a clean epilog finds nothing and exits 0' '
    rm_call PUT /v1/jobs/43 "{\"uid\":1001,\"nodes\":[\"n1\"]}" >/dev/null &&
    agent n1 prolog --job 43 && agent n1 epilog --job 43 && agent n1 housekeeping --job 43 --retry-busy 1
'
done_testing
