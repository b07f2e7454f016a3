#!/bin/bash
# t1010-lifecycle.sh: a job's whole life through the broker, with the
# application (libfabric) side played against mockfm with the job's token.
. "$(dirname "$0")/lib.sh"
start_mockfm
start_broker

expect_ok 'RUN of a 2-node job reserves hardware collectives' '
    rm_call PUT /v1/jobs/42 "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\"],\"ncores\":64}" >run.json &&
    jq -e ".hwcoll.state == \"reserved\" and .hwcoll.fm_job_id == \"c1-42\"" run.json &&
    mockfm_has_job c1-42
'
# Its intent is the job's first: normally nothing of it is at the FM yet,
# so the POST goes without a GET before it.
expect_ok 'a new job costs the FM one call, the POST' '
    test "$(grep -c "^POST /fabric/collectives/jobs 201" "$T/fm.log")" = 1 &&
    ! grep -q "^GET /fabric/collectives/jobs/c1-42" "$T/fm.log"
'
expect_ok 'the env is exactly what tasks need' '
    tok=$(jq -r .hwcoll.session_token run.json) && test ${#tok} -ge 32 &&
    jq -e --arg t "$tok" --arg u "$fm_url/fabric/collectives/multicasts" "
        .env == {SLINGSHOT_VNIS: (.vnis | map(tostring) | join(\",\")),
                 SLINGSHOT_TCS: \"0xa\",
                 FI_CXI_COLL_JOB_ID: \"c1-42\",
                 FI_CXI_COLL_MCAST_TOKEN: \$t,
                 FI_CXI_COLL_FABRIC_MGR_URL: \$u,
                 FI_CXI_HWCOLL_ADDRS_PER_JOB: \"4\",
                 FI_CXI_HWCOLL_MIN_NODES: \"2\"}" run.json &&
    jq -e ".vnis | length == 1 and .[0] >= 1024" run.json
'
mcast () { # STEP: create a tree the way libfabric does
    curl -s -o /dev/null -w "%{http_code}" -H "Authorization: Bearer $(jq -r .hwcoll.session_token run.json)" \
        -H "Content-Type: application/json" \
        --data "{\"macs\":[\"0:00:01\",\"0:00:02\"],\"vni\":$(jq .vnis[0] run.json),\"timeout\":20000000,\"jobID\":\"c1-42\",\"jobStepID\":\"$1\"}" \
        "$(jq -r .env.FI_CXI_COLL_FABRIC_MGR_URL run.json)"
}
trees_of_step () { curl -sf "$fm_url/_mock/state" | jq --arg s "$1" "[.trees[] | select(.jobStepID == \$s)] | length"; }
expect_ok 'tasks create multicast trees with the token from the env' '
    test "$(mcast 0)" = 200 && test "$(mcast 1)" = 200 &&
    test "$(trees_of_step 0)" = 1 && test "$(trees_of_step 1)" = 1
'
expect_ok 'the same RUN again is the same job (RM retry)' '
    rm_call PUT /v1/jobs/42 "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\"],\"ncores\":64}" >again.json &&
    jq -e --slurpfile a run.json ".vnis == \$a[0].vnis and .hwcoll.session_token == \$a[0].hwcoll.session_token" again.json &&
    test "$(grep -c "POST /fabric/collectives/jobs " "$T/fm.log")" = 1
'
expect_ok 'a different RUN for the same job is a conflict' '
    api_call PUT /v1/jobs/42 "{\"uid\":1001,\"nodes\":[\"n1\",\"n2\"]}" >out &&
    read code body <out && test "$code" = 409 &&
    echo "$body" | jq -e ".status == 409 and (.detail | test(\"different request\"))"
'
expect_ok 'step cleanup with ?wait removes that step'"'"'s trees only' '
    rm_call DELETE "/v1/jobs/42/steps/0?wait=10" >step.json &&
    jq -e ".state == \"cleaned\"" step.json &&
    test "$(trees_of_step 0)" = 0 && test "$(trees_of_step 1)" = 1
'
expect_ok 'a Flux-style step id with slashes and UTF-8 is percent-encoded' '
    test "$(mcast "ƒ/0/1")" = 200 &&
    rm_call DELETE "/v1/jobs/42/steps/%C6%92%2F0%2F1?wait=10" | jq -e ".step == \"ƒ/0/1\" and .state == \"cleaned\"" &&
    test "$(trees_of_step "ƒ/0/1")" = 0
'
expect_ok 'the job'"'"'s token lets its owner clean its steps without being rm' '
    tok=$(jq -r .hwcoll.session_token run.json) &&
    curl -sf --unix-socket "$T/api.sock" -X DELETE -H "Authorization: Bearer $tok" \
        "http://fmbroker/v1/jobs/42/steps/1?wait=10" | jq -e ".state == \"cleaned\"" &&
    test "$(trees_of_step 1)" = 0
'
expect_ok 'a small job is not eligible and says why' '
    rm_call PUT /v1/jobs/43 "{\"uid\":1000,\"node_count\":1}" >small.json &&
    jq -e ".hwcoll.state == \"not_eligible\" and (.hwcoll.reason | test(\"min_nodes\"))" small.json &&
    jq -e ".env | has(\"FI_CXI_COLL_JOB_ID\") | not" small.json &&
    mockfm_lacks_job c1-43
'
expect_ok 'hwcoll=on overrides the size rule, hwcoll=off refuses it' '
    rm_call PUT /v1/jobs/44 "{\"uid\":1000,\"node_count\":1,\"hwcoll\":\"on\"}" | jq -e ".hwcoll.state == \"reserved\"" &&
    rm_call PUT /v1/jobs/45 "{\"uid\":1000,\"node_count\":8,\"hwcoll\":\"off\"}" | jq -e ".hwcoll.state == \"not_eligible\""
'
expect_ok 'VNIs are never shared' '
    rm_call GET /v1/vnis | jq -e "[.vnis[].vni] | length == (unique | length)" &&
    rm_call GET "/v1/jobs?state=active" | jq -e "[.jobs[].vnis[]] | length == (unique | length) and length == 4"
'
expect_ok 'CLEANUP answers 202 and the FM reservation goes' '
    api_call DELETE /v1/jobs/42 >out && read code body <out && test "$code" = 202 &&
    echo "$body" | jq -e ".state == \"releasing\"" &&
    wait_for 100 0.05 mockfm_lacks_job c1-42 &&
    wait_for 100 0.05 sh -c "curl -sf --unix-socket $T/api.sock http://fmbroker/v1/jobs/42 | jq -e \".state == \\\"released\\\"\""
'
expect_ok 'CLEANUP again is harmless' '
    rm_call DELETE /v1/jobs/42 | jq -e ".state == \"released\""
'
expect_ok 'the VNI stays quarantined until every node reports' '
    vni=$(jq .vnis[0] run.json) &&
    rm_call GET /v1/vnis | jq -e --argjson v "$vni" ".vnis[] | select(.vni == \$v) | .state == \"quarantined\"" &&
    rm_call PUT /v1/jobs/42/nodes/n1 "{\"cxi\":\"destroyed\"}" >/dev/null &&
    rm_call GET /v1/vnis | jq -e --argjson v "$vni" "any(.vnis[]; .vni == \$v)" &&
    rm_call PUT /v1/jobs/42/nodes/n2 "{\"cxi\":\"destroyed\"}" >/dev/null &&
    rm_call GET /v1/vnis | jq -e --argjson v "$vni" "any(.vnis[]; .vni == \$v) | not"
'
expect_ok 'a node that fails to destroy asks to be drained' '
    rm_call DELETE /v1/jobs/44 >/dev/null &&
    rm_call PUT /v1/jobs/44/nodes/nx "{\"cxi\":\"failed\",\"detail\":\"EBUSY for 30 s\"}" >/dev/null &&
    rm_call GET "/v1/events?after=0" >ev.json &&
    jq -e "any(.events[]; .type == \"node_drain_requested\" and .job == \"44\" and .detail.node == \"nx\")" ev.json &&
    jq -e "any(.events[]; .type == \"vni_quarantined\" and .job == \"42\")" ev.json &&
    jq -e "any(.events[]; .type == \"vni_released\" and .job == \"42\")" ev.json
'
expect_ok 'events are ordered and a long poll wakes on news' '
    last=$(jq .last_seq ev.json)
    { sleep 0.3; rm_call DELETE /v1/jobs/45 >/dev/null; } &
    rm_call GET "/v1/events?after=$last&wait=10" >ev2.json &&
    jq -e --argjson l "$last" ".events | length >= 1 and all(.[]; .seq > \$l)" ev2.json &&
    jq -e "[.events[].seq] == ([.events[].seq] | sort)" ev.json
'
expect_ok 'an admin may force the VNIs of a stuck job back to the pool' '
    rm_call DELETE "/v1/jobs/44?force=1" >/dev/null &&
    rm_call GET /v1/vnis | jq -e "all(.vnis[]; .job != \"44\")"
'
expect_ok 'a released job id can be used again' '
    rm_call PUT /v1/jobs/42 "{\"uid\":2000,\"nodes\":[\"n3\",\"n4\"]}" | jq -e ".uid == 2000 and .hwcoll.state == \"reserved\""
'
# The FM holds the job already (a store restored from an older backup):
# it refuses the POST, and the GET after it finds the reservation.
expect_ok 'a job the FM holds already: the POST is refused, the GET finds it' '
    curl -sf -H "Content-Type: application/json" --data "{\"jobID\":\"c1-142\",\"mcastLimit\":4}" \
        "$fm_url/fabric/collectives/jobs" >fm142.json &&
    rm_call PUT /v1/jobs/142 "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\"]}" >run142.json &&
    jq -e --slurpfile f fm142.json ".hwcoll.state == \"reserved\" and .hwcoll.session_token == \$f[0].sessionToken" run142.json &&
    grep -q "^POST /fabric/collectives/jobs 409" "$T/fm.log" &&
    grep -q "^GET /fabric/collectives/jobs/c1-142 200" "$T/fm.log" &&
    api_call DELETE /v1/jobs/142 | grep -q "^202 " && wait_for 50 0.1 mockfm_lacks_job c1-142
'
# Slurm requeues a job under the same id: EpilogSlurmctld's CLEANUP ends
# the first run, PrologSlurmctld's RUN starts the next.  While the FM
# cannot delete the first run's reservation yet, the next run is a new
# one -- fresh VNIs, active -- without hardware collectives (a
# reservation now, under the same FM id, would go with that delete); the
# delete still happens and leaves the new run alone.
rq_body='{"uid":1000,"nodes":["n1","n2"]}'
expect_ok 'a job requeued while the FM still holds its first run: a new run, fresh VNIs, no collectives yet' '
    rm_call PUT /v1/jobs/77 "$rq_body" >rq1.json && jq -e ".hwcoll.state == \"reserved\"" rq1.json &&
    mockfm_ctl POST /_mock/faults "DELETE /fabric/collectives/jobs/c1-77 503" &&
    api_call DELETE /v1/jobs/77 | grep -q "^202 " &&
    rm_call PUT /v1/jobs/77/nodes/n1 "{\"cxi\":\"destroyed\"}" >/dev/null &&
    rm_call PUT /v1/jobs/77/nodes/n2 "{\"cxi\":\"destroyed\"}" >/dev/null &&
    wait_for 50 0.1 grep -q "^DELETE /fabric/collectives/jobs/c1-77 503" "$T/fm.log" &&
    rm_call GET /v1/jobs/77 | jq -e ".state == \"releasing\"" &&
    api_call PUT /v1/jobs/77 "$rq_body" >rq2 && read code body <rq2 && test "$code" = 201 &&
    echo "$body" >rq2.json && cat rq2.json &&
    jq -e ".state == \"active\" and .hwcoll.state == \"unavailable\" and (.hwcoll.reason | test(\"yet to delete c1-77\"))" rq2.json &&
    jq -e --slurpfile old rq1.json ".vnis | length == 1 and . != \$old[0].vnis" rq2.json &&
    grep -q "job 77: run again while its previous run is still being released" "$T/broker.err" &&
    mockfm_has_job c1-77
'
expect_ok 'the first run'"'"'s reservation goes; the new run stays active' '
    mockfm_ctl DELETE /_mock/faults &&
    wait_for 300 0.1 mockfm_lacks_job c1-77 &&
    rm_call GET /v1/jobs/77 | jq -e ".state == \"active\" and .hwcoll.state == \"unavailable\"" &&
    rm_call DELETE /v1/jobs/77 >/dev/null &&
    wait_for 100 0.1 sh -c "curl -sf --unix-socket $T/api.sock http://fmbroker/v1/jobs/77 | jq -e \".state == \\\"released\\\"\""
'
# The FM holds a job's FM id again after the job was released (a POST it
# finished after the broker gave up on it); reconciliation queues its
# delete, which the FM refuses for now.  The RM reuses the id: the new
# run must not take that reservation for its own -- the delete would
# take it from under the running job -- and goes without collectives.
expect_ok 'a reused job id whose FM job is still to be deleted: no collectives, and the delete leaves it alone' '
    rm_call PUT /v1/jobs/79 "$rq_body" >/dev/null && rm_call DELETE /v1/jobs/79 >/dev/null &&
    wait_for 100 0.1 mockfm_lacks_job c1-79 &&
    curl -sf -H "Content-Type: application/json" --data "{\"jobID\":\"c1-79\",\"mcastLimit\":4}" \
        "$fm_url/fabric/collectives/jobs" >/dev/null &&
    mockfm_ctl POST /_mock/faults "DELETE /fabric/collectives/jobs/c1-79 503" &&
    rm_call POST /v1/reconcile >/dev/null &&
    wait_for 100 0.1 grep -q "^DELETE /fabric/collectives/jobs/c1-79 503" "$T/fm.log" &&
    rm_call PUT /v1/jobs/79/nodes/n1 "{\"cxi\":\"destroyed\"}" >/dev/null &&
    rm_call PUT /v1/jobs/79/nodes/n2 "{\"cxi\":\"destroyed\"}" >/dev/null &&
    rm_call PUT /v1/jobs/79 "$rq_body" >rq79.json && cat rq79.json &&
    jq -e ".state == \"active\" and .hwcoll.state == \"unavailable\" and (.hwcoll.reason | test(\"yet to delete c1-79\"))" rq79.json &&
    mockfm_ctl DELETE /_mock/faults && wait_for 300 0.1 mockfm_lacks_job c1-79 &&
    rm_call GET /v1/jobs/79 | jq -e ".state == \"active\""
'
expect_ok 'status, health and metrics report the broker' '
    rm_call GET /v1/status | jq -e ".fabric_manager.state == \"up\" and .jobs.active >= 1 and .vnis.held >= 1" &&
    rm_call GET /v1/health | jq -e ".status == \"ok\"" &&
    rm_call GET /metrics >metrics.txt &&
    grep -q "^fmbroker_fm_up 1" metrics.txt &&
    grep -q "^fmbroker_jobs{state=\"active\"}" metrics.txt &&
    grep -q "^fmbroker_fm_requests_total{call=\"create\",result=\"ok\"}" metrics.txt &&
    grep -q "^fmbroker_fm_request_duration_seconds_bucket{call=\"get\",le=\"+Inf\"}" metrics.txt
'
# What metrics and status count besides jobs (VNIs, multicast
# reservations, the outbox; kept by the store's triggers since schema 6)
# follows jobs as they come and go: two more reserved jobs, one cleaned up.
gauge () { awk -v k="$1" '$1 == k {print $2}' metrics.txt; }
counted () {
    rm_call GET /metrics >metrics.txt && rm_call GET /v1/status >status.json &&
    held=$(gauge "fmbroker_vnis{state=\"held\"}") &&
    quar=$(gauge "fmbroker_vnis{state=\"quarantined\"}") &&
    resv=$(gauge fmbroker_mcast_reservations) &&
    addr=$(gauge fmbroker_mcast_addresses_reserved) &&
    outbox=$(gauge fmbroker_outbox_depth) &&
    jq -e --argjson h "$held" --argjson q "$quar" --argjson r "$resv" --argjson a "$addr" \
        --argjson o "$outbox" ".vnis.held == \$h and .vnis.quarantined == \$q and
        .hwcoll.reservations == \$r and .hwcoll.addresses_reserved == \$a and
        .outbox.depth == \$o" status.json >/dev/null
}
expect_ok 'metrics and status count VNIs and reservations as jobs come and go' '
    counted && h0=$held q0=$quar r0=$resv a0=$addr &&
    for j in 301 302; do
        rm_call PUT /v1/jobs/$j "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\"]}" |
            jq -e ".hwcoll.state == \"reserved\"" || return 1
    done &&
    counted && echo "held $h0 -> $held, reservations $r0 -> $resv, addresses $a0 -> $addr" &&
    test "$held" = $((h0 + 2)) && test "$quar" = "$q0" &&
    test "$resv" = $((r0 + 2)) && test "$addr" = $((a0 + 8)) &&
    rm_call DELETE /v1/jobs/301 >/dev/null && wait_for 50 0.1 mockfm_lacks_job c1-301 &&
    wait_for 50 0.1 sh -c "test \$(curl -sf --unix-socket $T/api.sock http://fmbroker/v1/status | jq .outbox.depth) = 0" &&
    counted && echo "held $held, quarantined $q0 -> $quar, reservations $resv, addresses $addr, outbox $outbox" &&
    test "$held" = $((h0 + 1)) && test "$quar" = $((q0 + 1)) &&
    test "$resv" = $((r0 + 1)) && test "$addr" = $((a0 + 4)) && test "$outbox" = 0
'
expect_ok 'no token ever reaches the log' '
    ! grep -F "$(jq -r .hwcoll.session_token run.json)" "$T/broker.err"
'
expect_ok 'idle with the FM up and its outbox empty, the broker sleeps and logs nothing' '
    rm_call GET /v1/status | jq -e ".fabric_manager.state == \"up\" and .outbox.depth == 0" &&
    before=$(wc -l <"$T/broker.err") && broker_sleeps_when_idle &&
    tail -n +$((before + 1)) "$T/broker.err" >idle.log && cat idle.log && test ! -s idle.log
'
expect_ok 'SIGTERM stops the broker cleanly and removes its socket' '
    stop_broker && test ! -e "$T/api.sock"
'
expect_ok 'VNI-only mode: no FM configured, every job not_eligible with a reason' '
    fm_url= write_broker_conf && rm -rf "$T/state" && start_broker &&
    rm_call PUT /v1/jobs/7 "{\"uid\":1000,\"node_count\":100}" >vo.json &&
    jq -e ".hwcoll.state == \"not_eligible\" and (.hwcoll.reason | test(\"VNI-only\")) and (.vnis | length == 1)" vo.json &&
    rm_call DELETE /v1/jobs/7 | jq -e ".state == \"released\"" &&
    rm_call GET /v1/status | jq -e ".fabric_manager.state == \"disabled\""
'
done_testing
