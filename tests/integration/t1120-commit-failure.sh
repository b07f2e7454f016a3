#!/bin/bash
# t1120-commit-failure.sh: the disk fails under the broker.  While
# fsync(2) fails (an LD_PRELOAD library), no change can commit: every
# answer that would claim one is a 503, the broker keeps serving, and
# once the disk is back nothing is half-done: the FM ends up holding
# exactly the reservations of the jobs the broker has.  A slow disk shows
# in the stall metrics as the commit's share of the longest pass.
. "$(dirname "$0")/lib.sh"
failsync=$FMB_BIN/../faultinject/libfailsync.so
[ -f "$failsync" ] || { echo "Bail out! $failsync not built"; exit 1; }
start_mockfm
body='{"uid":1000,"nodes":["n1","n2"]}'
fm_holds_only_job_2 () { test "$(mockfm_jobs | sort | tr "\n" " ")" = "c1-2 "; }
show () { for f in r1 r2 r3 r7 r70 s70; do [ -f "$f" ] && echo "$f: $(cat "$f")"; done; tail -n 12 "$T/broker.err"; }
step_fail_hook=show
start_broker_failing () {
    # ASan wants its runtime first among preloads; the library is only
    # an fsync wrapper.
    LD_PRELOAD=$failsync FAILSYNC_TRIGGER=$T/disk-bad \
        FAILSYNC_SLOW_TRIGGER=$T/disk-slow FAILSYNC_SLOW_MS=${slow_ms:-150} \
        ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0 start_broker
}

expect_ok 'with a good disk, RUN reserves' '
    start_broker_failing &&
    rm_call PUT /v1/jobs/1 "$body" | jq -e ".hwcoll.state == \"reserved\""
'
# The pass's commit fails: a 503 that names the commit and why.
expect_ok 'with a bad disk, RUN, CLEANUP and a waited step cleanup answer 503 and say why' '
    touch "$T/disk-bad" &&
    api_call PUT /v1/jobs/2 "$body" >r2 && read code _ <r2 && test "$code" = 503 &&
    grep -q "commit.*disk I/O error" r2 &&
    api_call DELETE /v1/jobs/1 >r1 && read code _ <r1 && test "$code" = 503 && grep -q "commit.*disk I/O error" r1 &&
    api_call DELETE "/v1/jobs/1/steps/0?wait=5" >r3 && read code _ <r3 && test "$code" = 503 &&
    grep -q "commit.*disk I/O error" r3 &&
    grep -q "PUT job 2: 503 .*commit" "$T/broker.err" && grep -q "DELETE job 1: 503 .*commit" "$T/broker.err"
'
expect_ok 'the broker keeps answering what needs no write' '
    rm_call GET /v1/health >/dev/null && rm_call GET /v1/jobs/1 | jq -e ".state == \"active\""
'
expect_ok 'health says degraded while changes do not commit, and why' '
    rm_call GET /v1/health | jq -e ".status == \"degraded\" and (.reasons[0] | test(\"do not commit\"))"
'
# The release of job 1 was queued in the pass that could not commit, and
# job 2's POST was held for that commit: neither may change the FM, or it
# would lose job 1 or hold an orphan for job 2.
expect_ok 'what a failed commit would have changed at the FM never left' '
    sleep 0.5 && mockfm_jobs | grep -qx c1-1 && ! mockfm_jobs | grep -qx c1-2 &&
    ! grep -q "DELETE /fabric/collectives/jobs/c1-1" "$T/fm.log" &&
    test "$(grep -c "^POST /fabric/collectives/jobs " "$T/fm.log")" = 1
'
expect_ok 'the disk comes back: nothing half-done, and the requests can be repeated' '
    rm -f "$T/disk-bad" &&
    { ! rm_call GET /v1/jobs/2 >/dev/null; } &&
    rm_call PUT /v1/jobs/2 "$body" | jq -e ".hwcoll.state == \"reserved\"" &&
    rm_call DELETE /v1/jobs/1 >/dev/null &&
    wait_for 100 0.1 mockfm_lacks_job c1-1 &&
    rm_call POST /v1/reconcile >/dev/null &&
    wait_for 50 0.1 fm_holds_only_job_2 &&
    rm_call GET /v1/health | jq -e ".status == \"ok\""
'
expect_ok 'a restart finds the same' '
    stop_broker && start_broker_failing &&
    rm_call GET /v1/jobs/2 | jq -e ".state == \"active\" and .hwcoll.state == \"reserved\"" &&
    rm_call GET /v1/jobs/1 | jq -e ".state == \"released\""
