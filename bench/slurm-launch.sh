#!/bin/bash
# bench/slurm-launch.sh [BUILD_DIR]: what fmbroker adds to a user's job
# launch.  A real Slurm 22.05 (tests/integration/slurm.sh: two emulated
# nodes on 127.0.0.1) runs `srun -N2 true` (BENCH_SRUN_NODES, below) as
# nobody, alternately in each of these setups (BENCH_MODES, default
# without noprolog service true-hooks plugin):
#   without  plain Slurm: no plugin, no prolog of any kind
#   noprolog fmbroker's launch setup (doc/slurm.md): no Prolog=, no
#            PrologSlurmctld; the node service (fmbroker-cxi serve, one per
#            emulated node) makes each job's setup, RUN included ([api]
#            node_run = true), when the plugin in the job's first
#            slurmstepd on the node asks for it; the plugin with its
#            default state_dir; EpilogSlurmctld's CLEANUP; the epilog as in
#            service
#   service  the launch setup with a Prolog= (section 16): the node service
#            (fmbroker-cxi serve, one per emulated node), slurmd's Prolog=
#            fmbroker-slurm-prolog itself (it hands the job to the
#            resident service, whose broker connection stays open), the
#            plugin with its default state_dir, EpilogSlurmctld's CLEANUP;
#            the node services run in the setups that use them only.  The epilog is
#            fmbroker-slurm-prolog too, handing the job's end to the
#            service (section 18; before, fmbroker-cxi itself)
#   service-timeout  as service, with PrologEpilogTimeout=120 (slurmd
#            then polls for each hook's exit from 10 ms on)
#   true-hooks  no fmbroker but the plugin (fail_open): Prolog=/bin/true
#            and Epilog=/bin/true, what any node prolog costs in this Slurm
#   true-prolog, true-epilog, true-ectld  plain Slurm with
#            Prolog=/bin/true, Epilog=/bin/true or EpilogSlurmctld=/bin/true
#            alone: what each of Slurm's hooks costs by itself
#   true-ends  plain Slurm with Epilog=/bin/true and
#            EpilogSlurmctld=/bin/true: the two job-end hooks noprolog
#            needs (the node's end, the broker's CLEANUP), doing nothing
#   noprolog-scriptctld  as noprolog, with EpilogSlurmctld
#            deploy/slurm/epilog_slurmctld.sh (a shell running fmbroker
#            end-job): the CLEANUP hook before fmbroker-slurm-cleanup
#   noprolog-truectld  as noprolog, with EpilogSlurmctld=/bin/true: what
#            the CLEANUP's own work costs beyond Slurm's handling of the
#            hook (a measurement only: the broker never hears that a job
#            ended, so past about 250 launches of it the nodes reach
#            [api] node_max_jobs and their RUNs are refused)
#   service-noectld  as service, without EpilogSlurmctld: what the
#            controller's CLEANUP hook costs (a measurement only: the
#            broker then never hears that a job ended)
#   service-ectld-late  as service, EpilogSlurmctld's work starting 0.1 s
#            late (a bash waiting on a FIFO: no process): whether what it
#            costs the launch is Slurm's or its work's, on CPUs srun shares
#            here (a real controller is another host)
#   wrappers the plugin (fail_open) and the emulation's own prolog and
#            epilog wrappers running /bin/true: the stand-in's own cost,
#            and the floor of the prolog's clock (a fork and an exec)
#   plugin   the plugin alone: loaded by srun and each step, with no node
#            prolog or epilog (policy=fail_open: no record, no isolation)
# Each emulated node's slurmd (its prologs, epilogs and steps) runs in a
# mount namespace of its own in which /run/fmbroker-cxi is that node's
# records and service socket, as on a real node: the launch setup runs
# the programs a site configures, with no stand-in between slurmd and
# them.
# Every setup has EpilogSlurmctld's CLEANUP (it starts as srun ends) when
# fmbroker is in it: fmbroker-slurm-cleanup itself, as doc/slurm.md
# configures it, its settings read from /etc/default/fmbroker
# (slurmctld runs in a mount namespace whose /etc/default is this run's);
# the run ends by saying how many jobs the broker still holds active.
# A launch's time is bash's clock ($EPOCHREALTIME)
# around setpriv and srun.  Prints per setup: median, p90, max, the
# launches over 1 s, the ratio to "without", the host's steal time
# while the setup's launches ran (other guests' CPU on a shared VM: a
# run with it is disturbed), the CPU time per launch of the whole host
# (over each block: with the job-end hooks' and this bench's own polls
# for an idle cluster; and within srun's time alone, from /proc/stat
# read by the shell's builtin) and of fmbroker's own daemons (the broker
# with the mock FM, the two node services), and each hook's own time:
# the node prolog (its wrapper's clock where a bash wrapper runs it: the
# stand-in for the emulated nodes' NICs; from the kernel's exec and exit
# events otherwise), the PrologSlurmctld script, and the step-end
# cleanup on node 0 (plugin, SlurmdDebug=verbose).  With perf(1) (and
# BENCH_TRACE not 0) the kernel's process exec and exit events are
# recorded throughout, and a table splits each setup's launch into its
# phases: srun's start to the step's slurmstepd, slurmstepd to the tasks,
# the tasks' end to srun's exit.  With BENCH_PERF=1, every CPU is
# sampled throughout (perf cpu-clock) and a table gives the CPU each
# command took within srun's time, per launch of each setup: which
# processes a setup adds to the launch's own time (bench/cpu-in-launch.py).
# The broker gives a job of 2 nodes or
# more an FM reservation for its collectives (min_nodes = 2: every
# 2-node launch here pays for one); hwcoll_min_nodes=64, the shipped
# default, measures a 2-node job as a site's default makes it, with none.
# BENCH_SRUN_NODES=1 runs `srun -N1 true` instead (default 2, the
# emulation's two nodes): one node's step and its node service on this
# host's 2 cores, as each node of a cluster has cores of its own, where
# -N2 puts both nodes' steps and services on them; a 1-node job gets no
# FM reservation, and one node's setup.
# BENCH_SETTLE=S sleeps S seconds once the cluster is idle, before
# each launch of every setup: whether work left over from the last job
# (the broker's release, the node services' deferred reports) costs the
# next launch.
# Needs root.  Bounded: BENCH_LAUNCHES (100) per
# setup, in blocks of BENCH_BLOCK (25), every daemon stopped at exit.
set -u
build=$(cd "${1:-$(dirname "$0")/../build}" && pwd)
export FMB_BIN=$build/bin
export FMB_SRC=${FMB_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/../tests/integration/lib.sh"
N=${BENCH_LAUNCHES:-100}
B=${BENCH_BLOCK:-25}
MODES=${BENCH_MODES:-without noprolog service true-hooks plugin}
SRUN_NODES=${BENCH_SRUN_NODES:-2}
case $SRUN_NODES in 1 | 2) ;; *) echo "BENCH_SRUN_NODES: 1 or 2 (the emulation has two nodes)" >&2; exit 1 ;; esac
[ "$(id -u)" = 0 ] && [ -f "$FMB_BIN/../lib/fmbroker_spank.so" ] || { echo "needs root and the plugin" >&2; exit 1; }
chmod 755 "$T"
. "$FMB_SRC/tests/integration/slurm.sh"
fm_state_file=
start_mockfm || exit 1
# As a site runs: each node its own token (client_token_file %n).
tls_and_node_tokens || exit 1
start_broker_for_nodes n1 n2 -- "agent_run = true" || exit 1
# BENCH_SERVERS_NICE=N: the broker and the mock FM at nice N, a rough
# stand-in for their own hosts on a real cluster (they share this host's
# 2 cores with slurmctld, both nodes and srun here); a diagnostic only,
# not the setup the figures are for.
[ -n "${BENCH_SERVERS_NICE:-}" ] && renice -n "$BENCH_SERVERS_NICE" -p "$broker_pid" "$fm_pid" >/dev/null
mkdir -p "$S/hooks"
# The nodes' job records and report spools on tmpfs, as in /run on a
# real node (the test host's /run and /tmp are a disk, where each
# record's fsync would be timed as the prolog's), and the mock NICs'
# state (a NIC writes no file: on the disk, each service made or
# destroyed cost the job's setup 1-2 ms of writes, section 18).
# BENCH_NODE_STATE=disk puts the records and spools on this host's
# ordinary disk instead (/var/tmp), as a node without a tmpfs /run has
# them; the NICs' stand-in state stays on tmpfs either way.
case ${BENCH_NODE_STATE:-tmpfs} in
tmpfs) R=$(mktemp -d /dev/shm/fmbbench.XXXXXX) ;;
disk) R=$(mktemp -d /var/tmp/fmbbench.XXXXXX) ;;
*) echo "BENCH_NODE_STATE: tmpfs or disk" >&2; exit 1 ;;
esac
chmod 755 "$R" || exit 1
NIC=$(mktemp -d /dev/shm/fmbnic.XXXXXX) || exit 1
rm_records () { rm -rf "$R" "$NIC"; }
on_exit rm_records
mkdir -m 0755 "$R/rec-n1" "$R/rec-n2" || exit 1
# /run/fmbroker-cxi in each node's namespace is its $R/rec-NODE.  The
# host's directory (as the package's tmpfiles.d makes it) is left in
# place: another run's nodes may have their records mounted on it.
run_dir=/run/fmbroker-cxi
mkdir -p -m 0755 $run_dir || exit 1
slurmd_start () {
    setsid unshare -m --propagation private sh -c \
        'mount --bind "$1" '$run_dir' && exec /usr/sbin/slurmd -D -f "$2" -N "$3"' \
        sh "$R/rec-$1" "$SLURM_CONF" "$1" >>"$S/log/slurmd-$1.out" 2>&1 </dev/null &
}
# PrologSlurmctld notes "NAME MODE START_NS END_NS" in $T/hooks.times (the
# wrapper's sh is part of the time: a site's hook is a script too); its
# settings, as EpilogSlurmctld's, from slurmctld's /etc/default (below).
for h in prolog_slurmctld; do
    cat >"$S/hooks/$h.sh" <<HOOK
