#!/bin/bash
# t4010-slurm.sh: a real single-node Slurm (Debian's slurmctld, slurmd,
# munge on 127.0.0.1, two emulated nodes) wired with deploy/slurm's hooks
# to fmbrokerd, mockfm and fmbroker-cxi over the libcxi double.
#
# Jobs with enough nodes get a reservation and the FI_CXI_*/SLINGSHOT_*
# variables in their tasks' environment; small jobs do not; after the
# jobs end the FM holds nothing and the broker shows them released; with
# the broker stopped jobs still run.  Needs root (Slurm's daemons).
. "$(dirname "$0")/lib.sh"
if [ "$(id -u)" != 0 ] || ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    echo "ok 1 # SKIP needs root, slurmctld, slurmd and munge"
    echo "1..1"
    exit 0
fi
chmod 755 "$T"
export SLURM_CONF="$T/slurm/slurm.conf"
S="$T/slurm"
ctld_port=$(free_ports 3) || { echo "Bail out! no free ports"; exit 1; }
node_port=$((ctld_port + 1))
we_started_munge=

slurm_down () {
    for f in "$S"/slurmd-*.pid "$S/slurmctld.pid"; do
        [ -s "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null
    done
    for _ in $(seq 50); do pgrep -f "slurm.*$S" >/dev/null || break; sleep 0.1; done
    pkill -KILL -f "slurm.*$S" 2>/dev/null
    [ -n "$we_started_munge" ] && [ -s /run/munge/munged.pid ] && kill "$(cat /run/munge/munged.pid)" 2>/dev/null
    return 0
}
on_exit slurm_down

# What explains a failed step: the daemons' own words, the queue, the hooks.
slurm_diag () {
    echo "--- squeue / sinfo"
    squeue -a 2>&1 | head -20
    sinfo 2>&1 | head -5
    for f in "$S"/log/*; do
        [ -s "$f" ] || continue
        echo "--- $f (last 25 lines)"
        tail -n 25 "$f"
    done
    echo "--- broker.err (last 15 lines)"
    tail -n 15 "$T/broker.err" 2>/dev/null
}
step_fail_hook=slurm_diag

start_mockfm
write_broker_conf "[cxi]" "libcxi = $FMB_BIN/../mockcxi/new/libcxi.so.1"
sed -i 's/^rm_users = root$/rm_users = root/' "$T/broker.conf"
chmod 644 "$T/broker.conf"
start_broker

expect_ok 'munge and Slurm come up with the fmbroker hooks' '
    if [ ! -s /etc/munge/munge.key ]; then runuser -u munge -- mungekey --create --keyfile=/etc/munge/munge.key; fi
    install -d -o munge -g munge -m 0755 /run/munge &&
    if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
        runuser -u munge -- /usr/sbin/munged && we_started_munge=1
    fi
    munge -n </dev/null | unmunge >/dev/null &&
    mkdir -p "$S/state" "$S/log" "$S/hooks" "$S/spool/n1" "$S/spool/n2" &&
    for h in prolog_slurmctld epilog_slurmctld prolog epilog task_prolog; do
        cat >"$S/hooks/$h.sh" <<HOOK
#!/bin/sh
# test wrapper: where this build and its doubles are, then the real hook
export FMBROKER_CONF=$T/broker.conf FMBROKER_BINDIR=$FMB_BIN FMBROKER_SBINDIR=$FMB_BIN
export FMBROKER_CXI_ARGS="--state-dir $T/cxi-records-\${SLURMD_NODENAME:-ctld}"
export MOCKCXI_STATE=$T/\${SLURMD_NODENAME:-none}.cxi.json MOCKCXI_DEVICES=2
exec $FMB_SRC/deploy/slurm/$h.sh
HOOK
        chmod 755 "$S/hooks/$h.sh"
    done &&
    cat >"$SLURM_CONF" <<CONF &&
ClusterName=c1
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
MailProg=/bin/true
SchedulerParameters=batch_sched_delay=0
SlurmdParameters=config_overrides
SlurmctldPort=$ctld_port
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool/%n
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
PrologSlurmctld=$S/hooks/prolog_slurmctld.sh
EpilogSlurmctld=$S/hooks/epilog_slurmctld.sh
Prolog=$S/hooks/prolog.sh
Epilog=$S/hooks/epilog.sh
TaskProlog=$S/hooks/task_prolog.sh
PrologFlags=Alloc
NodeName=n[1-2] NodeHostname=localhost NodeAddr=127.0.0.1 Port=$node_port-$((node_port + 1)) CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
    # Nothing here uses cgroups (linuxproc, task/none), yet slurmd 22.05
    # loads a cgroup plugin at start and fails where /sys/fs/cgroup is
    # missing or cgroup2 without systemd (containers, CI): give it v1 at a
    # directory of its own, whatever the host has.
    mkdir -p "$S/cgroup" &&
    printf "CgroupPlugin=cgroup/v1\nCgroupMountpoint=%s\n" "$S/cgroup" >"$S/cgroup.conf" ||
        return 1
    setsid /usr/sbin/slurmctld -D -f "$SLURM_CONF" >"$S/log/slurmctld.out" 2>&1 </dev/null &
    for n in n1 n2; do setsid /usr/sbin/slurmd -D -f "$SLURM_CONF" -N $n >"$S/log/slurmd-$n.out" 2>&1 </dev/null & done
    wait_for 300 0.1 sh -c "test \"\$(sinfo -h -o \"%t %D\" 2>/dev/null)\" = \"idle 2\""
' || bail_out "Slurm did not come up; later steps would only wait"
job_gone () { ! squeue -h -j "$1" 2>/dev/null | grep -q .; }
expect_ok 'a 2-node job gets a reservation and the variables in its tasks'"'"' environment' '
    timeout 45 srun -N2 -l env >out2 &&
    grep -q "^0: FI_CXI_COLL_JOB_ID=c1-[0-9]" out2 && grep -q "^1: FI_CXI_COLL_JOB_ID=c1-[0-9]" out2 &&
    grep -q "^0: FI_CXI_COLL_MCAST_TOKEN=[0-9a-f]\{32,\}" out2 &&
    grep -q "^0: FI_CXI_COLL_FABRIC_MGR_URL=$fm_url/fabric/collectives/multicasts$" out2 &&
    grep -q "^0: FI_CXI_HWCOLL_ADDRS_PER_JOB=4$" out2 && grep -q "^0: FI_CXI_COLL_JOB_STEP_ID=0$" out2 &&
    grep -q "^0: SLINGSHOT_VNIS=[0-9]" out2 && grep -q "^0: SLINGSHOT_DEVICES=cxi0,cxi1$" out2 &&
    grep -q "^0: SLINGSHOT_SVC_IDS=[0-9]*,[0-9]*$" out2 && grep -q "^0: SLINGSHOT_TCS=0xa$" out2
'
big=$(sed -n "s/^0: FI_CXI_COLL_JOB_ID=c1-//p" out2)
expect_ok 'a 1-node job gets VNIs and services, but no collectives' '
    timeout 45 srun -N1 env >out1 &&
    grep -q "^SLINGSHOT_VNIS=[0-9]" out1 && grep -q "^SLINGSHOT_SVC_IDS=" out1 &&
    ! grep -q "^FI_CXI_COLL_MCAST_TOKEN=" out1
'
expect_ok 'after the jobs end: FM empty, jobs released, CXI services and VNIs gone' '
    wait_for 200 0.1 sh -c "! squeue -h | grep -q ." &&
    wait_for 100 0.1 sh -c "test -z \"\$(curl -sf $fm_url/_mock/state | jq -r \".jobs | keys[]\")\"" &&
    rm_call GET "/v1/jobs?limit=1000" >jobs.json &&
    jq -e ".jobs | length >= 2 and all(.[]; .state == \"released\")" jobs.json &&
    jq -e --arg b "$big" "any(.jobs[]; .id == \$b and .hwcoll.state == \"released\")" jobs.json &&
    wait_for 50 0.1 sh -c "curl -sf --unix-socket $T/api.sock http://fmbroker/v1/vnis | jq -e \".vnis == []\"" &&
    for n in n1 n2; do for d in 0 1; do
        jq -se ".[0].devices[$d].services | all(.[]; .id < 2)" "$T/$n.cxi.json" || return 1
    done; done &&
    sinfo -h -o "%t" | sort -u | grep -qx idle
'
expect_ok 'batch jobs go through the same hooks' '
    j=$(sbatch --parsable -N2 -o "$T/batch.out" --wrap "env") &&
    wait_for 200 0.1 job_gone "$j" &&
    grep -q "^FI_CXI_COLL_JOB_ID=c1-$j$" "$T/batch.out" &&
    rm_call GET "/v1/jobs/$j" | jq -e ".state == \"released\""
'
expect_ok 'with the broker stopped, jobs still run (without collectives)' '
    stop_broker &&
    timeout 45 srun -N2 -l env >out3 && grep -q "^0: SLURM_JOB_ID=" out3 &&
    ! grep -q "FI_CXI_COLL_MCAST_TOKEN" out3 &&
    wait_for 200 0.1 sh -c "! squeue -h | grep -q ." &&
    sinfo -h -o "%t" | sort -u | grep -qx idle
'
done_testing
