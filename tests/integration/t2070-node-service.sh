#!/bin/bash
# t2070-node-service.sh: issue 36.  The node service (fmbroker-cxi serve)
# and slurmd's Prolog= beside it (fmbroker-slurm-prolog), as a node runs
# them: the node reaches the broker over TLS with its own node token, and
# makes the job's RUN ([api] node_run).  The prolog program is run here
# with the variables slurmd gives it (t4010 runs it under a real slurmd):
# the job's services and records, one broker connection kept from job to
# job, the report delivered, the job's own reason when the broker is
# away, the connection made again after the broker restarts, no service
# for a caller that is not root, and the prolog run by fmbroker-cxi
# itself when no service answers.
. "$(dirname "$0")/lib.sh"
skip_unless_root
tls_and_node_tokens || bail_out "no certificates"
start_mockfm
# (the FM's reservation may take 10 s: the steps that delay it decide
# how long it is held, not the broker's deadline)
reserve_ms=10000 timeout_ms=10000 start_broker_for_nodes n1 -- "agent_run = true" || bail_out "no broker"
sed "/^\[api\]/a node_run = true" "$T/node.conf" >"$T/node-run.conf" || bail_out "no node.conf"
# (debug: the service says what it made, and in how long)
printf "[broker]\nlog_level = debug\n" >>"$T/node-run.conf"
chmod 755 "$T"
sock=$T/n1.rec/service.sock
start_service () {
    FMBROKER_NODE=n1 MOCKCXI_STATE=$T/n1.cxi.json MOCKCXI_DEVICES=2 "$FMB_BIN/fmbroker-cxi" \
        -c "$T/node-run.conf" --state-dir "$T/n1.rec" serve 2>>"$T/serve.log" &
    echo $! >"$T/serve.pid"
    wait_for 200 0.05 test -S "$sock"
}
stop_service () { kill "$(cat "$T/serve.pid")" 2>/dev/null && wait "$(cat "$T/serve.pid")" 2>/dev/null; :; }
on_exit stop_service
# prolog JOB [ENV...]: slurmd's Prolog= for JOB on n1 (a two-node job)
prolog () {
    job=$1
    shift
    env -i PATH="$PATH" SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_ID="$job" SLURMD_NODENAME=n1 \
        SLURM_JOB_UID=65534 SLURM_JOB_USER=nobody SLURM_NODELIST="n[1-2]" \
        FMBROKER_CXI_SERVICE="$sock" FMBROKER_CXI_PROGRAM="$FMB_BIN/fmbroker-cxi" \
        MOCKCXI_STATE="$T/n1.cxi.json" MOCKCXI_DEVICES=2 "$@" "$FMB_BIN/fmbroker-slurm-prolog"
}
# the service's connections to the broker, as local ports
service_conns () {
    ss -tnpH state established "( dport = :$tcp_port )" |
        awk -v p="pid=$(cat "$T/serve.pid")," 'index($0, p) { print $3 }' | sort
}
uid_services () { agent n1 list --json | jq "[.[].services[] | select(.uid == $1)] | length"; }

# to_service answer|hang-up REQUEST: a raw request on the service's
# socket; its answer printed, or none waited for (a caller gone).
to_service () {
    python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[3].encode())
if sys.argv[2] == "answer":
    print(s.recv(256).decode(), end="")
s.close()' "$sock" "$1" "$2"
}
# request OP KEY=VALUE...: the node service's request (nodeproto.h)
request () { printf 'fmbroker-node/1 %s\n' "$1"; shift; printf '%s\n' "$@"; echo; }
# The wait a step's slurmstepd (the SPANK plugin) and the epilog make
# for the job's setup handed to the service: answered once it is made.
setup_wait () { to_service answer "$(request wait "job=$1")"$'\n\n'; }
expect_ok 'the service starts, its socket open to all (each caller'"'"'s uid is checked)' '
    start_service && test "$(stat -c "%a %u" "$sock")" = "666 0"
'
one_conn () { test "$(service_conns | wc -l)" = 1; }
# check CMD...: CMD, and on failure which one failed (in a step's output)
check () { "$@" || { echo "failed: $*"; return 1; }; }
expect_ok 'the service opens its broker connection ahead of any job (within 3 s of its start), and keeps it' '
    wait_for 60 0.1 one_conn && c=$(service_conns) &&
    sleep 1.5 && test "$(service_conns)" = "$c"
