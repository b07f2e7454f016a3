#!/bin/bash
# t2050-agent-reports.sh: node reports are durable.  A report the broker
# misses (it was down) is kept on the node and delivered by the next
# agent run and by `fmbroker-cxi report --pending`; the VNI then leaves
# quarantine without anyone running the epilog again.  The broker shows
# which nodes a quarantined VNI waits for; a node whose prolog never ran
# ends its wait by reporting anything, or an admin forces the release.
. "$(dirname "$0")/lib.sh"
export MOCKCXI_SYSTEM_SVC=1 MOCKCXI_DEVICES=2
start_mockfm
start_broker
vni_of () { rm_call GET "/v1/jobs/$1" | jq -r ".vnis[0]"; }
waits_for () { # JOB NODES-JSON: the job and its VNI wait for exactly these nodes
    rm_call GET "/v1/jobs/$1" | jq -e --argjson w "$2" ".waiting_for == \$w" >/dev/null &&
    rm_call GET /v1/vnis | jq -e --arg j "$1" --argjson w "$2" \
        "any(.vnis[]; .job == \$j and .state == \"quarantined\" and .waiting_for == \$w)" >/dev/null
}
vni_free () { ! rm_call GET /v1/vnis | jq -e --argjson v "$1" "any(.vnis[]; .vni == \$v)" >/dev/null; }
fmbroker () { "$FMB_BIN/fmbroker" --socket "$T/api.sock" "$@"; }

expect_ok 'after CLEANUP the VNI waits for both nodes, and every view says so' '
    rm_call PUT /v1/jobs/42 "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\"]}" >/dev/null &&
    agent n1 prolog --job 42 && agent n2 prolog --job 42 &&
    rm_call DELETE /v1/jobs/42 >/dev/null &&
    waits_for 42 "[\"n1\",\"n2\"]" &&
    fmbroker vni list >out && grep -Eq "^$(vni_of 42) +42 +quarantined +all nodes report +n1,n2$" out
'
expect_ok 'with the broker down, the epilogs destroy the services and keep their reports' '
    v=$(vni_of 42) && echo $v >vni42 && stop_broker &&
    agent n1 epilog --job 42 2>err1 && agent n2 epilog --job 42 2>err2 &&
    grep -q "reporting .destroyed. to the broker failed: .*kept in $T/n1.rec/reports" err1 &&
    for n in n1 n2; do
        for d in 0 1; do cxi_services $n $d | jq -se "all(.[]; .id < 3)" || return 1; done &&
        jq -e ".job == \"42\" and .node == \"$n\" and .cxi == \"destroyed\"" "$T/$n.rec/reports/42@$n.json" &&
        test "$(stat -c %a "$T/$n.rec/reports/42@$n.json")" = 600 || return 1
    done
'
expect_ok 'report --pending with the broker still down keeps them and exits 1' '
    { agent n2 report --pending 2>err; test $? = 1; } &&
    grep -q "1 node report(s) still not delivered" err && test -e "$T/n2.rec/reports/42@n2.json"
'
# Hooks show the agent's last line to the job's user (the SPANK plugin,
# Flux's prolog): with another job's report kept, a failing prolog's last
# line is still its own job's reason, with no advice meant for admins.
expect_ok 'a prolog that fails with reports of other jobs kept: its last line is its own job'"'"'s reason' '
    { agent n2 prolog --job 45 2>err; test $? = 1; } &&
    tail -n 1 err >last && cat last &&
    grep -q "^fmbroker-cxi: error: job 45: cannot get the job.s VNIs from the broker: " last &&
    ! grep -q -- "--uid" last && test -e "$T/n2.rec/reports/42@n2.json"
'
expect_ok 'the broker back: the VNI still waits, for both nodes' '
    start_broker && waits_for 42 "[\"n1\",\"n2\"]"
'
expect_ok 'the next agent run on n1 (another job'"'"'s prolog) delivers n1'"'"'s report' '
    rm_call PUT /v1/jobs/43 "{\"uid\":1001,\"nodes\":[\"n1\"]}" >/dev/null &&
    agent n1 prolog --job 43 2>err && grep -q "delivered the kept report .destroyed. of node n1" err &&
    test ! -e "$T/n1.rec/reports/42@n1.json" && waits_for 42 "[\"n2\"]"
'
expect_ok 'report --pending on n2 delivers the last one: the VNI leaves quarantine' '
    agent n2 report --pending && test ! -e "$T/n2.rec/reports/42@n2.json" &&
    vni_free "$(cat vni42)" && rm_call GET /v1/jobs/42 | jq -e ".vnis == [] and (has(\"waiting_for\") | not)" &&
    agent n2 report --pending
