#!/bin/bash
# t3010-cli.sh: fmbroker, the admin and hook CLI: each subcommand's table
# and JSON output, exit codes, and step-clean run by the job itself.
. "$(dirname "$0")/lib.sh"
start_mockfm
start_broker
fmb () { "$FMB_BIN/fmbroker" --socket "$T/api.sock" "$@"; }

expect_ok 'run-job expands a host list and prints the job env, with its own traffic classes' '
    fmb run-job 42 --uid 1000 --user root --nodes "n[1-2]" --ncores 4 --tcs BULK_DATA >env.sh &&
    grep -q "^export SLINGSHOT_VNIS=[0-9]" env.sh && grep -qx "export SLINGSHOT_TCS=0x4" env.sh &&
    grep -q "^export FI_CXI_COLL_JOB_ID=c1-42$" env.sh &&
    rm_call GET /v1/jobs/42 | jq -e ".nodes == [\"n1\",\"n2\"] and .user == \"root\""
'
expect_ok 'status: a summary for people, the document with --json' '
    fmb status >s.txt && grep -q "^fabric manager: up" s.txt && grep -q "^jobs: 1 active" s.txt &&
    fmb --json status | jq -e ".jobs.active == 1"
'
expect_ok 'status --json after the command is --json before it' '
    fmb status --json | jq -e ".jobs.active == 1" &&
    fmb status --json >a.json && fmb --json status >b.json &&
    diff <(jq -S "del(.uptime_s)" a.json) <(jq -S "del(.uptime_s)" b.json) &&
    fmb jobs --json | jq -e ".jobs | length == 1"
'
expect_ok 'metrics: the Prometheus text, as a scraper sees it' '
    fmb metrics >m.txt && grep -q "^# HELP fmbroker_fm_up " m.txt &&
    grep -q "^# TYPE fmbroker_fm_up gauge" m.txt && grep -q "^fmbroker_fm_up 1" m.txt &&
    fmb metrics --help | grep -q "^Usage: fmbroker metrics"
'
# Every line, not the first: getopt's own messages, and the usage once
# printed after "unknown command", began with the program or command name.
expect_ok 'every error line the CLI prints starts with "fmbroker: ", getopt'"'"'s too' '
    for args in "bogus" "status extra" "jobs extra" "job" "job frob 1" "vni" "end-job" \
        "run-job 9" "step-clean 1" "events extra" "job show nosuch" "metrics extra" \
        "jobs --bogus" "jobs -l" "events --after" "run-job 9 --frob" "reconcile --frob" \
        "--bogus status" "--timeout" "" "reconcile now"; do
        fmb $args >/dev/null 2>err && { echo "$args succeeded"; return 1; }
        test -s err && ! grep -v "^fmbroker: " err || { echo "$args: $(cat err)"; return 1; }
    done &&
    { fmb jobs --bogus 2>err; test $? = 3; } && grep -qx "fmbroker: jobs: unrecognized option .--bogus." err
'
expect_ok 'jobs: a table, filters, and --json' '
    fmb run-job 43 --uid 1001 --node-count 1 --quiet &&
    fmb jobs >j.txt && head -1 j.txt | grep -q "^JOB  *STATE  *UID" &&
    grep -q "^42  *active  *1000  *root  *2 .* reserved" j.txt && grep -q "^43 .*not_eligible" j.txt &&
    fmb jobs --user 1001 | grep -c "^4[0-9] " | grep -qx 1 &&
    fmb --json jobs --state active | jq -e ".jobs | length == 2"
'
expect_ok 'job show and job release' '
    fmb job show 42 | grep -q "^hwcoll: reserved (FM job c1-42" &&
    fmb job show 43 | grep -q "^hwcoll: not_eligible (no FM job): job has 1 node" &&
    ! fmb job show 43 | grep -q "c1-43" &&
    fmb job show 42 | grep -qx "  FI_CXI_COLL_MCAST_TOKEN=(hidden; --json shows it)" &&
    fmb --json job show 42 | jq -e ".env.FI_CXI_COLL_MCAST_TOKEN | test(\"^[0-9a-f]{32,}$\")" &&
    fmb job show 42 | grep -q "VNIs .*, TCs 0x4$" &&
    fmb --json job show 42 | jq -e ".id == \"42\"" &&
    fmb job release 43 | grep -q "^job 43: released"