'
expect_ok 'a job'"'"'s prolog handed to the service: RUN, services on both NICs, records, the report' '
    prolog 1 2>"$T/p1.err" && test "$(setup_wait 1)" = "0	" &&
    test ! -s "$T/p1.err" && test "$(uid_services 65534)" = 2 &&
    grep -q SLINGSHOT_VNIS "$T/n1.rec/1.env" &&
    wait_for 100 0.1 sh -c "curl -s --unix-socket $T/api.sock http://x/v1/jobs/1 |
        jq -e \"any(.node_reports[]; .node == \\\"n1\\\" and .cxi == \\\"created\\\")\""
'
expect_ok 'the next jobs use the same TLS connection to the broker' '
    first=$(service_conns) && test "$(echo "$first" | wc -l)" = 1 && test -n "$first" &&
    prolog 2 && test "$(setup_wait 2)" = "0	" && prolog 3 && test "$(setup_wait 3)" = "0	" &&
    test "$(service_conns)" = "$first" &&
    test "$(uid_services 65534)" = 6
'
# A step's end as the SPANK plugin in node 0's slurmstepd sends it.
step_end () { to_service answer "$(request step-end "job=$1" "step=$2")"$'\n\n'; }
mcast () { # JOB STEP: a tree, made the way libfabric does
    run=$(rm_call GET "/v1/jobs/$1") &&
    curl -s -o /dev/null -w "%{http_code}" -H "Content-Type: application/json" \
        -H "Authorization: Bearer $(echo "$run" | jq -r .hwcoll.session_token)" \
        --data "{\"macs\":[\"0:00:01\",\"0:00:02\"],\"vni\":$(echo "$run" | jq .vnis[0]),\"timeout\":20000000,\"jobID\":\"c1-$1\",\"jobStepID\":\"$2\"}" \
        "$(echo "$run" | jq -r .env.FI_CXI_COLL_FABRIC_MGR_URL)"
}
trees_of_step () { curl -sf "$fm_url/_mock/state" | jq --arg s "$1" "[.trees[] | select(.jobStepID == \$s)] | length"; }
no_trees_of_step () { test "$(trees_of_step "$1")" = 0; }
expect_ok 'a step'"'"'s end through the service: answered at once, that step'"'"'s trees deleted after' '
    test "$(mcast 1 0)" = 200 && test "$(mcast 1 1)" = 200 && test "$(trees_of_step 0)" = 1 &&
    test "$(step_end 1 0)" = "0	" &&
    wait_for 100 0.1 no_trees_of_step 0 && test "$(trees_of_step 1)" = 1 &&
    test "$(service_conns)" = "$first"
'
expect_ok 'a step'"'"'s end that names no valid job is refused' '
    step_end ../1 0 | grep -q "^2	" && grep -q "a step.s end without a valid job and step" "$T/serve.log"
'
expect_ok 'a caller that is not root gets no prolog, end or step end of any job' '
    n=$(uid_services 65534) &&
    { as_user 65534 env SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_ID=9 SLURMD_NODENAME=n1 \
        SLURM_JOB_UID=65534 SLURM_NODELIST=n1 FMBROKER_CXI_SERVICE="$sock" \
        FMBROKER_CXI_PROGRAM=/bin/false "$FMB_BIN/fmbroker-slurm-prolog" 2>/dev/null || :; } &&
    test "$(uid_services 65534)" = "$n" && test ! -e "$T/n1.rec/9.json" &&
    grep -q "a request (setup) from uid 65534 (pid [0-9]*) refused: root'"'"'s only" "$T/serve.log" &&
    as_user 65534 /usr/bin/python3 -c "import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall((sys.argv[2] + chr(10) * 2).encode()); print(s.recv(256).decode(), end=\"\")" "$sock" "$(request end job=1)" |
        grep -qx "2	root.s only" && test "$(uid_services 65534)" = "$n"
'
expect_ok 'the broker away: the prolog exits 0 and the job'"'"'s record says the job'"'"'s own reason' '
    stop_broker &&
    prolog 4 && test "$(setup_wait 4)" = "0	" &&
    jq -e ".services == 0 and (.reason | test(\"job 4: the broker did not RUN the job\"))" \
        "$T/n1.rec/4.env" >/dev/null &&
    test "$(uid_services 65534)" = 6
