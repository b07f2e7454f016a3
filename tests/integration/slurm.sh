# slurm.sh: a real Slurm 22.05 (Debian's slurmctld, slurmd, munge) on
# 127.0.0.1 with two emulated nodes n1 n2, for t4010 and bench/; sourced
# after lib.sh, as root.  slurm_up LINES starts it with LINES added to
# slurm.conf; it is stopped at exit.  Each run has a munged of its own
# (AuthInfo=socket=...): runs of other worktrees come and go on the same
# machine, and one stopping the system's munged broke the other.
export SLURM_CONF="$T/slurm/slurm.conf"
S="$T/slurm"
slurm_ctld_port=$(free_ports 3) || { echo "Bail out! no free ports"; exit 1; }
munge_socket="$S/munge/munge.socket"

slurm_down () {
    for f in "$S"/slurmd-*.pid "$S/slurmctld.pid" "$S/munge/munged.pid"; do
        [ -s "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null
    done
    # (munged's command line names $S too)
    for _ in $(seq 50); do pgrep -f "slurm.*$S" >/dev/null || break; sleep 0.1; done
    pkill -KILL -f "slurm.*$S" 2>/dev/null
    return 0
}
on_exit slurm_down

# What explains a failed step: the daemons' own words, the queue, the broker.
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

# slurmd_start NODE: one emulated node's slurmd, in the background (a
# caller may redefine it, as bench/slurm-launch.sh does to give each
# node a /run of its own).
slurmd_start () {
    setsid /usr/sbin/slurmd -D -f "$SLURM_CONF" -N "$1" >>"$S/log/slurmd-$1.out" 2>&1 </dev/null &
}
# slurmctld_start: slurmctld in the background (a caller may redefine it,
# as bench/slurm-launch.sh gives it a mount namespace of its own).
slurmctld_start () {
    setsid /usr/sbin/slurmctld -D -f "$SLURM_CONF" >>"$S/log/slurmctld.out" 2>&1 </dev/null &
}

slurm_all_idle () { ! squeue -h | grep -q . && sinfo -h -o "%t" | sort -u | grep -qx idle; }

# slurm_up [SLURM.CONF LINES]: munge, then slurmctld and two slurmd; waits
# until both nodes are idle.
slurm_up () {
    if [ ! -s /etc/munge/munge.key ]; then runuser -u munge -- mungekey --create --keyfile=/etc/munge/munge.key; fi
    mkdir -p "$S" && install -d -o munge -g munge -m 0755 "$S/munge" &&
    runuser -u munge -- /usr/sbin/munged --socket="$munge_socket" --pid-file="$S/munge/munged.pid" \
        --log-file="$S/munge/munged.log" --seed-file="$S/munge/munged.seed" &&
    munge --socket="$munge_socket" -n </dev/null | unmunge --socket="$munge_socket" >/dev/null &&
    mkdir -p "$S/state" "$S/log" "$S/spool/n1" "$S/spool/n2" &&
    cat >"$SLURM_CONF" <<CONF &&
ClusterName=c1
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$munge_socket
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
SlurmctldPort=$slurm_ctld_port
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool/%n
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
PlugStackConfig=$S/plugstack.conf
SwitchType=switch/none
${1:-}
NodeName=n[1-2] NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((slurm_ctld_port + 1))-$((slurm_ctld_port + 2)) CPUs=2 RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
    touch -a "$S/plugstack.conf" &&
    # slurmd 22.05 loads a cgroup plugin even with linuxproc/task none:
    # give it v1 at a directory of its own, whatever the host has.
    mkdir -p "$S/cgroup" &&
    printf "CgroupPlugin=cgroup/v1\nCgroupMountpoint=%s\n" "$S/cgroup" >"$S/cgroup.conf" ||
        return 1
    slurmctld_start
    for n in n1 n2; do slurmd_start $n; done
    wait_for 300 0.1 sh -c "test \"\$(sinfo -h -o \"%t %D\" 2>/dev/null)\" = \"idle 2\""
}

# slurm_restart: slurmctld and both slurmd again, after a change slurmd
# reads only at start (plugstack.conf's job prologs, PrologFlags);
# waits until both nodes are idle.
slurm_restart () {
    for f in "$S"/slurmd-*.pid "$S/slurmctld.pid"; do
        [ -s "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null
    done
    for _ in $(seq 100); do
        pgrep -f "slurm(ctld|d) -D -f $SLURM_CONF" >/dev/null || break
        sleep 0.1
    done
    slurmctld_start
    for n in n1 n2; do slurmd_start $n; done
    wait_for 300 0.1 sh -c "test \"\$(sinfo -h -o \"%t %D\" 2>/dev/null)\" = \"idle 2\""
}