#!/bin/sh
t0=\$(date +%s%N)
$FMB_SRC/deploy/slurm/$h.sh
read m <$S/mode
echo "$h \$m \$t0 \$(date +%s%N)" >>$T/hooks.times
HOOK
done
# EpilogSlurmctld: the hook itself, as doc/slurm.md configures it, with
# no wrapper (a shell more per job, measured as fmbroker's before), and
# its settings where a site keeps them, /etc/default/fmbroker (slurmctld
# gives its hooks none of its own environment): slurmctld runs in a
# mount namespace of its own whose /etc/default is a copy of the host's
# with this run's settings.  Untimed (srun does not wait for it).
# (FMBROKER_SHAREDIR: where its script is, for what it hands over; a
# package installs it beside the program)
ectld=$FMB_BIN/fmbroker-slurm-cleanup
mkdir "$S/etc-default" && cp -a /etc/default/. "$S/etc-default/" && rm -f "$S/etc-default/fmbroker" &&
    printf "FMBROKER_CONF=%s\nFMBROKER_BINDIR=%s\nFMBROKER_SHAREDIR=%s\n" "$T/broker.conf" "$FMB_BIN" \
        "$FMB_SRC/deploy" >"$S/etc-default/fmbroker" ||
    exit 1
slurmctld_start () {
    setsid unshare -m --propagation private sh -c \
        'mount --bind "$1" /etc/default && exec /usr/sbin/slurmctld -D -f "$2"' \
        sh "$S/etc-default" "$SLURM_CONF" >>"$S/log/slurmctld.out" 2>&1 </dev/null &
}
# The node prolog and epilog: fmbroker-cxi as slurmd's Prolog=/Epilog=,
# through a wrapper that gives each emulated node its own NICs and
# records (a real node's are its own) and times the run without a fork
# (bash's clock).
for h in prolog epilog; do
    cat >"$S/hooks/$h.sh" <<HOOK
