#!/bin/bash
# t4020-flux.sh: deploy/flux's scripts, run the way Flux runs them (its
# variables, its `flux` command answering for R and broker attributes:
# a stub here, since Debian 12 has no Flux), against fmbrokerd, mockfm
# and fmbroker-cxi over the libcxi double.  RUN passes the real node
# list; the job shell plugin gives tasks the job's variables and the
# job-id path as step id; a sub-instance passes its enclosing job's
# variables down without the broker and cleans its jobs' trees with the
# inherited token; housekeeping retries, then drains.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || { echo "ok 1 # SKIP needs root (setpriv)"; echo "1..1"; exit 0; }
command -v lua5.4 >/dev/null || { echo "ok 1 # SKIP needs lua5.4 (scripts/install-deps.sh)"; echo "1..1"; exit 0; }
export MOCKCXI_SYSTEM_SVC=1 MOCKCXI_DEVICES=2
chmod 755 "$T"
F=$FMB_SRC/deploy/flux
mkdir -p "$T/bin"
# The stub answers what the scripts ask Flux, from STUB_* variables.
cat >"$T/bin/flux" <<'STUB'
#!/bin/bash
echo "flux $*" >>"$STUB_LOG"
case "$1 $2" in
"job id") # --to=dec|f58 ID, between the forms of the jobs these steps use
    for p in 1001:ƒA1 1007:ƒA7 1008:ƒA8 1009:ƒA9 2:ƒB2 3:ƒB3 99:ƒZ9; do
        if [ "$4" = "${p%%:*}" ] || [ "$4" = "${p#*:}" ]; then
            [ "$3" = --to=dec ] && echo "${p%%:*}" || echo "${p#*:}"; exit 0
        fi
    done
    echo "flux-job: error parsing jobid: \"$4\"" >&2; exit 1 ;;
"job info") [ -n "$STUB_NODELIST" ] && echo '{"version":1}' || exit 1 ;;
"R decode") cat >/dev/null
    case $3 in --nodelist) echo "$STUB_NODELIST" ;; --count=node) echo "$STUB_NNODES" ;;
        --count=core) echo "$STUB_NCORES" ;; esac ;;
"getattr instance-level") echo "${STUB_LEVEL:-0}" ;;
"getattr jobid-path") echo "${STUB_JOBID_PATH:-/}" ;;
"getattr rundir") echo "$STUB_RUNDIR" ;;
"jobs -n") [ -e "$STUB_JOBS" ] && cat "$STUB_JOBS" || { echo "flux-jobs: error: Unable to connect to Flux" >&2; exit 1; } ;;
*) exit 1 ;;
esac
STUB
chmod 755 "$T/bin/flux"
export STUB_LOG=$T/flux.calls
start_mockfm
write_broker_conf
chmod 644 "$T/broker.conf"
start_broker
# What every script gets from /etc/default/fmbroker on a real node.
export PATH="$T/bin:$PATH" FMBROKER_CONF=$T/broker.conf FMBROKER_BINDIR=$FMB_BIN \
    FMBROKER_SBINDIR=$FMB_BIN FMBROKER_HOOK_TIMEOUT=2 FMBROKER_FLUX_DIR=$F
on_node () { # NODE SCRIPT: a per-node script as Flux runs it on NODE
    FMBROKER_NODE=$1 MOCKCXI_STATE="$T/$1.cxi.json" \
        FMBROKER_CXI_ARGS="--libcxi $FMB_BIN/../mockcxi/new/libcxi.so.1 --state-dir $T/$1.rec" "$F/$2"
}
# The job shell: a stub 'shell' table, the plugin, then the task env.
cat >"$T/shell.lua" <<'LUA'
local env = {}
for line in io.lines (arg[1]) do
    local k, v = line:match ("^([^=]+)=(.*)$")
    if k then env[k] = v end