'
expect_ok 'the broker back: the service connects again, the next job gets its services' '
    check start_broker && check prolog 5 && check test "$(setup_wait 5)" = "0	" &&
    { check test "$(uid_services 65534)" = 8 || { cat "$T/n1.rec/5.env"; false; }; } &&
    { check wait_for 100 0.1 one_conn || { service_conns; false; }; }
'
# The launch setup has no Prolog=: the SPANK plugin in a job's first
# slurmstepd on the node hands the service the job's setup (the
# variables slurmd would give a prolog, and FMB_SETUP) and waits.
step_setup () {
    to_service answer "$(request setup "job=$1" node=n1 uid=65534 user=nobody "nodes=n[1-2]" vni_count=2)"$'\n\n'
}
expect_ok 'a step'"'"'s setup where no Prolog= runs: answered once the job'"'"'s services and records are made; a second step'"'"'s makes nothing' '
    # the FM slow to answer the RUN'"'"'s reservation: the answer waits for it
    mockfm_ctl POST /_mock/faults "POST /fabric/collectives/jobs delay=1500 x1" && t0=$(ms_now) &&
    test "$(step_setup 7)" = "0	" && test $(($(ms_now) - t0)) -ge 1500 &&
    jq -e ".env.SLINGSHOT_VNIS | test(\"^[0-9]+,[0-9]+$\")" "$T/n1.rec/7.env" >/dev/null &&
    test "$(uid_services 65534)" = 10 &&
    test "$(job_field 7 ".vnis | length")" = 2 && test "$(job_field 7 .uid)" = 65534 &&
    made=$(stat -c %i "$T/n1.rec/7.env") &&
    test "$(step_setup 7)" = "0	" && test "$(uid_services 65534)" = 10 &&
    test "$(stat -c %i "$T/n1.rec/7.env")" = "$made"
'
expect_ok 'a step'"'"'s setup that names no valid job is refused with why, and makes nothing' '
    step_setup ../7 | grep -qx "2	not a job id" && test "$(uid_services 65534)" = 10 &&
    grep -q "a request (setup) without a valid job id: refused" "$T/serve.log"
'
# trickle: a request sent a byte every 0.3 s (it would take 10 s in all)
trickle () {
    python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
try:
    for b in sys.argv[2].encode():
        s.send(bytes([b])); time.sleep(0.3)
except OSError:
    pass
print(s.recv(256).decode(), end="")' "$sock" "$(printf "fmbroker-node/1 wait\njob=7\n\n")"
}
expect_ok '... and one naming no valid node, or sent too slowly to hold a worker, is refused with why' '
    to_service answer "$(request setup job=7 node=../n1 uid=65534)"$'"'"'\n\n'"'"' | grep -qx "2	not a node name" &&
    t0=$(ms_now) && trickle | grep -q "^2	a request ended early, is too long or too slow" &&
    test $(($(ms_now) - t0)) -lt 5000 && test "$(uid_services 65534)" = 10
'
# slurmd's Epilog= beside the service: fmbroker-slurm-prolog hands it
# the job's epilog and exits with its status; FALLBACK, the program run
# when the service does not do it, notes that it ran.
service_epilog () { # JOB FALLBACK
    env -i PATH="$PATH" SLURM_SCRIPT_CONTEXT=epilog_slurmd SLURM_JOB_ID="$1" SLURMD_NODENAME=n1 \
        SLURM_JOB_UID=65534 SLURM_JOB_USER=nobody SLURM_NODELIST="n[1-2]" \
        FMBROKER_CXI_SERVICE="$sock" FMBROKER_CXI_PROGRAM="$2" "$FMB_BIN/fmbroker-slurm-prolog"
}
# (and whether the job's facts were still there for it)
printf '#!/bin/sh\ntouch %s/fallback.$SLURM_JOB_ID\ntest -e %s/$SLURM_JOB_ID.json && touch %s/facts.$SLURM_JOB_ID\nFMBROKER_NODE=n1 MOCKCXI_STATE=%s MOCKCXI_DEVICES=2 exec %s -c %s --state-dir %s\n' \
    "$T" "$T/n1.rec" "$T" "$T/n1.cxi.json" "$FMB_BIN/fmbroker-cxi" "$T/node-run.conf" "$T/n1.rec" >"$T/epilog-fallback.sh" &&
    chmod 755 "$T/epilog-fallback.sh"