#!/bin/bash
t0=\$EPOCHREALTIME
read m <$S/mode
[ \$m = wrappers ] && { /bin/true; echo "$h \$m \${t0/./} \${EPOCHREALTIME/./}" >>$T/hooks.times; exit 0; }
conf=$T/node.conf
case \$m in node | nohold) conf=$T/node-run.conf ;; esac
export MOCKCXI_STATE=$NIC/\$SLURMD_NODENAME.cxi.json MOCKCXI_DEVICES=2
$FMB_BIN/fmbroker-cxi -c \$conf --state-dir $R/rec-\$SLURMD_NODENAME
rc=\$?
echo "$h \$m \${t0/./} \${EPOCHREALTIME/./}" >>$T/hooks.times
exit \$rc
HOOK
done
# EpilogSlurmctld's hook starting 0.1 s late, without a process to wait.
mkfifo "$S/late.fifo" || exit 1
cat >"$S/hooks/epilog_slurmctld-late.sh" <<HOOK
#!/bin/bash
exec 3<>$S/late.fifo
read -r -t 0.1 -u 3
exec $ectld
HOOK
# The service setups' epilog: a dash that gives fmbroker-cxi the emulated
# node's mock NICs (a real node has its own) and execs it.
cat >"$S/hooks/epilog-sh.sh" <<HOOK
#!/bin/sh
MOCKCXI_STATE=$NIC/\$SLURMD_NODENAME.cxi.json MOCKCXI_DEVICES=2 exec $FMB_BIN/fmbroker-cxi -c $T/node-run.conf --state-dir $R/rec-\$SLURMD_NODENAME
HOOK
chmod 755 "$S"/hooks/*.sh
plugin="required $FMB_BIN/../lib/fmbroker_spank.so config=$T/node.conf state_dir=$R/rec-%n"
# the launch setup's: the default state_dir, /run/fmbroker-cxi
plugin_run="required $FMB_BIN/../lib/fmbroker_spank.so config=$T/node.conf"
servicehooks=$(printf "Prolog=%s\nEpilog=%s" "$FMB_BIN/fmbroker-slurm-prolog" "$FMB_BIN/fmbroker-slurm-prolog")
# the launch setup's nodes make the RUN ([api] node_run = true)
sed "/^\[api\]/a node_run = true" "$T/node.conf" >"$T/node-run.conf" || exit 1
# (debug: the node service logs each setup's time, tabled below)
printf "[broker]\nlog_level = debug\n" >>"$T/node-run.conf"
# the service setups' node services, one per emulated node, as
# fmbroker-cxi.service runs them; up only in those setups (the others
# are measured without them)
start_services () {
    for n in n1 n2; do
        [ -S "$R/rec-$n/service.sock" ] && continue
        FMBROKER_NODE=$n MOCKCXI_STATE=$NIC/$n.cxi.json MOCKCXI_DEVICES=2 $FMB_BIN/fmbroker-cxi \
            -c "$T/node-run.conf" --state-dir "$R/rec-$n" serve 2>>"$T/serve-$n.log" &
        echo $! >"$T/serve-$n.pid"
    done
    wait_for 100 0.05 test -S "$R/rec-n1/service.sock" && wait_for 100 0.05 test -S "$R/rec-n2/service.sock"
}
stop_services () {
    for n in n1 n2; do
        [ -s "$T/serve-$n.pid" ] && kill "$(cat "$T/serve-$n.pid")" 2>/dev/null && : >"$T/serve-$n.pid"
    done
    wait_for 100 0.05 sh -c "! test -e $R/rec-n1/service.sock && ! test -e $R/rec-n2/service.sock"
}
on_exit stop_services
nodehooks=$(printf "Prolog=%s\nEpilog=%s" "$S/hooks/prolog.sh" "$S/hooks/epilog.sh")
# A setup is slurm.conf lines (Include'd) and a plugstack.conf; slurmd
# decides at start whether job prologs run SPANK plugins, and PrologFlags
# are read at start: every change restarts the daemons (not timed).
mode () {
    echo "$1" >"$S/mode"
    case $1 in
    without) echo "# plain Slurm" >"$S/mode.conf" && : >"$S/plugstack.conf" ;;
    ctld) printf "PrologSlurmctld=%s\nEpilogSlurmctld=%s\nPrologFlags=Alloc\n%s\n" \
        "$S/hooks/prolog_slurmctld.sh" "$ectld" "$nodehooks" >"$S/mode.conf" &&
        echo "$plugin" >"$S/plugstack.conf" ;;
    node) printf "EpilogSlurmctld=%s\n%s\n" "$ectld" "$nodehooks" >"$S/mode.conf" &&
        echo "$plugin" >"$S/plugstack.conf" ;;
    service) printf "EpilogSlurmctld=%s\n%s\n" "$ectld" "$servicehooks" >"$S/mode.conf" &&
        echo "$plugin_run" >"$S/plugstack.conf" ;;
    noprolog) printf "EpilogSlurmctld=%s\nEpilog=%s\n" "$ectld" "$FMB_BIN/fmbroker-slurm-prolog" \
        >"$S/mode.conf" && echo "$plugin_run" >"$S/plugstack.conf" ;;
    noprolog-scriptctld) printf "EpilogSlurmctld=%s\nEpilog=%s\n" "$FMB_SRC/deploy/slurm/epilog_slurmctld.sh" \
        "$FMB_BIN/fmbroker-slurm-prolog" >"$S/mode.conf" && echo "$plugin_run" >"$S/plugstack.conf" ;;
    noprolog-truectld) printf "EpilogSlurmctld=/bin/true\nEpilog=%s\n" "$FMB_BIN/fmbroker-slurm-prolog" \
        >"$S/mode.conf" && echo "$plugin_run" >"$S/plugstack.conf" ;;
    service-timeout) printf "EpilogSlurmctld=%s\n%s\nPrologEpilogTimeout=120\n" "$ectld" \
        "$servicehooks" >"$S/mode.conf" && echo "$plugin_run" >"$S/plugstack.conf" ;;
    true-hooks) printf "Prolog=/bin/true\nEpilog=/bin/true\n" >"$S/mode.conf" &&
        echo "required $FMB_BIN/../lib/fmbroker_spank.so policy=fail_open" >"$S/plugstack.conf" ;;
    true-prolog) printf "Prolog=/bin/true\n" >"$S/mode.conf" && : >"$S/plugstack.conf" ;;
    true-epilog) printf "Epilog=/bin/true\n" >"$S/mode.conf" && : >"$S/plugstack.conf" ;;
    true-ectld) printf "EpilogSlurmctld=/bin/true\n" >"$S/mode.conf" && : >"$S/plugstack.conf" ;;
    true-ends) printf "EpilogSlurmctld=/bin/true\nEpilog=/bin/true\n" >"$S/mode.conf" && : >"$S/plugstack.conf" ;;
    wrappers) printf "%s\n" "$nodehooks" >"$S/mode.conf" &&
        echo "required $FMB_BIN/../lib/fmbroker_spank.so policy=fail_open" >"$S/plugstack.conf" ;;
    plugin) printf "# the plugin alone\n" >"$S/mode.conf" &&
        echo "required $FMB_BIN/../lib/fmbroker_spank.so policy=fail_open" >"$S/plugstack.conf" ;;
    service-ectld-late) printf "EpilogSlurmctld=%s\n%s\n" "$S/hooks/epilog_slurmctld-late.sh" "$servicehooks" \
        >"$S/mode.conf" && echo "$plugin_run" >"$S/plugstack.conf" ;;
    service-noectld) printf "%s\n" "$servicehooks" >"$S/mode.conf" && echo "$plugin_run" >"$S/plugstack.conf" ;;
    nohold) printf "EpilogSlurmctld=%s\nPrologFlags=Alloc,NoHold\n%s\n" "$ectld" \
        "$nodehooks" >"$S/mode.conf" &&
        echo "$plugin" >"$S/plugstack.conf" ;;
    esac
    case $1 in service* | noprolog*) start_services ;; *) stop_services ;; esac || return 1
    [ -s "$S/slurmctld.pid" ] || return 0
    wait_for 300 0.05 slurm_all_idle
    slurm_restart
}
echo "# plain Slurm" >"$S/mode.conf"
slurm_up "Include $S/mode.conf
SlurmdDebug=verbose" || { slurm_diag; exit 1; }

# The host's CPU time (/proc/stat's first line, in clock ticks), read by
# the shell's builtin (no process of its own, even around each srun):
# cpu_steal, taken by other guests (on a shared VM, other tenants'
# bursts slow some blocks and not others, and a setup's median with them
# is not its own); cpu_total, all of it; cpu_busy, user, nice, system,
# irq and softirq (every process's CPU, fmbroker's and Slurm's).
read_cpu () {
    local u n s i w q sq st
    read -r _ u n s i w q sq st _ </proc/stat
    cpu_steal=$st cpu_total=$((u + n + s + i + w + q + sq + st)) cpu_busy=$((u + n + s + q + sq))
}
cpu_jiffies () { read_cpu && echo "$cpu_steal $cpu_total $cpu_busy"; }
# One srun -N$SRUN_NODES true from an idle cluster, as nobody: its wall time in ms,
# in bash's own clock (no process is started to read it: a `date` after
# srun would wait behind the job's epilogs, which on this host share its
# 2 cores and on a real cluster run on other hosts).
launch () { # MODE
    wait_for 300 0.05 slurm_all_idle || return 1
    [ -z "${BENCH_SETTLE:-}" ] || sleep "$BENCH_SETTLE"
    read_cpu
    local busy0=$cpu_busy
    t0=$EPOCHREALTIME
    setpriv --reuid=nobody --regid=nogroup --clear-groups srun -N"$SRUN_NODES" true || return 1
    t1=$EPOCHREALTIME
    read_cpu
    # in tenths of a ms: whole ms made the ratio of two ~35 ms medians
    # move in steps of 0.03
    local us=$((${t1//[!0-9]/} - ${t0//[!0-9]/}))
    echo "$((us / 1000)).$((us / 100 % 10))" >>"$T/$1.ms"
    echo $((cpu_busy - busy0)) >>"$T/$1.busy"
    echo "$1 ${t0/,/.} ${t1/,/.}" >>"$T/windows" # (a locale's decimal comma)
}
for m in $MODES; do : >"$T/$m.ms" && : >"$T/$m.busy" && : >"$T/steal.$m"; done
# Per block (cpu_jiffies, before and after): the steal while a setup's
# launches ran, and the host's busy time, the job-end hooks' and this
# bench's polls included; per launch (.busy): the busy time within
# srun's own.
: >"$T/hooks.times"
for m in $MODES; do : >"$T/clean.$m" && : >"$T/wait.$m" && : >"$T/own.$m"; done
# The CPU fmbroker's own daemons took (clock ticks, /proc/PID/stat): the
# broker with the mock FM (on a real cluster, other hosts), and the two
# nodes' services (on a real cluster, a core of each node beside its
# slurmstepd).  Their work after a block's last launch (its end's
# reports) is counted too: it is the launches' as well.
proc_ticks () { for p; do [ -n "$p" ] && awk '{ s += $14 + $15 } END { print s + 0 }' "/proc/$p/stat" 2>/dev/null; done | awk '{ s += $1 } END { print s + 0 }'; }
own_ticks () {
    echo "$(proc_ticks "$broker_pid" "$fm_pid") $(proc_ticks "$(cat "$T/serve-n1.pid" 2>/dev/null)" "$(cat "$T/serve-n2.pid" 2>/dev/null)")"
}
# The kernel's exec and exit events, for the phases of each launch; a
# block's setup is named by the exec of $T/mark/SETUP (a /bin/true).
mkdir "$T/mark" && for m in warmup $MODES; do ln -s /bin/true "$T/mark/$m"; done
trace_pid= trace_started=
if [ "${BENCH_TRACE:-1}" != 0 ] && command -v perf >/dev/null; then
    perf record -q -a -e sched:sched_process_exec -e sched:sched_process_exit \
        -o "$T/sched.data" >"$T/perf.out" 2>&1 &
    trace_pid=$! trace_started=1
    sleep 1
fi
# BENCH_PERF=1: every CPU sampled (cpu-clock, 999 Hz, on the realtime
# clock that $EPOCHREALTIME reads), for the table of the CPU each
# command takes within srun's time (bench/cpu-in-launch.py)
cpu_pid=
if [ "${BENCH_PERF:-0}" = 1 ] && command -v perf >/dev/null; then
    perf record -q -a -e cpu-clock -F 999 -k realtime -o "$T/cpu.data" >"$T/perf-cpu.out" 2>&1 &
    cpu_pid=$!
    sleep 1
fi
trace_stop () {
    for p in $trace_pid $cpu_pid; do kill -INT "$p" && wait "$p"; done 2>/dev/null
    trace_pid= cpu_pid=
}
on_exit trace_stop
blocks=$(((N + B - 1) / B))
for _ in $(seq "$blocks"); do
    for m in $MODES; do
        # the first launch after a restart is not counted
        "$T/mark/warmup"
        mode $m && launch warmup || { echo "launch failed ($m)" >&2; slurm_diag >&2; exit 1; }
        "$T/mark/$m"
        off1=$(stat -c %s "$S/log/slurmd-n1.log") off2=$(stat -c %s "$S/log/slurmd-n2.log")
        before=$(cpu_jiffies) own0=$(own_ticks)
        for _ in $(seq "$B"); do
            launch $m || { echo "launch failed ($m)" >&2; slurm_diag >&2; exit 1; }
        done
        echo "$before $(cpu_jiffies)" >>"$T/steal.$m"
        echo "$own0 $(own_ticks)" >>"$T/own.$m"
        wait_for 300 0.05 slurm_all_idle
        # the plugin's own timing of the step-end cleanup (node 0) and of
        # each node's wait for the service's setup
        { tail -c +$((off1 + 1)) "$S/log/slurmd-n1.log"; tail -c +$((off2 + 1)) "$S/log/slurmd-n2.log"; } |
            grep -o "step cleanup done in [0-9]* ms\|node service setup wait [0-9.]* ms" |
            awk -v c="$T/clean.$m" -v w="$T/wait.$m" '{print $(NF - 1) >>($2 == "cleanup" ? c : w)}'
    done
done
wait_for 300 0.05 slurm_all_idle
trace_stop
load=$(cut -d' ' -f1-3 /proc/loadavg)
pct () { sort -g | awk -v p="$1" '{a[NR] = $1} END {i = int(NR * p / 100 + 0.999); if (i < 1) i = 1; print a[i]}'; }
wo=$(pct 50 <"$T/without.ms" 2>/dev/null)
echo "# fmbroker with Slurm: launch cost, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# machine: $(nproc) cores, load average $load at the end"
echo
echo "## srun -N$SRUN_NODES true as nobody, from an idle cluster, setups alternated in blocks of $B (node state: ${BENCH_NODE_STATE:-tmpfs}; load $(cut -d" " -f1-3 /proc/loadavg))"
echo "| setup | launches | median ms | p90 ms | max ms | over 1 s | median / without | host steal % | host CPU ms per launch | host CPU ms within srun's time | broker + FM CPU ms per launch | node services CPU ms per launch |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
hz=$(getconf CLK_TCK)
for m in $MODES; do
    f=$T/$m.ms
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n" "$m" "$(wc -l <"$f")" "$(pct 50 <"$f")" "$(pct 90 <"$f")" \
        "$(sort -g "$f" | tail -1)" "$(awk '$1 > 1000' "$f" | wc -l)" \
        "$(awk -v a="$(pct 50 <"$f")" -v b="${wo:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')" \
        "$(awk '{ s += $4 - $1; t += $5 - $2 } END { if (t > 0) printf "%.1f", 100 * s / t; else print "-" }' "$T/steal.$m")" \
        "$(awk -v hz="$hz" -v n="$(wc -l <"$f")" '{ s += $6 - $3 } END { printf "%.1f", n ? 1000 * s / hz / n : 0 }' "$T/steal.$m")" \
        "$(awk -v hz="$hz" '{ s += $1 } END { printf "%.1f", NR ? 1000 * s / hz / NR : 0 }' "$T/$m.busy")" \
        "$(awk -v hz="$hz" -v n="$(wc -l <"$f")" '{ s += $3 - $1 } END { printf "%.1f", n ? 1000 * s / hz / n : 0 }' "$T/own.$m")" \
        "$(awk -v hz="$hz" -v n="$(wc -l <"$f")" '$4 >= $2 { s += $4 - $2 } END { printf "%.1f", n ? 1000 * s / hz / n : 0 }' "$T/own.$m")"
done
echo
# Each hook's own time, per setup.
hook_row () { # NAME MODE VALUES-FILE
    [ -s "$3" ] || return 0
    printf "| %s | %s | %s | %s | %s | %s |\n" "$1" "$2" "$(pct 50 <"$3")" "$(pct 90 <"$3")" \
        "$(sort -g "$3" | tail -1)" "$(wc -l <"$3")"
}
echo "## each hook's own time (goal: 10 ms each)"
echo "| hook | setup | median ms | p90 ms | max ms | runs |"
echo "|---|---|---|---|---|---|"
for m in $MODES; do
    awk -v m="$m" '$1 == "prolog" && $2 == m { print int(($4 - $3) / 1e3) }' "$T/hooks.times" >"$T/h.prolog.$m"
    awk -v m="$m" '$1 == "prolog_slurmctld" && $2 == m { print int(($4 - $3) / 1e6) }' "$T/hooks.times" >"$T/h.ctld.$m"
    hook_row "node prolog (Prolog=, over TLS; the wrapper's clock)" "$m" "$T/h.prolog.$m"
    hook_row "PrologSlurmctld (hook script, fmbroker run-job)" "$m" "$T/h.ctld.$m"
    hook_row "the step's wait for the node service's setup (the plugin in slurmstepd, blocked before the tasks)" "$m" "$T/wait.$m"
    hook_row "step-end cleanup on node 0 (the plugin's own timing)" "$m" "$T/clean.$m"
done
# the node service's own log: a job's setup from its request to its
# answer (the RUN over the kept TLS connection, both NICs' services, the
# records), every setup of the setups that use the service
cat "$T"/serve-n*.log 2>/dev/null | sed -n 's/.*: prolog made in \([0-9]*\) ms, .*(exit 0.*/\1/p' >"$T/h.engine"
hook_row "the node engine's setup of a job (the service's log)" "noprolog, service" "$T/h.engine"
# and the CPU its thread took meanwhile (the node's own work, beside the
# job's slurmstepd), in tenths of a ms
cat "$T"/serve-n*.log 2>/dev/null | sed -n 's/.*: prolog made in [0-9]* ms, \([0-9]*\) us of CPU (exit 0.*/\1/p' |
    awk '{ print int($1 / 100) / 10 }' >"$T/h.engine-cpu"
