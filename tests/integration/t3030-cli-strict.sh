#!/bin/bash
# t3030-cli-strict.sh: the CLI never acts when asked for help, refuses bad
# numbers and job ids before sending anything (a socket that only records
# proves it), sorts and selects job columns, prints times with their zone,
# and every command exits with the monitoring (Nagios) codes.
. "$(dirname "$0")/lib.sh"
cli="$FMB_BIN/fmbroker"

# A Unix socket that accepts and records whatever arrives, answering nothing.
python3 - "$T/rec.sock" "$T/rec.log" <<'PY' &
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(16); s.settimeout(0.2)
end = time.time() + 120
with open(sys.argv[2], "ab", buffering=0) as log:
    while time.time() < end:
        try:
            c, _ = s.accept()
        except socket.timeout:
            continue
        log.write(b"CONNECT\n")
        c.settimeout(0.5)
        try:
            log.write(c.recv(65536))
        except OSError:
            pass
        c.close()
PY
rec_pid=$!
stop_rec () { kill "$rec_pid" 2>/dev/null; wait "$rec_pid" 2>/dev/null; }
on_exit stop_rec
wait_for 100 0.05 test -S "$T/rec.sock" || bail_out "recording socket did not start"
: >"$T/rec.log"
rec () { "$cli" --socket "$T/rec.sock" --timeout 2 "$@"; }
nothing_sent () { test ! -s "$T/rec.log" || { cat "$T/rec.log"; return 1; }; }

expect_ok 'the recording socket does record (the test can see a request)' '
    { rec jobs 2>/dev/null; true; } && grep -q CONNECT rec.log && : >rec.log
'
expect_ok 'every subcommand answers --help and -h with its usage, exit 0, sending nothing' '
    for args in "status" "jobs" "job" "job show" "job show 42" "job release 42" \
        "job release 42 --force" "step-clean" "step-clean 42 0" "events" "events --follow" \
        "reconcile" "vni" "vni list" "run-job" "run-job 42 --uid 1 --node-count 1" \
        "end-job" "end-job 42"; do
        for h in --help -h; do
            c=${args%% *}
            out=$(rec $args $h) || { echo "$args $h: exit $?"; return 1; }
            echo "$out" | grep -q "^Usage: fmbroker $c" || { echo "$args $h: $out"; return 1; }
        done
    done && nothing_sent
'
expect_ok 'status --help and --help document the monitoring exit codes' '
    rec status --help | grep -q "0 all well; 1 degraded" &&
    "$cli" --help | grep -q "0 ok; 1 the broker" && "$cli" --help | grep -q "; 3 usage or configuration error" &&
    "$cli" --help | grep -q "^75 the broker could not be reached"
'
# refused ARGS...: exit 3 (usage), a message, nothing sent
refused () {
    rec "$@" >out 2>err; rc=$?
    test $rc = 3 && test -s err && nothing_sent || { echo "$* -> $rc: $(cat err)"; return 1; }
}
expect_ok 'numbers are parsed whole: uid, counts, timeout, after, limit' '
    refused run-job 1 --uid x --node-count 1 &&
    refused run-job 1 --uid "" --node-count 1 &&
    refused run-job 1 --uid 12abc --node-count 1 &&
    refused run-job 1 --uid 1e3 --node-count 1 &&
    refused run-job 1 --uid -1 --node-count 1 &&
    refused run-job 1 --uid 4294967295 --node-count 1 &&
    refused run-job 1 --uid 5 --node-count 0 &&
    refused run-job 1 --uid 5 --node-count " 3" &&
    refused run-job 1 --uid 5 --node-count 1 --ncores 2x &&
    refused run-job 1 --uid 5 --node-count 1 --vni-count 5 &&
    refused --timeout x jobs && refused --timeout 0 jobs && refused --timeout -3 jobs &&
    refused events --after x && refused events --after -1 && refused events --count 0 &&
    refused jobs --limit 10k && grep -q "expected a whole number" err
'
# status is a monitoring check: a usage error is UNKNOWN (3) there,
# never CRITICAL (2), which means the broker cannot be reached; and so
# for every other command.
expect_ok 'a usage or configuration error exits 3, status or not, sending nothing' '
    for args in "--timeout x status" "status extra" "status --bogus" "-c /nonexistent.conf status" \
        "-c /nonexistent.conf jobs" "jobs --bogus" "--bogus end-job 1" "end-job"; do
        rec $args >out 2>err; rc=$?
        test $rc = 3 && grep -q "^fmbroker: " err && nothing_sent || { echo "$args -> $rc: $(cat err)"; return 1; }
    done
'
expect_ok 'ids that cannot be job ids are refused before any request' '
    refused end-job -x && refused end-job "a/b" && refused job show -- -x &&
    refused job show "" && refused job release "x y" &&
    refused run-job -5 --uid 1 --node-count 1 && refused step-clean -1 0 &&
    refused end-job "$(head -c 129 /dev/zero | tr "\0" a)" &&
    grep -q "is not a job id" err
'
expect_ok 'stray arguments are refused, not ignored' '
    refused reconcile now && refused end-job 1 2 && refused job show 1 --force &&
    refused jobs extra && refused vni list more && refused jobs -o JOB,NOPE
'
stop_rec

start_mockfm
write_broker_conf
start_broker || bail_out "broker did not start"
fmb () { "$cli" --socket "$T/api.sock" "$@"; }
for j in 10 9 100 b a 2; do
    fmb run-job $j --uid 1000 --user root --node-count 1 --quiet || bail_out "run-job $j"
done

expect_ok 'jobs: numeric ids by value, then the others; USER shown' '
    fmb jobs >j.txt && head -1 j.txt | grep -q "^JOB  *STATE  *UID  *USER  *NODES" &&
    test "$(fmb jobs --noheader -o job | tr -d " " | tr "\n" ,)" = "2,9,10,100,a,b," &&
    grep -q "^100  *active  *1000  *root " j.txt
'
expect_ok 'jobs -o picks and orders columns; --noheader drops the header' '
    fmb jobs -o USER,JOB --noheader | head -1 | grep -q "^root  *2$" &&
    fmb jobs -o state | head -1 | grep -q "^STATE$"
'
expect_ok 'event times are ISO 8601 with the zone offset' '
    fmb end-job 2 && fmb events >e.txt &&
    grep -Eq "^[0-9]+ +[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[+-][0-9]{2}:[0-9]{2} " e.txt &&
    TZ=UTC0 "$cli" --socket "$T/api.sock" events | grep -q "+00:00 "
'
expect_ok 'status exits 0 when all is well' '
    fmb status >s.txt && grep -q "^fabric manager: up" s.txt
'
expect_ok 'status exits 1 when degraded (FM down), and says so' '
    stop_mockfm &&
    fmb reconcile >/dev/null &&
    wait_for 100 0.1 eval "fmb status >s.txt; test \$? = 1" &&
    grep -q "^degraded: " s.txt &&
    { fmb --json status >/dev/null; test $? = 1; }
'
expect_ok 'status exits 2 when the broker cannot be reached' '
    { "$cli" --socket "$T/nowhere.sock" status 2>err; test $? = 2; } && grep -q nowhere.sock err
'
done_testing
