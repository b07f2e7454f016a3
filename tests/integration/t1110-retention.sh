#!/bin/bash
# t1110-retention.sh: a broker running for months keeps its store small:
# released jobs and events older than [broker] retain_days are deleted
# (the first batch runs 10 s after start), active jobs are kept, and
# event readers can tell that they missed pruned events.
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
        INSERT INTO events (at_ms, type, detail) VALUES ($(days_ago 1), \"young\", \"{}\");" &&
    start_broker
'
expect_ok 'a batch after start deletes the old history, and only that' '
    wait_for 300 0.1 sh -c "! curl -sf --unix-socket $T/api.sock http://fmbroker/v1/jobs/old1 >/dev/null" &&
    ! rm_call GET /v1/jobs/old2 >/dev/null &&
    rm_call GET /v1/jobs/live | jq -e ".state == \"active\"" &&
    rm_call GET /v1/jobs/recent | jq -e ".state == \"released\"" &&
    rm_call GET /metrics | grep -qx "fmbroker_pruned_total{what=\"jobs\"} 2"
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
done_testing
