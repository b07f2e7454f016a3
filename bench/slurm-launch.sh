#!/bin/bash
# bench/slurm-launch.sh [BUILD_DIR]: what fmbroker adds to a user's job
# launch.  A real Slurm 22.05 (tests/integration/slurm.sh: two emulated
# nodes on 127.0.0.1) runs `srun -N2 true` as nobody, alternately in each
# of these setups (BENCH_MODES, default without service true-hooks wrappers node):
#   without  plain Slurm: no plugin, no prolog of any kind
#   ctld     the classic setup: RUN from PrologSlurmctld, PrologFlags=Alloc,
#            the node prolog (fmbroker-cxi as slurmd's Prolog=) over TLS
#            with its node's token
#   node     fmbroker's launch setup (doc/slurm.md): the RUN made by the
#            node prolog ([api] node_run = true), no PrologSlurmctld, no
#            PrologFlags=Alloc: the step waits for the prolog inside
#            slurmd instead of srun polling the controller
#   nohold   as node, with PrologFlags=Alloc,NoHold: the node prologs
#            start at allocation and the step waits for them in slurmd
#   service  as node, with the node service (fmbroker-cxi serve, one per
#            emulated node) and fmbroker-slurm-prolog as Prolog=: the
#            prolog hands the job to the resident service, whose broker
#            connection stays open; the services run in these setups
#            only
#   service-sh  as service, with the emulation's stand-ins for the node
#            hooks a dash that execs fmbroker-slurm-prolog or fmbroker-cxi
#            (no bash, no fork, no clock: the closest to a real node's
#            Prolog=/Epilog=; the node prolog's own time is then not shown)
#   true-hooks  no fmbroker but the plugin (fail_open): Prolog=/bin/true
#            and Epilog=/bin/true, what any node prolog costs in this Slurm
#   true-prolog, true-epilog, true-ectld  plain Slurm with
#            Prolog=/bin/true, Epilog=/bin/true or EpilogSlurmctld=/bin/true
#            alone: what each of Slurm's hooks costs by itself
#   service-noectld  as service, without EpilogSlurmctld: what the
#            controller's CLEANUP hook costs (a measurement only: the
#            broker then never hears that a job ended)
#   wrappers the plugin (fail_open) and the emulation's own prolog and
#            epilog wrappers running /bin/true: the stand-in's own cost,
#            and the floor of the prolog's clock (a fork and an exec)
#   plugin   the plugin alone: loaded by srun and each step, with no node
#            prolog or epilog (policy=fail_open: no record, no isolation)
# Every setup has EpilogSlurmctld's CLEANUP (after the job, off the launch
# path) when fmbroker is in it.  Prints per setup: median, p90, max, the
# launches over 1 s, the ratio to "without", and each hook's own time:
# the node prolog (its wrapper's clock: the stand-in for the emulated
# nodes' NICs, a bash that execs fmbroker-cxi, is part of it), the
# PrologSlurmctld script, and the step-end cleanup on node 0 (plugin,
# SlurmdDebug=verbose).  Needs root.  Bounded: BENCH_LAUNCHES (100) per
# setup, in blocks of BENCH_BLOCK (25), every daemon stopped at exit.
set -u
build=$(cd "${1:-$(dirname "$0")/../build}" && pwd)
export FMB_BIN=$build/bin
export FMB_SRC=${FMB_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
. "$(dirname "$0")/../tests/integration/lib.sh"
N=${BENCH_LAUNCHES:-100}
B=${BENCH_BLOCK:-25}
MODES=${BENCH_MODES:-without service true-hooks wrappers node}
[ "$(id -u)" = 0 ] && [ -f "$FMB_BIN/../lib/fmbroker_spank.so" ] || { echo "needs root and the plugin" >&2; exit 1; }
chmod 755 "$T"
. "$FMB_SRC/tests/integration/slurm.sh"
fm_state_file=
start_mockfm || exit 1
# As a site runs: each node its own token (client_token_file %n).
tls_and_node_tokens || exit 1
start_broker_for_nodes n1 n2 -- "agent_run = true" || exit 1
mkdir -p "$S/hooks"
# The nodes' job records and report spools on tmpfs, as in /run on a
# real node (the test host's /run and /tmp are a disk, where each
# record's fsync would be timed as the prolog's).
R=$(mktemp -d /dev/shm/fmbbench.XXXXXX) && chmod 755 "$R" || exit 1
rm_records () { rm -rf "$R"; }
on_exit rm_records
# Every hook notes "NAME MODE START_NS END_NS" in $T/hooks.times (the
# wrapper's sh is part of the time: a site's hook is a script too).
for h in prolog_slurmctld epilog_slurmctld; do
    cat >"$S/hooks/$h.sh" <<HOOK
#!/bin/sh
t0=\$(date +%s%N)
FMBROKER_CONF=$T/broker.conf FMBROKER_BINDIR=$FMB_BIN $FMB_SRC/deploy/slurm/$h.sh
read m <$S/mode
echo "$h \$m \$t0 \$(date +%s%N)" >>$T/hooks.times
HOOK
done
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
case \$m in node | nohold | service | service-noectld) conf=$T/node-run.conf ;; esac
export MOCKCXI_STATE=$T/\$SLURMD_NODENAME.cxi.json MOCKCXI_DEVICES=2
if [ \${m%-*} = service ] && [ $h = prolog ]; then
    FMBROKER_CXI_SERVICE=$R/rec-\$SLURMD_NODENAME/service.sock $FMB_BIN/fmbroker-slurm-prolog