'
expect_ok 'step-clean run by the job itself, unprivileged, with its token' '
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
        # a copy the user can reach, wherever the build tree is (/root)
        chmod 755 "$T" && install -m 755 "$FMB_BIN/fmbroker" "$T/fmbroker" &&
        val () { sed -n "s/^export $1=//p" env.sh; } &&
        as_user 1000 env FI_CXI_COLL_JOB_ID="$(val FI_CXI_COLL_JOB_ID)" FI_CXI_COLL_JOB_STEP_ID=0 \
            FI_CXI_COLL_MCAST_TOKEN="$(val FI_CXI_COLL_MCAST_TOKEN)" \
            "$T/fmbroker" --socket "$T/api.sock" step-clean | grep -q "^job 42 step 0: cleaned" &&
        { as_user 1000 "$T/fmbroker" --socket "$T/api.sock" step-clean 42 0 2>err; test $? = 1; } &&
        grep -q "403" err
    else
        echo "skipped: needs root and setpriv"
    fi
'
expect_ok 'step-clean with explicit arguments as the RM' '
    fmb step-clean 42 "f1/0/1" | grep -q "step f1/0/1: cleaned"
'
expect_ok 'step-clean with an FM slower than its timeout: "cleaning" in time, not a timeout' '
    mockfm_ctl POST /_mock/faults "PATCH /fabric/collectives/jobs/* delay=6000" &&
    start=$(date +%s) && { fmb --timeout 4 step-clean 42 slow >out; rc=$?; } && took=$(($(date +%s) - start)) &&
    mockfm_ctl POST /_mock/faults "" && cat out && echo "exit $rc after $took s" &&
    test "$rc" = 0 && grep -q "^job 42 step slow: cleaning" out && test "$took" -le 4 &&
    fmb step-clean 42 slow | grep -q "^job 42 step slow: cleaned"
'
expect_ok 'events: a table, --after, --follow --count' '
    fmb end-job 42 &&
    fmb events >e.txt && grep -q " vni_quarantined  *42 " e.txt &&
    first=$(fmb --json events | head -1 | jq .seq) &&
    test "$(fmb --json events --after "$first" | wc -l)" -ge 1 &&
    { sleep 0.3; fmb end-job 43 >/dev/null; fmb run-job 44 --uid 1 --node-count 1 --quiet; fmb end-job 44; } &
    last=$(fmb --json status | jq .events.last_seq) &&
    timeout 20 "$FMB_BIN/fmbroker" --socket "$T/api.sock" --json events --follow --after "$last" --count 1 >f.json &&
    jq -e ".seq > $last" f.json
'
expect_ok 'vni list and reconcile' '
    fmb vni list | head -1 | grep -q "^VNI  *JOB  *STATE" &&
    fmb --json vni list | jq -e ".pool_min == 1024" &&
    fmb reconcile | grep -q "^reconciliation scheduled"
'
# One scheme for every command, status's (Nagios): 0 ok, 1 refused,
# 2 unreachable (what a hook retries), 3 usage.
expect_ok 'exit codes, every command: 1 refused, 75 unreachable (status: 2), 3 usage' '
    { fmb job show nosuch 2>err; test $? = 1; } && grep -q "404" err &&
    { fmb bogus 2>/dev/null; test $? = 3; } &&
    { fmb 2>/dev/null; test $? = 3; } &&
    { fmb --bogus jobs 2>/dev/null; test $? = 3; } &&
    { fmb jobs --bogus 2>/dev/null; test $? = 3; } &&
    { fmb run-job 9 2>/dev/null; test $? = 3; } &&
    { fmb run-job 9 --uid 1 --nodes "n[1-" 2>/dev/null; test $? = 3; } &&
    { fmb run-job 9 --uid 1 2>err; test $? = 3; } && grep -q -- "--nodes or --node-count, one of them" err &&
    { fmb run-job 9 --uid 1 --nodes n1 --node-count 1 2>err; test $? = 3; } &&
    { fmb run-job 9 --uid 1 --nodes n1 --hwcoll maybe 2>err; test $? = 3; } && grep -q "on, off or auto" err &&
    { fmb -c /nonexistent.conf jobs 2>/dev/null; test $? = 3; } &&
    test "$(api_call GET /v1/jobs/9 | cut -d" " -f1)" = 404 &&
    for c in jobs "job show 1" "end-job 1" "vni list" events reconcile metrics status; do
        "$FMB_BIN/fmbroker" --socket "$T/nowhere.sock" $c 2>err; rc=$?
        want=75 && { [ "$c" != status ] || want=2; } && # status: Nagios CRITICAL
        test $rc = $want && grep -q "nowhere.sock" err || { echo "$c: exit $rc: $(cat err)"; return 1; }
    done
'
# A broker that answers "not now" (busy, failing over, its disk failing)
# is a transient failure too: a hook retries it as it retries no answer.
expect_ok 'an answer of 429 or 503 exits 75, a 4xx refusal 1, each with the broker'"'"'s detail' '
    python3 - "$T/busy.sock" <<'"'"'PY'"'"' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(8); s.settimeout(0.2)
