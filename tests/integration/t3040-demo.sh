#!/bin/bash
# t3040-demo.sh: README command 1's demo can be run again on the same
# state, every curl line it prints works, both times, in order, and so
# does its fmbroker line; SIGTERM to its pid stops it all.
. "$(dirname "$0")/lib.sh"
demo_pid=
stop_demo () {
    [ -n "$demo_pid" ] && kill -TERM -- "-$demo_pid" 2>/dev/null && wait "$demo_pid" 2>/dev/null
    demo_pid=
    return 0
}
on_exit stop_demo
run_demo () { # OUTPUT-FILE: start the demo on $T/demo-state, wait for its socket
    rm -f "$T/demo-state/fmbroker.sock"
    FMB_BIN=$FMB_BIN setsid bash "$FMB_SRC/scripts/demo.sh" "$T/demo-state" >"$1" 2>"$1.err" &
    demo_pid=$!
    wait_for 100 0.1 sh -c "curl -sf --unix-socket $T/demo-state/fmbroker.sock http://fmbroker/v1/health >/dev/null"
}
# Each printed curl line, in order, must get a 2xx.
lines_work () { # OUTPUT-FILE
    grep "^  curl " "$1" >lines && test "$(wc -l <lines)" -ge 4 &&
    while read -r line; do
        eval "${line/curl -s/curl -sf -o /dev/null}" || { echo "failed: $line"; return 1; }
    done <lines
}
expect_ok 'the demo starts and every line it prints works' '
    run_demo out1 && lines_work out1 && stop_demo
'
expect_ok 'run again on the same state: every line it prints works again' '
    run_demo out2 && lines_work out2 &&
    ! cmp -s <(grep "^  curl " out1) <(grep "^  curl " out2)
'
expect_ok 'the job of each run ends released, its VNI out of quarantine' '
    for f in out1 out2; do
        j=$(grep -o "/v1/jobs/[^/ ]*" $f | head -1 | cut -d/ -f4) &&
        curl -sf --unix-socket "$T/demo-state/fmbroker.sock" "http://fmbroker/v1/jobs/$j" |
            jq -e ".state == \"released\" and .vnis == []" || return 1
    done
'
expect_ok 'the fmbroker -c line it prints works' '
    grep "^  .*/fmbroker -c .*/demo.conf status$" out2 >cli && test "$(wc -l <cli)" = 1 &&
    wait_for 50 0.1 sh -c "$(cat cli) >status.out" && grep -q "fabric manager: up" status.out
'
# gone PID: exited (a zombie not yet waited for counts as gone)
gone () { ! kill -0 "$1" 2>/dev/null || grep -q "^[0-9]* (.*) Z " "/proc/$1/stat"; }
expect_ok 'SIGTERM to the demo pid stops it, the broker and the mock FM' '
    pid=$demo_pid && kill -TERM "$pid" && wait_for 100 0.1 gone "$pid" &&
    { wait "$pid"; demo_pid=; true; } &&
    ! pgrep -g "$pid" >/dev/null &&
    ! curl -sf --unix-socket "$T/demo-state/fmbroker.sock" http://fmbroker/v1/health >/dev/null &&
    ! curl -sf "http://127.0.0.1:$(cat "$T/demo-state/mockfm.port")/_mock/state" >/dev/null
'
done_testing