else
    $FMB_BIN/fmbroker-cxi -c \$conf --state-dir $R/rec-\$SLURMD_NODENAME
fi
rc=\$?
echo "$h \$m \${t0/./} \${EPOCHREALTIME/./}" >>$T/hooks.times
exit \$rc
HOOK
done
# The same stand-in without the clock, for the service-sh setup: a dash
# that only picks the emulated node's socket, NICs and records and execs
# the program a real node runs as Prolog=/Epilog= (bash's start, the fork
# and the clock are not in that setup's launch).
cat >"$S/hooks/prolog-sh.sh" <<HOOK
#!/bin/sh
FMBROKER_CXI_SERVICE=$R/rec-\$SLURMD_NODENAME/service.sock exec $FMB_BIN/fmbroker-slurm-prolog
HOOK
cat >"$S/hooks/epilog-sh.sh" <<HOOK
#!/bin/sh
MOCKCXI_STATE=$T/\$SLURMD_NODENAME.cxi.json MOCKCXI_DEVICES=2 exec $FMB_BIN/fmbroker-cxi -c $T/node-run.conf --state-dir $R/rec-\$SLURMD_NODENAME
HOOK
chmod 755 "$S"/hooks/*.sh
plugin="required $FMB_BIN/../lib/fmbroker_spank.so config=$T/node.conf state_dir=$R/rec-%n"
# the launch setup's nodes make the RUN ([api] node_run = true)
sed "/^\[api\]/a node_run = true" "$T/node.conf" >"$T/node-run.conf" || exit 1
# the service setups' node services, one per emulated node, as
# fmbroker-cxi.service runs them; up only in those setups (a node's
# epilog hands its work to a service that listens)
start_services () {
    for n in n1 n2; do
        [ -S "$R/rec-$n/service.sock" ] && continue
        FMBROKER_NODE=$n MOCKCXI_STATE=$T/$n.cxi.json MOCKCXI_DEVICES=2 $FMB_BIN/fmbroker-cxi \
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
        "$S/hooks/prolog_slurmctld.sh" "$S/hooks/epilog_slurmctld.sh" "$nodehooks" >"$S/mode.conf" &&
        echo "$plugin" >"$S/plugstack.conf" ;;
    node | service) printf "EpilogSlurmctld=%s\n%s\n" "$S/hooks/epilog_slurmctld.sh" "$nodehooks" >"$S/mode.conf" &&
        echo "$plugin" >"$S/plugstack.conf" ;;
    true-hooks) printf "Prolog=/bin/true\nEpilog=/bin/true\n" >"$S/mode.conf" &&
        echo "required $FMB_BIN/../lib/fmbroker_spank.so policy=fail_open" >"$S/plugstack.conf" ;;
    true-prolog) printf "Prolog=/bin/true\n" >"$S/mode.conf" && : >"$S/plugstack.conf" ;;
    true-epilog) printf "Epilog=/bin/true\n" >"$S/mode.conf" && : >"$S/plugstack.conf" ;;
    true-ectld) printf "EpilogSlurmctld=/bin/true\n" >"$S/mode.conf" && : >"$S/plugstack.conf" ;;
    wrappers) printf "%s\n" "$nodehooks" >"$S/mode.conf" &&
        echo "required $FMB_BIN/../lib/fmbroker_spank.so policy=fail_open" >"$S/plugstack.conf" ;;
    plugin) printf "# the plugin alone\n" >"$S/mode.conf" &&
        echo "required $FMB_BIN/../lib/fmbroker_spank.so policy=fail_open" >"$S/plugstack.conf" ;;
    service-sh) printf "EpilogSlurmctld=%s\nProlog=%s\nEpilog=%s\n" "$S/hooks/epilog_slurmctld.sh" \
        "$S/hooks/prolog-sh.sh" "$S/hooks/epilog-sh.sh" >"$S/mode.conf" && echo "$plugin" >"$S/plugstack.conf" ;;
    service-noectld) printf "%s\n" "$nodehooks" >"$S/mode.conf" && echo "$plugin" >"$S/plugstack.conf" ;;
    nohold) printf "EpilogSlurmctld=%s\nPrologFlags=Alloc,NoHold\n%s\n" "$S/hooks/epilog_slurmctld.sh" \
        "$nodehooks" >"$S/mode.conf" &&
        echo "$plugin" >"$S/plugstack.conf" ;;
    esac
    case $1 in service*) start_services ;; *) stop_services ;; esac || return 1
    [ -s "$S/slurmctld.pid" ] || return 0
    wait_for 300 0.05 slurm_all_idle
    slurm_restart
}
echo "# plain Slurm" >"$S/mode.conf"
slurm_up "Include $S/mode.conf
SlurmdDebug=verbose" || { slurm_diag; exit 1; }

# One srun -N2 true from an idle cluster, as nobody: its wall time in ms.
launch () { # MODE
    wait_for 300 0.05 slurm_all_idle || return 1
    t0=$(date +%s%N)
    setpriv --reuid=nobody --regid=nogroup --clear-groups srun -N2 true || return 1
    echo $((($(date +%s%N) - t0) / 1000000)) >>"$T/$1.ms"
}
for m in $MODES; do : >"$T/$m.ms"; done
: >"$T/hooks.times"
for m in $MODES; do : >"$T/clean.$m" && : >"$T/wait.$m"; done
blocks=$(((N + B - 1) / B))
for _ in $(seq "$blocks"); do
    for m in $MODES; do
        # the first launch after a restart is not counted
        mode $m && launch warmup || { echo "launch failed ($m)" >&2; slurm_diag >&2; exit 1; }
        off1=$(stat -c %s "$S/log/slurmd-n1.log") off2=$(stat -c %s "$S/log/slurmd-n2.log")
        for _ in $(seq "$B"); do
            launch $m || { echo "launch failed ($m)" >&2; slurm_diag >&2; exit 1; }
        done
        wait_for 300 0.05 slurm_all_idle
        # the plugin's own timing of the step-end cleanup (node 0) and of
        # each node's wait for the service's setup
        { tail -c +$((off1 + 1)) "$S/log/slurmd-n1.log"; tail -c +$((off2 + 1)) "$S/log/slurmd-n2.log"; } |
            grep -o "step cleanup done in [0-9]* ms\|node service setup wait [0-9]* ms" |
            awk -v c="$T/clean.$m" -v w="$T/wait.$m" '{print $(NF - 1) >>($2 == "cleanup" ? c : w)}'
    done
done
wait_for 300 0.05 slurm_all_idle
load=$(cut -d' ' -f1-3 /proc/loadavg)
pct () { sort -g | awk -v p="$1" '{a[NR] = $1} END {i = int(NR * p / 100 + 0.999); if (i < 1) i = 1; print a[i]}'; }
wo=$(pct 50 <"$T/without.ms" 2>/dev/null)
echo "# fmbroker with Slurm: launch cost, $(date -u +%Y-%m-%dT%H:%MZ)"
echo "# machine: $(nproc) cores, load average $load at the end"
echo
echo "## srun -N2 true as nobody, from an idle cluster, setups alternated in blocks of $B"
echo "| setup | launches | median ms | p90 ms | max ms | over 1 s | median / without |"
echo "|---|---|---|---|---|---|---|"
for m in $MODES; do
    f=$T/$m.ms
    printf "| %s | %s | %s | %s | %s | %s | %s |\n" "$m" "$(wc -l <"$f")" "$(pct 50 <"$f")" "$(pct 90 <"$f")" \
        "$(sort -g "$f" | tail -1)" "$(awk '$1 > 1000' "$f" | wc -l)" \
        "$(awk -v a="$(pct 50 <"$f")" -v b="${wo:-0}" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')"
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
    hook_row "the step's wait for the node service's setup (the plugin in slurmstepd)" "$m" "$T/wait.$m"
    hook_row "step-end cleanup on node 0 (the plugin's own timing)" "$m" "$T/clean.$m"
done
echo
echo "(load average at the end: $load)"
