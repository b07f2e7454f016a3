#!/bin/bash
# t4010-slurm.sh: a real Slurm (Debian's slurmctld, slurmd, munge on
# 127.0.0.1, two emulated nodes) run the way a cluster runs fmbroker:
# the controller hooks call the broker over its socket; on the "compute
# nodes" slurmd runs fmbroker-cxi itself as Prolog= and Epilog= (in the
# launch setup, the prolog is fmbroker-slurm-prolog handing the job to
# each node's service, fmbroker-cxi serve), which reaches the broker over
# TCP+TLS, each node with its own node token only, and the steps load the
# SPANK plugin; jobs are submitted by an unprivileged user (nobody).
#
# Tasks see exactly their node's record plus the step id; a step starts
# without the broker; each step's multicast trees are released when that
# step ends (through fmbroker_spank_clean.so) while a running step's
# stay; --fmb-* options reach RUN and bad ones are refused at submission;
# with the broker down a job fails with the reason (fail_closed) or runs
# (fail_open); node_drain_requested drains the node; reservation_lost
# cancels the job or tells its srun.  Needs root.
. "$(dirname "$0")/lib.sh"
if [ "$(id -u)" != 0 ] || ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null ||
    [ ! -f "$FMB_BIN/../lib/fmbroker_spank.so" ]; then
    echo "ok 1 # SKIP needs root, slurmctld, slurmd, munge and the SPANK plugin (libslurm-dev)"
    echo "1..1"
    exit 0
fi
chmod 755 "$T"
D="$T/out" # the job user's files
mkdir -p "$D" && chown nobody "$D"
events_pid=
jobs_down () { # before Slurm stops: no job left running, no consumer
    [ -n "$events_pid" ] && kill -- "-$events_pid" 2>/dev/null
    touch "$D/stop" && scancel -u nobody 2>/dev/null && wait_for 50 0.1 sh -c "! squeue -h | grep -q ."
    return 0
}
on_exit jobs_down
. "$(dirname "$0")/slurm.sh"
step_fail_hook=slurm_diag

# The broker: socket for the controller's hooks, TLS + tokens for nodes.
tls_and_node_tokens || bail_out "no certificates or token"
start_mockfm
# each compute node its own token ($T/n1.token, $T/n2.token), and a
# node's configuration without the socket: the broker's URL and token
# (the FM's reservation may take 10 s: the steps that delay it decide
# how long it is held, not the broker's deadline)
reserve_ms=10000 timeout_ms=10000 start_broker_for_nodes n1 n2 -- "agent_run = true" || bail_out "no broker for the nodes"

