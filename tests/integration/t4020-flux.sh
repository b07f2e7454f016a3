#!/bin/bash
# t4020-flux.sh: fmbroker under a real multi-user Flux system instance
# (tests/integration/flux.sh: flux-core 0.88.0 built from
# ../shared/thirdparty, owner flux, the IMP, munge, ranks n1 and n2, jobs
# by nobody), nodes reaching fmbrokerd over TLS each with its own node token.
# The jobtap plugin makes the RUN and CLEANUP; the shell plugin hands each
# node's resident service (fmbroker-cxi serve) the job's setup, as the
# job's user, and sets the tasks' variables from the record it made.
. "$(dirname "$0")/lib.sh"
skip_unless_root
. "$(dirname "$0")/flux.sh"
step_fail_hook=flux_diag

tls_and_node_tokens || bail_out "no certificates or token"
start_mockfm
rm_users=root,flux
# A compute node: the broker's URL and its own token (%n: the node's
# name, FMBROKER_NODE, set by the Flux scripts); the jobtap
# plugin (the instance owner on the leader): the broker's socket as rm.
start_broker_for_nodes n1 n2 || bail_out "no broker for the nodes"
printf "[api]\nsocket = %s\n" "$T/api.sock" >"$T/rm.conf"
chmod 644 "$T/rm.conf"
mkdir -p "$T/home" && chown nobody "$T/home"
flux_node_scripts "$T/node.conf"
flux_node_services "$T/node.conf" || bail_out "no node services"
flux_config fail_closed
flux_start || bail_out "the Flux instance did not start: $(tail -5 "$FD/start.log")"

dec () { flux_as_owner flux job id --to=dec "$1"; }
# job_env ID RANK: what the job's task on RANK saw (its output file)
job_env () { grep -E "^$2: (SLINGSHOT|FI_CXI)_" "$T/home/$1.out" | sed "s/^$2: //" | sort; }
submit () { # ARGS...: a job of nobody's printing its fabric per rank
    flux_as_user flux submit --output="$T/home/{{id}}.out" --label-io "$@" \
        sh -c 'env | grep -E "^(SLINGSHOT|FI_CXI)_"; true'
}
wait_job () { flux_as_owner flux job wait-event -t 60 "$1" clean >/dev/null; }
job_in () { test "$(job_field "$1" .state)" = "$2"; }
job_not_in () { ! job_in "$@"; }
drained () { flux_as_owner flux resource drain -no '{nodelist}' | grep .; }

hold () { # a job script: print the fabric, then wait (bounded) for $HOME/go
    printf '%s\n' '#!/bin/sh' 'env | grep -E "^(SLINGSHOT|FI_CXI)_"' \
        'for _ in $(seq 600); do [ -e "$HOME/go" ] && exit 0; sleep 0.1; done' >"$T/home/hold.sh"
    chmod 755 "$T/home/hold.sh" && rm -f "$T/home/go"
}
both_printed () { test "$(grep -c "SLINGSHOT_VNIS" "$T/home/$1.out")" = 2; }
expect_ok 'a user job of two nodes gets its fabric on both, as fmbroker job show says' '
    # the user'"'"'s own libfabric tuning passes; forged fabric variables do not
    hold && id=$(flux_as_user flux submit --output="$T/home/{{id}}.out" --label-io -N2 -n2 \
        --env=FI_CXI_RX_MATCH_MODE=hybrid --env=FI_CXI_RDZV_THRESHOLD=16384 \
        --env=SLINGSHOT_VNIS=99 --env=FI_CXI_COLL_MCAST_TOKEN=forged "$T/home/hold.sh") &&
    j=$(dec "$id") && f58=$(flux_as_owner flux job id --to=f58 "$id") &&
    wait_for 300 0.1 both_printed "$id" &&
    rm_call GET "/v1/jobs/$j" >"$T/show.json" && touch "$T/home/go" && wait_job "$id" &&
    flux_as_owner flux job status "$id" &&
    jq -e ".nodes == [\"n1\",\"n2\"] and .uid == $(id -u nobody) and .ncores == 1" "$T/show.json" &&
    for r in 0 1; do
        job_env "$id" $r >"$T/env.$r" &&
        grep -qx "FI_CXI_COLL_JOB_STEP_ID=/$f58" "$T/env.$r" &&
        for k in SLINGSHOT_VNIS SLINGSHOT_TCS FI_CXI_COLL_JOB_ID FI_CXI_COLL_MCAST_TOKEN FI_CXI_COLL_FABRIC_MGR_URL; do
            grep -qx "$k=$(jq -r ".env.$k" "$T/show.json")" "$T/env.$r" || { echo "rank $r: $k"; cat "$T/env.$r"; return 1; }
        done && grep -qx "SLINGSHOT_DEVICES=cxi0,cxi1" "$T/env.$r" &&
        grep -qx "FI_CXI_RX_MATCH_MODE=hybrid" "$T/env.$r" &&
        grep -qx "FI_CXI_RDZV_THRESHOLD=16384" "$T/env.$r" &&
        test "$(grep -c "^SLINGSHOT_VNIS=" "$T/env.$r")" = 1 &&
        grep -q "^SLINGSHOT_SVC_IDS=[0-9]*,[0-9]*$" "$T/env.$r" || return 1
    done