hook_row "the node engine's setup of a job: its thread's CPU" "noprolog, service" "$T/h.engine-cpu"
echo
[ -s "$T/sched.data" ] && perf script -i "$T/sched.data" -F pid,time,event,trace 2>>"$T/perf.out" |
    awk -f "$FMB_SRC/bench/launch-phases.awk" >"$T/phases"
[ -n "$trace_started" ] && [ ! -s "$T/phases" ] &&
    { echo "(no phase table: perf recorded nothing usable; its words:)"; cat "$T/perf.out"; echo; }
[ -s "$T/phases" ] && {
    echo "## each launch's phases, from the kernel's exec and exit events (median ms)"
    echo "| setup | launches | srun's start to the step's slurmstepd | slurmstepd to the tasks | the tasks' end to srun's exit | whole launch | node prolog, each (exec to exit) |"
    echo "|---|---|---|---|---|---|---|"
    phase () { awk -v m="$1" -v k="$2" '$1 == m && $2 == k { print $3 }' "$T/phases"; } # MODE PHASE
    for m in $MODES; do
        printf "| %s | %s | %s | %s | %s | %s | %s |\n" "$m" "$(phase "$m" launch | wc -l)" \
            "$(phase "$m" stepd | pct 50)" "$(phase "$m" tasks | pct 50)" "$(phase "$m" end | pct 50)" \
            "$(phase "$m" launch | pct 50)" "$(phase "$m" prolog | pct 50)"
    done
    echo
}
[ "${BENCH_PERF:-0}" = 1 ] && [ ! -s "$T/cpu.data" ] &&
    { echo "(no table of the CPU within srun's time: perf recorded nothing; its words:)"; cat "$T/perf-cpu.out"; echo; }