# A caller that connects and sends nothing: the service waits 2 s for
# it, and those who come meanwhile are served one after the other.
# (Each caller notes when it is connected: python starts slowly here.)
hold_service () {
    rm -f "$T/hold.connected"
    python3 -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
open(sys.argv[2], "w").close()
time.sleep(3)' "$sock" "$T/hold.connected" &
    wait_for 50 0.1 test -e "$T/hold.connected"
}
# step_end_then_end JOB STEP: a step's end, then the job's end (slurmd's
# epilog) as soon as the first is answered, each answer on a line: a
# step's end is deferred for at most a second, so the two are sent from
# one process, not from two the host may start seconds apart
step_end_then_end () {
    python3 -c 'import socket, sys
def ask(text):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(text.encode())
    out = b""
    while True:
        got = s.recv(256)
        if not got:
            break
        out += got
    s.close()
    print(out.decode().rstrip("\n"))
ask("fmbroker-node/1 step-end\njob=%s\nstep=%s\n\n" % (sys.argv[2], sys.argv[3]))
ask("fmbroker-node/1 end\njob=%s\nnode=n1\n\n" % sys.argv[2])' "$sock" "$1" "$2"
}
n1_report () { job_field "$1" '[.node_reports[] | select(.node == "n1") | .cxi] | join(",")'; }
job_services () { # JOB: n1's services holding the job's first VNI
    v=$(job_field "$1" ".vnis[0]") &&
        jq "[.devices[].services[] | select(.vnis | index($v))] | length" "$T/n1.cxi.json"
}
expect_ok 'a job'"'"'s epilog handed to the service: its services destroyed before the answer, the node'"'"'s report at the broker, its step ends still waiting dropped' '
    # the step end and the epilog in line together: no idle gap between
    # them in which the service would call the broker for the step
    test "$(job_services 7)" = 2 && hold_service &&
    step_end_then_end 7 1 >"$T/se7.out" && cat "$T/se7.out" &&
    test "$(cat "$T/se7.out")" = "0	
0	done" &&
    test "$(job_services 7)" = 0 &&
    test ! -e "$T/n1.rec/7.env" && test ! -e "$T/n1.rec/7.json" &&
    grep -q "job 7: epilog made in [0-9]* ms (exit 0)" "$T/serve.log" &&
    grep -q "job 7: 1 step end(s) dropped: the job.s end deletes its trees" "$T/serve.log" &&
    test "$(n1_report 7)" = destroyed && ! grep -q "DELETE /v1/jobs/7/steps/1" "$T/serve.log"
'
expect_ok '... and services still in use: the service reports nothing and says so; fmbroker-cxi waits for them and destroys them' '
    test "$(job_services 5)" = 2 && v=$(job_field 5 ".vnis[0]") &&
    cxi_set n1 "(.devices[].services[] | select(.vnis | index($v)) | .busy) = 2" &&
    service_epilog 5 "$T/epilog-fallback.sh" && test -e "$T/fallback.5" && test -e "$T/facts.5" &&
    grep -q "job 5: 2 CXI service(s) still in use: left to fmbroker-cxi.s epilog, which waits for them" "$T/serve.log" &&
    grep -q "job 5: epilog made in [0-9]* ms (exit 75)" "$T/serve.log" &&
    test "$(job_services 5)" = 0 && test "$(n1_report 5)" = destroyed &&
    ! rm_call GET "/v1/events?after=0" | jq -e "any(.events[]; .type == \"node_drain_requested\")" >/dev/null
'
# Issue 50: the service serves each job on a thread of its own.
setup_ms () { # JOB OUT: a step's setup of JOB, its answer and ms in OUT
    t=$(ms_now) && a=$(step_setup "$1") && echo "$a $(($(ms_now) - t))" >"$2"
}
expect_ok 'a slow FM reservation for one job: another job'"'"'s setup on the node completes meanwhile, in its own time' '
    mockfm_ctl POST /_mock/faults "POST /fabric/collectives/jobs delay=4000 x1" &&
    { setup_ms 41 "$T/s41.out" & } && wait_for 200 0.05 fm_holds 1 &&
    setup_ms 42 "$T/s42.out" && read -r st42 ms42 <"$T/s42.out" &&
    test "$st42" = 0 && test ! -s "$T/s41.out" &&
    echo "job 42 answered in $ms42 ms while job 41 waits for the FM" &&
    test "$(job_services 42)" = 2 &&
    wait_for 100 0.1 test -s "$T/s41.out" && read -r st41 ms41 <"$T/s41.out" &&
    echo "job 41 answered in $ms41 ms" && test "$st41" = 0 && test "$ms41" -ge 1500 &&
    test "$(job_services 41)" = 2 &&
    service_epilog 41 "$T/epilog-fallback.sh" && service_epilog 42 "$T/epilog-fallback.sh" &&
    test "$(job_services 41)" = 0 && test "$(job_services 42)" = 0
