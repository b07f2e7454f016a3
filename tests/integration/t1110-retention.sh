#!/bin/bash
# t1110-retention.sh: a broker running for months keeps its store small:
# released jobs and events older than [broker] retain_days are deleted
# (the first slice runs 10 s after start), a backlog in slices between
# which the loop serves, active jobs are kept, and event readers can tell
# that they missed pruned events.  Also: fmbrokerd --check-db.
. "$(dirname "$0")/lib.sh"
start_mockfm
write_broker_conf "[broker]" "retain_days = 30"
start_broker
body='{"uid":1000,"node_count":2,"vni_count":0,"hwcoll":"off"}'
days_ago () { echo $(( $(date +%s%3N) - $1 * 86400000 )); }

expect_ok 'three jobs; two are released' '
    for j in old1 old2 live recent; do rm_call PUT /v1/jobs/$j "$body" >/dev/null || return 1; done &&
    rm_call DELETE /v1/jobs/old1 >/dev/null && rm_call DELETE /v1/jobs/old2 >/dev/null &&
    rm_call DELETE /v1/jobs/recent >/dev/null &&
    wait_for 100 0.1 sh -c "curl -sf --unix-socket $T/api.sock http://fmbroker/v1/jobs/old2 | jq -e \".state == \\\"released\\\"\"" &&
    rm_call GET "/v1/events?after=0" | jq -e ".first_seq >= 0" >/dev/null
