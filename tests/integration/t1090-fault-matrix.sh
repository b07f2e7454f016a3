#!/bin/bash
# t1090-fault-matrix.sh: every FM call meets every kind of fault.  For
# each (call, fault): RUN answers within its deadline, the broker keeps
# serving, and once the fault has passed the FM holds exactly the
# reservations of the jobs that are active and reserved here.
. "$(dirname "$0")/lib.sh"
reserve_ms=500 timeout_ms=1000
mkdir -p "$T/auth" && echo slurm >"$T/auth/client-id" && echo s3cret >"$T/auth/client-secret" &&
    chmod 600 "$T/auth/client-secret"
start_mockfm --auth oauth --auth-dir "$T/auth"
echo "$fm_url/oauth/token" >"$T/auth/endpoint"
# An FM that finishes a POST the broker gave up on after the broker's
# delete of it was answered 404 (create meets delay=1500: the delete is
# due 1 s after the give-up, the POST ends 1.5 s after it began, and on
# a loaded machine either comes first) holds a reservation only the next
# reconciliation deletes: every 5 s here, so the 15 s wait for
# consistency covers it whichever came first (the shipped 30 s does not).
reconcile_s=5 write_broker_conf
sed -i "s|^auth = none$|auth = oauth\nauth_dir = $T/auth\nallow_plain_http = true|" "$T/broker.conf"
start_broker

# A new job's RUN makes no GET (its POST comes first): the FM refuses that
# POST as if it held the job (409), so that the GET after it meets the fault.
declare -A call=(
    [get]=$'POST /fabric/collectives/jobs 409 x1\nGET /fabric/collectives/jobs/c1-*'
    [create]="POST /fabric/collectives/jobs"
    [patch]="PATCH /fabric/collectives/jobs/*"
    [delete]="DELETE /fabric/collectives/jobs/*"
    [list]="GET /fabric/collectives/jobs/"
    [token]="POST /oauth/token"
)
faults="500 503 409 429 401 garbage wrong_types truncate slow_body delay=1500 drop"

# The FM holds exactly the active, reserved jobs' reservations.
consistent () {
    want=$(rm_call GET "/v1/jobs?state=active&limit=1000" |
        jq -r '.jobs[] | select(.hwcoll.state == "reserved") | .hwcoll.fm_job_id' | sort | tr '\n' ' ')
    got=$(mockfm_jobs | sort | tr '\n' ' ')
    depth=$(rm_call GET /v1/status | jq .outbox.depth)
    [ "$want" = "$got" ] && [ "$depth" = 0 ]
}

n=0
for c in get create patch delete list token; do
    for f in $faults; do
        n=$((n + 1))
        expect_ok "$c meets $f: RUN in time, the broker serves, nothing leaks" '
            mockfm_ctl POST /_mock/faults "${call[$c]} $f x1" &&
            { [ $c != token ] || mockfm_ctl POST /_mock/expire-tokens; } &&
            rm_call_timed PUT /v1/jobs/$n "{\"uid\":1000,\"nodes\":[\"a\",\"b\"]}" >t && read code ms <t &&
            test "$code" = 201 && test "$ms" -lt $((reserve_ms + 1500)) &&
            { [ $c != get ] || wait_for 30 0.1 grep -q "^GET /fabric/collectives/jobs/c1-$n " "$T/fm.log"; } &&
            st=$(job_field $n .hwcoll.state) && case $st in reserved|unavailable) ;; *) return 1 ;; esac &&
            { [ $st != reserved ] || api_call DELETE "/v1/jobs/$n/steps/0?wait=2" | grep -q "^20[02] "; } &&
            { [ $n = 1 ] || api_call DELETE /v1/jobs/$((n - 1)) | grep -q "^202 "; } &&
            rm_call POST /v1/reconcile >/dev/null &&
            rm_call GET /v1/health >/dev/null &&
            wait_for 150 0.1 consistent
        '
    done
done
# The FM answers, but refuses fmbroker's calls even with a fresh token
# (its access rules changed, or only one broker of a pair was given the
# new credentials): nothing gets done, so the session is down with that
# reason (t1026 has the rest).  Health and the log say why, and health
# is ok again once the FM accepts the calls (the next probe).
health_ok () { rm_call GET /v1/health | jq -e '.status == "ok"' >/dev/null; }
expect_ok 'the FM refuses the credentials: health degraded naming it, ok once they are accepted' '
    mockfm_ctl POST /_mock/faults "POST /fabric/collectives/jobs 401" &&
    n=$((n + 1)) && rm_call PUT /v1/jobs/$n "{\"uid\":1000,\"nodes\":[\"a\",\"b\"]}" >r.json &&
    cat r.json && jq -e ".hwcoll.state == \"unavailable\"" r.json &&
    rm_call GET /v1/health >h.json && cat h.json &&
    jq -e ".status == \"degraded\" and any(.reasons[]; test(\"refuses fmbroker.s credentials\"))" h.json &&
    grep -q "fabric manager .* refuses fmbroker.s credentials" "$T/broker.err" &&
    mockfm_ctl DELETE /_mock/faults && n=$((n + 1)) &&
    wait_for 100 0.1 health_ok &&
    rm_call PUT /v1/jobs/$n "{\"uid\":1000,\"nodes\":[\"a\",\"b\"]}" | jq -e ".hwcoll.state == \"reserved\"" &&
    grep -q "fabric manager .* accepts fmbroker.s credentials again" "$T/broker.err"
'
expect_ok 'connection refused for every call: RUN in time, then nothing leaks' '
    mockfm_ctl DELETE /_mock/faults && stop_mockfm && n=$((n + 1)) &&
    rm_call_timed PUT /v1/jobs/$n "{\"uid\":1000,\"nodes\":[\"a\",\"b\"]}" >t && read code ms <t &&
    test "$code" = 201 && test "$ms" -lt $((reserve_ms + 1500)) &&
    api_call DELETE /v1/jobs/$((n - 1)) | grep -q "^202 " &&
    start_mockfm --auth oauth --auth-dir "$T/auth" && wait_for 300 0.1 consistent
'
expect_ok 'through all of it the broker kept every promise it could check' '
    rm_call GET "/v1/jobs?limit=1000" | jq -e "[.jobs[] | select(.state == \"active\") | .vnis[]] | length == (unique | length)" &&
    rm_call GET /v1/status | jq -e ".fabric_manager.state == \"up\""
'
done_testing