# (replaced, never rewritten in place: a node that read it half-written
# ran a job's epilog with no plugin, and that job's CXI services stayed)
plugstack () { # EXTRA ARGS: the plugin line (re-read at every launch)
    echo "required $FMB_BIN/../lib/fmbroker_spank.so config=$T/node.conf state_dir=$T/rec-%n" \
        "step_timeout=2 tcs=LOW_LATENCY,BULK_DATA,BEST_EFFORT $*" >"$S/plugstack.conf.new" &&
        mv -f "$S/plugstack.conf.new" "$S/plugstack.conf"
}
as_nobody () { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
# The node prolog and epilog: fmbroker-cxi run by slurmd (the hooks below
# only give each emulated node its own NICs and records).
node_hooks () { printf "Prolog=%s\nEpilog=%s\n" "$S/hooks/prolog.sh" "$S/hooks/epilog.sh"; }
# The controller's RUN (PrologSlurmctld, PrologFlags=Alloc), as most of
# this test runs; the launch setup (the nodes RUN) is tried near the end.
ctld_setup () {
    { printf "PrologSlurmctld=%s\nEpilogSlurmctld=%s\nPrologFlags=Alloc\n" \
        "$S/hooks/prolog_slurmctld.sh" "$S/hooks/epilog_slurmctld.sh" && node_hooks; } >"$S/setup.conf"
}

expect_ok 'munge and Slurm come up with the plugin and the controller hooks' '
    mkdir -p "$S/hooks" &&
    for h in prolog_slurmctld epilog_slurmctld; do
        # EpilogSlurmctld is fmbroker-slurm-cleanup, as doc/slurm.md has
        # it; what it hands over, the script from the source tree
        prog=$FMB_SRC/deploy/slurm/$h.sh
        [ $h = epilog_slurmctld ] && prog=$FMB_BIN/fmbroker-slurm-cleanup
        cat >"$S/hooks/$h.sh" <<HOOK
#!/bin/sh
# the controller, on the broker host: the socket
export FMBROKER_CONF=$T/broker.conf FMBROKER_BINDIR=$FMB_BIN FMBROKER_HOOK_LOG=$S/log/hooks.log
export FMBROKER_SHAREDIR=$FMB_SRC/deploy
# (short waits for a broker that does not answer: one is stopped on purpose)
export FMBROKER_RUN_RETRY_S=3 FMBROKER_CLEANUP_RETRY_S=6
exec $prog
HOOK
    done &&
    for h in prolog epilog; do
        cat >"$S/hooks/$h.sh" <<HOOK
#!/bin/sh
# A compute node: slurmd runs fmbroker-cxi (TLS and a token per node).
# The stand-in: one host plays two nodes, so each gets its own mock NICs
# and records here, where a real node has its NICs and /run/fmbroker-cxi.
export MOCKCXI_STATE=$T/\$SLURMD_NODENAME.cxi.json MOCKCXI_DEVICES=2
exec $FMB_BIN/fmbroker-cxi -c $T/node.conf --state-dir $T/rec-\$SLURMD_NODENAME
HOOK
    done &&
    chmod 755 "$S"/hooks/*.sh && plugstack && ctld_setup &&
    slurm_up "Include $S/setup.conf"
' || bail_out "Slurm did not come up; later steps would only wait"
all_idle () { slurm_all_idle; }
job_gone () { ! squeue -h -j "$1" 2>/dev/null | grep -q .; }
# the mock FM holds no reservation; what is left when it does (the FM, the
# broker's view of those jobs and its outbox, its log)
fm_holds_nothing () { test -z "$(curl -sf "$fm_url/_mock/state" | jq -r ".jobs | keys[]")"; }
fm_leftovers () {
    echo "--- at the FM: $(curl -sf "$fm_url/_mock/state" | jq -c ".jobs | keys")"
    rm_call GET /v1/status | jq -c "{fabric_manager, outbox}"
    rm_call GET "/v1/jobs?limit=1000" | jq -c ".jobs[] | {id, state, hwcoll: .hwcoll.state}"
    tail -n 30 "$T/broker.err"
}
# only the default service (id 1) on every device of both nodes: the job
# services are gone (the node epilogs destroy them)
no_job_services () {
    for n in n1 n2; do for d in 0 1; do
        jq -se ".[0].devices[$d].services | all(.[]; .id < 2)" "$T/$n.cxi.json" >/dev/null || return 1
    done; done
}
services_left () {
    for n in n1 n2; do echo "--- $n: $(jq -sc "[.[0].devices[] | [.services[].id]]" "$T/$n.cxi.json")"; done
}

expect_ok 'srun, sbatch and salloc list the plugin'"'"'s options' '
    for c in srun sbatch salloc; do
        $c --help >help 2>&1; grep -q -- "--fmb-hwcoll=on|off|auto" help && grep -q -- "--fmb-vnis=N" help &&
        grep -q -- "--fmb-tcs=LIST" help || return 1
    done
'
# Each task writes its SLINGSHOT_*/FI_CXI_* variables and its node's record.
cat >"$D/showenv.sh" <<'EOF'
#!/bin/sh
env | grep -E '^(SLINGSHOT|FI_CXI)_' | sort >"$1/env.$SLURMD_NODENAME"
jq -r '.env | to_entries[] | "\(.key)=\(.value)"' "$2-$SLURMD_NODENAME/$SLURM_JOB_ID.env" >"$1/rec.$SLURMD_NODENAME"
echo "FI_CXI_COLL_JOB_STEP_ID=$SLURM_STEP_ID" >>"$1/rec.$SLURMD_NODENAME"
sort -o "$1/rec.$SLURMD_NODENAME" "$1/rec.$SLURMD_NODENAME"
id -u >"$1/uid.$SLURMD_NODENAME"
EOF
chmod 755 "$D/showenv.sh"
expect_ok 'tasks of an unprivileged user get exactly their node'"'"'s variables, from a node that reaches the broker over TLS' '
    as_nobody timeout 45 srun -N2 "$D/showenv.sh" "$D" "$T/rec" &&
    j=$(rm_call GET "/v1/jobs?limit=1000" | jq -r ".jobs[-1].id") && rm_call GET "/v1/jobs/$j" >job.json &&
    for n in n1 n2; do
        test "$(cat "$D/uid.$n")" = 65534 && diff "$D/rec.$n" "$D/env.$n" &&
        grep -qx "FI_CXI_COLL_JOB_ID=c1-$j" "$D/env.$n" && grep -qx "FI_CXI_COLL_JOB_STEP_ID=0" "$D/env.$n" &&
        grep -q "^FI_CXI_COLL_MCAST_TOKEN=[0-9a-f]\{32,\}$" "$D/env.$n" &&
        grep -q "^SLINGSHOT_VNIS=1[0-9][0-9][0-9]$" "$D/env.$n" &&
        grep -qx "SLINGSHOT_DEVICES=cxi0,cxi1" "$D/env.$n" && grep -qx "SLINGSHOT_TCS=0xa" "$D/env.$n" &&
        grep -q "^SLINGSHOT_SVC_IDS=[0-9]*,[0-9]*$" "$D/env.$n" || return 1
    done &&
    test "$(grep -h SLINGSHOT_VNIS "$D/env.n1")" = "$(grep -h SLINGSHOT_VNIS "$D/env.n2")" &&
    jq -e ".uid == 65534 and .hwcoll.fm_job_id == \"c1-$j\"" job.json
'

expect_ok 'a user'"'"'s own libfabric tuning reaches her tasks; a forged fabric variable does not' '
    as_nobody env FI_CXI_RX_MATCH_MODE=hybrid FI_CXI_RDZV_THRESHOLD=16384 SLINGSHOT_VNIS=99 \
        timeout 45 srun -N2 "$D/showenv.sh" "$D" "$T/rec" &&
    for n in n1 n2; do
        grep -qx "FI_CXI_RX_MATCH_MODE=hybrid" "$D/env.$n" && grep -qx "FI_CXI_RDZV_THRESHOLD=16384" "$D/env.$n" &&
        test "$(grep -c "^SLINGSHOT_VNIS=" "$D/env.$n")" = 1 && ! grep -qx "SLINGSHOT_VNIS=99" "$D/env.$n" || return 1
    done
'

# A step's task 0 creates a multicast tree as libfabric does.
cat >"$D/mcast.sh" <<'EOF'
#!/bin/sh
# mcast.sh DIR [wait]: task 0 makes a tree for its step; with "wait" it
# then waits until DIR/stop exists
[ "$SLURM_PROCID" = 0 ] || exit 0
curl -sf -o /dev/null -H "Authorization: Bearer $FI_CXI_COLL_MCAST_TOKEN" -H "Content-Type: application/json" \
    --data "{\"macs\":[\"0:00:01\",\"0:00:02\"],\"vni\":${SLINGSHOT_VNIS%%,*},\"timeout\":20000000,\"jobID\":\"$FI_CXI_COLL_JOB_ID\",\"jobStepID\":\"$FI_CXI_COLL_JOB_STEP_ID\"}" \
    "$FI_CXI_COLL_FABRIC_MGR_URL" || exit 1
touch "$1/tree.$FI_CXI_COLL_JOB_STEP_ID"
[ "${2:-}" = wait ] || exit 0
for _ in $(seq 600); do [ -e "$1/stop" ] && break; sleep 0.1; done
EOF
cat >"$D/steps.sh" <<EOF
#!/bin/sh
# step 0 makes a tree and keeps running; steps 1 and 2 make one and end
srun --overlap -N2 -n2 $D/mcast.sh $D wait &
while [ ! -e $D/tree.0 ]; do sleep 0.1; done
srun --overlap -N2 -n2 $D/mcast.sh $D && srun --overlap -N2 -n2 $D/mcast.sh $D && touch $D/steps.done
wait
EOF
chmod 755 "$D/mcast.sh" "$D/steps.sh"
trees_of () { curl -sf "$fm_url/_mock/state" | jq --arg j "c1-$1" --arg s "$2" "[.trees[] | select(.jobID == \$j and .jobStepID == \$s)] | length"; }
ended_steps_have_no_tree () { test "$(trees_of "$1" 1)" = 0 && test "$(trees_of "$1" 2)" = 0; }
expect_ok 'each step'"'"'s trees are gone when it ends; a running step'"'"'s stay; no FM GET per step (nor at RUN)' '
    j=$(cd "$D" && as_nobody sbatch --parsable -N2 --ntasks-per-node=2 -o "$D/steps.out" "$D/steps.sh") &&
    wait_for 300 0.1 test -e "$D/steps.done" &&
    wait_for 50 0.1 ended_steps_have_no_tree "$j" &&
    test "$(trees_of "$j" 0)" = 1 &&
    grep -q "PATCH /fabric/collectives/jobs/c1-$j" "$T/fm.log" &&
    test "$(grep -c "^GET /fabric/collectives/jobs/c1-$j " "$T/fm.log")" = 0 &&
    touch "$D/stop" && wait_for 300 0.1 job_gone "$j" &&
    wait_for 100 0.1 mockfm_lacks_job "c1-$j" &&
    # steps 0, 1 and 2; none for the batch step, as Slurm sends none for it
    test "$(grep -c "^PATCH /fabric/collectives/jobs/c1-$j " "$T/fm.log")" = 3
'
expect_ok 'options reach RUN: --fmb-hwcoll=off reserves nothing, --fmb-vnis=2 gives two VNIs, --fmb-tcs' '
    as_nobody timeout 45 srun -N2 --fmb-hwcoll=off --fmb-vnis=2 --fmb-tcs=BULK_DATA "$D/showenv.sh" "$D" "$T/rec" &&
    j=$(rm_call GET "/v1/jobs?limit=1000" | jq -r ".jobs[-1].id") && rm_call GET "/v1/jobs/$j" >job.json &&
    jq -e ".hwcoll.state == \"not_eligible\"" job.json &&
    ! grep -q "jobs/c1-$j" "$T/fm.log" &&
    grep -q "^SLINGSHOT_VNIS=[0-9]*,[0-9]*$" "$D/env.n1" &&
    grep -qx "SLINGSHOT_TCS=0x4" "$D/env.n2" && grep -qx "SLINGSHOT_TCS=0x4" "$D/env.n1" &&
    ! grep -q FI_CXI_COLL_MCAST_TOKEN "$D/env.n1" && ! grep -q FI_CXI_COLL_JOB_STEP_ID "$D/env.n1" &&
    jq -e ".tcs == \"0x4\" and .env.SLINGSHOT_TCS == \"0x4\"" job.json &&
    "$FMB_BIN/fmbroker" -c "$T/broker.conf" job show "$j" | grep -q ", TCs 0x4$" &&
    grep -qx "SLINGSHOT_TCS=0x4" "$D/rec.n1"
'
expect_ok 'bad option values are refused at submission, with what they take' '
    { as_nobody srun -N1 --fmb-vnis=7 true 2>err; test $? != 0; } && grep -q "fmb-vnis=7: the job.s VNI count, 0..4" err &&
    { as_nobody sbatch --fmb-hwcoll=maybe --wrap true 2>err; test $? != 0; } && grep -q "fmb-hwcoll=maybe: on, off or auto" err &&
    { as_nobody salloc --fmb-tcs=DEDICATED_ACCESS true 2>err; test $? != 0; } &&
    grep -q "fmb-tcs=DEDICATED_ACCESS: this cluster allows only LOW_LATENCY,BULK_DATA,BEST_EFFORT" err
'
# The events consumer (deploy/slurm), as its systemd unit runs it, from
# the newest event on.
consumer_start () { # LOST-ACTION (one consumer at a time, even after a failed test)
    { [ -z "$events_pid" ] || consumer_stop; } &&
    rm_call GET /v1/status | jq .events.last_seq >"$T/events.seq" &&
    { FMBROKER_CONF=$T/broker.conf FMBROKER_BINDIR=$FMB_BIN FMBROKER_EVENTS_STATE=$T/events.seq \
        FMBROKER_HOOK_LOG=$S/log/hooks.log FMBROKER_LOST_ACTION=$1 \
        setsid "$FMB_SRC/deploy/slurm/fmbroker-slurm-events.sh" 2>>"$T/events.err" & } &&
    events_pid=$!
}
consumer_stop () { kill -- "-$events_pid"; events_pid=; }
expect_ok 'node_drain_requested drains the node in Slurm, with the reason' '
    consumer_start notify &&
    rm_call PUT /v1/jobs/drain1 "{\"uid\":65534,\"nodes\":[\"n2\"]}" >/dev/null &&
    rm_call PUT /v1/jobs/drain1/nodes/n2 "{\"cxi\":\"created\"}" >/dev/null &&
    rm_call PUT /v1/jobs/drain1/nodes/n2 "{\"cxi\":\"failed\",\"detail\":\"cxi0: EBUSY\"}" >/dev/null &&
    wait_for 100 0.1 sh -c "sinfo -h -n n2 -o %t | grep -q drain" &&
    scontrol show node n2 | grep -q "Reason=fmbroker job drain1: cxi0: EBUSY" &&
    sinfo -h -n n1 -o %t | grep -qx idle &&
    scontrol update nodename=n2 state=resume && consumer_stop &&
    rm_call DELETE /v1/jobs/drain1 >/dev/null
'
# The FM forgets a running job's reservation; the broker's reconciliation
# finds it gone, marks the job lost and emits reservation_lost.
job_running () { squeue -h -j "$1" -o %T 2>/dev/null | grep -qx RUNNING; }
# (the event, not the state: the consumer may have cancelled the job and
# its CLEANUP moved it on already)
job_lost () {
    rm_call GET "/v1/events?after=0&limit=1000" |
        jq -e --arg j "$1" "any(.events[]; .type == \"reservation_lost\" and .job == \$j)" >/dev/null
}
lose_reservation () { # JOB
    job_field "$1" .hwcoll.state | grep -qx reserved &&
    curl -sf -X DELETE "$fm_url/fabric/collectives/jobs/c1-$1" >/dev/null &&
    rm_call POST /v1/reconcile >/dev/null && wait_for 100 0.1 job_lost "$1"
}
lost_why="fmbroker: the job.s hardware-collective reservation was lost at the fabric manager: the fabric manager no longer holds the reservation"
# Each job is lost once its tasks run.  In one CI run a batch job that
# was cancelled while its node was still launching it stayed COMPLETING
# for more than 10 s (n1 never said "done with job"): a race inside
# Slurm, not what these steps are about.
job_cancelled () { scontrol show job "$1" | grep -q JobState=CANCELLED; }
expect_ok 'reservation_lost, FMBROKER_LOST_ACTION=cancel: the job is cancelled, the reason on it and in the log' '
    wait_for 100 0.1 all_idle && rm -f "$D/lost.up" &&
    j=$(cd "$D" && as_nobody sbatch --parsable -N2 -o /dev/null --wrap "touch $D/lost.up; sleep 120") &&
    wait_for 300 0.1 test -e "$D/lost.up" && consumer_start cancel && lose_reservation "$j" &&
    { wait_for 300 0.1 job_cancelled "$j" || { scontrol show job "$j"; false; }; } &&
    scontrol show job "$j" | grep -q "AdminComment=$lost_why" &&
    grep -q "job $j: $lost_why; FMBROKER_LOST_ACTION=cancel" "$S/log/hooks.log" &&
    consumer_stop
'
# The requeued job goes back to PENDING with its restart counted (Slurm
# holds it until its begin time); the reason stays on it.
job_requeued () {
    scontrol show job "$1" >"$T/requeued.txt" &&
        grep -q "JobState=PENDING" "$T/requeued.txt" && grep -q "Restarts=1" "$T/requeued.txt"
}
expect_ok '... requeue: the job goes back to the queue, the reason on it and in the log' '
    wait_for 100 0.1 all_idle && rm -f "$D/requeue.up" &&
    j=$(cd "$D" && as_nobody sbatch --parsable --requeue -N2 -o /dev/null --wrap "touch $D/requeue.up; sleep 120") &&
    wait_for 300 0.1 test -e "$D/requeue.up" && consumer_start requeue && lose_reservation "$j" &&
    { wait_for 300 0.1 job_requeued "$j" || { scontrol show job "$j"; false; }; } &&
    scontrol show job "$j" | grep -q "AdminComment=$lost_why" &&
    grep -q "job $j: $lost_why; FMBROKER_LOST_ACTION=requeue" "$S/log/hooks.log" &&
    consumer_stop && scancel "$j" && wait_for 100 0.1 job_gone "$j"
'
expect_ok '... notify (the default): the job'"'"'s srun prints the reason, the job runs on' '
    wait_for 100 0.1 all_idle && consumer_start notify &&
    rm -f "$D"/notify.up.* &&
    { as_nobody timeout 60 srun -N2 -J lostnotify sh -c "touch $D/notify.up.\$SLURM_NODEID; exec sleep 60" \
        2>"$D/notify.err" & } &&
    wait_for 300 0.1 test -e "$D/notify.up.0" -a -e "$D/notify.up.1" &&
    j=$(squeue -h -n lostnotify -o %i) && lose_reservation "$j" &&
    wait_for 100 0.1 grep -q "$lost_why" "$D/notify.err" &&
    job_running "$j" && scontrol show job "$j" | grep -q "AdminComment=$lost_why" &&
    consumer_stop && scancel "$j" && wait_for 100 0.1 job_gone "$j"
'
# A step's start asks neither the broker nor the FM (only the record):
# with the broker stopped in the middle of a job, its next step still
# starts, with its variables.
cat >"$D/midjob.sh" <<EOF
#!/bin/sh
srun -N2 true && touch $D/mid.up
while [ ! -e $D/mid.go ]; do sleep 0.1; done
srun -N2 $D/showenv.sh $D $T/rec && touch $D/mid.done
while [ ! -e $D/mid.end ]; do sleep 0.1; done
EOF
chmod 755 "$D/midjob.sh"
expect_ok 'a step needs no broker to start: the broker stopped mid-job, the next step gets its variables' '
    { [ -z "$events_pid" ] || consumer_stop; } && scancel -u nobody && # what a failed test left
    wait_for 100 0.1 all_idle && rm -f "$D"/mid.* "$D"/env.n[12] &&
    { as_nobody timeout 60 salloc -N2 "$D/midjob.sh" >/dev/null 2>&1 & } &&
    wait_for 300 0.1 test -e "$D/mid.up" && stop_broker && touch "$D/mid.go" &&
    wait_for 300 0.1 test -e "$D/mid.done" && start_broker && touch "$D/mid.end" &&
    for n in n1 n2; do
        grep -q "^SLINGSHOT_VNIS=[0-9]" "$D/env.$n" && grep -qx "FI_CXI_COLL_JOB_STEP_ID=1" "$D/env.$n" &&
        diff "$D/rec.$n" "$D/env.$n" || return 1
    done
'
# Jobs that end while no broker answers: EpilogSlurmctld's detached retry
# outlives the hook (slurmctld kills the hook's process group as it
# exits; before fmb_detach waited, 7 in 10 retries died with it) and ends
# each job once a broker answers again.
ended () { job_field "$1" .state | grep -qx "releasing\|released"; }
expect_ok 'EpilogSlurmctld'"'"'s CLEANUP retry outlives the hook: three jobs that end with no broker are ended when it is back' '
    wait_for 100 0.1 all_idle && rm -f "$D"/retry.* && ids= &&
    for i in 1 2 3; do
        j=$(cd "$D" && as_nobody sbatch --parsable -N1 -o /dev/null \
            --wrap "touch $D/retry.up$i; while [ ! -e $D/retry.end ]; do sleep 0.1; done") && ids="$ids $j" || return 1
    done &&
    wait_for 300 0.1 test -e "$D/retry.up1" -a -e "$D/retry.up2" -a -e "$D/retry.up3" &&
    stop_broker && touch "$D/retry.end" &&
    for j in $ids; do wait_for 300 0.1 grep -q "job $j: end-job failed: .*retrying" "$S/log/hooks.log" || return 1; done &&
    start_broker &&
    for j in $ids; do
        wait_for 200 0.1 grep -q "job $j: end-job done after [0-9]* s of retries" "$S/log/hooks.log" && ended "$j" ||
            { echo "job $j not ended"; return 1; }
    done
'
# A job that ends while no broker answers for longer than EpilogSlurmctld
# retries (FMBROKER_CLEANUP_RETRY_S: 6 s here) stays active at the
# broker, holding its VNIs and FM reservation.  The sweep, as its timer
# runs it, ends it and leaves a running job alone.
expect_ok 'a job whose CLEANUP never arrived is ended by fmbroker-slurm-sweep; a running job is not' '
    wait_for 100 0.1 all_idle && rm -f "$D"/sweep.* &&
    a=$(cd "$D" && as_nobody sbatch --parsable -N2 -o /dev/null \
        --wrap "touch $D/sweep.a; while [ ! -e $D/sweep.end ]; do sleep 0.1; done") &&
    b=$(cd "$D" && as_nobody sbatch --parsable -N2 -o /dev/null \
        --wrap "touch $D/sweep.b; while [ ! -e $D/sweep.stop ]; do sleep 0.1; done") &&
    wait_for 300 0.1 test -e "$D/sweep.a" -a -e "$D/sweep.b" &&
    stop_broker && touch "$D/sweep.end" && wait_for 300 0.1 job_gone "$a" &&
    wait_for 300 0.1 grep -q "job $a: end-job still failing after" "$S/log/hooks.log" &&
    start_broker && test "$(job_field "$a" .state)" = active && mockfm_has_job "c1-$a" &&
    FMBROKER_CONF=$T/broker.conf FMBROKER_BINDIR=$FMB_BIN FMBROKER_HOOK_LOG=$S/log/hooks.log \
        FMBROKER_SWEEP_MIN_AGE_S=0 "$FMB_SRC/deploy/slurm/fmbroker-slurm-sweep.sh" >sweep.txt &&
    grep -q "^job $a: ended in Slurm (COMPLETED), and its CLEANUP never reached the broker: ended now" sweep.txt &&
    ended "$a" && test "$(job_field "$b" .state)" = active &&
    wait_for 100 0.1 mockfm_lacks_job "c1-$a" && mockfm_has_job "c1-$b" &&
    touch "$D/sweep.stop" && wait_for 300 0.1 job_gone "$b"
'
expect_ok 'without fmbroker_spank_clean.so next to the plugin, steps run and their end logs why nothing was cleaned' '
    wait_for 100 0.1 all_idle && mkdir -p "$T/lonely" && cp "$FMB_BIN/../lib/fmbroker_spank.so" "$T/lonely/" &&
    plugstack && sed "s|[^ ]*/fmbroker_spank.so|$T/lonely/fmbroker_spank.so|" "$S/plugstack.conf" >"$S/lonely.conf" &&
    mv -f "$S/lonely.conf" "$S/plugstack.conf" &&
    as_nobody timeout 45 srun -N2 true &&
    wait_for 50 0.1 grep -q "step 0: step cleanup: .*lonely/fmbroker_spank_clean.so: cannot open" \
        "$S/log/slurmd-n1.log" "$S/log/slurmd-n2.log" &&
    plugstack
'
expect_ok 'a plugstack.conf line of the plugin'"'"'s old node hooks is refused, naming the node service and Epilog= instead' '
    plugstack prolog=/usr/share/fmbroker/slurm/prolog.sh &&
    { as_nobody timeout 45 srun -N1 true 2>err; test $? != 0; } &&
    grep -q "prolog=: no longer taken; the node service fmbroker-cxi.service makes each job.s setup, and slurm.conf.s Epilog=/usr/sbin/fmbroker-slurm-prolog its end" err &&
    plugstack
'
expect_ok 'with the broker stopped, a job fails and says why (fail_closed, the default)' '
    { [ -z "$events_pid" ] || consumer_stop; } && scancel -u nobody && # what a failed test left
    wait_for 100 0.1 all_idle && stop_broker &&
    { as_nobody timeout 60 srun -N2 true 2>err; test $? != 0; } &&
    grep -q "no VNI isolation: .*the step does not start (policy fail_closed)" err &&
    grep -q "broker at https://127.0.0.1:$tcp_port" err &&
    wait_for 200 0.1 all_idle && # the next job, with the first one'"'"'s reports kept on the nodes
    { as_nobody timeout 60 srun -N2 true 2>err2; test $? != 0; } &&
    grep -q "no VNI isolation: .*cannot get the job.s VNIs from the broker: broker at https://127.0.0.1:$tcp_port" err2 &&
    ! grep -q "kept report\|--uid" err2 &&
    ! grep -q "prolog failed" "$S/log/slurmd-n1.log" "$S/log/slurmd-n2.log" && # no node drained
    wait_for 200 0.1 all_idle && test -z "$(sinfo -h -R)" &&
    grep -q "run-job failed after [0-9]* s of retries: .*$T/api.sock" "$S/log/hooks.log"
'
# The job's user owns its .env record and may rewrite it; the fail-closed
# verdict must not follow.  Inside one allocation: the first step runs the
# (failing) prolog, the user forges a record with a service, a second step
# must still be refused, from root's own record.
forge_record () {
    cat >"$D/forge.sh" <<'EOF'
#!/bin/sh
srun -N1 -w n1 true 2>/dev/null && exit 10
r=$REC/$SLURM_JOB_ID.env
chmod 600 "$r" || exit 11
printf '{"version":1,"job":"%s","uid":65534,"services":1,"env":{"SLINGSHOT_VNIS":"1024","SLINGSHOT_DEVICES":"cxi0","SLINGSHOT_SVC_IDS":"5","SLINGSHOT_TCS":"0xa"},"reason":""}' \
    "$SLURM_JOB_ID" >"$r" && chmod 400 "$r" || exit 12
srun -N1 -w n1 env
EOF
    chmod 755 "$D/forge.sh" &&
    { as_nobody env REC="$T/rec-n1" timeout 60 salloc -N1 -w n1 "$D/forge.sh" >forge.out 2>forge.err
      rc=$?; test $rc != 0 && test $rc -lt 10; } && # 10-12: the forging itself failed
    ! grep -q "^SLINGSHOT_SVC_IDS=5" forge.out &&
    grep -q "rec-n1/[0-9]*.json: .*the node prolog did not set up" forge.err
}
expect_ok '... and a record its user rewrote does not change that verdict' '
    wait_for 100 0.1 all_idle && forge_record
'
expect_ok '... and under policy=fail_open it runs without isolation' '
    wait_for 200 0.1 all_idle && plugstack policy=fail_open &&
    as_nobody timeout 60 srun -N2 -l env >open.txt && grep -q "^1: SLURM_JOB_ID=" open.txt &&
    ! grep -q "SLINGSHOT_\|FI_CXI_" open.txt &&
    grep -q "running without VNI isolation (policy fail_open)" "$S/log/slurmd-n1.log" &&
    plugstack
'
# The launch setup (doc/slurm.md): no PrologSlurmctld, no
# PrologFlags=Alloc, no Prolog=; the node service on each node
# (fmbroker-cxi serve) makes the job's setup when the plugin in the job's
# first slurmstepd there hands it over, with the RUN (the node's token,
# as the nodes' fmbroker.conf says: [api] node_run = true); node 0's
# plugin hands it each step's end.
services_up () { # (one already up is left as it is, and its pid file)
    for n in n1 n2; do
        [ -S "$T/rec-$n/service.sock" ] && kill -0 "$(cat "$T/serve-$n.pid" 2>/dev/null)" 2>/dev/null && continue
        FMBROKER_NODE=$n MOCKCXI_STATE=$T/$n.cxi.json MOCKCXI_DEVICES=2 "$FMB_BIN/fmbroker-cxi" \
            -c "$T/node.conf" --state-dir "$T/rec-$n" serve 2>>"$S/log/serve-$n.log" &
        echo $! >"$T/serve-$n.pid"
    done
    wait_for 50 0.1 test -S "$T/rec-n1/service.sock" && wait_for 50 0.1 test -S "$T/rec-n2/service.sock"
}
services_down () {
    for n in n1 n2; do [ -s "$T/serve-$n.pid" ] && kill "$(cat "$T/serve-$n.pid")" 2>/dev/null; done
    return 0
}
on_exit services_down
# Epilog= (and Prolog= where one runs) beside the services:
# fmbroker-slurm-prolog hands the job's hook to the node's service, and
# runs fmbroker-cxi itself where none answers.  The stand-in: each
# emulated node its own service socket (a real node has
# /run/fmbroker-cxi/service.sock, the program's default) and its
# fmbroker-cxi through the node hook above.
service_hook () {
    printf "#!/bin/sh\nFMBROKER_CXI_SERVICE=%s/rec-\$SLURMD_NODENAME/service.sock FMBROKER_CXI_PROGRAM=%s exec %s\n" \
        "$T" "$S/hooks/epilog.sh" "$FMB_BIN/fmbroker-slurm-prolog" >"$S/hooks/service-hook.sh" &&
        chmod 755 "$S/hooks/service-hook.sh"
}
launch_setup () {
    service_hook &&
        printf "EpilogSlurmctld=%s\nEpilog=%s\n" "$S/hooks/epilog_slurmctld.sh" "$S/hooks/service-hook.sh" >"$S/setup.conf"
}
# both nodes reported the job's CXI services destroyed
both_destroyed () { test "$(job_field "$1" '[.node_reports[].cxi] | join(",")')" = destroyed,destroyed; }
# the broker's newest job with a Slurm id
newest_job () { rm_call GET "/v1/jobs?limit=1000" | jq -r "[.jobs[].id | select(test(\"^[0-9]+$\")) | tonumber] | max"; }
expect_ok 'the launch setup, no Prolog= nor PrologSlurmctld: each node'"'"'s service RUNs the job ([api] node_run in its configuration) for its first step; the tasks get their variables and options' '
    start_broker && wait_for 200 0.1 all_idle && launch_setup &&
    sed -i "/^\[api\]/a node_run = true" "$T/node.conf" && printf "[broker]\nlog_level = debug\n" >>"$T/node.conf" &&
    services_up && slurm_restart &&
    : >"$S/log/hooks.log" &&
    # The FM slow to answer the RUN: the job'"'"'s services come 1.5 s
    # later, and each node'"'"'s slurmstepd waits for them before the
    # tasks (or the step would fail: no record yet).
    mockfm_ctl POST /_mock/faults "POST /fabric/collectives/jobs delay=1500 x1" && t0=$(ms_now) &&
    as_nobody timeout 45 srun -N2 --fmb-vnis=2 "$D/showenv.sh" "$D" "$T/rec" &&
    test $(($(ms_now) - t0)) -ge 1500 && mockfm_ctl POST /_mock/faults "" &&
    j=$(newest_job) && rm_call GET "/v1/jobs/$j" >job.json &&
    { jq -e ".uid == 65534 and .user == \"nobody\" and .nodes == [\"n1\",\"n2\"]" job.json ||
        { jq -c . job.json; grep -h "fmbroker" "$S"/log/slurmd-n*.log | tail -5; false; }; } &&
    ! grep -q "run-job" "$S/log/hooks.log" &&
    for n in n1 n2; do
        diff "$D/rec.$n" "$D/env.$n" && grep -q "^SLINGSHOT_VNIS=[0-9]*,[0-9]*$" "$D/env.$n" &&
        grep -q "^FI_CXI_COLL_MCAST_TOKEN=" "$D/env.$n" || return 1
    done &&
    wait_for 300 0.1 job_gone "$j" && wait_for 100 0.1 ended "$j" &&
    # made by the services for the job'"'"'s first step, once per node,
    # and ended by them at the epilog, each node'"'"'s report at the broker
    for n in n1 n2; do
        grep -q "job $j: cxi0: service [0-9]* (uid 65534)" "$S/log/serve-$n.log" &&
        test "$(grep -c "job $j: prolog made in [0-9]* ms, [0-9]* us of CPU (exit 0, for its first step)" "$S/log/serve-$n.log")" = 1 &&
        wait_for 100 0.1 grep -q "job $j: epilog made in [0-9]* ms (exit 0)" "$S/log/serve-$n.log" || return 1
    done &&
    wait_for 50 0.1 both_destroyed "$j" &&
    # node 0'"'"'s step end: deleted, or left to the job'"'"'s end by its epilog
    wait_for 30 0.1 grep -q "step cleanup: DELETE /v1/jobs/$j/steps/0 done\|job $j: 1 step end(s) dropped" "$S/log/serve-n1.log"
'
# A batch job: its batch step is the job'"'"'s first on n1, an srun inside
# it the first on n2; both hand over the options the job was submitted
# with (sbatch'"'"'s), not the srun'"'"'s own, which cannot change its job.
expect_ok '... and a batch job gets its options on every node, whichever step comes first; an srun inside cannot change them' '
    wait_for 200 0.1 all_idle && rm -f "$D"/env.* &&
    as_nobody sbatch -W -N2 --fmb-vnis=3 --fmb-hwcoll=off -o "$D/batch.out" \
        --wrap "srun -N2 --fmb-vnis=1 $D/showenv.sh $D $T/rec" >/dev/null &&
    j=$(newest_job) &&
    { jq -e "(.hwcoll.reason | test(\"hwcoll=off\")) and .nodes == [\"n1\",\"n2\"]" <<<"$(rm_call GET "/v1/jobs/$j")" ||
        { rm_call GET "/v1/jobs/$j" | jq -c .; cat "$D/batch.out"; false; }; } &&
    for n in n1 n2; do
        grep -q "^SLINGSHOT_VNIS=[0-9]*,[0-9]*,[0-9]*$" "$D/env.$n" && ! grep -q "^FI_CXI_" "$D/env.$n" || return 1
    done
'
# Issue 50: each node's service serves each job on a thread of its own.
expect_ok '... and a job waiting for its FM reservation holds no other job'"'"'s setup on the same nodes' '
    wait_for 200 0.1 all_idle && rm -f "$D"/env.* "$D/slow.end" &&
    mockfm_ctl POST /_mock/faults "POST /fabric/collectives/jobs delay=3000 x1" && t0=$(ms_now) &&
    { { as_nobody timeout 45 srun -N2 true 2>"$D/slow.err"; echo "$? $(ms_now)" >"$D/slow.end"; } & } &&
    wait_for 200 0.05 fm_holds 1 && as_nobody timeout 45 srun -N2 --fmb-hwcoll=off "$D/showenv.sh" "$D" "$T/rec" &&
    t1=$(ms_now) && test ! -s "$D/slow.end" &&
    echo "the second job ran, $((t1 - t0)) ms after the first began, while the first waited for the FM" &&
    for n in n1 n2; do grep -q "^SLINGSHOT_VNIS=[0-9]" "$D/env.$n" || return 1; done &&
    wait_for 300 0.1 test -s "$D/slow.end" && read -r rc tend <"$D/slow.end" &&
    echo "the first job ended $((tend - t0)) ms after it began" && test "$rc" = 0 &&
    mockfm_ctl POST /_mock/faults ""
'
# The CPUs a job's CXI services are sized for come from the step's
# credential, not from its environment: a user who writes
# SLURM_JOB_CPUS_PER_NODE cannot size a service on a node others share.
expect_ok '... and a user'"'"'s SLURM_JOB_CPUS_PER_NODE does not reach the RUN nor size the services' '
    wait_for 200 0.1 all_idle && rm -f "$D"/env.* &&
    as_nobody timeout 45 salloc -N2 sh -c "SLURM_JOB_CPUS_PER_NODE=1000000 srun -N2 $D/showenv.sh $D $T/rec" \
        >/dev/null 2>"$D/salloc.err" &&
    j=$(newest_job) && test "$(job_field "$j" .ncores)" = 0 &&
    for n in n1 n2; do grep -q "^SLINGSHOT_VNIS=[0-9]" "$D/env.$n" || return 1; done &&
    grep -q "job $j: prolog made in [0-9]* ms, [0-9]* us of CPU (exit 0, for its first step)" "$S/log/serve-n2.log"
'
expect_ok '... and with the broker stopped, the job fails with its own reason, not an earlier job'"'"'s kept report' '
    wait_for 200 0.1 all_idle && stop_broker &&
    { as_nobody timeout 60 srun -N2 true 2>err1; test $? != 0; } && wait_for 200 0.1 all_idle &&
    { as_nobody timeout 60 srun -N2 true 2>err; test $? != 0; } && cat err &&
    grep -q "no VNI isolation: .*the broker did not RUN the job: .*broker at https://127.0.0.1:$tcp_port" err &&
    ! grep -q "kept report\|--uid" err &&
    grep -q "the broker did not RUN the job" "$S/log/serve-n1.log"
'
# A service killed (a crash, an OOM kill) while it makes the job's setup
# for the job's first steps: each node's slurmstepd is waiting for it;
# the step is refused with what happened to it, in the user's words, and
# the job leaves nothing behind.  The services are killed once each has
# taken a step's setup (an accepted connection on its socket: the service
# is busy with the RUN the FM holds for 5 s).
setups_taken () {
    for n in n1 n2; do
        ss -xH state connected src "$T/rec-$n/service.sock" | grep -q . || return 1
    done
}
killed_services_step () {
    mockfm_ctl POST /_mock/faults "POST /fabric/collectives/jobs delay=5000 x1" &&
    { as_nobody timeout 60 srun -N2 true 2>err & } && srun_pid=$! &&
    wait_for 200 0.1 setups_taken &&
    kill -KILL "$(cat "$T/serve-n1.pid")" "$(cat "$T/serve-n2.pid")" &&
    { wait "$srun_pid"; test $? != 0; } && cat err &&
    grep -q "no VNI isolation: the job's setup by the node service: the node service at $T/rec-n[12]/service.sock closed the connection without an answer" err
}
# whatever happened: the services back, the job ended, the broker
# stopped as the next step expects
services_restarted () {
    mockfm_ctl POST /_mock/faults ""
    services_down
    for n in n1 n2; do wait "$(cat "$T/serve-$n.pid")" 2>/dev/null; done
    rm -f "$T/rec-n1/service.sock" "$T/rec-n2/service.sock"
    services_up && wait_for 300 0.1 all_idle && wait_for 300 0.1 fm_holds_nothing
}
expect_ok '... and node services killed while the steps wait for the job'"'"'s setup: the step is refused with that reason' '
    start_broker && wait_for 200 0.1 all_idle || return 1
    killed_services_step
    rc=$?
    services_restarted && stop_broker && return $rc
'
expect_ok '... and no node service: the step is refused, the user told so, slurmd'"'"'s log saying what to start' '
    start_broker && wait_for 200 0.1 all_idle && services_down &&
    wait_for 50 0.1 sh -c "! test -e $T/rec-n1/service.sock && ! test -e $T/rec-n2/service.sock" &&
    { as_nobody timeout 45 srun -N2 true 2>err; test $? != 0; } && cat err &&
    grep -q "no VNI isolation: the job.s setup by the node service: no node service answers on this node; the step does not start" err &&
    ! grep -q "fmbroker-cxi.service" err &&
    grep -q "no node service answers at $T/rec-n1/service.sock and no node prolog made the job.s record: start fmbroker-cxi.service" \
        "$S/log/slurmd-n1.log"
'
# A service restarting (systemctl restart, a package upgrade) has no
# socket for a moment: a job's first step waits up to 3 s for it.
expect_ok '... and a job started while the node services restart waits for them and gets its services' '
    wait_for 200 0.1 all_idle && rm -f "$D"/env.* &&
    { as_nobody timeout 45 srun -N2 "$D/showenv.sh" "$D" "$T/rec" 2>"$D/restart.err" & } && srun_pid=$! &&
    sleep 1 && services_up && wait "$srun_pid" &&
    for n in n1 n2; do grep -q "^SLINGSHOT_VNIS=[0-9]" "$D/env.$n" || return 1; done
'
# slurmd's Prolog= beside the service: fmbroker-slurm-prolog hands it the
# job and returns; the steps find the job's setup made, or wait for it.
expect_ok 'with Prolog=fmbroker-slurm-prolog, the prolog hands each node'"'"'s service the job; its steps get their variables' '
    wait_for 200 0.1 all_idle &&
    # The stand-in: each emulated node its own service socket (a real
    # node has /run/fmbroker-cxi/service.sock, the program'"'"'s default).
    printf "EpilogSlurmctld=%s\nProlog=%s\nEpilog=%s\n" "$S/hooks/epilog_slurmctld.sh" \
        "$S/hooks/service-hook.sh" "$S/hooks/service-hook.sh" >"$S/setup.conf" && slurm_restart &&
    as_nobody timeout 45 srun -N2 "$D/showenv.sh" "$D" "$T/rec" &&
    j=$(newest_job) &&
    for n in n1 n2; do
        diff "$D/rec.$n" "$D/env.$n" && grep -q "^SLINGSHOT_VNIS=[0-9]" "$D/env.$n" &&
        grep -q "job $j: prolog made in [0-9]* ms, [0-9]* us of CPU (exit 0)" "$S/log/serve-$n.log" &&
        ! grep -q "job $j: prolog made in .*first step" "$S/log/serve-$n.log" || return 1
    done
'
expect_ok '... and a node whose service is stopped runs fmbroker-cxi itself: the job gets its services all the same' '
    wait_for 200 0.1 all_idle && services_down &&
    wait_for 50 0.1 sh -c "! test -e $T/rec-n1/service.sock" &&
    as_nobody timeout 45 srun -N2 "$D/showenv.sh" "$D" "$T/rec" &&
    for n in n1 n2; do grep -q "^SLINGSHOT_VNIS=[0-9]" "$D/env.$n" || return 1; done &&
    sed -i "/^node_run = true$/d; /^\[broker\]$/d; /^log_level = debug$/d" "$T/node.conf" &&
    ctld_setup && plugstack && wait_for 200 0.1 all_idle && slurm_restart
'
expect_ok 'afterwards: every node idle, no reservation left at the FM, no CXI service left' '
    wait_for 200 0.1 all_idle &&
    { wait_for 300 0.1 fm_holds_nothing || { fm_leftovers; false; }; } &&
    { wait_for 100 0.1 no_job_services || { services_left; false; }; }
'
done_testing
