#!/bin/bash
# t1030-crash-safety.sh: promises 1, 2, 3 and 5 under kill -9.
#
# 200 job lifecycles; before about one call in six a killer sends SIGKILL
# to the broker 0-20 ms later, at whatever point it has reached.  The
# test acts like a resource manager: a call that failed because the broker
# died is repeated once it is back (calls are idempotent).  At the end
# the FM must hold exactly the reservations of the jobs still active, and
# no VNI may be held by two jobs.
. "$(dirname "$0")/lib.sh"
JOBS=${CRASH_JOBS:-200}
# FM calls take 20 ms, so that kills land inside reservations and
# releases, not only between them.
start_mockfm --latency 20
start_broker
kills=0
active=" "

# Restart the broker if it is dead.  "Dead" includes dying: a SIGKILLed
# process (slow to exit under ASan) or a zombie still answers kill -0,
# so look at its state instead.
ensure_broker () {
    local st
    st=$(awk '{print $3}' "/proc/$broker_pid/stat" 2>/dev/null)
    if [ -n "$broker_pid" ] && [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]; then
        return 0
    fi
    wait "$broker_pid" 2>/dev/null
    broker_pid=
    kills=$((kills + 1))
    start_broker
}

# call METHOD PATH [BODY]: like an RM, repeat until the broker answers 2xx.
call () {
    for try in 1 2 3 4 5 6 7 8 9 10; do
        if [ $((RANDOM % 6)) -eq 0 ]; then
            victim=$broker_pid
            { sleep "0.0$((RANDOM % 20))"; kill -9 "$victim" 2>/dev/null; } &
            killer=$!
        else
            killer=
        fi
        out=$(rm_call "$@") && ok=1 || ok=0
        if [ -n "$killer" ]; then
            # the killer has sent SIGKILL: wait until the victim is gone
            wait "$killer"
            wait "$victim" 2>/dev/null
        fi
        ensure_broker || return 1
        [ $ok = 1 ] && { echo "$out"; return 0; }
    done
    echo "no answer for $* after 10 tries" >&2
    return 1
}

expect_ok "$JOBS lifecycles with kill -9 at random moments" '
    for i in $(seq 1 $JOBS); do
        call PUT /v1/jobs/$i "{\"uid\":$((1000 + i % 7)),\"nodes\":[\"n$i\",\"m$i\"]}" >/dev/null || break
        active="$active$i "
        if [ $i -gt 2 ] && [ $((RANDOM % 3)) -ne 0 ]; then
            victim_job=$((i - 2))
            case "$active" in *" $victim_job "*)
                call DELETE /v1/jobs/$victim_job >/dev/null || break
                active=${active/ $victim_job / } ;;
            esac
        fi
    done
    test $i = $JOBS && test $kills -gt 0
'
echo "# $kills broker kills"
expect_ok 'the broker settles: outbox empty, nothing reserving' '
    ensure_broker &&
    wait_for 300 0.1 sh -c "curl -sf --unix-socket $T/api.sock http://fmbroker/v1/status | jq -e \".outbox.depth == 0\" >/dev/null" &&
    wait_for 100 0.1 sh -c "! curl -sf --unix-socket $T/api.sock \"http://fmbroker/v1/jobs?limit=1000\" | jq -e \"any(.jobs[]; .hwcoll.state == \\\"reserving\\\")\" >/dev/null"
'
expect_ok 'the FM holds exactly the reservations of the active jobs' '
    for j in $active; do echo "c1-$j"; done | sort >want &&
    mockfm_jobs | sort >got &&
    diff -u want got
'
expect_ok 'every active job is reserved, every cleaned-up job released' '
    rm_call GET "/v1/jobs?limit=1000" >all.json &&
    for j in $active; do echo "$j"; done | sort >want_active &&
    jq -r ".jobs[] | select(.state == \"active\") | .id" all.json | sort >got_active &&
    diff -u want_active got_active &&
    jq -e "all(.jobs[] | select(.state == \"active\"); .hwcoll.state == \"reserved\")" all.json &&
    jq -e "all(.jobs[] | select(.state != \"active\"); .state == \"released\")" all.json
'
expect_ok 'no VNI is held by two jobs' '
    jq -e "[.jobs[] | select(.state == \"active\") | .vnis[]] | length == (unique | length)" all.json &&
    "$FMB_BIN/fmbroker" --socket "$T/api.sock" --json vni list | jq -e "[.vnis[].vni] | length == (unique | length)" &&
    test "$(jq "[.jobs[] | select(.state == \"active\")] | length" all.json)" -ge 1
'
done_testing