'
# A Flux user's burst of jobs on one node: the job shell asks for each
# job's setup as the user; over the user's share they wait, not fail.
user_setups () { # JOB...: as nobody, all at once; "JOB STATUS" lines in $T/us.out
    as_user 65534 /usr/bin/python3 -c "import socket, sys, threading
out = []
def one(job):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
    s.sendall(('fmbroker-node/1 setup\\njob=%s\\nnode=n1\\n\\n' % job).encode())
    out.append('%s %s' % (job, s.recv(512).decode().split(chr(9))[0]))
ts = [threading.Thread(target=one, args=(j,)) for j in sys.argv[2:]]
[t.start() for t in ts]; [t.join() for t in ts]
print(chr(10).join(sorted(out)))" "$sock" "$@" >"$T/us.out"
}
expect_ok 'a user'"'"'s eight job setups at once (its share is four): all made, the rest waiting their turn' '
    for j in 51 52 53 54 55 56 57 58; do
        rm_call PUT /v1/jobs/$j "{\"uid\":65534,\"nodes\":[\"n1\"],\"hwcoll\":\"off\"}" >/dev/null || return 1
    done &&
    user_setups 51 52 53 54 55 56 57 58 && cat "$T/us.out" &&
    test "$(grep -c " 0$" "$T/us.out")" = 8 &&
    for j in 51 52 53 54 55 56 57 58; do
        test "$(job_services $j)" = 2 && service_epilog $j "$T/epilog-fallback.sh" &&
        test "$(job_services $j)" = 0 || return 1
    done
'
expect_ok 'the broker stalled past a node'"'"'s timeout at a job'"'"'s setup: the node tries again, and the job gets its services' '
    kill -STOP "$broker_pid" && { sleep 6; kill -CONT "$broker_pid"; } &
    waker=$! && step_setup 12 >"$T/s12.out"; wait "$waker" &&
    test "$(cat "$T/s12.out")" = "0	" && test "$(job_services 12)" = 2 &&
    grep -q "PUT /v1/jobs/12: .*trying again (2 of 3)" "$T/serve.log" &&
    service_epilog 12 "$T/epilog-fallback.sh" && test "$(job_services 12)" = 0
'
n1_destroyed () { test "$(n1_report "$1")" = destroyed; }
vni_services () { jq "[.devices[].services[] | select(.vnis | index($1))] | length" "$T/n1.cxi.json"; }
expect_ok 'the broker away at a job'"'"'s epilog: the node'"'"'s report is kept, and delivered within seconds of the broker'"'"'s return by the service itself (no timer)' '
    test "$(step_setup 11)" = "0	" && test "$(job_services 11)" = 2 && v=$(job_field 11 ".vnis[0]") &&
    stop_broker && service_epilog 11 "$T/epilog-fallback.sh" && test "$(vni_services "$v")" = 0 &&
    ls "$T/n1.rec/reports" | grep -q . &&
    start_broker && t0=$(ms_now) && wait_for 100 0.1 n1_destroyed 11 &&
    echo "delivered $(($(ms_now) - t0)) ms after the broker was back" &&
    ! ls "$T/n1.rec/reports" | grep -q .
'
# A service that answers an epilog "0" and makes nothing (one older than
# the epilog's hand-over, not yet restarted after an upgrade).
old_service () {
    python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1]); s.listen(1); s.settimeout(20)
c, _ = s.accept(); c.recv(16384); c.sendall(b"0\t\n"); c.close()' "$T/old.sock" &
    wait_for 100 0.1 test -S "$T/old.sock"
}
expect_ok '... and a service that does not make epilogs, or none and no fmbroker-cxi: the epilog is fmbroker-cxi itself, or it fails (drain)' '
    test "$(job_services 3)" = 2 && old_service &&
    env -i PATH="$PATH" SLURM_SCRIPT_CONTEXT=epilog_slurmd SLURM_JOB_ID=3 SLURMD_NODENAME=n1 \
        SLURM_JOB_UID=65534 FMBROKER_CXI_SERVICE="$T/old.sock" \
        FMBROKER_CXI_PROGRAM="$T/epilog-fallback.sh" "$FMB_BIN/fmbroker-slurm-prolog" &&
    test -e "$T/fallback.3" && test "$(job_services 3)" = 0 &&
    { env -i SLURM_SCRIPT_CONTEXT=epilog_slurmd SLURM_JOB_ID=3 FMBROKER_CXI_SERVICE="$T/none.sock" \
        FMBROKER_CXI_PROGRAM="$T/no-such-program" "$FMB_BIN/fmbroker-slurm-prolog"; test $? = 1; }