'
expect_ok 'its RUN and CLEANUP reached the FM, and its VNIs are free once both nodes reported' '
    grep -q "POST" "$T/fm.log" && wait_for 100 0.1 mockfm_lacks_job "c1-$j" &&
    wait_for 100 0.1 job_in "$j" released &&
    rm_call GET "/v1/jobs/$j" | jq -e "[.node_reports[].cxi] == [\"destroyed\",\"destroyed\"]"
'
no_user_service () { test "$(jq "[.devices[].services[] | select(.member0.id == $(id -u nobody))] | length" "$T/$1.cxi.json")" = 0; }
expect_ok 'the job'"'"'s CXI services are gone from both nodes' '
    wait_for 100 0.1 no_user_service n1 && wait_for 100 0.1 no_user_service n2
'
expect_ok 'broker down under fail_closed: a fatal exception with the reason, no node drained' '
    stop_broker &&
    id=$(submit -N2 -n2) && wait_job "$id" &&
    ! flux_as_owner flux job status "$id" &&
    flux_as_owner flux job eventlog "$id" | grep "exception" | grep "type=\"fmbroker\"" | tee "$T/exc" &&
    grep -q "no VNI isolation for this job: the fabric broker could not be reached" "$T/exc" &&
    ! grep -q -e "api.sock" -e "is fmbrokerd running" "$T/exc" &&
    flux_as_owner flux dmesg | grep "RUN at fmbrokerd failed" | grep -q "api.sock" &&
    ! drained
'
expect_ok 'the broker back: jobs run again' '
    start_broker && id=$(submit -N1 -n1) && wait_job "$id" && flux_as_owner flux job status "$id"
'
expect_ok 'no node service on the nodes: the job does not run, and says why' '
    flux_node_services_stop && id=$(submit -N1 -n1) && wait_job "$id"; rc=$?
    flux_node_services "$T/node.conf" && test $rc = 0 &&
    ! flux_as_owner flux job status "$id" &&
    flux_as_owner flux job eventlog "$id" | grep exception | grep -q "no node service answers at" &&
    ! grep -q "SLINGSHOT_VNIS" "$T/home/$id.out"