end
shell = { info = { jobid = tonumber (arg[2]) } }
function shell.getenv (n) if n == nil then local c = {} for k, v in pairs (env) do c[k] = v end return c end return env[n] end
function shell.setenv (n, v) env[n] = v end
function shell.unsetenv (n) env[n] = nil end
dofile (arg[3])
local names = {}
for k, _ in pairs (env) do names[#names + 1] = k end
table.sort (names)
for _, k in ipairs (names) do print (k .. "=" .. env[k]) end
LUA
job_shell () { # SUBMIT-ENV-FILE JOBID: the task environment, as the job's user
    as_user 1000 env MOCKCXI_STATE="$T/n1.cxi.json" FMBROKER_CXI_ARGS="--state-dir $T/n1.rec" \
        lua5.4 "$T/shell.lua" "$1" "$2" "$F/fmbroker.lua"
}

expect_ok 'RUN (job-manager prolog) passes the real node list and cores per node from R' '
    FLUX_JOB_ID=ƒA1 FLUX_JOB_USERID=1000 STUB_DEC=1001 STUB_NODELIST="n[1-2]" STUB_NNODES=2 \
        STUB_NCORES=16 "$F/fmbroker-run.sh" &&
    rm_call GET /v1/jobs/1001 | jq -e ".nodes == [\"n1\",\"n2\"] and .ncores == 8 and .uid == 1000 and .hwcoll.state == \"reserved\""
'
expect_ok 'RUN without a readable R runs nothing at the broker and says why' '
    FLUX_JOB_ID=ƒA9 FLUX_JOB_USERID=1000 STUB_DEC=1009 STUB_NODELIST= "$F/fmbroker-run.sh" 2>err &&
    grep -q "job 1009: cannot read its node list (R), so no RUN: .*FMBROKER_POLICY=fail_closed decides" err &&
    test "$(api_call GET /v1/jobs/1009 | cut -d" " -f1)" = 404
'
expect_ok 'the per-node prolog creates the services and the job record' '
    for n in n1 n2; do FLUX_JOB_ID=ƒA1 STUB_DEC=1001 on_node $n fmbroker-cxi-prolog.sh || return 1; done &&
    test "$(stat -c "%u %a" "$T/n1.rec/1001.env")" = "1000 400"
'
# A job whose services cannot be made on a node (here: no RUN, so the
# broker has no facts for it) does not start under the default policy:
# the prolog fails, saying why (Flux raises the job exception); under
# fail_open it runs, logged, and the job shell tells the job why it has
# no SLINGSHOT_* variable (under fail_closed a job runs without a record
# only on a node without Slingshot NICs: nothing to tell).
expect_ok 'no services for a job: the prolog fails it (fail_closed), or lets it run saying why (fail_open)' '
    { FLUX_JOB_ID=ƒA7 STUB_DEC=1007 on_node n1 fmbroker-cxi-prolog.sh 2>err; test $? = 1; } && cat err &&
    grep -q "job 1007: no VNI isolation on n1: .*job .1007. not found; the job does not start (FMBROKER_POLICY=fail_closed)" err &&
    FLUX_JOB_ID=ƒA7 STUB_DEC=1007 FMBROKER_POLICY=fail_open on_node n1 fmbroker-cxi-prolog.sh 2>err &&
    grep -q "running without it (FMBROKER_POLICY=fail_open)" err &&
    printf "FLUX_JOB_ID=ƒZ9\nFLUX_JOB_ID_PATH=/ƒZ9\n" >submit7.env &&
    STUB_DEC=1007 FMBROKER_POLICY=fail_open job_shell submit7.env 1007 >task7.env 2>err7 && cat err7 &&
    ! grep -q "^SLINGSHOT_" task7.env && grep -q "1007.*no record of the job on this node" err7 &&
    STUB_DEC=1007 job_shell submit7.env 1007 >task7.env 2>err7 &&
    ! grep -q "^SLINGSHOT_" task7.env && test ! -s err7
'
expect_ok 'system instance: the shell gives the job'"'"'s variables, the id path as step id, and drops stale ones' '
    printf "FLUX_JOB_ID=ƒZ9\nFLUX_JOB_ID_PATH=/ƒZ9\nSLINGSHOT_VNIS=999\nFI_CXI_STALE=1\nHOME=/h\n" >submit.env &&
    STUB_DEC=1001 job_shell submit.env 1001 >task.env &&
    grep -qx "SLINGSHOT_DEVICES=cxi0,cxi1" task.env && grep -qx "SLINGSHOT_SVC_IDS=3,3" task.env &&
    grep -qx "SLINGSHOT_VNIS=$(rm_call GET /v1/jobs/1001 | jq -r ".vnis[0]")" task.env &&
    grep -qx "FI_CXI_COLL_JOB_ID=c1-1001" task.env && grep -qx "FI_CXI_COLL_JOB_STEP_ID=/ƒA1" task.env &&
    ! grep -q FI_CXI_STALE task.env && grep -qx HOME=/h task.env
'
expect_ok 'a sub-instance captures the enclosing job'"'"'s variables at start, all but the step id' '
    mkdir -p "$T/sub" && chown 1000 "$T/sub" &&
    as_user 1000 env -i PATH="$PATH" $(grep -E "^(SLINGSHOT|FI_CXI)_" task.env) STUB_LEVEL=1 STUB_RUNDIR="$T/sub" \
        STUB_LOG="$T/sub/calls" sh "$F/fmbroker-capture.sh" &&
    test "$(stat -c "%u %a" "$T/sub/fmbroker-inherited.env")" = "1000 600" &&
    ! grep -q STEP_ID "$T/sub/fmbroker-inherited.env" &&
    test "$(grep -c . "$T/sub/fmbroker-inherited.env")" = "$(grep -cE "^(SLINGSHOT|FI_CXI)_" task.env | xargs expr -1 +)"
'
expect_ok 'a sub-instance job gets them without the broker, with its own id path as step id' '
    stop_broker &&
    printf "FLUX_JOB_ID=ƒZ9\nFLUX_JOB_ID_PATH=/ƒZ9\n" >sub.env &&
    STUB_LEVEL=1 STUB_JOBID_PATH=/ƒA1 STUB_RUNDIR="$T/sub" STUB_LOG="$T/sub/calls" job_shell sub.env 2 >subtask.env &&
    start_broker &&
    diff <(grep -E "^(SLINGSHOT|FI_CXI)_" task.env | grep -v STEP_ID) \
         <(grep -E "^(SLINGSHOT|FI_CXI)_" subtask.env | grep -v STEP_ID) &&
    grep -qx "FI_CXI_COLL_JOB_STEP_ID=/ƒA1/ƒB2" subtask.env
'
# A tree made by the sub-instance job's tasks, with the session token.
make_tree () { # STEP NIC
    curl -sf -X POST -H "Authorization: Bearer $(sed -n "s/^FI_CXI_COLL_MCAST_TOKEN=//p" task.env)" \
        --data-binary "{\"macs\":[\"$2\"],\"vni\":1,\"timeout\":5,\"jobID\":\"c1-1001\",\"jobStepID\":\"$1\"}" \
        "$fm_url/fabric/collectives/multicasts" >/dev/null
}
trees_of () { curl -sf "$fm_url/_mock/state" | jq --arg s "$1" "[.trees[] | select(.jobStepID == \$s)] | length"; }
expect_ok 'at the sub-instance job'"'"'s CLEANUP its trees go, with the inherited token' '
    make_tree /ƒA1/ƒB2 1:A2:B3 && make_tree /ƒA1 1:A2:B4 && test "$(trees_of /ƒA1/ƒB2)" = 1 &&
    as_user 1000 env PATH="$PATH" FMBROKER_CONF=$T/broker.conf FMBROKER_BINDIR=$FMB_BIN FMBROKER_HOOK_TIMEOUT=2 \
        FLUX_JOB_ID=ƒB2 STUB_JOBID_PATH=/ƒA1 STUB_LEVEL=1 STUB_RUNDIR="$T/sub" STUB_LOG="$T/sub/calls" \
        "$F/fmbroker-end.sh" &&
    for _ in $(seq 50); do test "$(trees_of /ƒA1/ƒB2)" = 0 && break; sleep 0.1; done &&
    test "$(trees_of /ƒA1/ƒB2)" = 0 &&
    test "$(trees_of /ƒA1)" = 1
'
expect_ok 'with the broker away, that cleanup is bounded and not fatal' '
    stop_broker && start=$(date +%s) &&
    FLUX_JOB_ID=ƒB3 STUB_JOBID_PATH=/ƒA1 STUB_LEVEL=1 STUB_RUNDIR="$T/sub" "$F/fmbroker-end.sh" 2>err &&
    test $(($(date +%s) - start)) -le 4 && start_broker &&
    grep -q "step-clean failed (exit 3: fmbroker: broker at .*Couldn.t connect to server" err
'
expect_ok 'epilog: seconds, never fatal, no report; housekeeping: busy past its window drains' '
    v=$(rm_call GET /v1/jobs/1001 | jq -r ".vnis[0]") &&
    cxi_set n1 "(.devices[].services[] | select(.vnis == [$v]) | .busy) = 100" &&
    FLUX_JOB_ID=ƒA1 STUB_DEC=1001 on_node n1 fmbroker-cxi-epilog.sh 2>err &&
    grep -q "housekeeping retries" err &&
    FLUX_JOB_ID=ƒA1 STUB_DEC=1001 on_node n2 fmbroker-cxi-epilog.sh &&
    test "$(rm_call GET "/v1/events?after=0" | jq "[.events[] | select(.type == \"node_drain_requested\")] | length")" = 0 &&
    { FLUX_JOB_ID=ƒA1 STUB_DEC=1001 FMBROKER_HOUSEKEEPING_S=1 on_node n1 fmbroker-cxi-housekeeping.sh 2>err; test $? = 1; } &&
    grep -q "draining this node" err &&
    rm_call GET "/v1/events?after=0" | jq -e "any(.events[]; .type == \"node_drain_requested\" and .job == \"1001\" and .detail.node == \"n1\")"
'
expect_ok 'housekeeping once the service frees up, and CLEANUP: the VNI is free' '
    v=$(rm_call GET /v1/jobs/1001 | jq -r ".vnis[0]") &&
    cxi_set n1 "(.devices[].services[] | select(.vnis == [$v]) | .busy) = 0" &&
    for n in n1 n2; do FLUX_JOB_ID=ƒA1 STUB_DEC=1001 on_node $n fmbroker-cxi-housekeeping.sh || return 1; done &&
    FLUX_JOB_ID=ƒA1 STUB_DEC=1001 "$F/fmbroker-end.sh" &&
    wait_for 50 0.1 sh -c "curl -sf --unix-socket $T/api.sock http://fmbroker/v1/jobs/1001 | jq -e \".state == \\\"released\\\"\"" &&
    ! rm_call GET /v1/vnis | jq -e --argjson v "$v" "any(.vnis[]; .vni == \$v)" >/dev/null
'
# The job-manager epilog finds no broker (a failover): it returns at once
# and a detached copy tries again, for FMBROKER_CLEANUP_RETRY_S.
end_logged () { grep -q "fmbroker-flux: job $1: $2" "$T/hooks.log"; }
expect_ok 'a CLEANUP that finds no broker returns at once; a detached copy ends the job once one answers, or says it gave up' '
    for j in 1007 1008; do rm_call PUT /v1/jobs/$j "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\"]}" >/dev/null || return 1; done &&
    stop_broker &&
    FMBROKER_HOOK_LOG=$T/hooks.log FMBROKER_CLEANUP_RETRY_S=2 FLUX_JOB_ID=ƒA8 STUB_DEC=1008 "$F/fmbroker-end.sh" 2>/dev/null &&
    FMBROKER_HOOK_LOG=$T/hooks.log FMBROKER_CLEANUP_RETRY_S=30 FLUX_JOB_ID=ƒA7 STUB_DEC=1007 "$F/fmbroker-end.sh" 2>/dev/null &&
    end_logged 1007 "end-job failed: .*Couldn.t connect to server.*; retrying for up to 30 s" &&
    wait_for 100 0.1 end_logged 1008 "end-job still failing after 2 s (.*); it keeps its VNIs and FM reservation until someone runs .fmbroker end-job 1008. once a broker answers" &&
    start_broker &&
    wait_for 300 0.1 end_logged 1007 "end-job done after [0-9]* s of retries" &&
    job_field 1007 .state | grep -qx "releasing\|released" && test "$(job_field 1008 .state)" = active
'
# The sweep, as fmbroker-flux-sweep.timer runs it: a job the broker holds
# that Flux no longer has active (inactive, or purged since) is ended.
states () { rm_call GET "/v1/jobs?limit=1000" | jq -r '.jobs[] | "\(.id) \(.state)"' | sort; }
expect_ok 'fmbroker-flux-sweep ends the jobs Flux no longer has active, and nothing without Flux'"'"'s list' '
    for j in 2001 2002 2003; do rm_call PUT /v1/jobs/$j "{\"uid\":1000,\"nodes\":[\"n1\",\"n2\"]}" >/dev/null || return 1; done &&
    states >before && grep -qx "1008 active" before &&
    { STUB_JOBS=$T/no-such FMBROKER_SWEEP_MIN_AGE_S=0 "$F/fmbroker-flux-sweep.sh" >out 2>/dev/null; test $? = 2; } &&
    grep -q "flux jobs failed: flux-jobs: error: Unable to connect to Flux; nothing ended" out &&
    states >now && diff before now &&
    printf "%s\n" "2001 RUN" "2003 CLEANUP" >"$T/flux.jobs" && : >"$T/hooks.log" &&
    STUB_JOBS=$T/flux.jobs FMBROKER_HOOK_LOG=$T/hooks.log FMBROKER_SWEEP_MIN_AGE_S=0 "$F/fmbroker-flux-sweep.sh" >out 2>/dev/null &&
    grep -q "^flux jobs -n --user=all --filter=pending,running -c 1000000 -o {id.dec} {state}$" "$STUB_LOG" &&
    states >now && grep -qx "2001 active" now && grep -qx "2003 active" now &&
    grep -q "^2002 \(releasing\|released\)$" now && grep -q "^1008 \(releasing\|released\)$" now &&
    grep -q "fmbroker-flux: sweep: job 2002: not active in Flux (inactive, or purged since), and its CLEANUP never reached the broker: ended now" "$T/hooks.log" &&
    test "$(grep -c " active$" now)" = 2
'
done_testing