'
# The NIC refuses to destroy the job's services (EIO, on both NICs).
fail_destroys () { cxi_set n1 '.fail.cxil_destroy_svc = {"errno": 5, "count": 2}'; }
expect_ok '... and services it cannot destroy: the epilog exits 1 (slurmd drains the node) with nothing run in its place, the failure at the broker' '
    test "$(job_services 2)" = 2 &&
    fail_destroys && { service_epilog 2 "$T/epilog-fallback.sh"; test $? = 1; } && test ! -e "$T/fallback.2" &&
    test "$(job_services 2)" = 2 && grep -q "job 2: epilog made in [0-9]* ms (exit 1)" "$T/serve.log" &&
    test "$(n1_report 2)" = failed &&
    rm_call GET "/v1/events?after=0" | jq -e "any(.events[]; .type == \"node_drain_requested\" and .job == \"2\")" >/dev/null
'
# The same just after the job's setup, its 'created' report still kept
# for the background: the broker must hear it before the failure, which
# it would otherwise take for the setup's own (told to the user, no
# drain asked for).  The report is kept for at most a second when the
# broker is there, so no check from here could see it kept in time: the
# epilog comes while the setup is held inside libcxi (mockcxi's hold),
# as slurmd's does for a job cancelled during its start, and waits for
# the job's turn.
# hold_alloc JOB: the next service made on n1 waits for $T/release.JOB
hold_alloc () { cxi_set n1 ".hold.cxil_alloc_svc = \"$T/release.$1\""; }
kept () { grep -q "$2" "$T/n1.rec/reports/$1@n1.json"; } # JOB TEXT
n1_failed () { test "$(n1_report "$1")" = failed; }
drained () { rm_call GET "/v1/events?after=0" | jq -e "any(.events[]; .type == \"node_drain_requested\" and .job == \"$1\")" >/dev/null; }
expect_ok '... and services it cannot destroy just after they were made: the broker hears them made first, and the failure is taken as the end failing (a drain)' '
    check fail_destroys && check hold_alloc 27 && check prolog 27 &&
        check wait_for 300 0.1 test -e "$T/release.27.held" || return 1
    { service_epilog 27 "$T/epilog-fallback.sh"; echo $? >"$T/e27.rc"; } &
    check wait_for 300 0.1 grep -q "job 27: a request (end) waits for the job.s turn" "$T/serve.log"
    waited=$?
    touch "$T/release.27" && test "$waited" = 0 && check wait_for 300 0.1 test -s "$T/e27.rc" &&
    check test "$(cat "$T/e27.rc")" = 1 && check test "$(job_services 27)" = 2 &&
    check wait_for 100 0.1 n1_failed 27 && check drained 27 &&
    check service_epilog 27 "$T/epilog-fallback.sh" && check test "$(job_services 27)" = 0
'
# The broker killed while the setup is held inside libcxi: the job has
# its RUN, and its 'created' report cannot be delivered.
expect_ok '... and with the broker away at that end too: the failure is kept behind the created, and both reach the broker in order once it is back (a drain)' '
    check fail_destroys && check hold_alloc 28 && check prolog 28 &&
    check wait_for 300 0.1 test -e "$T/release.28.held" && kill_broker
    held=$?
    touch "$T/release.28" && test "$held" = 0 && check test "$(setup_wait 28)" = "0	" &&
    check kept 28 "\"cxi\":\"created\"" &&
    { service_epilog 28 "$T/epilog-fallback.sh"; check test $? = 1; } &&
    check kept 28 "\"cxi\":\"failed\"" && check kept 28 "\"after_created\":true" &&
    check start_broker && check wait_for 300 0.1 n1_failed 28 && check drained 28 &&
    check service_epilog 28 "$T/epilog-fallback.sh" && check test "$(job_services 28)" = 0 ||
        { [ -n "$broker_pid" ] || start_broker; false; } # (the next steps have their broker)