'
# A user who asks a node service for another user'"'"'s job gets nothing.
other_job_setup () { # JOB: as uid 1 (daemon), the setup of JOB on n1
    setpriv --reuid=1 --regid=1 --clear-groups /usr/bin/python3 -c "import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
s.sendall((\"fmbroker-node/1 setup\\njob=%s\\n\\n\" % sys.argv[2]).encode())
print(s.recv(512).decode(), end=\"\")" "$T/rec-n1/service.sock" "$1"
}
expect_ok 'another user asking the node service for a job of nobody'"'"'s: refused, nothing made' '
    rm_call PUT /v1/jobs/4343 "{\"uid\":$(id -u nobody),\"nodes\":[\"n1\"]}" >/dev/null &&
    other_job_setup 4343 | tee "$T/other.out" | grep -q "^1	job 4343 is not this user.s" &&
    test ! -e "$T/rec-n1/4343.env" && test ! -e "$T/rec-n1/4343.json" &&
    grep -q "job 4343: uid 1 asked for its setup, but it is uid $(id -u nobody).s: refused" "$T/serve-n1.log" &&
    rm_call DELETE /v1/jobs/4343 >/dev/null
'
expect_ok 'a job that ends while no broker answers is ended once one is back (CLEANUP retry)' '
    id=$(flux_as_user flux submit -N1 sleep 2) && j=$(dec "$id") &&
    flux_as_owner flux job wait-event -t 30 "$id" start >/dev/null && job_in "$j" active &&
    stop_broker && wait_job "$id" && sleep 1 && start_broker &&
    wait_for 150 0.1 job_not_in "$j" active
'
expect_ok 'fail_open: broker down, the job runs without isolation and says so' '
    flux_as_owner flux jobtap remove fmbroker.so &&
    flux_as_owner flux jobtap load fmbroker.so config="$T/rm.conf" policy=fail_open timeout=2 state-dir="$T/rec-%n" &&
    stop_broker && id=$(submit -N1 -n1) && wait_job "$id"; rc=$?
    start_broker
    flux_as_owner flux jobtap remove fmbroker.so
    flux_as_owner flux jobtap load fmbroker.so config="$T/rm.conf" policy=fail_closed timeout=3 state-dir="$T/rec-%n"
    test $rc = 0 && flux_as_owner flux job status "$id" &&
    ! grep -q SLINGSHOT_VNIS "$T/home/$id.out" &&
    flux_as_owner flux job eventlog "$id" | grep "fmbroker" | grep -q "fail_open"
'
drained_is () { test "$(flux_as_owner flux resource drain -no {nodelist})" = "$1"; }
busy_service () { # NODE: the nobody job's services there stay busy (N more EBUSY)
    jq "(.devices[].services[] | select(.member0.id == $(id -u nobody))).busy = 100000" "$T/$1.cxi.json" >"$T/cxi.tmp" &&
        mv "$T/cxi.tmp" "$T/$1.cxi.json"
}
expect_ok 'services left busy on n2: housekeeping drains n2 only, and the broker holds the VNI back' '
    # the user'"'"'s own libfabric tuning passes; forged fabric variables do not
    hold && id=$(flux_as_user flux submit --output="$T/home/{{id}}.out" --label-io -N2 -n2 \
        --env=FI_CXI_RX_MATCH_MODE=hybrid --env=FI_CXI_RDZV_THRESHOLD=16384 \
        --env=SLINGSHOT_VNIS=99 --env=FI_CXI_COLL_MCAST_TOKEN=forged "$T/home/hold.sh") &&
    j=$(dec "$id") && wait_for 300 0.1 both_printed "$id" && echo "printed" && busy_service n2 &&
    jq -c ".devices[].services[] | select(.member0.id == $(id -u nobody)) | .busy" "$T/n2.cxi.json" &&
    touch "$T/home/go" && wait_job "$id" && echo "job ended" &&
    wait_for 200 0.1 drained_is n2 && echo "n2 drained" &&
    rm_call GET /v1/vnis | jq -e --arg j "$j" "any(.vnis[]; .job == \$j and .state == \"quarantined\")"
'
expect_ok 'the node freed and undrained' '
    jq "(.devices[].services[]).busy = 0" "$T/n2.cxi.json" >"$T/cxi.tmp" && mv "$T/cxi.tmp" "$T/n2.cxi.json" &&
    MOCKCXI_STATE=$T/n2.cxi.json "$FMB_BIN/fmbroker-cxi" -c "$T/node.conf" --state-dir "$T/rec-n2" \
        housekeeping --job "$j" --node n2 &&
    flux_as_owner flux resource undrain n2 && ! drained
'
expect_ok 'the sweep (real flux jobs) ends a job Flux no longer has, and leaves a running one' '
    hold && id=$(flux_as_user flux submit --output="$T/home/{{id}}.out" -N1 "$T/home/hold.sh") &&
    j=$(dec "$id") && flux_as_owner flux job wait-event -t 30 "$id" start >/dev/null &&
    rm_call PUT /v1/jobs/4242 "{\"uid\":$(id -u nobody),\"nodes\":[\"n1\"]}" >/dev/null &&
    job_in 4242 active && job_in "$j" active &&
    flux_as_owner env FMBROKER_CONF="$T/rm.conf" FMBROKER_BINDIR="$FMB_BIN" FMBROKER_SWEEP_MIN_AGE_S=0 \
        "$FMB_SRC/deploy/flux/fmbroker-flux-sweep.sh" >"$T/sweep.out" 2>&1 && cat "$T/sweep.out" &&
    grep -q 4242 "$T/sweep.out" && job_not_in 4242 active && job_in "$j" active &&
    touch "$T/home/go" && wait_job "$id"
'
# A step's task 0 makes a multicast tree as libfabric does.
cat >"$T/home/mcast.sh" <<'EOF2'
#!/bin/sh
[ "${FLUX_TASK_RANK:-0}" = 0 ] || exit 0
curl -sf -o /dev/null -H "Authorization: Bearer $FI_CXI_COLL_MCAST_TOKEN" -H "Content-Type: application/json" \
    --data "{\"macs\":[\"0:00:01\",\"0:00:02\"],\"vni\":${SLINGSHOT_VNIS%%,*},\"timeout\":20000000,\"jobID\":\"$FI_CXI_COLL_JOB_ID\",\"jobStepID\":\"$FI_CXI_COLL_JOB_STEP_ID\"}" \
    "$FI_CXI_COLL_FABRIC_MGR_URL" && echo "$FI_CXI_COLL_JOB_STEP_ID" >>"$HOME/steps"
EOF2
cat >"$T/home/inner.sh" <<'EOF2'
#!/bin/sh
cd "$HOME" || exit 1
flux run -N1 "$HOME/mcast.sh"
EOF2
cat >"$T/home/outer.sh" <<'EOF2'
#!/bin/sh
# level 1: a sub-job with a tree, then a level-2 instance whose job makes one
cd "$HOME" || exit 1
flux run -N2 "$HOME/mcast.sh" &&
id=$(flux batch -N1 "$HOME/inner.sh") && flux job wait-event -t 120 "$id" clean &&
touch "$HOME/subs.done"
for _ in $(seq 1200); do [ -e "$HOME/stop" ] && break; sleep 0.1; done
EOF2
chmod 755 "$T/home/mcast.sh" "$T/home/inner.sh" "$T/home/outer.sh"
trees_of () { curl -sf "$fm_url/_mock/state" | jq --arg j "c1-$1" --arg s "$2" "[.trees[] | select(.jobID == \$j and .jobStepID == \$s)] | length"; }
no_tree () { test "$(trees_of "$1" "$2")" = 0; }
expect_ok 'flux batch inside flux batch: sub-jobs inherit the fabric, each one'"'"'s trees go when it ends' '
    id=$(flux_as_user flux batch -N2 --output="$T/home/batch.out" "$T/home/outer.sh") && j=$(dec "$id") &&
    wait_for 1200 0.1 test -e "$T/home/subs.done" &&
    test "$(wc -l <"$T/home/steps")" = 2 && cat "$T/home/steps" &&
    a=$(flux_as_owner flux job id --to=f58 "$id") &&
    grep -q "^/$a/[^/]*$" "$T/home/steps" && grep -q "^/$a/[^/]*/[^/]*$" "$T/home/steps" &&
    for s in $(cat "$T/home/steps"); do wait_for 100 0.1 no_tree "$j" "$s" || return 1; done &&
    rm_call GET "/v1/jobs/$j" | jq -e ".state == \"active\"" &&
    touch "$T/home/stop" && wait_job "$id" && wait_for 100 0.1 mockfm_lacks_job "c1-$j"
'
# A site set up per Flux's admin guide has its own system.toml with a
# [job-manager] plugins array; Flux replaces arrays across conf.d files.
expect_ok 'a system.toml with its own [job-manager] plugins array: said at the instance'"'"'s start with the fix, and a job fails at once with it' '
    flux_stop && printf "[job-manager]\nplugins = [ { load = \"perilog.so\" } ]\n" >"$FD/conf/system.toml" &&
    chmod 644 "$FD/conf/system.toml" && flux_start &&
    flux_as_owner flux dmesg | grep "rc1" | grep -q "fmbroker.so is not loaded in the system instance.s job-manager" &&
    t0=$(ms_now) && id=$(submit -N1 -n1 --env=FMBROKER_STATE_DIR="$T/rec-%n") && wait_job "$id" &&
    ! flux_as_owner flux job status "$id" &&
    flux_as_owner flux job eventlog "$id" | grep exception | grep -q "fmbroker.so is not loaded" &&
    echo "the job failed $(($(ms_now) - t0)) ms after its submission" && test $(($(ms_now) - t0)) -lt 20000 &&
    rm -f "$FD/conf/system.toml" && flux_stop && flux_start
'
done_testing