'
expect_ok 'a node whose prolog never ran: its epilog, even with the broker down, ends the wait' '
    rm_call PUT /v1/jobs/44 "{\"uid\":1002,\"nodes\":[\"n1\",\"n3\"]}" >/dev/null &&
    agent n1 prolog --job 44 && rm_call DELETE /v1/jobs/44 >/dev/null && agent n1 epilog --job 44 &&
    rm_call GET /v1/jobs/44 | jq -e "any(.node_reports[]; .node == \"n3\" and .cxi == \"pending\")" &&
    waits_for 44 "[\"n3\"]" && v=$(vni_of 44) &&
    stop_broker && agent n3 epilog --job 44 && test -e "$T/n3.rec/reports/44@n3.json" &&
    start_broker && agent n3 report --pending && vni_free $v
'
expect_ok 'a node that never reports at all: one admin command releases the VNI' '
    rm_call PUT /v1/jobs/45 "{\"uid\":1003,\"nodes\":[\"n1\",\"n4\"]}" >/dev/null &&
    agent n1 prolog --job 45 && rm_call DELETE /v1/jobs/45 >/dev/null && agent n1 epilog --job 45 &&
    waits_for 45 "[\"n4\"]" && v=$(vni_of 45) &&
    fmbroker job release 45 --force && vni_free $v
'
expect_ok 'a kept report the broker refuses for good is dropped, not retried forever' '
    mkdir -p "$T/n5.rec/reports" &&
    printf "{\"job\":\"nosuchjob\",\"node\":\"n5\",\"cxi\":\"destroyed\",\"at_ms\":1}" >"$T/n5.rec/reports/nosuchjob@n5.json" &&
    printf "garbage" >"$T/n5.rec/reports/junk@n5.json" &&
    agent n5 report --pending 2>err &&
    grep -q "refused the kept report .destroyed. of node n5" err &&
    test ! -e "$T/n5.rec/reports/nosuchjob@n5.json" && test -e "$T/n5.rec/reports/junk@n5.json.bad"
'
# Each job's report has a lock of its own (spool.h): a kept report that
# a slow broker holds up does not hold up another job's report, nor the
# agent run that makes it (a job's setup in the node service waits on
# the same lock).  The broker cannot be made to answer one job late and
# another at once: slowbroker.py stands in for its report call.
slow_done () { [ -z "${slow_pid:-}" ] || { kill "$slow_pid"; wait "$slow_pid"; } 2>/dev/null; slow_pid=; }
on_exit slow_done
expect_ok 'a kept report a slow broker holds up does not hold up another job'"'"'s report' '
    stop_broker && mkdir -p "$T/n6.rec/reports" &&
    printf "{\"job\":\"61\",\"node\":\"n6\",\"cxi\":\"destroyed\",\"at_ms\":1}" >"$T/n6.rec/reports/61@n6.json" &&
    rm -f "$T/api.sock" && : >slow.log &&
    { python3 "$FMB_SRC/tests/integration/slowbroker.py" "$T/api.sock" slow.log 61 release 2>slow.err &
      slow_pid=$!; } &&
    wait_for 200 0.05 grep -qx ready slow.log &&
    { agent n6 report --pending 2>pending.err & pending_pid=$!; } &&
    wait_for 200 0.05 grep -qx "recv PUT /v1/jobs/61/nodes/n6" slow.log &&
    agent n6 epilog --job 62 2>epilog.err &&
    grep -qx "answer /v1/jobs/62/nodes/n6" slow.log && test ! -e "$T/n6.rec/reports/62@n6.json" &&
    kill -0 "$pending_pid" && ! grep -q "^answer /v1/jobs/61/" slow.log &&
    touch release && wait "$pending_pid" && grep -qx "answer /v1/jobs/61/nodes/n6" slow.log &&
    test ! -e "$T/n6.rec/reports/61@n6.json" && test "$(grep -c "^recv PUT /v1/jobs/61/" slow.log)" = 1
'
slow_done
expect_ok 'the node timer and its service pass systemd-analyze verify' '
    if ! command -v systemd-analyze >/dev/null; then echo "skipped: no systemd-analyze"; return 0; fi
    sed "s|^ExecStart=/usr/sbin/fmbroker-cxi|ExecStart=$FMB_BIN/fmbroker-cxi|" \
        "$FMB_SRC/deploy/fmbroker-cxi-report.service" >fmbroker-cxi-report.service &&
    cp "$FMB_SRC/deploy/fmbroker-cxi-report.timer" . &&
    systemd-analyze verify --man=no ./fmbroker-cxi-report.timer ./fmbroker-cxi-report.service 2>err &&
    { ! test -s err || { cat err; false; }; } &&
    grep -q "^ExecStart=/usr/sbin/fmbroker-cxi -c \${FMBROKER_CONF} \$FMBROKER_CXI_ARGS report --pending$" \
        "$FMB_SRC/deploy/fmbroker-cxi-report.service" &&
    grep -qx "EnvironmentFile=-/etc/default/fmbroker" "$FMB_SRC/deploy/fmbroker-cxi-report.service"
'
done_testing