end = time.time() + 60
while time.time() < end:
    try:
        c, _ = s.accept()
    except socket.timeout:
        continue
    req = c.recv(65536).decode(errors="replace")
    code = {"/v1/jobs/busy": 429, "/v1/jobs/down": 503}.get(req.split(" ")[1], 409)
    body = b"{\"detail\": \"as scripted\"}"
    c.sendall(b"HTTP/1.1 %d X\r\nContent-Type: application/problem+json\r\n"
              b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (code, len(body), body))
    c.close()
PY
    busy_pid=$! && wait_for 100 0.05 test -S "$T/busy.sock" &&
    at () { "$FMB_BIN/fmbroker" --socket "$T/busy.sock" "$@"; } &&
    { at end-job busy 2>err; rc=$?; test $rc = 75; } && grep -q "^fmbroker: DELETE /v1/jobs/busy: 429 as scripted" err &&
    { at end-job down 2>err; rc=$?; test $rc = 75; } && grep -q ": 503 as scripted" err &&
    { at end-job other 2>err; rc=$?; test $rc = 1; } && grep -q ": 409 as scripted" err &&
    { at status 2>err; rc=$?; test $rc = 1; } &&
    # the hooks retry what the CLI calls transient, and only that
    fmb_log () { :; } && . "$FMB_SRC/deploy/hooklib.sh" &&
    { at end-job down 2>/dev/null; fmb_transient $? ""; } &&
    { at end-job busy 2>/dev/null; fmb_transient $? ""; } &&
    { at end-job other 2>/dev/null; ! fmb_transient $? ""; } &&
    { at end-job 2>/dev/null; ! fmb_transient $? ""; } &&
    { "$FMB_BIN/fmbroker" --socket "$T/nowhere.sock" end-job 1 2>/dev/null; fmb_transient $? ""; }
    r=$?; kill $busy_pid; wait $busy_pid 2>/dev/null; test $r = 0
'
# A hook tells "try again" from "no" by the CLI's exit status alone
# (apiretry.h's rule); the options are checked before anything is sent.
expect_ok 'a script sees 75 for a broker that is away, a refusal for a bad option' '
    fmb_log () { :; } && . "$FMB_SRC/deploy/hooklib.sh" &&
    { "$FMB_BIN/fmbroker" --socket "$T/nowhere.sock" run-job 9 --uid 1 --nodes n1 2>err; rc=$?; } &&
    test $rc = 75 && fmb_transient $rc "" &&
    { fmb run-job 9 --uid 1 --nodes n1 --vni-count 7 2>err; rc=$?; } && test $rc = 3 &&
    grep -qx "fmbroker: run-job: --vni-count 7: the job.s VNI count, 0..4" err && ! fmb_transient $rc "" &&
    { fmb run-job 9 --uid 1 --nodes "n[1-2],n2" 2>err; rc=$?; } && test $rc = 3 &&
    grep -qx "fmbroker: run-job: --nodes n\[1-2\],n2: .n2. listed twice" err &&
    { fmb run-job 9 --uid 1 --nodes n1 --tcs DEDICATED_ACCESS 2>err; rc=$?; } && test $rc = 1 &&
    grep -q "this cluster allows only" err && ! fmb_transient $rc "" &&
    test "$(api_call GET /v1/jobs/9 | cut -d" " -f1)" = 404
'
# PrologSlurmctld hands the user's options to the CLI as they came: the
# CLI's check is the script's, and its words reach the hook's log.
prolog_slurmctld () { # JOB [VAR=VALUE...]
    _job=$1 && shift &&
    env SLURM_JOB_ID=$_job SLURM_JOB_UID=1000 SLURM_JOB_USER=nobody SLURM_JOB_NODELIST="n[1-2]" \
        SLURM_JOB_CPUS_PER_NODE="4(x2)" FMBROKER_CONF=$T/broker.conf FMBROKER_BINDIR=$FMB_BIN \
        FMBROKER_HOOK_TIMEOUT=2 FMBROKER_HOOK_LOG=$T/hooks.log "$@" "$FMB_SRC/deploy/slurm/prolog_slurmctld.sh"
}
expect_ok 'PrologSlurmctld: options reach RUN; a bad one is logged in the CLI'"'"'s words, not retried' '
    prolog_slurmctld pc1 SPANK_FMB_HWCOLL=off SPANK_FMB_VNIS=2 SPANK_FMB_TCS=0x4 &&
    api_call GET /v1/jobs/pc1 | cut -d" " -f2- >pc1.json &&
    jq -e "(.vnis | length) == 2 and .hwcoll.reason == \"hwcoll=off requested\" and .tcs == \"0x4\" and .ncores == 4" pc1.json &&
    prolog_slurmctld pc2 SPANK_FMB_VNIS=7 FMBROKER_RUN_RETRY_S=30 &&
    grep -q "job pc2: run-job failed: fmbroker: run-job: --vni-count 7: the job.s VNI count, 0..4$" "$T/hooks.log" &&
    ! grep -q "job pc2: .*retries" "$T/hooks.log" &&
    test "$(api_call GET /v1/jobs/pc2 | cut -d" " -f1)" = 404