'
# A reconciliation that meets a foreign reservation while the disk is bad
# writes its report in a pass that does not commit: the report must come
# again once commits work, not count as made (the listing is matched
# again from where the failed pass began).
fm_post () { curl -sf -H "Content-Type: application/json" --data "{\"jobID\":\"$1\",\"mcastLimit\":2}" "$fm_url/fabric/collectives/jobs" >/dev/null; }
slices () { rm_call GET /metrics | awk '/^fmbroker_reconcile_slices_total/ {print $2}'; }
slices_past () { test "$(slices)" -ge "$1"; }
foreign_reported () {
    rm_call GET "/v1/events?after=0" |
        jq -e "[.events[] | select(.type == \"foreign_reservation\" and .detail.fm_job_id == \"c1-888\")] | length == 1"
}
expect_ok 'a foreign reservation met while commits fail is reported once they succeed' '
    fm_post c1-888 && touch "$T/disk-bad" && s0=$(slices) &&
    api_call POST /v1/reconcile >/dev/null &&
    wait_for 100 0.1 slices_past $((s0 + 1)) &&
    rm -f "$T/disk-bad" && rm_call POST /v1/reconcile >/dev/null &&
    wait_for 50 0.1 foreign_reported
'
# The same for a session token that no longer decrypts: its event is
# written in the pass that found the damage; when that pass does not
# commit, the event comes in a later one, not never.
damage_reported () {
    rm_call GET "/v1/events?after=0" |
        jq -e "[.events[] | select(.type == \"token_damaged\" and .job == \"2\")] | length == 1"
}
expect_ok 'a damaged token found while commits fail is reported once they succeed' '
    touch "$T/disk-bad" &&
    sqlite3 -cmd ".timeout 5000" "$T/state/fmbroker.db" "UPDATE jobs SET token = X'"'"'00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff'"'"' WHERE id = '"'"'2'"'"'" &&
    api_call GET /v1/jobs/2 >/dev/null &&
    wait_for 50 0.1 grep -q "job 2: its stored session token does not decrypt" "$T/broker.err" &&
    sleep 1.5 && rm -f "$T/disk-bad" &&
    wait_for 50 0.1 damage_reported
'
# The FM makes a reservation while the commit of its outcome fails: the
# RUN is answered 503 and the job stays "reserving"; the repeated RUN
# starts the reservation again, and its GET finds the FM's (no second
# POST), instead of answering "reserving" for ever.
job5_reserving () { rm_call GET /v1/jobs/5 | jq -e ".hwcoll.state == \"reserving\"" >/dev/null; }
# (read by another connection: committed, not only written in the pass)
job5_committed () {
    test "$(sqlite3 -cmd ".timeout 5000" "$T/state/fmbroker.db" "SELECT hwcoll FROM jobs WHERE id = '5'")" = reserving
}
posts () { grep -c "^POST /fabric/collectives/jobs " "$T/fm.log"; }
# (the POST takes 6 s: time for the disk to fail under any load)
expect_ok 'a reservation whose outcome did not commit: 503, then the repeated RUN finds it' '
    stop_broker && reserve_ms=15000 timeout_ms=15000 write_broker_conf && start_broker_failing &&
    mockfm_ctl POST /_mock/faults "POST /fabric/collectives/jobs delay=6000 x1" &&
    { api_call PUT /v1/jobs/5 "$body" >r5 & } &&
    wait_for 50 0.1 job5_committed && touch "$T/disk-bad" && wait $! &&
    read code _ <r5 && test "$code" = 503 && cat r5 &&
    rm -f "$T/disk-bad" && job5_reserving && mockfm_has_job c1-5 && p0=$(posts) &&
    rm_call PUT /v1/jobs/5 "$body" >run5.json && cat run5.json &&
    jq -e ".hwcoll.state == \"reserved\" and (.hwcoll.session_token | length > 0)" run5.json &&
    test "$(posts)" = "$p0" && grep -q "^GET /fabric/collectives/jobs/c1-5 200" "$T/fm.log"