'
bad_epilog () { to_service answer "$(request end job=../5)"$'\n\n'; }
expect_ok '... and an epilog that names no valid job is refused with why' '
    bad_epilog | grep -qx "2	not a job id" && grep -q "a request (end) without a valid job id: refused" "$T/serve.log"
'
# A caller that gives up before its turn (slurmd killed its prolog).
gone_caller () {
    to_service hang-up "$(request setup "job=$1" node=n1 uid=65534 nodes=n1)"$'\n\n'
}
# slurmd's Epilog= for JOB on n1: fmbroker-cxi, here with a broker that
# refuses at once (its report is kept for later)
epilog () {
    env -i PATH="$PATH" SLURM_SCRIPT_CONTEXT=epilog_slurmd SLURM_JOB_ID="$1" SLURMD_NODENAME=n1 \
        SLURM_JOB_UID=65534 SLURM_JOB_USER=nobody SLURM_NODELIST=n1 FMBROKER_NODE=n1 \
        MOCKCXI_STATE="$T/n1.cxi.json" MOCKCXI_DEVICES=2 \
        "$FMB_BIN/fmbroker-cxi" -c "$T/refused.conf" --state-dir "$T/n1.rec"
}
# (each check of the step below says which failed)
stop21_checks () {
    check test $((t21 - t0)) -lt 3000 && check test "$erc" = 0 && check test $((eend - t0)) -ge 4000 &&
        check test ! -e "$T/n1.rec/21.env" && check grep -q "job 21: .*timed out" "$T/serve.log" &&
        check jq -e ".services == 0 and (.reason | test(\"job 23: .*timed out\"))" "$T/n1.rec/23.env" &&
        check test "$(grep -c "job 21: prolog made in" "$T/serve.log")" = 1 &&
        check grep -q "job 21: its setup.s caller stopped waiting before its turn" "$T/serve.log" &&
        check test ! -e "$T/fallback.21" && check test ! -e "$T/fallback.23" && check test ! -e "$sock" &&
        check test $((t1 - t0)) -lt 30000
}
expect_ok 'a broker that does not answer: the prolog handed over at once, the epilog waits for its setup; a stop with callers in line: each made with its reason, none twice' '
    silent=$(free_ports 1) && refused=$(free_ports 1) || return 1
    # accepts connections (the kernel does) and never says a word
    python3 -c "import socket, time