'
expect_ok 'every subcommand has --help' '
    for c in jobs job step-clean events run-job; do fmb $c --help | grep -q "^Usage: fmbroker $c" || { echo "$c"; return 1; }; done &&
    fmb --help | grep -q "^Exit status, every command"
'
# PrologSlurmctld passes $SLURM_JOB_USER as it is; sites with sssd's
# fully qualified names or winbind have '@' or a backslash in it.
expect_ok 'a user name as directories give it (user@domain, DOMAIN backslash user) is taken' '
    fmb run-job 145 --uid 1002 --user "jdoe@ad.example.com" --node-count 1 --quiet &&
    rm_call GET /v1/jobs/145 | jq -e ".user == \"jdoe@ad.example.com\"" &&
    fmb run-job 146 --uid 1003 --user "EXAMPLE\\jdoe" --node-count 1 --quiet &&
    rm_call GET /v1/jobs/146 | jq -e ".user == \"EXAMPLE\\\\jdoe\"" &&
    { fmb run-job 147 --uid 1003 --user "a b" --node-count 1 --quiet 2>err; test $? != 0; } &&
    grep -q "user: a name of 1-256 characters" err &&
    fmb end-job 145 >/dev/null && fmb end-job 146 >/dev/null
'
expect_ok 'vni list: a long WAITING FOR cell says how many more nodes there are' '
    fmb run-job 150 --uid 1000 --nodes "node[001-100]" --quiet && fmb end-job 150 >/dev/null &&
    fmb vni list | grep " 150 " >row && cat row &&
    shown=$(sed "s/.* quarantined *all nodes report *//; s/ (.*//" row | tr , "\n" | grep -c node) &&
    more=$(sed -n "s/.*(+\([0-9]*\) more; --json lists all)$/\1/p" row) &&
    test $((shown + more)) = 100 && test "$shown" -gt 10 &&
    fmb --json vni list | jq -e "[.vnis[] | select(.job == \"150\") | .waiting_for | length] == [100]"
'
# curl says "Couldn't connect to server" whatever went wrong with a socket;
# the CLI (and the hooks and the agent, which share its client) say which.
expect_ok 'a socket that takes no connection: the CLI says why (none, stale, or not allowed)' '
    { fmb_at () { "$FMB_BIN/fmbroker" --socket "$1" status; }; } &&
    { fmb_at "$T/nosuch.sock" 2>err; test $? = 2; } &&
    grep -q "Couldn.t connect to server (no such socket: is fmbrokerd running" err &&
    python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$T/stale.sock" &&
    { fmb_at "$T/stale.sock" 2>err; test $? = 2; } && grep -q "(connection refused: .*a stale socket)" err &&
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
        chmod 711 "$T" && mkdir -m 700 "$T/private" &&
        python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$T/private/x.sock" &&
        { as_user 1000 "$FMB_BIN/fmbroker" --socket "$T/private/x.sock" status 2>err; test $? = 2; } &&
        grep -q "(permission denied: this user may not reach the socket or its directory)" err
    fi
'
# fmbrokerd runs with umask 077; a socket directory it makes itself must
# still let every user reach the (0666) socket.
expect_ok 'the socket directory fmbrokerd makes is 0755; one the admin made keeps its mode' '
    stop_broker && mkdir -m 750 "$T/admin" &&
    write_broker_conf && sed -i "s|^socket = .*|socket = $T/made/by/broker.sock|" "$T/broker.conf" &&
    { "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" 2>>"$T/broker.err" & broker_pid=$!; } &&
    wait_for 100 0.05 test -S "$T/made/by/broker.sock" && test "$(file_mode "$T/made/by")" = 755 &&
    stop_broker && sed -i "s|^socket = .*|socket = $T/admin/broker.sock|" "$T/broker.conf" &&
    { "$FMB_BIN/fmbrokerd" -c "$T/broker.conf" 2>>"$T/broker.err" & broker_pid=$!; } &&
    wait_for 100 0.05 test -S "$T/admin/broker.sock" && test "$(file_mode "$T/admin")" = 750 && stop_broker
'
done_testing