'
# Every sync takes 150 ms: the loop's longest pass is a RUN's commit, and
# the metrics say so (an admin can tell a slow disk from a busy broker).
metric () { awk -v k="$1" '$1 == k {print $2}' m.txt; }
expect_ok 'with a slow disk, the longest loop stall and its commit share say so' '
    touch "$T/disk-slow" && rm_call PUT /v1/jobs/6 "$body" >/dev/null && rm -f "$T/disk-slow" &&
    rm_call GET /metrics >m.txt && stall=$(metric fmbroker_loop_stall_seconds) &&
    commit=$(metric fmbroker_loop_stall_commit_seconds) &&
    echo "# longest pass $stall s, of which committing $commit s" &&
    awk -v s="$stall" -v c="$commit" "BEGIN { exit !(c >= 0.15 && s >= c) }" &&
    over=$(awk "/^fmbroker_loop_pass_seconds_count / {n = \$2}
        /^fmbroker_loop_pass_seconds_bucket.le=.0.1.. / {b = \$2} END {print n - b}" m.txt) &&
    echo "# passes over 0.1 s: $over" && test "$over" -ge 1
'
# A commit slower than reserve_timeout_ms holds a new job's POST past its
# deadline (it waits for the job's intent to commit): the job goes without
# collectives, but the FM was never asked, so it is not taken for down --
# that would send the next jobs without collectives too, for nothing.
# (Each sync takes 1.5 s, a RUN may wait 0.5 s.)
expect_ok 'a POST held past its deadline by a slow commit does not make the FM look down' '
    stop_broker && reserve_ms=500 write_broker_conf && slow_ms=1500 start_broker_failing &&
    wait_for 50 0.1 sh -c "curl -sf --unix-socket $T/api.sock http://fmbroker/v1/status | jq -e \".fabric_manager.state == \\\"up\\\"\"" &&
    since=$(rm_call GET /v1/status | jq -e ".fabric_manager | select(.state == \"up\") | .since_ms") &&
    p0=$(posts) && touch "$T/disk-slow" &&
    { rm_call PUT /v1/jobs/70 "$body" >r70; rc=$?; rm -f "$T/disk-slow"; test $rc = 0; } &&
    cat r70 && jq -e ".hwcoll.state == \"unavailable\"" r70 &&
    rm_call GET /v1/status >s70 &&
    jq -e --argjson s "$since" ".fabric_manager.state == \"up\" and .fabric_manager.since_ms == \$s" s70 &&
    test "$(posts)" = "$p0" &&
    rm_call PUT /v1/jobs/71 "$body" | jq -e ".hwcoll.state == \"reserved\"" &&
    rm_call GET /metrics | grep -qx "fmbroker_fm_up 1"
'
expect_ok 'the broker back on a quick disk and the usual deadline' '
    rm -f "$T/disk-slow" && stop_broker && write_broker_conf && start_broker_failing
'
# Another process holds the store's write lock past the busy timeout (5
# s): an admin's sqlite3 shell left in a transaction, say.  The passes
# that need to write cannot begin: what they would change is a 503 that
# names the lock, what only reads still answers (health degraded, with
# the reason; a job, to root and to its own unprivileged user; the
# metrics), and once the lock is gone the same request succeeds.  (The
# loop waits out the busy timeout on each write; an FM liveness probe in
# flight then times out and the FM is taken for down until the next
# probe: known, see the session note; the RUN is asked once it is up.)
hold_write_lock () { # until $T/locked is removed (at most 60 s)
    python3 -c '
import os, sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
open(sys.argv[2], "w").close()
for _ in range(600):
    if not os.path.exists(sys.argv[2]):
        break
    time.sleep(0.1)
db.execute("ROLLBACK")
' "$T/state/fmbroker.db" "$T/locked" &
    lock_pid=$!
}
stop_lock () { [ -n "${lock_pid:-}" ] && kill "$lock_pid" 2>/dev/null; lock_pid=; }
on_exit stop_lock
expect_ok 'another writer holds the lock: health says why, reads answer, a RUN is a 503 naming it, then it succeeds' '
    rm -f "$T/locked" && hold_write_lock && wait_for 100 0.1 test -f "$T/locked" &&
    rm_call GET /v1/health >h.json && cat h.json &&
    jq -e ".status == \"degraded\" and (.reasons[0] | test(\"begin transaction: database is locked\"))" h.json &&
    rm_call GET /v1/jobs/2 | jq -e ".state == \"active\"" &&
    chmod 755 "$T" && # the socket directory, for the job owner (uid 1000)
    as_user 1000 curl -sf --max-time 20 --unix-socket "$T/api.sock" http://fmbroker/v1/jobs/2 |
        jq -e ".state == \"active\"" &&
    rm_call GET /metrics | grep -q "^fmbroker_jobs{state=\"active\"} [1-9]" &&
    api_call PUT /v1/jobs/7 "$body" >r7 && cat r7 && read code _ <r7 && test "$code" = 503 &&
    grep -q "database is locked" r7 && rm "$T/locked" && wait "$lock_pid" && lock_pid= &&
    wait_for 100 0.1 sh -c "curl -sf --unix-socket $T/api.sock http://fmbroker/v1/status | jq -e \".fabric_manager.state == \\\"up\\\"\"" &&
    rm_call PUT /v1/jobs/7 "$body" | jq -e ".hwcoll.state == \"reserved\""
'
done_testing