[ -s "$T/cpu.data" ] && {
    echo "## the host's CPU within srun's time, per command (ms per launch; perf cpu-clock at 999 Hz)"
    perf script -i "$T/cpu.data" -F comm,time 2>>"$T/perf-cpu.out" |
        python3 "$FMB_SRC/bench/cpu-in-launch.py" "$T/windows" $MODES
    echo
}
# Every CLEANUP got through?  (Setups without fmbroker's EpilogSlurmctld
# leave theirs active by design.)
active_jobs () {
    _list=$("$FMB_BIN/fmbroker" -c "$T/broker.conf" jobs --state active --limit 100000 --noheader) || return 1
    if [ -z "$_list" ]; then echo 0; else printf "%s\n" "$_list" | wc -l; fi
}
no_active_jobs () { [ "$(active_jobs)" = 0 ]; }
if ! wait_for 50 0.1 no_active_jobs; then
    if ! n_active=$(active_jobs); then
        echo "(could not ask the broker which jobs it still holds: whether every CLEANUP got through is unknown)"
    else
        case " $MODES " in
        *" noprolog-truectld "* | *" service-noectld "*)
            echo "(jobs still active at the broker after the run: $n_active; the setups without fmbroker's CLEANUP leave theirs)" ;;
        *) echo "(jobs still active at the broker after the run: $n_active, their CLEANUP not through)" ;;
        esac
    fi
fi
echo "(load average at the end: $load)"