'
expect_ok 'forty days pass for two of them and for the events so far' '
    stop_broker &&
    sqlite3 "$T/state/fmbroker.db" "
        UPDATE jobs SET released_ms = $(days_ago 40) WHERE id IN (\"old1\", \"old2\");
        INSERT INTO events (at_ms, type, detail) VALUES (0, \"old\", \"{}\");
        UPDATE events SET at_ms = $(days_ago 40);
        INSERT INTO events (at_ms, type, detail) VALUES ($(days_ago 1), \"young\", \"{}\");
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
        INSERT INTO jobs (id, fm_job_id, uid, node_count, request, state, hwcoll,
                          created_ms, updated_ms, released_ms)
        SELECT \"b\" || i, \"c1-b\" || i, 1000, 1, \"{}\", \"released\", \"released\",
               $(days_ago 41), $(days_ago 41), $(days_ago 41) FROM n;" &&
    start_broker
'
expect_ok 'slices after start delete the old history, and only that' '
    wait_for 300 0.1 sh -c "! curl -sf --unix-socket $T/api.sock http://fmbroker/v1/jobs/old1 >/dev/null" &&
    wait_for 300 0.1 sh -c "curl -sf --unix-socket $T/api.sock http://fmbroker/metrics | grep -qx \"fmbroker_pruned_total{what=\\\"jobs\\\"} 20002\"" &&
    ! rm_call GET /v1/jobs/old2 >/dev/null &&
    rm_call GET /v1/jobs/live | jq -e ".state == \"active\"" &&
    rm_call GET /v1/jobs/recent | jq -e ".state == \"released\""
'
expect_ok 'the backlog went in slices (the loop served between them), and says so' '
    rm_call GET /metrics >m.txt &&
    slices=$(awk "/^fmbroker_prune_slices_total / {print \$2}" m.txt) &&
    echo "# 20002 jobs in $slices slices" &&
    [ "$slices" -ge 4 ] &&
    grep -q "^fmbroker_loop_stall_seconds [0-9.]*$" m.txt &&
    grep -q "retention: deleted 20002 released jobs and [0-9]* events older than 30 days" "$T/broker.err"
'
expect_ok 'an event reader behind the pruned ones can tell' '
    rm_call GET "/v1/events?after=0" >ev.json &&
    jq -e ".first_seq > 1 and ([.events[].type] | index(\"old\") == null) and ([.events[].type] | index(\"young\") != null)" ev.json &&
    "$FMB_BIN/fmbroker" --socket "$T/api.sock" events --after 0 2>err >/dev/null &&
    grep -q "events 1 to [0-9]* were deleted (\[broker\] retain_days)" err
'
expect_ok 'a released id whose job was pruned can be run again' '
    rm_call PUT /v1/jobs/old1 "$body" | jq -e ".state == \"active\""
'
expect_ok '--check-db reads the whole store beside the running broker' '
    "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" --check-db >out 2>err &&
    grep -q "fmbroker.db: no damage found" out
'
show_check () { cat out err 2>/dev/null; ls -l "$T/state"; tail -n 5 "$T/broker.err"; }
step_fail_hook=show_check
# A kept count changed behind SQLite's back (here by hand) shows wrong in
# metrics; --check-db names it and says what to do, --recount puts it
# right, both beside the running broker.
outbox_depth () { rm_call GET /metrics | awk "\$1 == \"fmbroker_outbox_depth\" {print \$2}"; }
expect_ok 'a wrong kept count: --check-db names it, --recount puts it right' '
    d0=$(outbox_depth) && test -n "$d0" &&
    sqlite3 "$T/state/fmbroker.db" ".timeout 5000" \
        "UPDATE tallies SET n = n + 3 WHERE name = '\''outbox'\''" &&
    test "$(outbox_depth)" = $((d0 + 3)) &&
    { "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" --check-db >out 2>err; [ $? = 1 ]; } &&
    grep -q "tallies outbox: kept count $((d0 + 3)) (what metrics, status and health show), counted $d0" out &&
    grep -q "counts differ from the tables" err && grep -q "run fmbrokerd --recount" err &&
    "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" --recount >out 2>err &&
    grep -q "fmbroker.db: 1 kept count put right" out &&
    test "$(outbox_depth)" = "$d0" &&
    "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" --check-db >out 2>err &&
    rm_call GET /v1/health | jq -e ".status == \"ok\"" >/dev/null
'
# A kept count missing altogether: health fails, /metrics still answers
# (the other counts as they are) and the log names the fix.
expect_ok 'a missing kept count: health 503, /metrics answers and the log says what to do' '
    sqlite3 "$T/state/fmbroker.db" ".timeout 5000" \
        "DELETE FROM tallies WHERE name = '\''outbox'\''" &&
    test "$(api_call GET /v1/health | cut -d" " -f1)" = 503 &&
    rm_call GET /metrics >m.txt && grep -q "^fmbroker_vnis{state=\"held\"} " m.txt &&
    grep -q "metrics: store: outbox depth: no tally .outbox. in the store (fmbrokerd --check-db" \
        "$T/broker.err" &&
    "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" --recount >out 2>err &&
    grep -q "1 kept count put right" out &&
    rm_call GET /v1/health | jq -e ".status == \"ok\"" >/dev/null
'
# An index or trigger dropped behind fmbroker's back (a hand edit, a
# dump loaded without them): SQLite finds no damage, but retention's
# query names the index and a count drifts without its trigger.
# --check-db names them, --recount makes them again beside the running
# broker, and start-up does it by itself and says so.
expect_ok 'a missing index: --check-db names it, --recount makes it again' '
    sqlite3 "$T/state/fmbroker.db" ".timeout 5000" "DROP INDEX jobs_released" &&
    { "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" --check-db >out 2>err; [ $? = 1 ]; } &&
    grep -q "^  index jobs_released: missing (fmbrokerd --recount, or the next start, makes it again)" out &&
    grep -q "the schema differs from fmbroker.s: index jobs_released: missing" err &&
    grep -q "run fmbrokerd --recount" err &&
    "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" --recount >out 2>err &&
    grep -q "fmbroker.db: made again: index jobs_released (missing)" out &&
    "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" --check-db >out 2>err
'
expect_ok 'start-up makes a missing index and trigger again, recounts, and says so' '
    stop_broker &&
    sqlite3 "$T/state/fmbroker.db" "DROP INDEX job_nodes_waiting; DROP TRIGGER outbox_tallied_in;
        INSERT INTO outbox (kind, target, next_ms, created_ms) VALUES (\"delete\", \"c1-gone\", 0, 0)" &&
    start_broker &&
    grep -q "store: .*fmbroker.db was changed outside fmbroker: made again index job_nodes_waiting (missing), trigger outbox_tallied_in (missing); 1 kept count put right" "$T/broker.err" &&
    rm_call GET /v1/jobs/recent | jq -e ".state == \"released\"" &&
    "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" --check-db >out 2>err
'
expect_ok '--check-db on a damaged store says so and exits 1' '
    rm -f out err && { stop_broker || { echo "the broker stopped with status $?"; false; }; } &&
    size=$(stat -c %s "$T/state/fmbroker.db") &&
    truncate -s $((size / 2)) "$T/state/fmbroker.db" &&
    { "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" --check-db >out 2>err; [ $? = 1 ]; } &&
    grep -q "fmbroker.db: damaged database: truncated" err
'
done_testing