s = socket.socket(); s.bind((\"127.0.0.1\", $silent)); s.listen(8); time.sleep(30)" &
    echo $! >"$T/silent.pid"
    wait_for 50 0.1 sh -c "ss -ltnH \"( sport = :$silent )\" | grep -q ." &&
    sed "s|^broker_url = .*|broker_url = https://127.0.0.1:$silent|" "$T/node-run.conf" >"$T/silent.conf" &&
    sed "s|^broker_url = .*|broker_url = https://127.0.0.1:$refused|" "$T/node-run.conf" >"$T/refused.conf" &&
    cp "$T/node-run.conf" "$T/node-run.conf.good" && cp "$T/silent.conf" "$T/node-run.conf" || return 1
    # the service reads its configuration once, and again on SIGHUP
    kill -HUP "$(cat "$T/serve.pid")" &&
        wait_for 50 0.1 grep -q "SIGHUP: the configuration is reloaded" "$T/serve.log" ||
        { cp "$T/node-run.conf.good" "$T/node-run.conf"; return 1; }
    printf "#!/bin/sh\ntouch %s/fallback.\$SLURM_JOB_ID\n" "$T" >"$T/marker.sh" && chmod 755 "$T/marker.sh"
    # a record an earlier run of job 21 left (requeued): gone once the
    # service takes the job, before its setup, so no step reads it
    echo '"'"'{"version":1,"job":"21","uid":65534,"services":1,"env":{},"reason":""}'"'"' >"$T/n1.rec/21.env" &&
    t0=$(ms_now) &&
    prolog 21 env FMBROKER_CXI_PROGRAM="$T/marker.sh" && t21=$(ms_now) &&
    test ! -e "$T/n1.rec/21.env" || return 1
    # job 21 cancelled at once: slurmd runs its epilog while the service
    # still waits for the broker on its behalf
    { epilog 21 2>"$T/epilog21.err"; echo "$? $(ms_now)" >"$T/epilog21.end"; } &
    # a second setup of job 21 whose caller gives up while the first is
    # made (the service serves other jobs at once: only a job'"'"'s own
    # turn makes a caller wait)
    sleep 0.5 && gone_caller 21 &&
    prolog 23 env FMBROKER_CXI_PROGRAM="$T/marker.sh" &
    p23=$!
    sleep 0.5 && kill -TERM "$(cat "$T/serve.pid")" &&
    # a step of job 23 arriving while the service stops: its wait is
    # answered in its turn, once 23 is made
    # (once its prolog was handed over: a wait that came first would find
    # nothing of job 23 in the making, as a step cannot before slurmd'"'"'s
    # prolog returned)
    sleep 0.3 && wait "$p23" && w23=$(setup_wait 23) && echo "the wait for 23 answered [$w23]" &&
    test "$w23" = "0	" && test -e "$T/n1.rec/23.env" && t1=$(ms_now) &&
    wait_for 200 0.1 sh -c "! kill -0 $(cat "$T/serve.pid") 2>/dev/null" &&
    wait_for 300 0.1 test -s "$T/epilog21.end" &&
    read -r erc eend <"$T/epilog21.end" &&
    echo "prolog 21 handed over in $((t21 - t0)) ms; its epilog exit $erc after $((eend - t0)) ms; job 23 answered after $((t1 - t0)) ms" &&
    stop21_checks || { tail -n 40 "$T/serve.log"; cat "$T/epilog21.err"; false; }
    rc=$? # (the next steps have the broker'"'"'s address back, failed or not)
    cp "$T/node-run.conf.good" "$T/node-run.conf" && kill "$(cat "$T/silent.pid")" 2>/dev/null
    return $rc
'
# The stand-in for a node's own configuration and records (one host
# plays n1 here): fmbroker-cxi reads /etc/fmbroker/fmbroker.conf on a node.
printf '#!/bin/sh\nFMBROKER_NODE=n1 exec %s -c %s --state-dir %s "$@"\n' \
    "$FMB_BIN/fmbroker-cxi" "$T/node-run.conf" "$T/n1.rec" >"$T/agent.sh" && chmod 755 "$T/agent.sh"
expect_ok 'no service answering: the prolog is fmbroker-cxi itself, and still makes the job'"'"'s services' '
    stop_service && test ! -e "$sock" &&
    prolog 6 env FMBROKER_CXI_PROGRAM="$T/agent.sh" &&
    test "$(uid_services 65534)" = 6 && grep -q SLINGSHOT_VNIS "$T/n1.rec/6.env"
'
expect_ok 'installed elsewhere than it was built for (a package in /usr, a build for /usr/local): with no service, the fmbroker-cxi beside it runs' '
    mkdir -p "$T/pkg/sbin" && cp "$FMB_BIN/fmbroker-slurm-prolog" "$T/pkg/sbin/" &&
    printf "#!/bin/sh\ntouch %s/beside.\$SLURM_JOB_ID\n" "$T" >"$T/pkg/sbin/fmbroker-cxi" &&
    chmod 755 "$T/pkg/sbin/fmbroker-cxi" &&
    env -i PATH="$PATH" SLURM_SCRIPT_CONTEXT=prolog_slurmd SLURM_JOB_ID=31 SLURMD_NODENAME=n1 \
        SLURM_JOB_UID=65534 SLURM_JOB_USER=nobody SLURM_NODELIST="n[1-2]" \
        FMBROKER_CXI_SERVICE="$T/no-service.sock" "$T/pkg/sbin/fmbroker-slurm-prolog" &&
    test -e "$T/beside.31"
'
expect_ok 'fmbroker-cxi.service passes systemd-analyze verify, and runs the service as slurmd'"'"'s hooks read' '
    if ! command -v systemd-analyze >/dev/null; then echo "skipped: no systemd-analyze"; return 0; fi
    sed "s|^ExecStart=/usr/sbin/fmbroker-cxi|ExecStart=$FMB_BIN/fmbroker-cxi|" \
        "$FMB_SRC/deploy/fmbroker-cxi.service" >"$T/fmbroker-cxi.service" &&
    systemd-analyze verify --man=no "$T/fmbroker-cxi.service" 2>"$T/verify.err" &&
    { ! test -s "$T/verify.err" || { cat "$T/verify.err"; false; }; } &&
    grep -qx "ExecStart=/usr/sbin/fmbroker-cxi serve" "$FMB_SRC/deploy/fmbroker-cxi.service"
'
done_testing
